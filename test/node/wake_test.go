package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// EnvKEDABin names the directory of the KEDA HTTP add-on's interceptor
// binary, built by test/keda-binaries.sh (which the test runs: it only
// builds when its stamp is stale).
const EnvKEDABin = "FORMSPEC_KEDA_BIN"

// InterceptorImage is the interceptor of the KEDA HTTP add-on, packed from
// the binary test/keda-binaries.sh builds.
const InterceptorImage = "formspec.test/keda-http-interceptor:node-test"

// Where the test runs the interceptor, and its ports.
const (
	interceptorNamespace = "keda"
	interceptorName      = "keda-interceptor"
	interceptorProxyPort = 8080
	interceptorAdminPort = 9090
)

// The KEDA HTTP add-on's route kind, which the wake controller attaches
// (internal/hooks/wake, not imported: it would bring the hook server's codec into
// this module).
const (
	routeAPIVersion = "http.keda.sh/v1beta1"
	routeKind       = "InterceptorRoute"
)

// concurrentFirstRequests is how many requests arrive at once for the
// sleeping workspace in the second wake.
const concurrentFirstRequests = 20

// TestWakeOnRequest installs the chart with wakeOnRequest on, the KEDA HTTP
// add-on's interceptor (its own CRDs and binary, as it is), Metacontroller
// and a workspace of a wake-on-request class that starts idle, at no pods.
// A request through the interceptor for the workspace's host is held, the
// reporter wakes the workspace and its pod answers it with 200; after the
// class's idleAfterSeconds without a request the reporter idles it again;
// then 20 requests at once are all answered. Each cold start is printed
// beside the pod's own time to become ready. With the feature taken off
// the class, the route goes and the interceptor no longer knows the host.
func TestWakeOnRequest(t *testing.T) {
	mcBin := os.Getenv(EnvMetacontrollerBin)
	if mcBin == "" {
		t.Skip(EnvMetacontrollerBin + " not set: skipping wake on request on the one-node cluster; see docs/testing.md")
	}
	RequirePrerequisites(t)
	interceptor := interceptorBinary(t)
	tm := NewTimings(t)
	archives := buildImages(t, mcBin)
	img, err := interceptorImageFrom(interceptor)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "interceptor.tar")
	if err := img.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	tm.Phase("images built (interceptor from " + interceptor + ")")
	c := Start(t, tm, append(archives.Paths(), archive)...)

	crds, err := controlplane.KEDAHTTPCRDs(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client().InstallCRDs(crds...); err != nil {
		t.Fatalf("cannot install the KEDA HTTP add-on's CRDs: %v", err)
	}
	repo, tag, _ := strings.Cut(hooksImage(t), ":")
	adminURL := fmt.Sprintf("http://%s-admin.%s:%d", interceptorName, interceptorNamespace, interceptorAdminPort)
	c.helmInstallChart(t, filepath.Join(controlplane.RepoRoot(t), chartDir),
		"defaultVersion: "+workspaceVersion+"\nimage:\n  repository: "+repo+"\n  tag: "+tag+"\n  pullPolicy: Never\n"+
			"wakeOnRequest:\n  enabled: true\n  interceptorAdminURL: "+adminURL+"\n"+plainHTTPClusterControl)
	c.startInterceptor(t)
	tm.Phase("chart with wakeOnRequest and the interceptor Ready")
	admin := c.startClusterControl(t)
	c.startMetacontroller(t)
	t.Cleanup(func() { c.checkMetacontrollerAllowed(t, nil) })
	t.Cleanup(func() {
		if t.Failed() {
			// What the reporters decided is the first thing to read.
			t.Logf("reporter logs:\n%s", c.kubectl(t, "-n", hooksNamespace, "logs", "-l", "app.kubernetes.io/name="+hooksName,
				"-c", "reporter", "--prefix", "--tail=100"))
		}
	})
	tm.Phase("Metacontroller Ready")

	const ns, name, class = "wake-ws", "sleepy", "on-demand"
	c.createSleepingWorkspace(t, ns, name, class)
	proxy := "http://" + c.serviceIP(t, interceptorNamespace, interceptorName+"-proxy") + fmt.Sprintf(":%d", interceptorProxyPort)
	// The longest of the host names the wake controller routes
	// (internal/hooks/wake.Hosts).
	host := name + "." + ns + ".svc.cluster.local"
	c.waitRouted(t, ns, name)
	tm.Phase("a sleeping workspace at no pods, routed by the interceptor")

	pods := c.watchPodReadiness(t, ns, name)
	took := c.wakeWith(t, pods, proxy, host, 1)
	t.Logf("first wake: cold start %v (one request)", took)
	c.checkWokenByRequest(t, admin, ns, name)
	tm.Phase("one request held, the workspace woken, answered 200")

	c.waitPods(t, ns, name, 0)
	c.waitWorkspacePhase(t, ns, name, v1alpha1.PhaseIdle)
	tm.Phase("idled by the reporter after idleAfterSeconds without a request")

	c.wakeWith(t, pods, proxy, host, concurrentFirstRequests)
	tm.Phase(fmt.Sprintf("%d first requests at once, all answered", concurrentFirstRequests))
	c.reportColdStartMetric(t)

	c.patch(t, v1alpha1.APIVersion, "ClusterClass", "", class, map[string]any{"spec": map[string]any{"features": []any{}, "scaling": map[string]any{"idleAfterSeconds": nil}}})
	c.waitFor(t, "the route removed with the feature", func() (bool, string) {
		_, err := c.Client().Get(routeAPIVersion, routeKind, ns, name)
		return controlplane.IsNotFound(err), fmt.Sprint(err)
	}, ns)
	c.waitFor(t, "the interceptor to stop routing the host", func() (bool, string) {
		code, _, err := getHost(proxy+"/", host, 5*time.Second)
		return err == nil && code == http.StatusNotFound, fmt.Sprintf("status %d, %v", code, err)
	}, interceptorNamespace)
	tm.Phase("feature off: no route, the interceptor answers 404 for the host")
}

