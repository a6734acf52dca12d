// Command trivialhook is the floor TestScale measures the hook server
// against: it serves every path of the controller definitions in
// compositecontrollers/, over TLS as the hook server does, and answers each
// with the least a working hook could: a Workspace sync gets constant
// children named after the parent and a status of its generation; every
// other hook gets an empty answer. It decodes no more of a request than
// that needs, checks no token and hands nothing to a reporter.
//
// So that both put the same objects in the API server, a workspace of the
// class named by --pdb-class also gets a PodDisruptionBudget and one of
// --hpa-class a HorizontalPodAutoscaler, as the hooks give the classes
// TestScale creates, and the workspace customize hook asks for what the
// hooks' asks for (the ClusterClass, and the ResourceClaims of the
// namespace when the workspace lists datastores), so that Metacontroller
// watches and sends the same related objects.
//
// With --answer-like, a Workspace sync is answered instead with the
// children and status of a hook server's answer (one of its fixtures'
// response.json), the fixture's workspace name, namespace and generation
// replaced by the parent's: the same objects the hook server makes, at
// the trivial hook's cost, so that TestScale can tell what the hook
// server's objects cost the API server and Metacontroller from what its
// own work costs. With --claim-answer-like, likewise, every ResourceClaim
// sync is answered with a hook server's grant (one of its fixtures'
// response.json: the claim's status and credentials Secret), renamed for
// the claim, and the claim's customize hook asks for what the hooks' asks
// for; without it a claim gets an empty answer and is never granted.
//
// It counts what it served as formspec_hooks_requests_total{hook,code} and
// the bodies it read as formspec_hooks_request_size_bytes{hook}, the hook
// server's metrics, on --metrics-listen, with the process collector.
package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8443", "address of the hooks (TLS)")
	metricsListen := flag.String("metrics-listen", "127.0.0.1:9090", "address of /metrics and /readyz")
	certFile := flag.String("tls-cert-file", "", "PEM serving certificate")
	keyFile := flag.String("tls-key-file", "", "PEM serving key")
	pdbClass := flag.String("pdb-class", "", "ClusterClass whose workspaces also get a PodDisruptionBudget")
	hpaClass := flag.String("hpa-class", "", "ClusterClass whose workspaces also get a HorizontalPodAutoscaler")
	answerLike := flag.String("answer-like", "", "a hook server's Workspace sync answer (a fixture's response.json) whose children and status to answer with, instead of the constant ones")
	claimLike := flag.String("claim-answer-like", "", "a hook server's ResourceClaim sync answer granting a claim (a fixture's response.json) whose status and attachments to answer every claim with, instead of an empty answer")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cl := classes{pdb: *pdbClass, hpa: *hpaClass}
	if *answerLike != "" {
		like, err := readAnswer(*answerLike)
		if err != nil {
			log.Fatal(err)
		}
		cl.like = &like
	}
	if *claimLike != "" {
		like, err := readClaimAnswer(*claimLike)
		if err != nil {
			log.Fatal(err)
		}
		cl.claim = &like
	}
	if err := run(ctx, *listen, *metricsListen, *certFile, *keyFile, cl); err != nil {
		log.Fatal(err)
	}
}

// classes name the ClusterClasses whose workspaces get an extra child,
// and hold the answers to give like the hook server's, if there are any:
// like for a Workspace, claim for a ResourceClaim.
type classes struct {
	pdb, hpa    string
	like, claim *answer
}

// answer is a sync answer with {name}, {namespace} and {generation} left
// to fill in: a status, and a Workspace's children or a claim's
// attachments.
type answer struct {
	status   string
	children []string
}

// readAnswer makes an answer of a hook server's Workspace sync answer: the
// name and namespace of its Deployment, and the generation its status
// observed, become the placeholders.
func readAnswer(path string) (answer, error) {
	src, err := readSource(path, "children")
	if err != nil {
		return answer{}, err
	}
	var name, namespace string
	for _, o := range src.objects {
		if o.Kind == "Deployment" {
			name, namespace = o.Metadata.Name, o.Metadata.Namespace
		}
	}
	if name == "" || namespace == "" {
		return answer{}, fmt.Errorf("%s: the answer has no Deployment with a name and namespace", path)
	}
	return src.template(`"`+name+`"`, `"{name}"`, `"`+name+`-config"`, `"{name}-config"`, `"`+namespace+`"`, `"{namespace}"`)
}

