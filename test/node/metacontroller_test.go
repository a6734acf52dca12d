package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// EnvMetacontrollerBin names the environment variable holding the path of
// the Metacontroller binary, as in test/e2e.
const EnvMetacontrollerBin = "METACONTROLLER_BIN"

// fieldManager is the server-side apply field manager of the tests' writes.
const fieldManager = "formspec-node-test"

// TestMetacontrollerOnNode runs Metacontroller in a pod, with only the RBAC
// deploy/ grants it, beside the hook pods of TestInstall's install, and
// walks a Workspace on real pods: Ready from real readiness, idle to zero
// and back, and a deletion that drains the pods before the rest goes.
func TestMetacontrollerOnNode(t *testing.T) {
	mcBin := os.Getenv(EnvMetacontrollerBin)
	if mcBin == "" {
		t.Skip(EnvMetacontrollerBin + " not set: skipping Metacontroller on the one-node cluster; see docs/testing.md")
	}
	RequirePrerequisites(t)
	c, tm := startInstalled(t, mcBin, (*Cluster).install, "kubectl apply -k, hook pods Ready")
	admin := c.startReporting(t, tm)

	const ns, name, class = "node-ws", "acme", "node-standard"
	c.checkWorkspaceReady(t, ns, name, class)
	tm.Phase("Workspace Ready on real pods")

	c.checkLifecycle(t, tm, ns, name, class)

	c.checkRestartConsumedAfterRollout(t, admin, class)
	tm.Phase("restart consumed once the slow rollout is done")

	c.checkCredentialsInPod(t, class)
	tm.Phase("claim credentials in the pod, then revoked")
}

// checkLifecycle walks a Ready Workspace through what users do to it on
// real pods: a new artifact hash and a ClusterClass change each roll the
// pods, idle scales them to zero and back, and a deletion drains them
// before the rest goes.
func (c *Cluster) checkLifecycle(t *testing.T, tm *Timings, ns, name, class string) {
	t.Helper()
	c.checkArtifactHashRolls(t, ns, name)
	tm.Phase("new artifact hash rolls the pods")

	c.checkClassChangeRolls(t, ns, name, class)
	tm.Phase("ClusterClass change rolls the pods")

	c.patch(t, v1alpha1.APIVersion, "Workspace", ns, name, map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationIdle: "true"}},
	})
	c.waitPods(t, ns, name, 0)
	c.waitWorkspacePhase(t, ns, name, v1alpha1.PhaseIdle)
	c.patch(t, v1alpha1.APIVersion, "Workspace", ns, name, map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationIdle: nil}},
	})
	c.waitDeploymentReady(t, ns, name)
	c.waitWorkspacePhase(t, ns, name, v1alpha1.PhaseReady)
	tm.Phase("idle to zero and back")

	c.checkOrderedDeletion(t, ns, name)
	tm.Phase("ordered deletion")
}

// checkWorkspaceReady creates a ClusterClass and a Workspace of the
// stand-in version in a new namespace, and waits for the Workspace to turn
// Ready from its pod's real readiness, with its environment in the pod.
func (c *Cluster) checkWorkspaceReady(t *testing.T, ns, name, class string) {
	t.Helper()
	c.apply(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	c.apply(t, &v1alpha1.ClusterClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ClusterClass"},
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec:       v1alpha1.ClusterClassSpec{SLA: "99.9", Scaling: v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](2), ScaleToZero: true}},
	})
	ws := standInWorkspace(ns, name, class)
	ws.Spec.Config = map[string]string{"LOG_LEVEL": "info"}
	c.apply(t, ws)
	c.waitWorkspacePhase(t, ns, name, v1alpha1.PhaseReady)
	c.waitDeploymentReady(t, ns, name)
	if got := c.podEnv(t, ns, name); !strings.Contains(got, "WORKSPACE_ID="+name+"\n") || !strings.Contains(got, "LOG_LEVEL=info\n") {
		t.Errorf("the workspace pod's environment lacks WORKSPACE_ID=%s or LOG_LEVEL=info:\n%s", name, got)
	}
}

