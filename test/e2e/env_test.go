// Package e2e runs this repository's hooks under a real Metacontroller
// against a real control plane, and walks the Workspace, Datastore and
// ResourceClaim golden paths end to end.
//
// It needs three things the repository does not ship:
//
//   - a Metacontroller binary (v4.16 or newer, built from its public
//     source), named by METACONTROLLER_BIN;
//   - the control-plane binaries of test/controlplane, from FORMSPEC_K8S_BIN
//     or, when that is unset, from where test/k8s-binaries.sh puts them by
//     default (~/.cache/formspec-hooks/k8s-v1.37.2);
//   - Metacontroller's CRDs: the published copy in ../shared/testdata beside
//     the repository, or minimal stand-ins when it is absent.
//
// Without the binaries TestMetacontroller skips and says what is missing.
// Everything listens on 127.0.0.1 only, and every process is stopped when
// the test ends.
//
// The control plane runs no deployment, replicaset or HPA controller and no
// kubelet, so the tests play those parts themselves: they write a
// Deployment's status and scale it the way the HPA would. That is what makes
// the replica and readiness checks deterministic.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// EnvMetacontrollerBin names the environment variable holding the path of
// the Metacontroller binary.
const EnvMetacontrollerBin = "METACONTROLLER_BIN"

// controlClusterURL is what the hook server hands workspaces; nothing
// listens there, and nothing in these tests calls it.
const controlClusterURL = "http://formspec-ctl.formspec-system:7070"

// k8sVersion is the version test/k8s-binaries.sh builds, which names its
// default output directory.
const k8sVersion = "v1.37.2"

// fieldManager is the server-side apply field manager of the tests' writes.
const fieldManager = "formspec-e2e-test"

// startTimeout bounds how long the hook server and Metacontroller may take
// to become ready: a guard against a hang, not a performance assertion.
const startTimeout = 2 * time.Minute

// env is one running control plane with the hook server and Metacontroller
// wired to it.
type env struct {
	cp    *controlplane.ControlPlane
	c     *controlplane.Client
	hooks *controlplane.Process
	mc    *controlplane.Process
	// hookBase is the hook server's base URL, http://127.0.0.1:<port>.
	hookBase string
	// reporterPort is where the hook server hands observations over; no
	// reporter listens there unless a test starts one.
	reporterPort int
}

// startEnv brings up the control plane, installs the CRDs, builds and
// starts the hook server, applies the controller definitions pointed at it
// and starts Metacontroller. It skips the test when a prerequisite is
// missing.
func startEnv(t *testing.T) *env {
	t.Helper()
	mcBin := os.Getenv(EnvMetacontrollerBin)
	if mcBin == "" {
		t.Skip(EnvMetacontrollerBin + " not set: skipping Metacontroller end-to-end tests; build Metacontroller v4.16+ from its public source and set it")
	}
	if _, err := os.Stat(mcBin); err != nil {
		t.Fatalf("%s=%s: %v", EnvMetacontrollerBin, mcBin, err)
	}
	if os.Getenv(controlplane.EnvBinDir) == "" {
		// Where test/k8s-binaries.sh builds by default, so that the tests
		// run without make once the binaries exist.
		if home, err := os.UserHomeDir(); err == nil {
			t.Setenv(controlplane.EnvBinDir, filepath.Join(home, ".cache", "formspec-hooks", "k8s-"+k8sVersion))
		}
	}
	if _, err := controlplane.BinDir(); err != nil {
		t.Skip("skipping Metacontroller end-to-end tests: " + err.Error())
	}
	root := repoRoot(t)
	// Metacontroller reads its own objects loosely, so the minimal
	// stand-ins serve when the published CRDs are not beside the repo.
	mcCRDs := controlplane.MetacontrollerCRDs(t)

	cp := controlplane.Start(t)
	e := &env{cp: cp, c: cp.Client()}
	if err := e.c.InstallCRDs(mcCRDs); err != nil {
		t.Fatalf("cannot install Metacontroller's CRDs: %v", err)
	}
	if err := e.c.InstallCRDs(globYAML(t, filepath.Join(root, "deploy", "crds"))...); err != nil {
		t.Fatalf("cannot install deploy/crds: %v", err)
	}

	dir := t.TempDir()
	ports := controlplane.FreePorts(t, 5)
	hookPort, hookMetricsPort, reporterPort, mcMetricsPort, mcHealthPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	e.hookBase = "http://127.0.0.1:" + strconv.Itoa(hookPort)
	e.reporterPort = reporterPort

	bin := buildHooks(t, root, dir)
	e.hooks = controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: dir, LogLines: 200}, bin, "serve",
		"--listen=127.0.0.1:"+strconv.Itoa(hookPort),
		"--metrics-listen=127.0.0.1:"+strconv.Itoa(hookMetricsPort),
		"--control-cluster-url="+controlClusterURL,
		// Nothing listens there unless a test starts a reporter: the
		// hand-off fails quietly and keeps what it could not hand over,
		// which is what the hooks must tolerate.
		"--reporter-url=http://127.0.0.1:"+strconv.Itoa(reporterPort),
		"--shutdown-delay=0",
		"--log-level=debug",
	)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := e.hooks.WaitReady(ctx, func() bool {
		return httpOK("http://127.0.0.1:" + strconv.Itoa(hookMetricsPort) + "/readyz")
	}); err != nil {
		t.Fatalf("the hook server did not become ready: %v", err)
	}

	for _, f := range globYAML(t, filepath.Join(root, "compositecontrollers")) {
		objs, err := controlplane.ReadYAMLFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			if err := loopbackWebhooks(obj, e.hookBase); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if _, err := e.c.Apply(obj, fieldManager); err != nil {
				t.Fatalf("cannot apply %s: %v", f, err)
			}
		}
	}

	e.mc = controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: dir, LogLines: 300}, mcBin,
		"--kubeconfig="+cp.Kubeconfig,
		// New CRDs and controllers are found within a second rather than
		// the default thirty.
		"--discovery-interval=1s",
		"--metrics-address=127.0.0.1:"+strconv.Itoa(mcMetricsPort),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(mcHealthPort),
		"--pprof-address=0",
		"--leader-election=false",
		// The defaults (5 QPS, burst 10) would make the parallel cases
		// queue behind the client-side rate limiter.
		"--client-go-qps=100",
		"--client-go-burst=200",
		"--zap-log-level=4",
	)
	if err := e.mc.WaitReady(ctx, func() bool {
		return httpOK("http://127.0.0.1:" + strconv.Itoa(mcHealthPort) + "/readyz")
	}); err != nil {
		t.Fatalf("Metacontroller did not become ready: %v", err)
	}
	return e
}