// readClaimAnswer makes an answer of a hook server's ResourceClaim sync
// answer that grants the claim: the claim's name (the credentials Secret's
// formspec.dev/resourceclaim label), the Secret's name, its namespace and
// the generation the status observed become the placeholders.
func readClaimAnswer(path string) (answer, error) {
	src, err := readSource(path, "attachments")
	if err != nil {
		return answer{}, err
	}
	var claim, secret, namespace string
	for _, o := range src.objects {
		if o.Kind == "Secret" {
			claim, secret, namespace = o.Metadata.Labels["formspec.dev/resourceclaim"], o.Metadata.Name, o.Metadata.Namespace
		}
	}
	if claim == "" || namespace == "" || secret != claim+"-credentials" {
		return answer{}, fmt.Errorf("%s: the answer attaches no Secret named <claim>-credentials, labelled with its claim, in a namespace", path)
	}
	return src.template(`"`+claim+`"`, `"{name}"`, `"`+secret+`"`, `"{name}-credentials"`, `"`+namespace+`"`, `"{namespace}"`)
}

// source is a hook server's sync answer, read to make an answer of.
type source struct {
	status json.RawMessage
	raw    []json.RawMessage
	// objects are what the readers look at of raw, in its order.
	objects    []object
	generation int64
}

// object is what the trivial hook reads of an object in an answer.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
}

// readSource reads the answer at path: its status, which must observe a
// generation, and the objects under key (children or attachments).
func readSource(path, key string) (source, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return source{}, err
	}
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(raw, &resp); err != nil {
		return source{}, fmt.Errorf("%s: %w", path, err)
	}
	src := source{status: resp["status"]}
	var status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
	}
	if err := json.Unmarshal(src.status, &status); err != nil || status.ObservedGeneration == 0 {
		return source{}, fmt.Errorf("%s: the answer's status observes no generation", path)
	}
	src.generation = status.ObservedGeneration
	if objs := resp[key]; objs != nil {
		if err := json.Unmarshal(objs, &src.raw); err != nil {
			return source{}, fmt.Errorf("%s: %s: %w", path, key, err)
		}
		if err := json.Unmarshal(objs, &src.objects); err != nil {
			return source{}, fmt.Errorf("%s: %s: %w", path, key, err)
		}
	}
	return src, nil
}

// template compacts the source's status and objects and puts in the
// placeholders: the pairs of old and new strings given, and the
// generation.
func (src source) template(oldnew ...string) (answer, error) {
	placeholders := strings.NewReplacer(append(oldnew,
		`"observedGeneration":`+strconv.FormatInt(src.generation, 10), `"observedGeneration":{generation}`)...)
	compact := func(raw []byte) (string, error) {
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return "", err
		}
		return placeholders.Replace(b.String()), nil
	}
	var a answer
	var err error
	if a.status, err = compact(src.status); err != nil {
		return answer{}, err
	}
	for _, o := range src.raw {
		t, err := compact(o)
		if err != nil {
			return answer{}, err
		}
		a.children = append(a.children, t)
	}
	return a, nil
}

