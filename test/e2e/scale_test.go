package e2e

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// EnvScale names the environment variable that turns on TestScale: the
// number of Workspaces to create, e.g. FORMSPEC_E2E_SCALE=300.
const EnvScale = "FORMSPEC_E2E_SCALE"

// scaleTimeout bounds one scale run: a guard against a hang, not a
// performance assertion.
const scaleTimeout = 20 * time.Minute

// TestScale is a benchmark, not a check: under the real Metacontroller it
// creates N Workspaces at once and prints the seconds until every one has
// its Deployment, Service and ConfigMap and a status.observedGeneration,
// and the hook server's CPU seconds meanwhile. It runs with
// Metacontroller's client throttle raised (as the other e2e tests run it),
// the same with a trivial hook in place of the hook server (constant
// children, no work: the floor to compare with), and at Metacontroller's
// defaults (--client-go-qps 5, burst 10), which dominate at any size. It
// runs only when FORMSPEC_E2E_SCALE is set.
//
//	FORMSPEC_E2E_SCALE=300 METACONTROLLER_BIN=... go test ./test/e2e -run TestScale -v -timeout 60m
//	FORMSPEC_E2E_SCALE=300 METACONTROLLER_BIN=... go test ./test/e2e -run 'TestScale/raised' -v
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv(EnvScale))
	if n <= 0 {
		t.Skip(EnvScale + " is not set to a number of Workspaces: skipping the scale benchmark")
	}
	// Each run gets an environment of its own: a restarted Metacontroller
	// resyncs every Workspace it finds, which would weigh on a later run.
	run := func(label string, setup func(t *testing.T, e *env), cpu bool) {
		t.Run(label, func(t *testing.T) {
			e := startEnv(t)
			if setup != nil {
				setup(t, e)
			}
			e.apply(t, clusterClass("scale", v1alpha1.Scaling{MinReplicas: ptr.To[int32](1)}))
			measure := e.hookCPUSeconds
			if !cpu {
				measure = nil
			}
			e.scaleRun(t, label, n, "scale", measure)
		})
	}
	run("raised-qps", nil, true)
	run("raised-qps-trivial-hook", func(t *testing.T, e *env) {
		e.hooks.Stop()
		e.startTrivialHook(t)
	}, false)
	run("default-qps", func(t *testing.T, e *env) {
		e.restartMetacontroller(t, func() {
			e.mcArgs = slices.DeleteFunc(e.mcArgs, func(a string) bool {
				return strings.HasPrefix(a, "--client-go-qps=") || strings.HasPrefix(a, "--client-go-burst=")
			})
		})
	}, true)
}

// startTrivialHook serves the workspace hooks where the hook server did,
// with its certificate, answering every sync with the same three children
// (named after the parent) and a status of its generation, without
// checking the token or decoding more than the parent's name.
func (e *env) startTrivialHook(t *testing.T) {
	t.Helper()
	backend := e.proxy.routes[serviceHost(e.install.service)]
	mounts := filepath.Join(e.dir, "mounts")
	cert, err := tls.LoadX509KeyPair(
		filepath.Join(mounts, filepath.FromSlash(flagValue(t, e.install.deployment, "tls-cert-file"))),
		filepath.Join(mounts, filepath.FromSlash(flagValue(t, e.install.deployment, "tls-key-file"))))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", backend, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/workspace/customize", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{}`)
	})
	mux.HandleFunc("POST /v1/workspace/sync", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent struct {
				Metadata struct {
					Name       string `json:"name"`
					Namespace  string `json:"namespace"`
					Generation int64  `json:"generation"`
				} `json:"metadata"`
			} `json:"parent"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		m := req.Parent.Metadata
		_, _ = io.WriteString(w, strings.NewReplacer("{name}", m.Name, "{namespace}", m.Namespace, "{generation}", strconv.FormatInt(m.Generation, 10)).Replace(trivialAnswer))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// trivialAnswer is the trivial hook's answer, {name}, {namespace} and
// {generation} replaced.
const trivialAnswer = `{"status":{"observedGeneration":{generation},"phase":"Ready"},"children":[
{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"{name}-config","namespace":"{namespace}"},"data":{"k":"v"}},
{"apiVersion":"v1","kind":"Service","metadata":{"name":"{name}","namespace":"{namespace}"},"spec":{"selector":{"formspec.dev/workspace":"{name}"},"ports":[{"name":"http","port":80,"targetPort":8080}]}},
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"{name}","namespace":"{namespace}"},"spec":{"replicas":1,"selector":{"matchLabels":{"formspec.dev/workspace":"{name}"}},
 "template":{"metadata":{"labels":{"formspec.dev/workspace":"{name}"}},"spec":{"containers":[{"name":"resource","image":"formahub/formspec-resource:latest"}]}}}}]}`

// scaleRun creates n Workspaces in a namespace of their own and waits for
// all of them, printing what it measured.
func (e *env) scaleRun(t *testing.T, label string, n int, className string, cpu func(*testing.T) float64) {
	ns := "scale-" + label
	e.namespace(t, ns)
	if cpu == nil {
		cpu = func(*testing.T) float64 { return 0 }
	}
	cpu0 := cpu(t)
	start := time.Now()
	for i := range n {
		e.apply(t, newWorkspace(ns, fmt.Sprintf("ws-%04d", i), className))
	}
	created := time.Since(start)
	deadline := start.Add(scaleTimeout)
	for {
		done, err := e.scaleDone(ns, n)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not every one of %d Workspaces was synced within %s", label, n, scaleTimeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
	elapsed := time.Since(start)
	t.Logf("%s: %d Workspaces created in %.1fs, all synced after %.1fs; hook server CPU %.2fs",
		label, n, created.Seconds(), elapsed.Seconds(), cpu(t)-cpu0)
}

// scaleDone reports whether n Workspaces of ns all have their three
// children and a status for their generation.
func (e *env) scaleDone(ns string, n int) (bool, error) {
	for _, kind := range [][2]string{{"apps/v1", "Deployment"}, {"v1", "Service"}, {"v1", "ConfigMap"}} {
		items, err := e.list(kind[0], kind[1], ns)
		if err != nil {
			return false, err
		}
		if len(items) < n {
			return false, nil
		}
	}
	items, err := e.list(v1alpha1.APIVersion, "Workspace", ns)
	if err != nil {
		return false, err
	}
	synced := 0
	for _, it := range items {
		meta, _ := it["metadata"].(map[string]any)
		status, _ := it["status"].(map[string]any)
		if gen, ok := meta["generation"].(float64); ok && status["observedGeneration"] == gen {
			synced++
		}
	}
	return synced >= n, nil
}

// list returns the items of a kind in a namespace.
func (e *env) list(apiVersion, kind, ns string) ([]map[string]any, error) {
	path, err := e.c.ResourcePath(apiVersion, kind, ns, "")
	if err != nil {
		return nil, err
	}
	raw, err := e.c.Do(http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// hookCPUSeconds reads process_cpu_seconds_total from the hook server's
// metrics listener.
func (e *env) hookCPUSeconds(t *testing.T) float64 {
	t.Helper()
	resp, err := http.Get(e.hookMetrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_cpu_seconds_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no process_cpu_seconds_total on %s/metrics", e.hookMetrics)
	return 0
}