// interceptorBinary runs test/keda-binaries.sh, which builds the
// interceptor only when its stamp is stale, and returns the binary.
func interceptorBinary(t *testing.T) string {
	t.Helper()
	root := controlplane.RepoRoot(t)
	cmd := exec.Command("bash", filepath.Join(root, "test", "keda-binaries.sh"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("test/keda-binaries.sh: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
	dir := os.Getenv(EnvKEDABin)
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(home, ".cache", "formspec-hooks", "keda-http-v0.15.0")
	}
	return filepath.Join(dir, "interceptor")
}

// interceptorImageFrom packs the static interceptor binary the way the
// add-on's own image does (one binary, user nonroot).
func interceptorImageFrom(bin string) (Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return Image{}, err
	}
	return Image{
		Name:   InterceptorImage,
		Files:  append(distrolessBase(), File{Path: "/interceptor", Mode: 0o755, Data: data}),
		Config: v1.Config{User: nonroot + ":" + nonroot, Entrypoint: []string{"/interceptor"}, Env: distrolessEnv},
	}, nil
}

// startInterceptor runs one interceptor replica as the add-on's chart does
// (its RBAC: read routes, EndpointSlices, Services, ConfigMaps), with a
// ClusterIP Service for its proxy port and a headless one for its admin
// port, which the reporter resolves to every replica. Its connect timeout
// is lowered from 500 ms: a dial the Service's rules drop cannot delay a
// cold start by more than that (docs/workspaces.md).
func (c *Cluster) startInterceptor(t *testing.T) {
	t.Helper()
	ns := interceptorNamespace
	labels := map[string]any{"app.kubernetes.io/name": "http-add-on", "app.kubernetes.io/component": "interceptor"}
	c.apply(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	c.apply(t, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": interceptorName, "namespace": ns}})
	read := []any{"get", "list", "watch"}
	c.apply(t, map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": map[string]any{"name": interceptorName},
		"rules": []any{
			map[string]any{"apiGroups": []any{"http.keda.sh"}, "resources": []any{"httpscaledobjects", "interceptorroutes"}, "verbs": read},
			map[string]any{"apiGroups": []any{"discovery.k8s.io"}, "resources": []any{"endpointslices"}, "verbs": read},
			map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps", "services"}, "verbs": read},
		},
	})
	c.apply(t, map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": interceptorName},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": interceptorName},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": interceptorName, "namespace": ns}},
	})
	env := func(kv ...string) []any {
		var out []any
		for i := 0; i < len(kv); i += 2 {
			out = append(out, map[string]any{"name": kv[i], "value": kv[i+1]})
		}
		return out
	}
	c.apply(t, map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": interceptorName, "namespace": ns, "labels": labels},
		"spec": map[string]any{
			"replicas": 1,
			"selector": map[string]any{"matchLabels": labels},
			"template": map[string]any{
				"metadata": map[string]any{"labels": labels},
				"spec": map[string]any{
					"serviceAccountName": interceptorName,
					"containers": []any{map[string]any{
						"name": "interceptor", "image": InterceptorImage, "imagePullPolicy": "Never",
						"env": env(
							"KEDA_HTTP_PROXY_PORT", fmt.Sprint(interceptorProxyPort),
							"KEDA_HTTP_ADMIN_PORT", fmt.Sprint(interceptorAdminPort),
							"KEDA_HTTP_CONNECT_TIMEOUT", "200ms",
							"OTEL_PROM_EXPORTER_ENABLED", "false",
						),
						"ports": []any{
							map[string]any{"name": "proxy", "containerPort": interceptorProxyPort},
							map[string]any{"name": "admin", "containerPort": interceptorAdminPort},
						},
						"readinessProbe": map[string]any{"httpGet": map[string]any{"port": "admin", "path": "/readyz"}, "periodSeconds": 2},
						"securityContext": map[string]any{
							"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
							"capabilities": map[string]any{"drop": []any{"ALL"}}, "seccompProfile": map[string]any{"type": "RuntimeDefault"},
						},
					}},
				},
			},
		},
	})
	c.apply(t, map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": interceptorName + "-proxy", "namespace": ns},
		"spec": map[string]any{"selector": labels, "ports": []any{map[string]any{"name": "http", "port": interceptorProxyPort, "targetPort": "proxy"}}},
	})
	c.apply(t, map[string]any{
		"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": interceptorName + "-admin", "namespace": ns},
		"spec": map[string]any{"clusterIP": "None", "selector": labels,
			"ports": []any{map[string]any{"name": "admin", "port": interceptorAdminPort, "targetPort": "admin"}}},
	})
	c.waitDeploymentReady(t, ns, interceptorName)
}