// standInWorkspace is a Workspace of the stand-in version in class.
func standInWorkspace(ns, name, class string) *v1alpha1.Workspace {
	return &v1alpha1.Workspace{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.WorkspaceSpec{
			Owner:        "acme-corp",
			Region:       "ap-southeast-3",
			ClusterClass: class,
			Environment:  "production",
			Version:      WorkspaceVersion,
		},
	}
}

// checkMetacontrollerAllowed reads Metacontroller's log (kubectl logs, as an
// operator would) for requests the API server refused: the RBAC deploy/
// grants must cover everything Metacontroller does for these controllers.
// A refusal at a time excused says (nil: none) is not counted: a
// kube-apiserver that has just started refuses requests until its RBAC
// caches are filled.
func (c *Cluster) checkMetacontrollerAllowed(t *testing.T, excused func(time.Time) bool) {
	t.Helper()
	var refused []string
	excusedN := 0
	for _, line := range strings.Split(c.kubectl(t, "-n", "metacontroller", "logs", "metacontroller-0"), "\n") {
		if !strings.Contains(line, " is forbidden: ") {
			continue
		}
		var entry struct {
			TS time.Time `json:"ts"`
		}
		if excused != nil && json.Unmarshal([]byte(line), &entry) == nil && excused(entry.TS) {
			excusedN++
			continue
		}
		refused = append(refused, line)
	}
	if excusedN > 0 {
		t.Logf("Metacontroller was refused %d requests while the API server restarted (its RBAC caches not filled yet); not counted", excusedN)
	}
	if len(refused) > 0 {
		t.Errorf("Metacontroller was refused %d requests with deploy/rbac's ClusterRole; the first:\n%s", len(refused), refused[0])
	}
}