func run(ctx context.Context, listen, metricsListen, certFile, keyFile string, cl classes) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("cannot load the serving certificate: %w", err)
	}
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "formspec_hooks_requests_total",
		Help: "Hook requests answered, by hook and HTTP status code.",
	}, []string{"hook", "code"})
	// The hook server's buckets, so that TestScale reads both alike.
	size := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "formspec_hooks_request_size_bytes",
		Help:    "Size of hook request bodies as read, by hook.",
		Buckets: prometheus.ExponentialBuckets(512, 4, 8),
	}, []string{"hook"})
	reg.MustRegister(requests, size, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())

	mux := hooks(cl, meters{requests: requests, size: size})

	ln, err := tls.Listen("tcp", listen, &tls.Config{
		Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		// HTTP/2 beside HTTP/1.1, as the hook server offers them, so that
		// Metacontroller keeps one connection per hook to either.
		NextProtos: []string{"h2", "http/1.1"},
	})
	if err != nil {
		return err
	}
	mln, err := net.Listen("tcp", metricsListen)
	if err != nil {
		_ = ln.Close()
		return err
	}
	ops := http.NewServeMux()
	ops.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// The profiler, as the hook server's --pprof serves it, for
	// TestScale's profiles of both.
	ops.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	ops.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	opsSrv := &http.Server{Handler: ops, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	errs := make(chan error, 2)
	go func() { errs <- srv.Serve(ln) }()
	go func() { errs <- opsSrv.Serve(mln) }()
	select {
	case <-ctx.Done():
	case err := <-errs:
		return err
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = opsSrv.Shutdown(shutdown)
	return srv.Shutdown(shutdown)
}

// meters are what the trivial hook counts: its answers by hook and code,
// and the bodies it read by hook.
type meters struct {
	requests *prometheus.CounterVec
	size     *prometheus.HistogramVec
}

// hooks serves every hook path, counting each answer and its request's size.
func hooks(cl classes, m meters) *http.ServeMux {
	mux := http.NewServeMux()
	handle := func(path string, answer func(body []byte) ([]byte, error)) {
		name := strings.ReplaceAll(strings.TrimPrefix(path, "/v1/"), "/", "-")
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			m.size.WithLabelValues(name).Observe(float64(len(body)))
			var out []byte
			if err == nil {
				out, err = answer(body)
			}
			if err != nil {
				m.requests.WithLabelValues(name, "400").Inc()
				http.Error(w, "bad request", http.StatusBadRequest)
				return
			}
			m.requests.WithLabelValues(name, "200").Inc()
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(out)
		})
	}
	empty := func([]byte) ([]byte, error) { return []byte(`{}`), nil }
	handle("/v1/workspace/sync", cl.workspaceSync)
	handle("/v1/workspace/customize", workspaceCustomize)
	handle("/v1/workspace/finalize", func([]byte) ([]byte, error) { return []byte(`{"children":[],"finalized":true}`), nil })
	rest := []string{"/v1/datastore/sync", "/v1/datastore/customize", "/v1/nodes/sync", "/v1/pods/sync"}
	if cl.claim != nil {
		handle("/v1/resourceclaim/sync", cl.claimSync)
		handle("/v1/resourceclaim/customize", claimCustomize)
	} else {
		rest = append(rest, "/v1/resourceclaim/sync", "/v1/resourceclaim/customize")
	}
	for _, p := range rest {
		handle(p, empty)
	}
	return mux
}

// request is all of a request the trivial hook reads: the object the
// hook is called for, which a CompositeController's hooks send as
// "parent" and a DecoratorController's sync as "object".
type request struct {
	Parent *subject `json:"parent"`
	Object *subject `json:"object"`
}