// createSleepingWorkspace creates a class that wakes on request (idling
// after 8 s without one) and a workspace of it that starts idle, and waits
// for it to be Idle at no pods.
func (c *Cluster) createSleepingWorkspace(t *testing.T, ns, name, class string) {
	t.Helper()
	c.apply(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	c.apply(t, &v1alpha1.ClusterClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ClusterClass"},
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: v1alpha1.ClusterClassSpec{
			Scaling: v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), ScaleToZero: true,
				IdleAfterSeconds: 8, WakeTimeoutSeconds: ptr.To[int32](90), MaxHeldRequests: ptr.To[int32](100)},
			Features: []string{v1alpha1.FeatureWakeOnRequest},
		},
	})
	c.apply(t, &v1alpha1.Workspace{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{v1alpha1.AnnotationIdle: "true"}},
		Spec: v1alpha1.WorkspaceSpec{Owner: "sleepy-corp", Region: "ap-southeast-3", ClusterClass: class,
			Environment: "production", Version: WorkspaceVersion},
	})
	c.waitWorkspacePhase(t, ns, name, v1alpha1.PhaseIdle)
	c.waitPods(t, ns, name, 0)
}

// waitRouted waits for the workspace's InterceptorRoute and for the
// interceptor to count requests for it (its admin queue lists the route).
func (c *Cluster) waitRouted(t *testing.T, ns, name string) {
	t.Helper()
	c.waitFor(t, "the workspace's InterceptorRoute", func() (bool, string) {
		_, err := c.Client().Get(routeAPIVersion, routeKind, ns, name)
		return err == nil, fmt.Sprint(err)
	}, ns)
	c.waitFor(t, "the interceptor to route the workspace", func() (bool, string) {
		ips, err := c.podIPs(interceptorNamespace, "app.kubernetes.io/component=interceptor")
		if err != nil || len(ips) == 0 {
			return false, fmt.Sprintf("interceptor pods %v: %v", ips, err)
		}
		body, err := get(fmt.Sprintf("http://%s:%d/queue", ips[0], interceptorAdminPort))
		return err == nil && strings.Contains(body, `"`+ns+"/"+name+`"`), body + fmt.Sprint(err)
	}, interceptorNamespace)
}