// buildHooks builds ./cmd/formspec-hooks into dir with the go command that
// runs the tests.
func buildHooks(t *testing.T, root, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("cannot find the go command to build formspec-hooks: %v", err)
	}
	bin := filepath.Join(dir, "formspec-hooks")
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/formspec-hooks")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/formspec-hooks: %v\n%s", err, out)
	}
	return bin
}

// loopbackWebhooks rewrites every webhook of a CompositeController or
// DecoratorController to call base (the hook server on loopback) at the
// path the definition names, dropping service, path and url and keeping
// everything else (timeouts, ETag settings, hook versions) as written.
func loopbackWebhooks(obj controlplane.Object, base string) error {
	spec, _ := obj["spec"].(map[string]any)
	hooks, _ := spec["hooks"].(map[string]any)
	if len(hooks) == 0 {
		return fmt.Errorf("%v %v has no spec.hooks", obj["kind"], objName(obj))
	}
	for _, hookName := range slices.Sorted(maps.Keys(hooks)) {
		hook, _ := hooks[hookName].(map[string]any)
		webhook, _ := hook["webhook"].(map[string]any)
		if webhook == nil {
			return fmt.Errorf("%v %v: hook %s has no webhook", obj["kind"], objName(obj), hookName)
		}
		var path string
		switch {
		case webhook["url"] != nil:
			u, err := url.Parse(fmt.Sprint(webhook["url"]))
			if err != nil {
				return fmt.Errorf("%v %v: hook %s: %w", obj["kind"], objName(obj), hookName, err)
			}
			path = u.Path
		case webhook["path"] != nil:
			path = fmt.Sprint(webhook["path"])
		}
		if !strings.HasPrefix(path, "/") {
			return fmt.Errorf("%v %v: hook %s names no path", obj["kind"], objName(obj), hookName)
		}
		delete(webhook, "service")
		delete(webhook, "path")
		webhook["url"] = strings.TrimSuffix(base, "/") + path
	}
	return nil
}

func objName(obj controlplane.Object) string {
	md, _ := obj["metadata"].(map[string]any)
	s, _ := md["name"].(string)
	return s
}

func httpOK(u string) bool {
	resp, err := http.Get(u)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode == http.StatusOK
}

// repoRoot is the repository's root directory.
func repoRoot(t testing.TB) string { return controlplane.RepoRoot(t) }

// globYAML lists dir/*.yaml except the kustomization.
func globYAML(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no YAML files in %s", dir)
	}
	return out
}

// getAs reads an object into a typed struct. A missing object is
// (nil, nil), so that a wait can tell "not yet" from a failure.
func getAs[T any](c *controlplane.Client, apiVersion, kind, namespace, name string) (*T, error) {
	obj, err := c.Get(apiVersion, kind, namespace, name)
	if controlplane.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return convert[T](obj)
}

// get reads an object into a typed struct; a missing object is an error.
func get[T any](c *controlplane.Client, apiVersion, kind, namespace, name string) (*T, error) {
	obj, err := getAs[T](c, apiVersion, kind, namespace, name)
	if err == nil && obj == nil {
		return nil, fmt.Errorf("%s %s/%s does not exist", kind, namespace, name)
	}
	return obj, err
}

// convert re-decodes a JSON object into a typed struct.
func convert[T any](obj any) (*T, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// toObject encodes a typed object for the client.
func toObject(t testing.TB, v any) controlplane.Object {
	t.Helper()
	obj, err := convert[map[string]any](v)
	if err != nil {
		t.Fatal(err)
	}
	return *obj
}