// checkCredentialsInPod grants a claim on a Datastore to a workspace (the
// signed test claim of internal/testkit/claimstest) and reads, from inside the
// workspace's pod through its Service, the claim's password in the
// environment (with the workspace's prefix) and under /bindings/<claim>;
// when the Datastore's owner stops allowing the workspace, the rolled-out
// pod has neither.
func (c *Cluster) checkCredentialsInPod(t *testing.T, class string) {
	t.Helper()
	const (
		ns        = claimstest.ClaimNamespace
		name      = claimstest.Workspace
		claimName = claimstest.ClaimName
		envPrefix = "ORDERS_"
	)
	for _, n := range []string{claimstest.DatastoreNamespace, ns} {
		c.apply(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": n}})
	}
	endpoint := claimstest.Secret()
	endpoint.ObjectMeta = metav1.ObjectMeta{Name: endpoint.Name, Namespace: endpoint.Namespace, Labels: endpoint.Labels}
	c.apply(t, endpoint)
	ds := claimstest.Datastore()
	ds.ObjectMeta = metav1.ObjectMeta{Name: ds.Name, Namespace: ds.Namespace, Labels: ds.Labels, Annotations: ds.Annotations}
	c.apply(t, ds)
	claim := claimstest.Claim()
	claim.ObjectMeta = metav1.ObjectMeta{Name: claim.Name, Namespace: claim.Namespace, Labels: claim.Labels, Annotations: claim.Annotations}
	// Granted a minute ago by the real clock, which the hook checks.
	claim.Spec.GrantedAt = time.Now().UTC().Add(-time.Minute).Truncate(time.Second).Format(time.RFC3339)
	c.apply(t, claimstest.SignClaim(claim, claimstest.Owner))
	ws := standInWorkspace(ns, name, class)
	ws.Spec.Datastores = []v1alpha1.DatastoreRef{{Name: ds.Name, Namespace: ds.Namespace, EnvPrefix: envPrefix}}
	c.apply(t, ws)
	envLine := envPrefix + "password=" + claimstest.Password + "\n"
	bindingLine := "/bindings/" + claimName + "/password: " + claimstest.Password + "\n"
	c.waitFor(t, "the claim's credentials inside the pod of Workspace "+ns+"/"+name, func() (bool, string) {
		env, err := c.serviceGet(ns, name, "/env")
		if err != nil {
			return false, err.Error()
		}
		bindings, err := c.serviceGet(ns, name, "/bindings")
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(env, envLine) && strings.Contains(bindings, bindingLine),
			fmt.Sprintf("password in env: %v, bindings: %q", strings.Contains(env, envLine), bindings)
	}, ns)

	c.patch(t, v1alpha1.APIVersion, "Datastore", ds.Namespace, ds.Name, map[string]any{
		"spec": map[string]any{"allowedTenants": []string{"team-b/*"}},
	})
	c.waitFor(t, "the revoked claim's credentials gone from the pod of Workspace "+ns+"/"+name, func() (bool, string) {
		pods, err := c.pods(ns, name)
		if err != nil || len(pods) != 1 {
			return false, fmt.Sprintf("pods %v (%v)", pods, err)
		}
		env, err := c.serviceGet(ns, name, "/env")
		if err != nil {
			return false, err.Error()
		}
		bindings, err := c.serviceGet(ns, name, "/bindings")
		if err != nil {
			return false, err.Error()
		}
		return !strings.Contains(env, envPrefix+"password=") && bindings == "",
			fmt.Sprintf("password in env: %v, bindings: %q", strings.Contains(env, envPrefix+"password="), bindings)
	}, ns)
}

// serviceGet GETs path from a workspace's pod through its Service.
func (c *Cluster) serviceGet(namespace, ws, path string) (string, error) {
	svc, err := c.Client().Get("v1", "Service", namespace, ws)
	if err != nil {
		return "", err
	}
	return get("http://" + stringField(svc, "spec", "clusterIP") + path)
}

// startReporting starts Cluster Control and Metacontroller, checks at the
// end that Metacontroller was refused nothing, and waits for the node's
// health to reach Cluster Control. It returns Cluster Control's admin URL.
func (c *Cluster) startReporting(t *testing.T, tm *Timings) string {
	t.Helper()
	admin := c.startClusterControl(t)
	c.startMetacontroller(t)
	// Also when a scenario fails: a refused request is the likeliest cause.
	t.Cleanup(func() { c.checkMetacontrollerAllowed(t, nil) })
	tm.Phase("Metacontroller Ready")
	c.checkNodeHealthReported(t, admin)
	tm.Phase("node health reported to Cluster Control")
	return admin
}

// startMetacontroller runs Metacontroller the way its own production
// manifests do (a StatefulSet in the metacontroller namespace, service
// account metacontroller), from the image built from METACONTROLLER_BIN,
// but bound only to the ClusterRole deploy/rbac grants it instead of
// upstream's wildcard one, and with server-side apply; extraArgs are
// added to its command line.
func (c *Cluster) startMetacontroller(t *testing.T, extraArgs ...string) {
	t.Helper()
	const ns = "metacontroller"
	c.apply(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	c.apply(t, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "metacontroller", "namespace": ns}})
	probe := func(path string) map[string]any {
		return map[string]any{"httpGet": map[string]any{"port": 8081, "path": path}}
	}
	c.apply(t, map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "StatefulSet",
		"metadata":   map[string]any{"name": "metacontroller", "namespace": ns, "labels": map[string]any{"app.kubernetes.io/name": "metacontroller"}},
		"spec": map[string]any{
			"replicas":    1,
			"serviceName": "",
			"selector":    map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "metacontroller"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app.kubernetes.io/name": "metacontroller"}},
				"spec": map[string]any{
					"serviceAccountName": "metacontroller",
					"containers": []any{map[string]any{
						"name":    "metacontroller",
						"image":   MetacontrollerImage,
						"command": []any{"/usr/bin/metacontroller"},
						"args": append([]any{
							"--zap-log-level=4",
							"--discovery-interval=5s",
							"--apply-strategy=server-side-apply",
						}, anySlice(extraArgs)...),
						"livenessProbe":  probe("/healthz"),
						"readinessProbe": probe("/readyz"),
					}},
				},
			},
		},
	})
	c.waitFor(t, "Metacontroller Ready", func() (bool, string) {
		s, err := c.Client().Get("apps/v1", "StatefulSet", ns, "metacontroller")
		if err != nil {
			return false, err.Error()
		}
		ready := intField(s, "status", "readyReplicas")
		return ready == 1, fmt.Sprintf("%d ready", ready)
	}, ns)
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// apply server-side applies a typed object or a map.
func (c *Cluster) apply(t *testing.T, v any) {
	t.Helper()
	obj, ok := v.(map[string]any)
	if !ok {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Client().Apply(obj, fieldManager); err != nil {
		t.Fatalf("cannot apply %v %v: %v", obj["kind"], obj["metadata"], err)
	}
}

func (c *Cluster) patch(t *testing.T, apiVersion, kind, namespace, name string, patch any) {
	t.Helper()
	if _, err := c.Client().MergePatch(apiVersion, kind, namespace, name, "", patch); err != nil {
		t.Fatalf("cannot patch %s %s/%s: %v", kind, namespace, name, err)
	}
}

// waitWorkspacePhase waits for a Workspace's status.phase.
func (c *Cluster) waitWorkspacePhase(t *testing.T, namespace, name, phase string) {
	t.Helper()
	c.waitFor(t, fmt.Sprintf("Workspace %s/%s %s", namespace, name, phase), func() (bool, string) {
		ws, err := c.Client().Get(v1alpha1.APIVersion, "Workspace", namespace, name)
		if err != nil {
			return false, err.Error()
		}
		status, _ := json.Marshal(ws["status"])
		return stringField(ws, "status", "phase") == phase, string(status)
	}, namespace)
}

// pods lists the names of a workspace's pods that still run: a pod
// whose containers have all stopped turns Succeeded or Failed before the
// kubelet removes it, and counts as gone (so does the Deployment's
// terminatingReplicas).
func (c *Cluster) pods(namespace, ws string) ([]string, error) {
	pods, err := c.listPods(namespace, v1alpha1.LabelWorkspace+"="+ws)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods {
		if !finished(p) {
			out = append(out, p.Name)
		}
	}
	return out, nil
}

// waitPods waits until a workspace has exactly n pods.
func (c *Cluster) waitPods(t *testing.T, namespace, ws string, n int) {
	t.Helper()
	c.waitFor(t, fmt.Sprintf("%d pods of Workspace %s/%s", n, namespace, ws), func() (bool, string) {
		pods, err := c.pods(namespace, ws)
		if err != nil {
			return false, err.Error()
		}
		return len(pods) == n, fmt.Sprintf("pods %v", pods)
	}, namespace)
}

// podEnv returns what the stand-in image answers on /env in the
// workspace's pod, through the workspace's Service.
func (c *Cluster) podEnv(t *testing.T, namespace, ws string) string {
	t.Helper()
	return c.httpGet(t, "http://"+c.serviceIP(t, namespace, ws)+"/env")
}

func (c *Cluster) httpGet(t *testing.T, url string) string {
	t.Helper()
	var last error
	for range 30 {
		body, err := get(url)
		if err == nil {
			return body
		}
		last = err
		time.Sleep(time.Second)
	}
	t.Fatalf("GET %s: %v", url, last)
	return ""
}

// checkArtifactHashRolls sets a new artifact hash on the Workspace: its
// pods must be replaced by new ones that turn Ready.
func (c *Cluster) checkArtifactHashRolls(t *testing.T, namespace, name string) {
	t.Helper()
	c.checkRolls(t, namespace, name, func() {
		c.patch(t, v1alpha1.APIVersion, "Workspace", namespace, name, map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationArtifactBinaryHash: "sha256:0d1e2f"}},
		})
	})
}