// subject is what the trivial hook reads of the object a hook is called
// for.
type subject struct {
	Metadata struct {
		Name       string `json:"name"`
		Namespace  string `json:"namespace"`
		Generation int64  `json:"generation"`
	} `json:"metadata"`
	Spec struct {
		// A Workspace's.
		ClusterClass string            `json:"clusterClass"`
		Datastores   []json.RawMessage `json:"datastores"`
		// A ResourceClaim's.
		Datastore struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"datastore"`
	} `json:"spec"`
}

func decode(body []byte) (subject, error) {
	var r request
	if err := json.Unmarshal(body, &r); err != nil {
		return subject{}, err
	}
	switch {
	case r.Object != nil:
		return *r.Object, nil
	case r.Parent != nil:
		return *r.Parent, nil
	}
	return subject{}, nil
}

// workspaceSync answers constant children: a ConfigMap, a Service and a
// Deployment, and the class's extra child.
func (cl classes) workspaceSync(body []byte) ([]byte, error) {
	p, err := decode(body)
	if err != nil {
		return nil, err
	}
	children, status := []string{configMap, service, deployment}, `{"observedGeneration":{generation},"phase":"Ready"}`
	if cl.like != nil {
		children, status = slices.Clone(cl.like.children), cl.like.status
	}
	switch p.Spec.ClusterClass {
	case "":
	case cl.pdb:
		children = append(children, pdb)
	case cl.hpa:
		children = append(children, hpa)
	}
	return fill(`{"status":`+status+`,"children":[`+strings.Join(children, ",")+`]}`, p), nil
}

// fill puts the subject's name, namespace and generation in an answer's
// placeholders.
func fill(answer string, p subject) []byte {
	m := p.Metadata
	return []byte(strings.NewReplacer("{name}", m.Name, "{namespace}", m.Namespace,
		"{generation}", strconv.FormatInt(m.Generation, 10)).Replace(answer))
}

// claimSync grants the claim as the hook server's answer in cl.claim does.
func (cl classes) claimSync(body []byte) ([]byte, error) {
	p, err := decode(body)
	if err != nil {
		return nil, err
	}
	return fill(`{"status":`+cl.claim.status+`,"attachments":[`+strings.Join(cl.claim.children, ",")+`]}`, p), nil
}

// The children, {name} and {namespace} to be replaced.
const (
	configMap  = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"{name}-config","namespace":"{namespace}"},"data":{"k":"v"}}`
	service    = `{"apiVersion":"v1","kind":"Service","metadata":{"name":"{name}","namespace":"{namespace}"},"spec":{"selector":{"formspec.dev/workspace":"{name}"},"ports":[{"name":"http","port":80,"targetPort":8080}]}}`
	deployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"{name}","namespace":"{namespace}"},"spec":{"replicas":1,"selector":{"matchLabels":{"formspec.dev/workspace":"{name}"}},` +
		`"template":{"metadata":{"labels":{"formspec.dev/workspace":"{name}"}},"spec":{"containers":[{"name":"resource","image":"formahub/formspec-resource:latest"}]}}}}`
	pdb = `{"apiVersion":"policy/v1","kind":"PodDisruptionBudget","metadata":{"name":"{name}","namespace":"{namespace}"},"spec":{"maxUnavailable":1,"selector":{"matchLabels":{"formspec.dev/workspace":"{name}"}}}}`
	hpa = `{"apiVersion":"autoscaling/v2","kind":"HorizontalPodAutoscaler","metadata":{"name":"{name}","namespace":"{namespace}"},"spec":{"minReplicas":1,"maxReplicas":5,` +
		`"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"{name}"}}}`
)

// rule is a related-resource rule of a customize answer.
type rule struct {
	APIVersion    string          `json:"apiVersion"`
	Resource      string          `json:"resource"`
	Namespace     string          `json:"namespace,omitempty"`
	Names         []string        `json:"names,omitempty"`
	LabelSelector *map[string]any `json:"labelSelector,omitempty"`
}

// claimCustomize asks for what the hooks' customize asks for: the claim's
// Datastore, and the Secrets of its namespace labelled for it. The trivial
// hook asks it only when it grants claims; otherwise it needs nothing of
// them.
func claimCustomize(body []byte) ([]byte, error) {
	p, err := decode(body)
	if err != nil {
		return nil, err
	}
	rules := []rule{}
	if ds := p.Spec.Datastore; ds.Name != "" {
		ns := cmp.Or(ds.Namespace, p.Metadata.Namespace)
		rules = append(rules,
			rule{APIVersion: "formspec.dev/v1alpha1", Resource: "datastores", Namespace: ns, Names: []string{ds.Name}},
			rule{APIVersion: "v1", Resource: "secrets", Namespace: ns,
				LabelSelector: &map[string]any{"matchLabels": map[string]string{"formspec.dev/datastore": ds.Name}}})
	}
	return json.Marshal(map[string]any{"relatedResources": rules})
}

// workspaceCustomize asks for what the hooks' customize asks for in their
// default mode (--workspace-claims=summary): the ClusterClass alone, the
// claims reaching the hooks as the reporter's summary on the Workspace.
func workspaceCustomize(body []byte) ([]byte, error) {
	p, err := decode(body)
	if err != nil {
		return nil, err
	}
	rules := []rule{}
	if c := p.Spec.ClusterClass; c != "" {
		rules = append(rules, rule{APIVersion: "formspec.dev/v1alpha1", Resource: "clusterclasses", Names: []string{c}})
	}
	return json.Marshal(map[string]any{"relatedResources": rules})
}
