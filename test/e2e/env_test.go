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
// The install is the documented one, `kubectl apply -k deploy/`: the hook
// server serves TLS and wants a bearer token, with the flags of
// deploy/hooks/deployment.yaml, and the controllers of
// compositecontrollers/ are applied unchanged, endpointConfigs and all.
// Metacontroller reaches the Service name through a CONNECT proxy of the
// test's (install_test.go), runs with --apply-strategy=server-side-apply as
// docs/security.md says, and is restarted with a wrong token and a wrong
// CA at the end.
//
// The control plane runs no deployment, replicaset or HPA controller and no
// kubelet, so the tests play those parts themselves: they write a
// Deployment's status and scale it the way the HPA would. That is what makes
// the replica and readiness checks deterministic.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// wired to it as the documented install wires them.
type env struct {
	cp    *controlplane.ControlPlane
	c     *controlplane.Client
	hooks *controlplane.Process
	mc    *controlplane.Process
	// hookMetrics and mcMetrics are the hook server's and Metacontroller's
	// metrics listeners, http://127.0.0.1:<port>.
	hookMetrics, mcMetrics string
	// install is what the tests read from deploy/ and compositecontrollers/.
	install install
	// proxy stands in for cluster DNS and the hook Service.
	proxy *serviceProxy
	// mcArgs and mcEnv start Metacontroller; mcRuns counts the starts, so
	// that each run logs to a directory of its own.
	mcArgs, mcEnv []string
	mcRuns        int
	dir           string
	healthURL     string
	// reporterPort is where the hook server hands observations over; no
	// reporter listens there unless a test starts one.
	reporterPort int
	// claimsRelated is set when the hook server relates claims to their
	// Workspaces (--workspace-claims=related) instead of reading the
	// summary the reporter writes.
	claimsRelated bool
}

// envConfig changes what startEnvWith starts; its zero value is the
// environment of the end-to-end tests.
type envConfig struct {
	// hookArgs are added to the hook server's command line, after the
	// tests' own: a flag given again overrides.
	hookArgs []string
	// mcArgs are added to Metacontroller's command line in the same way.
	mcArgs []string
	// startHooks, when set, starts something else in the hook server's
	// place: a server of the hooks on listen, its metrics and /readyz on
	// metricsListen, with the serving certificate and key of the install.
	startHooks func(t *testing.T, e *env, listen, metricsListen, certFile, keyFile string) *controlplane.Process
	// editController, when set, may change each controller definition
	// before it is applied.
	editController func(t *testing.T, obj controlplane.Object)
	// claimsRelated runs the hook server with --workspace-claims=related:
	// Metacontroller hands each Workspace the claims of its namespace, and
	// no claims summary is read.
	claimsRelated bool
}

// startEnv brings up the control plane, installs the CRDs, creates the
// Secrets the documented install expects (playing cert-manager and the
// user), builds and starts the hook server with the TLS and token flags of
// deploy/hooks/deployment.yaml, applies the controller definitions exactly
// as compositecontrollers/ has them, and starts Metacontroller with
// server-side apply and the test's CONNECT proxy as HTTPS_PROXY. It skips
// the test when a prerequisite is missing.
func startEnv(t *testing.T) *env { return startEnvWith(t, envConfig{}) }