// checkClassChangeRolls labels the node with a node type and gives the
// Workspace's ClusterClass that node type: the pods must be replaced by
// new ones, placed by the class's node selector, that turn Ready.
func (c *Cluster) checkClassChangeRolls(t *testing.T, namespace, name, class string) {
	t.Helper()
	const nodeType = "node-test"
	c.patch(t, "v1", "Node", "", NodeName, map[string]any{
		"metadata": map[string]any{"labels": map[string]any{v1alpha1.LabelNodeType: nodeType}},
	})
	c.checkRolls(t, namespace, name, func() {
		c.patch(t, v1alpha1.APIVersion, "ClusterClass", "", class, map[string]any{"spec": map[string]any{"nodeType": nodeType}})
	})
	d, err := c.Client().Get("apps/v1", "Deployment", namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := stringField(d, "spec", "template", "spec", "nodeSelector", v1alpha1.LabelNodeType); got != nodeType {
		t.Errorf("Deployment %s/%s selects %s=%q, want %q", namespace, name, v1alpha1.LabelNodeType, got, nodeType)
	}
}

// checkRolls makes a change and waits until every pod of the Workspace is
// a new one, the Deployment is ready and the Workspace Ready again.
func (c *Cluster) checkRolls(t *testing.T, namespace, name string, change func()) {
	t.Helper()
	before, err := c.pods(namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	change()
	c.waitFor(t, "the pods of Workspace "+namespace+"/"+name+" replaced", func() (bool, string) {
		pods, err := c.pods(namespace, name)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods {
			if slices.Contains(before, p) {
				return false, fmt.Sprintf("pods %v, before %v", pods, before)
			}
		}
		return len(pods) > 0, fmt.Sprintf("pods %v, before %v", pods, before)
	}, namespace)
	c.waitDeploymentReady(t, namespace, name)
	c.waitWorkspacePhase(t, namespace, name, v1alpha1.PhaseReady)
}

// checkOrderedDeletion deletes the Workspace as kubectl does and watches
// its pods and its ConfigMap: the pods must be gone while the ConfigMap
// (which the pods read) still exists, and then everything goes.
func (c *Cluster) checkOrderedDeletion(t *testing.T, namespace, name string) {
	t.Helper()
	if err := c.Client().DeleteWithPropagation(v1alpha1.APIVersion, "Workspace", namespace, name, "Background"); err != nil {
		t.Fatalf("cannot delete Workspace %s/%s: %v", namespace, name, err)
	}
	var podsGone, configGone time.Time
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) && (podsGone.IsZero() || configGone.IsZero()) {
		if podsGone.IsZero() {
			if pods, err := c.pods(namespace, name); err == nil && len(pods) == 0 {
				podsGone = time.Now()
			}
		}
		if configGone.IsZero() {
			if _, err := c.Client().Get("v1", "ConfigMap", namespace, name+"-config"); controlplane.IsNotFound(err) {
				configGone = time.Now()
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	switch {
	case podsGone.IsZero() || configGone.IsZero():
		t.Fatalf("Workspace %s/%s deletion: pods gone at %v, ConfigMap gone at %v (zero: not within %v)", namespace, name, podsGone, configGone, waitTimeout)
	case configGone.Before(podsGone):
		t.Errorf("Workspace %s/%s deletion: the ConfigMap went %v before the last pod", namespace, name, podsGone.Sub(configGone))
	}
	c.waitFor(t, "Workspace "+namespace+"/"+name+" gone", func() (bool, string) {
		_, err := c.Client().Get(v1alpha1.APIVersion, "Workspace", namespace, name)
		return controlplane.IsNotFound(err), fmt.Sprint(err)
	}, namespace)
}

// clusterControlToken is the bearer token the reporter sidecars present to
// the reference Cluster Control.
const clusterControlToken = "node-test-cluster-control-token"

// clusterControlAdminToken is the bearer token the tests present to the
// reference Cluster Control's admin API, which takes no other.
const clusterControlAdminToken = "node-test-cluster-control-admin-token"

// getAdmin is get for the reference Cluster Control's admin API.
func getAdmin(url string) (string, error) {
	req, err := adminRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	return do(req)
}

// adminRequest is a request to the reference Cluster Control's admin API,
// with its token.
func adminRequest(method, url string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+clusterControlAdminToken)
	return req, nil
}

// plainHTTPClusterControl are the chart values that point the reporters
// at the reference Cluster Control startClusterControl runs, which serves
// plain HTTP: the chart's reporter calls https by default, and sends its
// token over plain HTTP off the loopback only with reporter.insecureHTTP
// (deploy/overlays/insecure-http, which the kustomize tests install, sets
// the same).
const plainHTTPClusterControl = "reporter:\n" + plainHTTPReporterValues

// plainHTTPReporterValues are plainHTTPClusterControl's keys under
// reporter:, for values that set more of the reporter's.
const plainHTTPReporterValues = "  clusterControlURL: http://formspec-ctl.formspec-system:7070\n  insecureHTTP: true\n"

// plainHTTPClusterControlSets are plainHTTPClusterControl as --set
// arguments, for an upgrade.
var plainHTTPClusterControlSets = []string{"reporter.clusterControlURL=http://formspec-ctl.formspec-system:7070", "reporter.insecureHTTP=true"}

// startClusterControl runs the reference Cluster Control on the host, on
// NodeIP:7070, requiring clusterControlToken, and makes it the
// formspec-ctl.formspec-system:7070 that deploy/ points the reporters at (a
// Service without selector and its EndpointSlice), with the token in the
// Secret the reporters mount. It returns the admin API's base URL.
func (c *Cluster) startClusterControl(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	if err := goBuild(controlplane.RepoRoot(t), work, "./cmd/formspec-clustercontrol"); err != nil {
		t.Fatal(err)
	}
	tokens, adminTokens := filepath.Join(work, "tokens"), filepath.Join(work, "admin-tokens")
	for file, token := range map[string]string{tokens: clusterControlToken, adminTokens: clusterControlAdminToken} {
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	admin := "127.0.0.1:" + strconv.Itoa(controlplane.FreePorts(t, 1)[0])
	p := controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: work}, filepath.Join(work, "formspec-clustercontrol"),
		"--listen="+net.JoinHostPort(NodeIP, "7070"), "--admin-listen="+admin, "--token-file="+tokens, "--admin-token-file="+adminTokens)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx, func() bool { _, err := getAdmin("http://" + admin + "/admin/state"); return err == nil }); err != nil {
		t.Fatalf("Cluster Control did not start: %v", err)
	}
	c.apply(t, map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "formspec-ctl", "namespace": hooksNamespace},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "http", "port": 7070, "protocol": "TCP"}}},
	})
	c.apply(t, map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata": map[string]any{"name": "formspec-ctl", "namespace": hooksNamespace, "labels": map[string]any{
			"kubernetes.io/service-name": "formspec-ctl", "endpointslice.kubernetes.io/managed-by": fieldManager,
		}},
		"addressType": "IPv4",
		"endpoints":   []any{map[string]any{"addresses": []any{NodeIP}, "conditions": map[string]any{"ready": true}}},
		"ports":       []any{map[string]any{"name": "http", "port": 7070, "protocol": "TCP"}},
	})
	c.apply(t, map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata":   map[string]any{"name": "formspec-cluster-control-token", "namespace": hooksNamespace},
		"stringData": map[string]any{"token": clusterControlToken},
	})
	return "http://" + admin
}

// checkNodeHealthReported waits until the reference Cluster Control has a
// node-health report from a hook pod's reporter, sent with the token,
// that says this node is healthy with its real capacity: Metacontroller
// showed the Node to the hooks, which handed it to the sidecar.
func (c *Cluster) checkNodeHealthReported(t *testing.T, admin string) {
	t.Helper()
	node, err := c.Client().Get("v1", "Node", "", NodeName)
	if err != nil {
		t.Fatal(err)
	}
	cpu := stringField(node, "status", "capacity", "cpu")
	c.waitFor(t, "a node-health report at Cluster Control", func() (bool, string) {
		body, err := getAdmin(admin + "/admin/state")
		if err != nil {
			return false, err.Error()
		}
		var st clustercontrol.AdminState
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			return false, err.Error()
		}
		r := st.LastNodeHealth
		if r == nil {
			return false, body
		}
		// Only this node, unless fixtures posted through the Service
		// showed the sidecar made-up nodes, which it reports until they
		// go stale.
		for _, n := range r.Nodes {
			if n.Name == NodeName {
				return strings.HasPrefix(r.Reporter, hooksName+"-") && n.Health == "healthy" && n.Capacity.CPU == cpu, body
			}
		}
		return false, body
	}, hooksNamespace)
}
