package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/test/controlplane"
	"github.com/formspec/formspec-hooks/test/original"
)

// EnvTakeover set to 1 runs TestTakeover (make test-takeover).
const EnvTakeover = "FORMSPEC_TAKEOVER"

// takeoverInFlight is the roll's --max-in-flight in the test.
const takeoverInFlight = 3

// TestTakeover takes a cluster over from the original FormSpec operator
// on the one-node cluster, following docs/migrating.md step by step, with
// workspace pods running and a client calling every running workspace's
// Service throughout.
//
// The original operator's cluster is made by the test as that operator
// makes it (test/original): the CRDs, FLEET_WORKSPACES Workspaces of every
// class shape (one in four each: plain, scale-to-zero with every other one
// idle, auto-scaling under the operator's own HPA, two replicas), each
// with its Deployment, Service and ConfigMap (and HPA) named after it,
// owned by it, with the operator's selector (app: <workspace>), container
// name and environment, the datastore's endpoint Secret injected as the
// operator injected it, and a claim signed in the operator's v1 format on
// a Datastore that accepts v1 grants (docs/claims.md). Then:
//
//  1. the original operator is stopped (here: the test stops writing);
//  2. kubectl formspec takeover prepare -A;
//  3. the chart and Metacontroller are installed: every Workspace is held,
//     its children still its own, no pod rolled;
//  4. kubectl formspec diff -A shows every workspace's pods rolling once
//     released;
//  5. kubectl formspec takeover roll -A, at most takeoverInFlight at once,
//     and the fleet converges: every Workspace Ready (or Idle) with its
//     claim injected, as Cluster Control is told.
//
// Throughout, no call to a workspace's Service may fail; at the end no
// object of the workspaces' namespaces may be without its controller (no
// orphan), each original child is the Workspace's or gone, each
// Deployment has at most one new ReplicaSet, and each running pod has its
// credentials.
func TestTakeover(t *testing.T) {
	mcBin := requireSuite(t, EnvTakeover, "test-takeover")
	root := controlplane.RepoRoot(t)
	chart := filepath.Join(root, chartDir)
	tm := NewTimings(t)
	archives := buildImages(t, mcBin)
	plugin := buildKubectlPlugin(t, root)
	tm.Phase("images and the kubectl plugin built")
	c := Start(t, tm, archives.Paths()...)
	f := &fleet{c: c, tm: tm, workspaces: map[string]*fleetWorkspace{}}
	f.phases = c.startPhaseMonitor(t)

	// The original operator's cluster.
	crds, err := filepath.Glob(filepath.Join(chart, "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in the chart: %v", err)
	}
	if err := c.Client().InstallCRDs(crds...); err != nil {
		t.Fatalf("cannot install the CRDs: %v", err)
	}
	made := f.createOriginal(t, fleetSize(t))
	for _, w := range f.members() {
		c.waitRolledOut(t, w.ns, w.name)
	}
	tm.Phase(fmt.Sprintf("%d workspaces of the original operator running", len(f.members())))
	rsBefore := c.replicaSetsByDeployment(t, f.namespaces)
	running := f.runningWorkspaces()
	for _, w := range running {
		// A Service answers once kube-proxy has its endpoints, a moment
		// after the pods are Ready.
		c.waitFor(t, "Service "+w.key()+" answering", func() (bool, string) {
			_, err := c.serviceGet(w.ns, w.name, "/")
			return err == nil, fmt.Sprint(err)
		}, w.ns)
		c.checkCredentialsEnv(t, w)
	}
	p := c.startProber(t, running)

	// 1. Stop the original operator: the test made its objects and writes
	// no more. 2. Prepare.
	out := runKubectlPlugin(t, c, plugin, "takeover", "prepare", "-A")
	for _, w := range f.members() {
		want := fmt.Sprintf("%s   prepared Deployment/%s, Service/%s, ConfigMap/%s", w.key(), w.name, w.name, w.name)
		if !strings.Contains(out, want) {
			t.Errorf("takeover prepare -A: no %q in\n%s", want, out)
		}
	}
	tm.Phase("takeover prepare")

	// 3. Install the chart and Metacontroller: every Workspace held, its
	// children its own, nothing rolled.
	f.helm = c.newHelmRelease(t)
	repo, tag, _ := strings.Cut(hooksImage(t), ":")
	f.helm.install(t, c, chart, fmt.Sprintf("defaultVersion: %s\nimage:\n  repository: %s\n  tag: %s\n  pullPolicy: Never\n", WorkspaceVersion, repo, tag)+plainHTTPClusterControl)
	f.chart, f.resync = chart, resyncPeriod(t, chart, "workspace")
	f.admin = c.startClusterControl(t)
	installed := time.Now()
	c.startMetacontroller(t, "--client-go-qps=100", "--client-go-burst=200")
	t.Cleanup(func() { c.checkMetacontrollerAllowed(t, nil) })
	tm.Phase("chart, Cluster Control and Metacontroller installed")
	f.waitHeld(t)
	for ref := range made {
		c.checkStillChild(t, ref)
	}
	if d := newReplicaSets(rsBefore, c.replicaSetsByDeployment(t, f.namespaces)); len(d) > 0 {
		t.Errorf("workspaces rolled while held: %v", d)
	}
	tm.Phase("every workspace held, its children its own")

	// 4. Preview.
	out = runKubectlPlugin(t, c, plugin, "diff", "-A", "--resource-image", "formahub/formspec-resource",
		"--default-version", WorkspaceVersion, "--cluster-control-url", "http://formspec-ctl.formspec-system:7070")
	for _, w := range f.members() {
		if want := w.key() + "   pods would roll once released"; !strings.Contains(out, want) {
			t.Errorf("diff -A: no %q in\n%s", want, out)
		}
	}
	tm.Phase("diff")

	// 5. Roll, and watch the fleet converge.
	start := time.Now()
	out = runKubectlPlugin(t, c, plugin, "takeover", "roll", "-A", fmt.Sprintf("--max-in-flight=%d", takeoverInFlight), "--interval=1s", "--timeout=5m")
	rolled := time.Since(start)
	t.Logf("takeover roll -A:\n%s", out)
	if !strings.Contains(out, fmt.Sprintf("%d taken over, 0 failed, 0 still held", len(f.members()))) {
		t.Errorf("takeover roll -A did not take every workspace over:\n%s", out)
	}
	f.waitConverged(t, "after the takeover", 10*time.Minute)
	tm.Phase(fmt.Sprintf("rolled in %.0f s, converged", rolled.Seconds()))
	// The client keeps calling while the last original pods shut down.
	time.Sleep(10 * time.Second)
	calls, failed := p.stop()
	tm.Phase("the client stopped")

	for _, w := range running {
		c.checkCredentialsEnv(t, w)
	}
	newRS := newReplicaSets(rsBefore, c.replicaSetsByDeployment(t, f.namespaces))
	maxNew := 0
	for key, n := range newRS {
		maxNew = max(maxNew, n)
		if n > 1 {
			t.Errorf("Deployment %s got %d new ReplicaSets, want at most one", key, n)
		}
	}
	orphans := c.orphans(t, f.namespaces)
	for _, o := range orphans {
		t.Errorf("orphan: %s", o)
	}
	kept, gone := 0, 0
	for ref, uid := range made {
		if c.originalChildState(t, ref, uid) {
			kept++
		} else {
			gone++
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d calls to the workspaces' Services failed:\n%s", len(failed), calls, strings.Join(firstLines(failed, 10), "\n"))
	}
	syncs := c.failedHookCalls(t, installed)
	t.Logf("takeover of %d workspaces (%d running, at most %d at once) in %.0f s: %d calls to their Services, %d failed; orphans %d; "+
		"original children kept %d, deleted %d; new ReplicaSets per Deployment at most %d (%d Deployments rolled); failed syncs %d",
		len(f.members()), len(running), takeoverInFlight, rolled.Seconds(), calls, len(failed), len(orphans), kept, gone, maxNew, len(newRS), len(syncs))
}

// createOriginal makes n workspaces of the fleet's class shapes as the
// original operator ran them, with their namespaces, Datastores (accepting
// v1 grants) and claims signed in v1, and returns the UID of each original
// child by "namespace/Kind/name".
func (f *fleet) createOriginal(t *testing.T, n int) map[string]types.UID {
	t.Helper()
	for _, cls := range fleetClasses {
		f.c.apply(t, cls)
	}
	made := map[string]types.UID{}
	for i := range n {
		w := &fleetWorkspace{ns: fmt.Sprintf("fleet-%d", i/10), name: fmt.Sprintf("ws-%03d", i), class: fleetClasses[i%len(fleetClasses)].Name}
		w.idle = i%len(fleetClasses) == 1 && (i/len(fleetClasses))%2 == 0
		if !slices.Contains(f.namespaces, w.ns) {
			f.namespaces = append(f.namespaces, w.ns)
			f.createOriginalNamespace(t, w.ns)
		}
		f.workspaces[w.key()] = w
		claim := fleetClaim(w, claimstest.Owner)
		claim.Spec.SignatureVersion = v1alpha1.SignatureV1
		f.c.apply(t, claimstest.SignClaim(claim, claimstest.Owner))
		f.c.apply(t, w.object())
		ws, err := f.c.Client().Get(v1alpha1.APIVersion, "Workspace", w.ns, w.name)
		if err != nil {
			t.Fatal(err)
		}
		orig := original.Workspace{Namespace: w.ns, Name: w.name, UID: types.UID(stringField(ws, "metadata", "uid")),
			Image: "formahub/formspec-resource:" + WorkspaceVersion, Replicas: 1,
			EndpointSecret: fleetEndpoint, EnvPrefix: fleetEnvPrefix, ControlClusterURL: "http://formspec-ctl.formspec-system:7070",
			Config: map[string]string{"LOG_LEVEL": "info"}}
		switch w.class {
		case "fleet-zero":
			if w.idle {
				orig.Replicas = 0
			}
		case "fleet-hpa":
			orig.MaxReplicas = 3
		case "fleet-pdb":
			orig.Replicas = 2
		}
		for _, obj := range orig.Children() {
			created, err := original.Create(f.c.Client(), obj)
			if err != nil {
				t.Fatal(err)
			}
			made[w.ns+"/"+stringField(created, "kind")+"/"+w.name] = types.UID(stringField(created, "metadata", "uid"))
		}
		if _, err := f.c.Client().MergePatch(v1alpha1.APIVersion, "Workspace", w.ns, w.name, "status", map[string]any{"status": original.Status(true)}); err != nil {
			t.Fatal(err)
		}
	}
	return made
}

// createOriginalNamespace makes a namespace of the original operator's
// cluster: its Datastore, which accepts the operator's v1 grants
// (docs/claims.md), and the labelled endpoint Secret.
func (f *fleet) createOriginalNamespace(t *testing.T, ns string) {
	t.Helper()
	f.createNamespace(t, ns)
	if _, err := f.c.Client().MergePatch(v1alpha1.APIVersion, "Datastore", ns, fleetDatastore, "",
		map[string]any{"spec": map[string]any{"grantPolicy": map[string]any{"acceptV1Signatures": true}}}); err != nil {
		t.Fatal(err)
	}
}

// runningWorkspaces are the workspaces that run pods.
func (f *fleet) runningWorkspaces() []*fleetWorkspace {
	var out []*fleetWorkspace
	for _, w := range f.members() {
		if !w.idle {
			out = append(out, w)
		}
	}
	return out
}

// waitHeld waits until the hooks have synced every workspace and hold it.
func (f *fleet) waitHeld(t *testing.T) {
	t.Helper()
	f.c.waitFor(t, "every workspace held", func() (bool, string) {
		listed, err := f.listWorkspaces()
		if err != nil {
			return false, err.Error()
		}
		var not []string
		for _, w := range f.members() {
			ws := listed[w.key()]
			c := meta.FindStatusCondition(ws.Status.Conditions, v1alpha1.ConditionProgressing)
			if ws.Status.ObservedGeneration != ws.Metadata.Generation || c == nil || c.Reason != v1alpha1.ReasonTakeoverHeld {
				not = append(not, fmt.Sprintf("%s: %s %v", w.key(), ws.Status.Phase, c))
			}
		}
		return len(not) == 0, strings.Join(firstLines(not, 5), "; ")
	}, "fleet-0")
}

// checkStillChild checks that an original child (by "ns/Kind/name") is
// still its Workspace's child: its controller the Workspace, and labelled
// for Metacontroller's generated selector (Metacontroller did not release
// it).
func (c *Cluster) checkStillChild(t *testing.T, ref string) {
	t.Helper()
	if !c.originalChildState(t, ref, "") {
		t.Errorf("%s is gone while its workspace is held", ref)
	}
}

// originalChildState reports whether an original child still exists; one
// that does must be its Workspace's child (controller and label), else the
// test fails. uid, when set, must be the object's.
func (c *Cluster) originalChildState(t *testing.T, ref string, uid types.UID) bool {
	t.Helper()
	ns, rest, _ := strings.Cut(ref, "/")
	kind, name, _ := strings.Cut(rest, "/")
	apiVersion := map[string]string{"Deployment": "apps/v1", "Service": "v1", "ConfigMap": "v1", "HorizontalPodAutoscaler": "autoscaling/v2"}[kind]
	obj, err := c.Client().Get(apiVersion, kind, ns, name)
	if controlplane.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if uid != "" && types.UID(stringField(obj, "metadata", "uid")) != uid {
		return false
	}
	ws, err := c.Client().Get(v1alpha1.APIVersion, "Workspace", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	wsUID := stringField(ws, "metadata", "uid")
	md, _ := obj["metadata"].(map[string]any)
	labels, _ := md["labels"].(map[string]any)
	if controllerUID(md) != wsUID || labels["controller-uid"] != wsUID {
		t.Errorf("%s is not its Workspace's child: controller %q, labels %v", ref, controllerUID(md), labels)
	}
	return true
}

// controllerUID is the UID of an object's controller, or "".
func controllerUID(md map[string]any) string {
	refs, _ := md["ownerReferences"].([]any)
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		if ref["controller"] == true {
			s, _ := ref["uid"].(string)
			return s
		}
	}
	return ""
}

// orphans lists every object of the workspaces' kinds, and every
// ReplicaSet and pod, in namespaces whose controller is missing or does
// not exist (but the API server's kube-root-ca.crt ConfigMap).
func (c *Cluster) orphans(t *testing.T, namespaces []string) []string {
	t.Helper()
	exists := map[string]bool{}
	type item struct {
		kind string
		md   map[string]any
	}
	var all []item
	for _, ns := range namespaces {
		for _, k := range [][2]string{{"formspec.dev/v1alpha1", "Workspace"}, {"apps/v1", "Deployment"}, {"apps/v1", "ReplicaSet"}, {"v1", "Pod"},
			{"v1", "Service"}, {"v1", "ConfigMap"}, {"autoscaling/v2", "HorizontalPodAutoscaler"}, {"policy/v1", "PodDisruptionBudget"}} {
			path, err := c.Client().ResourcePath(k[0], k[1], ns, "")
			if err != nil {
				t.Fatal(err)
			}
			var list struct {
				Items []map[string]any `json:"items"`
			}
			c.getJSON(t, path, &list)
			for _, o := range list.Items {
				md := o["metadata"].(map[string]any)
				exists[md["uid"].(string)] = true
				if k[1] != "Workspace" && md["name"] != "kube-root-ca.crt" && md["deletionTimestamp"] == nil {
					all = append(all, item{k[1], md})
				}
			}
		}
	}
	var out []string
	for _, o := range all {
		if uid := controllerUID(o.md); uid == "" || !exists[uid] {
			out = append(out, fmt.Sprintf("%s %s/%s (controller %q)", o.kind, o.md["namespace"], o.md["name"], uid))
		}
	}
	slices.Sort(out)
	return out
}

// replicaSetsByDeployment lists the ReplicaSet UIDs of every Deployment in
// namespaces, by "namespace/deployment".
func (c *Cluster) replicaSetsByDeployment(t *testing.T, namespaces []string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, ns := range namespaces {
		var list struct {
			Items []struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"items"`
		}
		c.getJSON(t, "/apis/apps/v1/namespaces/"+ns+"/replicasets", &list)
		for _, rs := range list.Items {
			if ref := metav1.GetControllerOfNoCopy(&rs.Metadata); ref != nil && ref.Kind == "Deployment" {
				key := ns + "/" + ref.Name
				out[key] = append(out[key], string(rs.Metadata.UID))
			}
		}
	}
	return out
}

// newReplicaSets counts, by Deployment, the ReplicaSets in after that
// were not in before.
func newReplicaSets(before, after map[string][]string) map[string]int {
	out := map[string]int{}
	for key, uids := range after {
		for _, uid := range uids {
			if !slices.Contains(before[key], uid) {
				out[key]++
			}
		}
	}
	return out
}

// checkCredentialsEnv checks that a running workspace's pod has its
// datastore's password in its environment, under the entry's prefix: the
// original operator's pods from the endpoint Secret, the hooks' from the
// claim's credentials Secret.
func (c *Cluster) checkCredentialsEnv(t *testing.T, w *fleetWorkspace) {
	t.Helper()
	env, err := c.serviceGet(w.ns, w.name, "/env")
	if err != nil {
		t.Errorf("GET /env of %s: %v", w.key(), err)
		return
	}
	if want := fleetEnvPrefix + "password=" + fleetPassword(w.ns) + "\n"; !strings.Contains(env, want) {
		t.Errorf("the pod of %s has no %q in its environment", w.key(), strings.TrimSpace(want))
	}
}

// prober calls every running workspace's Service, each on a new
// connection (so that every call goes through the Service's rules as they
// are then), until stopped.
type prober struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	calls  atomic.Int64
	mu     sync.Mutex
	failed []string
}

// proberInterval is how often each workspace's Service is called.
const proberInterval = 250 * time.Millisecond

func (c *Cluster) startProber(t *testing.T, ws []*fleetWorkspace) *prober {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &prober{cancel: cancel}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, w := range ws {
		svc, err := c.Client().Get("v1", "Service", w.ns, w.name)
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + stringField(svc, "spec", "clusterIP") + "/"
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			tick := time.NewTicker(proberInterval)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				p.calls.Add(1)
				if err := call(ctx, client, url); err != nil && ctx.Err() == nil {
					p.mu.Lock()
					p.failed = append(p.failed, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), w.key(), err))
					p.mu.Unlock()
				}
			}
		}()
	}
	t.Cleanup(func() { p.stop() })
	return p
}

func call(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err == nil && (resp.StatusCode != http.StatusOK || string(body) != "ok\n") {
		err = fmt.Errorf("%s %q", resp.Status, body)
	}
	return err
}

// stop stops the calls and returns how many were made and the failures.
func (p *prober) stop() (int64, []string) {
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls.Load(), slices.Clone(p.failed)
}

// buildKubectlPlugin builds cmd/kubectl-formspec for the test.
func buildKubectlPlugin(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	if err := goBuild(root, dir, "./cmd/kubectl-formspec"); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "kubectl-formspec")
}

// runKubectlPlugin runs the plugin with the cluster's admin kubeconfig,
// as an administrator does, and returns its output; it fails the test
// when the plugin fails.
func runKubectlPlugin(t *testing.T, c *Cluster, bin string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append(args, "--kubeconfig", c.Kubeconfig)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl formspec %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