// startEnvWith is startEnv, changed by cfg.
func startEnvWith(t *testing.T, cfg envConfig) *env {
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
	root := controlplane.RepoRoot(t)
	// Metacontroller reads its own objects loosely, so the minimal
	// stand-ins serve when the published CRDs are not beside the repo.
	mcCRDs := controlplane.MetacontrollerCRDs(t)

	cp := controlplane.Start(t)
	e := &env{cp: cp, c: cp.Client(), dir: t.TempDir(), claimsRelated: cfg.claimsRelated}
	if err := e.c.InstallCRDs(mcCRDs); err != nil {
		t.Fatalf("cannot install Metacontroller's CRDs: %v", err)
	}
	if err := e.c.InstallCRDs(globYAML(t, filepath.Join(root, "deploy", "crds"))...); err != nil {
		t.Fatalf("cannot install deploy/crds: %v", err)
	}

	e.install = readInstall(t, root, newTestCA(t, "formspec-hooks-ca"), randomToken(t))
	for _, p := range e.install.policies {
		if _, err := e.c.Apply(p, fieldManager); err != nil {
			t.Fatalf("cannot apply %v %s: %v", p["kind"], objName(p), err)
		}
	}
	e.namespace(t, str(field(e.install.deployment, "metadata", "namespace")))
	for _, s := range e.install.secrets {
		if _, err := e.c.Create(s); err != nil {
			t.Fatalf("cannot create Secret %s: %v", objName(s), err)
		}
	}

	ports := controlplane.FreePorts(t, 5)
	hookPort, hookMetricsPort, reporterPort, mcMetricsPort, mcHealthPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	e.hookMetrics = "http://127.0.0.1:" + strconv.Itoa(hookMetricsPort)
	e.mcMetrics = "http://127.0.0.1:" + strconv.Itoa(mcMetricsPort)
	e.reporterPort = reporterPort

	hookListen, hookMetricsListen := "127.0.0.1:"+strconv.Itoa(hookPort), "127.0.0.1:"+strconv.Itoa(hookMetricsPort)
	files := serverFiles(t, e.c, e.install.deployment, filepath.Join(e.dir, "mounts"))
	if cfg.startHooks != nil {
		e.hooks = cfg.startHooks(t, e, hookListen, hookMetricsListen, files["tls-cert-file"], files["tls-key-file"])
	} else {
		bin := buildHooks(t, root, e.dir)
		args := []string{"serve",
			"--listen=" + hookListen,
			"--metrics-listen=" + hookMetricsListen,
			"--cluster-control-url=" + controlClusterURL,
			"--default-version=1.8.2",
			// Nothing listens there unless a test starts a reporter: the
			// hand-off fails quietly and keeps what it could not hand
			// over, which is what the hooks must tolerate.
			"--reporter-url=http://127.0.0.1:" + strconv.Itoa(reporterPort),
			"--shutdown-delay=0",
			"--log-level=debug",
			// A child that cannot be created makes its Workspace Degraded
			// after seconds, not the default minute.
			"--child-create-grace=3s",
		}
		for _, name := range serverFileNames {
			args = append(args, "--"+name+"="+files[name])
		}
		if cfg.claimsRelated {
			args = append(args, "--workspace-claims=related")
		}
		e.hooks = controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: e.dir, LogLines: 200}, bin, append(args, cfg.hookArgs...)...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := e.hooks.WaitReady(ctx, func() bool { return httpOK(e.hookMetrics + "/readyz") }); err != nil {
		t.Fatalf("the hook server did not become ready: %v", err)
	}

	e.proxy = startServiceProxy(t, map[string]string{serviceHost(e.install.service): "127.0.0.1:" + strconv.Itoa(hookPort)})
	for _, obj := range e.install.controllers {
		if cfg.editController != nil {
			cfg.editController(t, obj)
		}
		if _, err := e.c.Apply(obj, fieldManager); err != nil {
			t.Fatalf("cannot apply %v %s: %v", obj["kind"], objName(obj), err)
		}
	}

	e.mcArgs = []string{
		"--kubeconfig=" + cp.Kubeconfig,
		// What docs/security.md prescribes: the default (dynamic-apply)
		// copies every applied object, credentials Secrets included, into
		// an annotation.
		"--apply-strategy=server-side-apply",
		// New CRDs and controllers are found within a second rather than
		// the default thirty.
		"--discovery-interval=1s",
		"--metrics-address=127.0.0.1:" + strconv.Itoa(mcMetricsPort),
		"--health-probe-bind-address=127.0.0.1:" + strconv.Itoa(mcHealthPort),
		"--pprof-address=0",
		"--leader-election=false",
		// The defaults (5 QPS, burst 10) would make the parallel cases
		// queue behind the client-side rate limiter.
		"--client-go-qps=100",
		"--client-go-burst=200",
		"--zap-log-level=4",
	}
	e.mcArgs = append(e.mcArgs, cfg.mcArgs...)
	// The API server is on loopback, which Go never proxies; NO_PROXY
	// says so again in case the environment says otherwise.
	e.mcEnv = []string{"HTTPS_PROXY=" + e.proxy.URL(), "HTTP_PROXY=" + e.proxy.URL(), "NO_PROXY=127.0.0.1,localhost"}
	e.healthURL = "http://127.0.0.1:" + strconv.Itoa(mcHealthPort) + "/readyz"
	e.startMetacontroller(t, mcBin)
	return e
}

// startMetacontroller starts Metacontroller and waits until it is ready;
// each start logs to a directory of its own.
func (e *env) startMetacontroller(t *testing.T, bin string) {
	t.Helper()
	e.mcRuns++
	dir := filepath.Join(e.dir, "metacontroller-"+strconv.Itoa(e.mcRuns))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.mc = controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: dir, LogLines: 300, Env: e.mcEnv}, bin, e.mcArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := e.mc.WaitReady(ctx, func() bool { return httpOK(e.healthURL) }); err != nil {
		t.Fatalf("Metacontroller did not become ready: %v", err)
	}
}

// restartMetacontroller stops Metacontroller, runs change, and starts it
// again: Metacontroller reads the endpointConfigs Secrets only when it
// starts a controller.
func (e *env) restartMetacontroller(t *testing.T, change func()) {
	t.Helper()
	e.mc.Stop()
	change()
	e.startMetacontroller(t, os.Getenv(EnvMetacontrollerBin))
}

// randomToken is a bearer token as docs/security.md makes one.
func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
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