// podIPs lists the IPs of the running pods a label selector selects.
func (c *Cluster) podIPs(namespace, selector string) ([]string, error) {
	pods, err := c.listPods(namespace, selector)
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, p := range pods {
		if p.Status.Phase == "Running" && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	return ips, nil
}

// podTimes is when the test first saw each workspace pod, and first saw it
// Ready, polling every 50 ms.
type podTimes struct {
	mu    sync.Mutex
	seen  map[string]time.Time
	ready map[string]time.Time
}

// watchPodReadiness polls the workspace's pods until the test ends.
func (c *Cluster) watchPodReadiness(t *testing.T, ns, name string) *podTimes {
	t.Helper()
	pt := &podTimes{seen: map[string]time.Time{}, ready: map[string]time.Time{}}
	done := make(chan struct{})
	stopped := make(chan struct{})
	t.Cleanup(func() { close(done); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			pods, err := c.listPods(ns, v1alpha1.LabelWorkspace+"="+name)
			if err != nil {
				continue
			}
			now := time.Now()
			pt.mu.Lock()
			for _, p := range pods {
				if _, ok := pt.seen[p.Name]; !ok {
					pt.seen[p.Name] = now
				}
				if _, ok := pt.ready[p.Name]; !ok && podReady(p) {
					pt.ready[p.Name] = now
				}
			}
			pt.mu.Unlock()
		}
	}()
	return pt
}

// readySince returns how long the first pod first seen after since took
// from being seen to being Ready.
func (pt *podTimes) readySince(since time.Time) (time.Duration, bool) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	var first string
	for p, at := range pt.seen {
		if at.After(since) && (first == "" || at.Before(pt.seen[first])) {
			first = p
		}
	}
	r, ok := pt.ready[first]
	if first == "" || !ok {
		return 0, false
	}
	return r.Sub(pt.seen[first]), true
}

