package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestReporter runs the reporter sidecar, as its own ServiceAccount and
// under deploy/reporter's RBAC and admission policy, beside the hook server
// and Metacontroller, against a reference Cluster Control: directives
// become Workspace annotations that roll or scale the workspace and are
// reported consumed, decisions and every Degraded reason become Events, the
// reporter's identity cannot change a spec, a Cluster Control that lost its
// state is healed by the re-report, a deletion made while the sidecar was
// down still reaches Cluster Control, a claim granted on a v1 signature is
// announced on the claim, and so is a credentials Secret carrying a copy of
// its data.
func TestReporter(t *testing.T) {
	e := startEnv(t)
	const ns, name, className = "e2e-reporter", "shop", "e2e-reporter-zero"
	key := ns + "/" + name

	ri := e.installReporter(t)
	asReporter, err := controlplane.NewClient(e.cp.URL, ri.token, e.cp.CACert)
	if err != nil {
		t.Fatal(err)
	}

	cc := startClusterControl(t)
	metricsPort := controlplane.FreePorts(t, 1)[0]
	startReporter := func() *controlplane.Process {
		return ri.start(t, e, cc.addr, metricsPort,
			"--deploy-status-interval=200ms",
			"--node-health-interval=1s",
			"--resync-interval=2s",
			"--backoff-base=50ms",
			"--backoff-max=500ms",
			"--log-level=debug",
		)
	}
	rep := startReporter()

	e.namespace(t, ns)
	e.apply(t, clusterClass(className, v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](2), ScaleToZero: true}))
	e.apply(t, newWorkspace(ns, name, className))
	replicas := func(want int32) func() error {
		return func() error {
			dep, err := e.deployment(ns, name)
			if err != nil || dep == nil {
				return fmt.Errorf("Deployment: %v", err)
			}
			if got := ptr.Deref(dep.Spec.Replicas, 1); got != want {
				return fmt.Errorf("spec.replicas %d", got)
			}
			return e.runDeployment(ns, name)
		}
	}
	e.eventually(t, "Deployment "+key+" running one replica", replicas(1))
	e.eventually(t, "Cluster Control to hear of "+key, func() error {
		if _, ok := cc.srv().Workspaces()[key]; !ok {
			return errors.New("not reported")
		}
		return nil
	})

	t.Run("RestartRequired", func(t *testing.T) {
		const hash = "sha256:e2e0001e2e0001e2e0001e2e0001e2e0001e2e0001e2e0001e2e0001e2e00011"
		cc.srv().SetDirective(ns, name, hash)
		e.eventually(t, "the new binary in the pod template of "+key, func() error {
			dep, err := e.deployment(ns, name)
			if err != nil || dep == nil {
				return fmt.Errorf("Deployment: %v", err)
			}
			if got := dep.Spec.Template.Annotations[v1alpha1.AnnotationArtifactBinaryHash]; got != hash {
				return fmt.Errorf("pod template hash %q", got)
			}
			return e.runDeployment(ns, name)
		})
		ws, err := e.workspace(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if got := ws.Annotations[v1alpha1.AnnotationArtifactBinaryHash]; got != hash {
			t.Errorf("Workspace annotation %q, want %q", got, hash)
		}
		e.eventually(t, "the restart reported consumed", func() error {
			want := clustercontrol.Consumption{Namespace: ns, Name: name, Action: ccapi.ActionRestartRequired, ArtifactHash: hash}
			for _, c := range cc.srv().Consumed() {
				if c == want {
					return nil
				}
			}
			return fmt.Errorf("consumed %v", cc.srv().Consumed())
		})
		e.eventually(t, "a RollingOut Event on "+key, e.eventFor(ns, "Workspace", name, string(ws.UID), "RollingOut"))
	})

	t.Run("IdleAndWake", func(t *testing.T) {
		if err := cc.srv().PutDirective(ccapi.Directive{Namespace: ns, Name: name, Action: ccapi.ActionIdle}); err != nil {
			t.Fatal(err)
		}
		e.eventually(t, "Deployment "+key+" scaled to zero", replicas(0))
		e.eventually(t, "a ScaledToZero Event on "+key, e.eventFor(ns, "Workspace", name, "", "ScaledToZero"))
		if err := cc.srv().PutDirective(ccapi.Directive{Namespace: ns, Name: name, Action: ccapi.ActionWake}); err != nil {
			t.Fatal(err)
		}
		e.eventually(t, "Deployment "+key+" running again", replicas(1))
		e.eventually(t, "a Woken Event on "+key, e.eventFor(ns, "Workspace", name, "", "Woken"))
	})

	t.Run("DeniedClaim", func(t *testing.T) {
		claim := claimstest.Claim()
		claim.ObjectMeta = fresh(claim.ObjectMeta)
		claim.Namespace = ns
		claim.Spec.Workspace = name
		// No such Datastore in this namespace: denied.
		e.apply(t, claim)
		e.eventually(t, "a ClaimDenied Event on ResourceClaim "+ns+"/"+claim.Name, e.eventFor(ns, "ResourceClaim", claim.Name, "", "ClaimDenied"))
	})

	t.Run("DegradedEvents", func(t *testing.T) { testDegradedEvents(t, e) })

	t.Run("LegacySignature", func(t *testing.T) { testV1OptIn(t, e, e.legacySignatureEvent) })

	t.Run("IdentityCannotChangeSpec", func(t *testing.T) {
		_, err := asReporter.MergePatch(v1alpha1.APIVersion, "Workspace", ns, name, "", map[string]any{"spec": map[string]any{"owner": "mallory"}})
		var apiErr *controlplane.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusForbidden {
			t.Errorf("the reporter changing a Workspace's spec: got %v, want 403", err)
		}
	})

	t.Run("ClusterControlRestart", func(t *testing.T) {
		cc.restart(t)
		e.eventually(t, "the re-report to tell the new Cluster Control of "+key, func() error {
			r, ok := cc.srv().Workspaces()[key]
			if !ok {
				return errors.New("not reported")
			}
			// Nothing changed since the restart: this is the periodic
			// re-report, which keeps the state's observedAt.
			if !r.ReportedAt.After(r.ObservedAt) {
				return fail("the report after the restart is not a re-report: %+v", r)
			}
			return nil
		})
	})

	t.Run("DeletionWhileSidecarDown", func(t *testing.T) {
		rep.Stop()
		e.teardown(t, ns, name)
		rep = startReporter()
		e.eventually(t, "the deletion of "+key+" at Cluster Control", func() error {
			if r := cc.srv().Workspaces()[key]; !r.Deleted {
				return fmt.Errorf("last report %+v", r)
			}
			return nil
		})
	})

	// Last, because it restarts Metacontroller, whose new resyncs would be
	// taken for changes by the cases above: its default apply strategy for
	// the one case that needs it, then server-side apply again. Restarted
	// from this test, not from the subtest, whose end would stop the
	// process it started.
	e.restartMetacontroller(t, e.applyStrategy("dynamic-apply"))
	t.Run("CredentialsExposed", func(t *testing.T) { testExposedEvent(t, e) })
	e.restartMetacontroller(t, e.applyStrategy("server-side-apply"))
}