// wakeWith sends n requests at once through the interceptor for the
// sleeping workspace's host: every one must be answered 200 by the
// workspace's pod. It prints the cold starts beside the pod's own time to
// become ready and returns the slowest.
func (c *Cluster) wakeWith(t *testing.T, pods *podTimes, proxy, host string, n int) time.Duration {
	t.Helper()
	start := time.Now()
	type answer struct {
		code int
		body string
		took time.Duration
		err  error
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, body, err := getHost(proxy+"/env", host, 2*time.Minute)
			answers[i] = answer{code: code, body: body, took: time.Since(start), err: err}
		})
	}
	wg.Wait()
	var took []time.Duration
	for i, a := range answers {
		if a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, "WORKSPACE_ID=sleepy\n") {
			t.Errorf("request %d of %d: status %d after %v, %v: %.200q", i+1, n, a.code, a.took, a.err, a.body)
		}
		took = append(took, a.took)
	}
	slices.Sort(took)
	// The test's own poll of the pods may see the pod Ready after its
	// answers came back.
	var ready time.Duration
	c.waitFor(t, "the test to see the woken pod Ready", func() (bool, string) {
		var ok bool
		ready, ok = pods.readySince(start)
		return ok, "no pod seen Ready since the requests were sent"
	}, "wake-ws")
	slowest := took[len(took)-1]
	t.Logf("wake with %d request(s): answered after %v (fastest) to %v (slowest); the pod took %v from created to Ready; "+
		"cold start beyond the pod's own: %v (goal: within 2s)", n, took[0].Round(time.Millisecond), slowest.Round(time.Millisecond),
		ready.Round(time.Millisecond), (slowest - ready).Round(time.Millisecond))
	return slowest
}

// getHost GETs url with the Host header host.
func getHost(url, host string, timeout time.Duration) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), err
}

// checkWokenByRequest looks for the reporter's Woken Event for the request
// on the workspace, and for the wake and its reason at Cluster Control.
func (c *Cluster) checkWokenByRequest(t *testing.T, admin, ns, name string) {
	t.Helper()
	c.waitFor(t, "a Woken Event for the request", func() (bool, string) {
		raw, err := c.Client().Do("GET", "/apis/events.k8s.io/v1/namespaces/"+ns+"/events?fieldSelector="+
			url.QueryEscape("regarding.name="+name), nil)
		if err != nil {
			return false, err.Error()
		}
		var list struct {
			Items []struct {
				Reason string `json:"reason"`
				Action string `json:"action"`
				Note   string `json:"note"`
			} `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "Woken" && e.Action == "Request" {
				return true, e.Note
			}
		}
		return false, string(raw)
	}, ns)
	c.waitFor(t, "the wake reported to Cluster Control with its reason", func() (bool, string) {
		st, err := clusterControlState(admin)
		if err != nil {
			return false, err.Error()
		}
		for _, a := range st.AutoScales {
			if a.Namespace == ns && a.Name == name && a.Action == "wake" && a.Reason == "request" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("autoScales %+v", st.AutoScales)
	}, hooksNamespace)
}

// reportColdStartMetric waits for the reporters' cold-start histograms,
// scraped from each hook pod's reporter metrics port, to count both wakes
// (the reporter sees the held requests let go at its next poll), and
// prints them.
func (c *Cluster) reportColdStartMetric(t *testing.T) {
	t.Helper()
	var count, sum float64
	c.waitFor(t, "both wakes in the reporters' cold-start histogram", func() (bool, string) {
		ips, err := c.podIPs(hooksNamespace, "app.kubernetes.io/name=formspec-hooks")
		if err != nil {
			return false, err.Error()
		}
		count, sum = 0, 0
		for _, ip := range ips {
			body, err := get("http://" + ip + ":9091/metrics")
			if err != nil {
				return false, err.Error()
			}
			for _, line := range strings.Split(body, "\n") {
				var v float64
				switch {
				case strings.HasPrefix(line, `formspec_reporter_wake_cold_start_seconds_count{result="answered"} `):
					_, _ = fmt.Sscan(strings.Fields(line)[1], &v)
					count += v
				case strings.HasPrefix(line, `formspec_reporter_wake_cold_start_seconds_sum{result="answered"} `):
					_, _ = fmt.Sscan(strings.Fields(line)[1], &v)
					sum += v
				}
			}
		}
		return count >= 2, fmt.Sprintf("%v answered cold starts", count)
	}, hooksNamespace)
	t.Logf("formspec_reporter_wake_cold_start_seconds{result=answered}: %v wakes, %.2fs on average", count, sum/count)
}