// reporterInstall is the reporter sidecar as deploy/ installs it: its
// ServiceAccount, RBAC and admission policy applied, a kubeconfig with the
// account's token, and the binary built.
type reporterInstall struct {
	bin, kubeconfig, token, dir string
	// env holds KEY=value pairs added to the reporter's environment.
	env []string
}

func (e *env) installReporter(t *testing.T) reporterInstall {
	t.Helper()
	root := controlplane.RepoRoot(t)
	e.namespace(t, "formspec-system")
	for _, f := range globYAML(t, filepath.Join(root, "deploy", "reporter")) {
		if _, err := e.c.ApplyYAMLFile(f, fieldManager, false); err != nil {
			t.Fatalf("cannot apply %s: %v", f, err)
		}
	}
	ri := reporterInstall{dir: t.TempDir()}
	ri.token = serviceAccountToken(t, e.c, "formspec-system", "formspec-reporter")
	ri.kubeconfig = filepath.Join(ri.dir, "reporter.kubeconfig")
	writeKubeconfig(t, ri.kubeconfig, e.cp, ri.token)
	ri.bin = buildCommand(t, root, ri.dir, "formspec-reporter")
	return ri
}

// start runs the reporter where the hook server hands observations over
// (e.reporterPort), reporting to the Cluster Control at ccAddr, its
// metrics on metricsPort, with args added to its command line, and waits
// until it is ready.
func (ri reporterInstall) start(t *testing.T, e *env, ccAddr string, metricsPort int, args ...string) *controlplane.Process {
	t.Helper()
	p := controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: ri.dir, LogLines: 200, Env: ri.env}, ri.bin, append([]string{
		"--cluster-control-url=http://" + ccAddr,
		"--listen=127.0.0.1:" + strconv.Itoa(e.reporterPort),
		"--metrics-listen=127.0.0.1:" + strconv.Itoa(metricsPort),
		"--kubeconfig=" + ri.kubeconfig,
		// The kubeconfig names no namespace; the Lease the Role allows is
		// in the reporter's, as in a pod.
		"--lease-namespace=formspec-system",
		"--reporter-name=reporter-e2e",
	}, args...)...)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := p.WaitReady(ctx, func() bool { return httpOK("http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/readyz") }); err != nil {
		t.Fatalf("the reporter did not become ready: %v", err)
	}
	return p
}

// startClaimsReporter starts the reporter as the install runs it beside
// the hook server, with args added, against a reference Cluster Control
// that holds no directives. The workspace hook reads each Workspace's
// claims from the summary the elected reporter writes onto it (unless
// the hooks run with --workspace-claims=related), so every test in which
// a workspace receives credentials runs one.
func (e *env) startClaimsReporter(t *testing.T, args ...string) *controlplane.Process {
	t.Helper()
	cc := startClusterControl(t)
	return e.installReporter(t).start(t, e, cc.addr, controlplane.FreePorts(t, 1)[0], append([]string{"--log-level=debug"}, args...)...)
}

// eventFor checks for an Event with reason about the named object, found
// the way `kubectl events --for <kind>/<name>` finds it: through the core
// v1 Events API, by the involved object's kind, apiVersion and name. With
// uid set it also asks the way `kubectl describe` does, by kind, name and
// UID.
func (e *env) eventFor(ns, kind, name, uid, reason string) func() error {
	return func() error {
		selectors := []string{"involvedObject.kind=" + kind + ",involvedObject.apiVersion=" + v1alpha1.APIVersion + ",involvedObject.name=" + name}
		if uid != "" {
			selectors = append(selectors, "involvedObject.kind="+kind+",involvedObject.name="+name+",involvedObject.uid="+uid)
		}
		for _, sel := range selectors {
			raw, err := e.c.Do(http.MethodGet, "/api/v1/namespaces/"+ns+"/events?fieldSelector="+url.QueryEscape(sel), nil)
			if err != nil {
				return err
			}
			var l corev1.EventList
			if err := json.Unmarshal(raw, &l); err != nil {
				return err
			}
			var seen []string
			found := false
			for _, ev := range l.Items {
				found = found || ev.Reason == reason
				seen = append(seen, ev.Reason)
			}
			if !found {
				return fmt.Errorf("events selected by %s: %v", sel, seen)
			}
		}
		return nil
	}
}

// ccProcess is a reference Cluster Control served in the test process on a
// fixed address, which can be restarted with its state lost.
type ccProcess struct {
	addr   string
	server *clustercontrol.Server
	cancel context.CancelFunc
	done   chan error
}

func startClusterControl(t *testing.T) *ccProcess {
	t.Helper()
	p := &ccProcess{}
	if err := p.serve("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	// p is restarted in place, so this stops whichever server runs last.
	t.Cleanup(p.stop)
	return p
}

// serve starts a new server, with no state, on addr.
func (p *ccProcess) serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.addr, p.server, p.cancel, p.done = ln.Addr().String(), clustercontrol.New(clustercontrol.Options{}), cancel, make(chan error, 1)
	go func() { p.done <- p.server.Serve(ctx, ln) }()
	return nil
}

func (p *ccProcess) srv() *clustercontrol.Server { return p.server }

func (p *ccProcess) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.done
		p.cancel = nil
	}
}

// restart stops the server and starts a new one, with no state, on the
// same address.
func (p *ccProcess) restart(t *testing.T) {
	t.Helper()
	p.stop()
	if err := p.serve(p.addr); err != nil {
		t.Fatal(err)
	}
}

// serviceAccountToken asks the API server for a token of the account.
func serviceAccountToken(t *testing.T, c *controlplane.Client, ns, name string) string {
	t.Helper()
	raw, err := c.Do(http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+name+"/token",
		map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{}})
	if err != nil {
		t.Fatalf("cannot get a token for %s/%s: %v", ns, name, err)
	}
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil || tr.Status.Token == "" {
		t.Fatalf("no token in %s: %v", raw, err)
	}
	return tr.Status.Token
}

// writeKubeconfig writes a kubeconfig for the control plane with token.
// JSON is YAML, and []byte encodes as the base64 the kubeconfig wants.
func writeKubeconfig(t *testing.T, path string, cp *controlplane.ControlPlane, token string) {
	t.Helper()
	cfg := map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "e2e",
		"clusters": []any{map[string]any{"name": "e2e", "cluster": map[string]any{
			"server": cp.URL, "certificate-authority-data": cp.CACert}}},
		"users":    []any{map[string]any{"name": "e2e", "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "e2e", "context": map[string]any{"cluster": "e2e", "user": "e2e"}}},
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// buildCommand builds ./cmd/<name> into dir with the go command that runs
// the tests.
func buildCommand(t *testing.T, root, dir, name string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("cannot find the go command to build %s: %v", name, err)
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, out)
	}
	return bin
}
