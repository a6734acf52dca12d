package kubectl

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// traced is the document `trace -o json` prints, as far as the tests read
// it.
type traced struct {
	Ready bool `json:"ready"`
	Tree  node `json:"tree"`
}

type node struct {
	Kind      string            `json:"kind"`
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Datastore string            `json:"datastore"`
	Ready     string            `json:"ready"`
	Status    string            `json:"status"`
	Reason    string            `json:"reason"`
	Message   string            `json:"message"`
	Labels    map[string]string `json:"labels"`
	Events    []struct {
		Type   string `json:"type"`
		Reason string `json:"reason"`
		Count  int    `json:"count"`
	} `json:"events"`
	Children []node `json:"children"`
}

func (n node) ref() string {
	name := n.Name
	if name == "" {
		name = "<none>"
	}
	return n.Kind + "/" + name
}

// blocked lists "Kind/name Reason" for every node that is not Ready, in
// tree order.
func (n node) blocked() []string {
	var out []string
	if n.Ready != "" && n.Ready != "True" {
		out = append(out, n.ref()+" "+n.Reason)
	}
	for _, c := range n.Children {
		out = append(out, c.blocked()...)
	}
	return out
}

// shape is a node as a tree test compares it.
type shape struct {
	Ref, Ready, Reason string
	Children           []shape
}

func (n node) shape() shape {
	s := shape{Ref: n.ref(), Ready: n.Ready, Reason: n.Reason}
	for _, c := range n.Children {
		s.Children = append(s.Children, c.shape())
	}
	return s
}

func traceJSON(t *testing.T, p *plugin, args ...string) (traced, result) {
	t.Helper()
	r := p.run(t, append([]string{"trace", "-o", "json"}, args...)...)
	var out traced
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("trace %v -o json: %v\nstdout:\n%s\nstderr:\n%s", args, err, r.stdout, r.stderr)
	}
	return out, r
}

// testTraceStates traces an object in each state and checks the exit
// code, the root's state and every node the trace says is not Ready.
func testTraceStates(t *testing.T, p *plugin) {
	type want struct {
		code    int
		ready   string
		status  string
		reason  string
		blocked []string
	}
	cases := map[string]struct {
		reason string
		args   []string
		want   want
	}{
		"Ready": {
			reason: "A running workspace whose claim is granted is Ready all the way down.",
			args:   []string{"workspace/shop", "-n", nsA},
			want:   want{code: 0, ready: "True", status: "Ready", reason: "ReplicasAvailable"},
		},
		"ReadyAutoscaled": {
			reason: "A workspace under an HPA and a PodDisruptionBudget that both do their job is Ready.",
			args:   []string{"ws/scaled", "-n", nsA},
			want:   want{code: 0, ready: "True", status: "Ready", reason: "ReplicasAvailable"},
		},
		"Idle": {
			reason: "An idle workspace runs no pods: it is not Ready, and says why.",
			args:   []string{"ws/idle", "-n", nsA},
			want:   want{code: 1, ready: "False", status: "Idle", reason: "ScaledToZero", blocked: []string{"Workspace/idle ScaledToZero"}},
		},
		"ClusterClassNotFound": {
			reason: "The missing class is a node of its own.",
			args:   []string{"ws/classless", "-n", nsA},
			want: want{code: 1, ready: "False", status: "Degraded", reason: "ClusterClassNotFound",
				blocked: []string{"Workspace/classless ClusterClassNotFound", "ClusterClass/doomed ClusterClassNotFound"}},
		},
		"InvalidSpec": {
			reason: "A spec the hooks cannot read is the Workspace's own problem; its children are fine.",
			args:   []string{"ws/invalid", "-n", nsA},
			want:   want{code: 1, ready: "False", status: "Degraded", reason: "InvalidSpec", blocked: []string{"Workspace/invalid InvalidSpec"}},
		},
		"ProgressDeadlineExceeded": {
			reason: "A stalled rollout leads down to the pod whose image does not pull.",
			args:   []string{"ws/stalled", "-n", nsA},
			want: want{code: 1, ready: "False", status: "Degraded", reason: "ProgressDeadlineExceeded", blocked: []string{
				"Workspace/stalled ProgressDeadlineExceeded", "Deployment/stalled ProgressDeadlineExceeded",
				"ReplicaSet/stalled-7d4b9c ReplicasNotReady", "Pod/stalled-7d4b9c-ax2k9 ImagePullBackOff",
			}},
		},
		"ReplicaFailure": {
			reason: "A pod the quota refuses shows on the Deployment and on its ReplicaSet.",
			args:   []string{"ws/quota", "-n", nsA},
			want: want{code: 1, ready: "False", status: "Degraded", reason: "ReplicaFailure", blocked: []string{
				"Workspace/quota ReplicaFailure", "Deployment/quota FailedCreate", "ReplicaSet/quota-7d4b9c FailedCreate",
			}},
		},
		"DatastoreNotInjected": {
			reason: "A denied claim and a datastore without a claim are each a node.",
			args:   []string{"ws/billing", "-n", nsA},
			want: want{code: 1, ready: "False", status: "Degraded", reason: "DatastoreNotInjected", blocked: []string{
				"Workspace/billing DatastoreNotInjected", "ResourceClaim/billing-orders InvalidSignature", "ResourceClaim/<none> NotFound",
			}},
		},
		"Terminating": {
			reason: "A workspace being deleted, and its pod going with it.",
			args:   []string{"ws/leaving", "-n", nsA},
			want: want{code: 1, ready: "False", status: "Terminating", reason: "Terminating", blocked: []string{
				"Workspace/leaving Terminating", "Deployment/leaving StatusOutdated", "Pod/leaving-7d4b9c-ax2k9 Terminating",
			}},
		},
		"ClaimGranted": {
			reason: "A granted claim, its Secret, its Datastore and the endpoint Secret.",
			args:   []string{"rclaim/orders", "-n", nsA},
			want:   want{code: 0, ready: "True", status: "Granted", reason: "Granted"},
		},
		"ClaimDenied": {
			reason: "A claim signed by a key the Datastore does not know.",
			args:   []string{"rclaim/" + deniedClaim, "-n", nsA},
			want:   want{code: 1, ready: "False", status: "Denied", reason: "InvalidSignature", blocked: []string{"ResourceClaim/billing-orders InvalidSignature"}},
		},
		"DatastoreValidated": {
			reason: "A Datastore whose endpoint Secret carries the consent label.",
			args:   []string{"datastore/orders-db", "-n", nsData},
			want:   want{code: 0, ready: "True", status: "postgres", reason: "Validated"},
		},
		"DatastoreNotLabeled": {
			reason: "Without the consent label, both the Datastore and its Secret say so.",
			args:   []string{"dstore/" + unlabeledDatastore, "-n", nsData},
			want: want{code: 1, ready: "False", status: "postgres", reason: "SecretNotLabeled", blocked: []string{
				"Datastore/audit-db SecretNotLabeled", "Secret/audit-db-endpoint SecretNotLabeled",
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, r := traceJSON(t, p, tc.args...)
			got := want{code: r.code, ready: out.Tree.Ready, status: out.Tree.Status, reason: out.Tree.Reason, blocked: out.Tree.blocked()}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\ntrace %v: -want, +got:\n%s\nstderr:\n%s", tc.reason, tc.args, diff, r.stderr)
			}
			if out.Ready != (tc.want.code == 0) {
				t.Errorf("trace %v: \"ready\" is %v with exit code %d", tc.args, out.Ready, r.code)
			}
		})
	}
}

// testTraceViewer traces as a user who may read neither ClusterClasses
// nor Secrets: those parts have no state, a warning names them, and a
// healthy workspace still traces Ready.
func testTraceViewer(t *testing.T, p *plugin) {
	out, r := traceJSON(t, p, "ws/shop", "-n", nsA, "--as", viewer)
	var forbidden []string
	var walk func(n node)
	walk = func(n node) {
		if n.Reason == "Forbidden" {
			forbidden = append(forbidden, n.ref()+" "+n.Ready)
		}
		for _, c := range n.Children {
			walk(c)
		}
	}
	walk(out.Tree)
	want := []string{"ClusterClass/standard ", "Secret/orders-credentials ", "Secret/orders-db-endpoint "}
	if diff := cmp.Diff(want, forbidden); diff != "" || r.code != 0 || !out.Ready {
		t.Errorf("trace ws/shop --as %s: exit %d, ready %v (want 0, true); forbidden parts and their state -want, +got:\n%s\nstderr:\n%s", viewer, r.code, out.Ready, diff, r.stderr)
	}
	if !strings.Contains(r.stderr, "not allowed to read ClusterClass/standard, Secret/orders-credentials, Secret/orders-db-endpoint") {
		t.Errorf("trace --as %s: no warning naming the parts it could not read:\n%s", viewer, r.stderr)
	}
}

// testTraceTree checks whole trees: every kind of node, in order, and
// what the datastore chain shows.
func testTraceTree(t *testing.T, p *plugin) {
	cases := map[string]struct {
		reason string
		args   []string
		want   shape
	}{
		"Workspace": {
			reason: "The class, the Deployment down to its pods (newest ReplicaSet first), the Service and ConfigMap, then the claim chain.",
			args:   []string{"ws/shop", "-n", nsA},
			want: shape{Ref: "Workspace/shop", Ready: "True", Reason: "ReplicasAvailable", Children: []shape{
				{Ref: "ClusterClass/standard"},
				{Ref: "Deployment/shop", Ready: "True", Reason: "MinimumReplicasAvailable", Children: []shape{
					{Ref: "ReplicaSet/shop-7d4b9c", Ready: "True", Children: []shape{{Ref: "Pod/shop-7d4b9c-ax2k9", Ready: "True"}}},
					{Ref: "ReplicaSet/shop-5f6a7b", Ready: "True"},
				}},
				{Ref: "Service/shop"},
				{Ref: "ConfigMap/shop-config"},
				{Ref: "ResourceClaim/orders", Ready: "True", Reason: "Granted", Children: []shape{
					{Ref: "Secret/orders-credentials"},
					{Ref: "Datastore/orders-db", Ready: "True", Reason: "Validated", Children: []shape{
						{Ref: "Secret/orders-db-endpoint", Ready: "True", Reason: "Labeled"},
					}},
				}},
			}},
		},
		"Autoscaled": {
			reason: "The HorizontalPodAutoscaler and the PodDisruptionBudget follow the Service and ConfigMap.",
			args:   []string{"ws/scaled", "-n", nsA},
			want: shape{Ref: "Workspace/scaled", Ready: "True", Reason: "ReplicasAvailable", Children: []shape{
				{Ref: "ClusterClass/autoscale"},
				{Ref: "Deployment/scaled", Ready: "True", Reason: "MinimumReplicasAvailable", Children: []shape{
					{Ref: "ReplicaSet/scaled-7d4b9c", Ready: "True", Children: []shape{
						{Ref: "Pod/scaled-7d4b9c-ax2k9", Ready: "True"}, {Ref: "Pod/scaled-7d4b9c-bx2k9", Ready: "True"},
					}},
				}},
				{Ref: "Service/scaled"},
				{Ref: "ConfigMap/scaled-config"},
				{Ref: "HorizontalPodAutoscaler/scaled", Ready: "True", Reason: "ValidMetricFound"},
				{Ref: "PodDisruptionBudget/scaled", Ready: "True"},
			}},
		},
		"DeniedAndMissing": {
			reason: "A denied claim has no credentials Secret; a datastore nobody claimed is a claim node without a name.",
			args:   []string{"ws/billing", "-n", nsA},
			want: shape{Ref: "Workspace/billing", Ready: "False", Reason: "DatastoreNotInjected", Children: []shape{
				{Ref: "ClusterClass/standard"},
				{Ref: "Deployment/billing", Ready: "True", Reason: "MinimumReplicasAvailable", Children: []shape{
					{Ref: "ReplicaSet/billing-7d4b9c", Ready: "True", Children: []shape{{Ref: "Pod/billing-7d4b9c-ax2k9", Ready: "True"}}},
				}},
				{Ref: "Service/billing"},
				{Ref: "ConfigMap/billing-config"},
				{Ref: "ResourceClaim/billing-orders", Ready: "False", Reason: "InvalidSignature", Children: []shape{
					{Ref: "Datastore/orders-db", Ready: "True", Reason: "Validated", Children: []shape{
						{Ref: "Secret/orders-db-endpoint", Ready: "True", Reason: "Labeled"},
					}},
				}},
				{Ref: "ResourceClaim/<none>", Ready: "False", Reason: "NotFound"},
			}},
		},
		"Claim": {
			reason: "A claim traced on its own.",
			args:   []string{"rclaim/orders", "-n", nsA},
			want: shape{Ref: "ResourceClaim/orders", Ready: "True", Reason: "Granted", Children: []shape{
				{Ref: "Secret/orders-credentials"},
				{Ref: "Datastore/orders-db", Ready: "True", Reason: "Validated", Children: []shape{
					{Ref: "Secret/orders-db-endpoint", Ready: "True", Reason: "Labeled"},
				}},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, r := traceJSON(t, p, tc.args...)
			if diff := cmp.Diff(tc.want, out.Tree.shape()); diff != "" {
				t.Errorf("%s\ntrace %v: -want, +got:\n%s\nstderr:\n%s", tc.reason, tc.args, diff, r.stderr)
			}
		})
	}

	// What the nodes of the datastore chain say besides their state.
	out, _ := traceJSON(t, p, "ws/billing", "-n", nsA)
	claims := out.Tree.Children[len(out.Tree.Children)-2:]
	type chain struct {
		Datastores    []string
		ConsentLabels map[string]string
		ClaimEvents   []string
	}
	got := chain{ConsentLabels: claims[0].Children[0].Children[0].Labels}
	for _, c := range claims {
		got.Datastores = append(got.Datastores, c.Datastore)
	}
	for _, e := range claims[0].Events {
		got.ClaimEvents = append(got.ClaimEvents, e.Type+" "+e.Reason)
	}
	want := chain{
		Datastores:    []string{"orders-db", "ledger-db"},
		ConsentLabels: map[string]string{"formspec.dev/datastore": "orders-db"},
		ClaimEvents:   []string{"Warning ClaimDenied"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trace ws/billing: each claim names its datastore, the endpoint Secret shows its consent label only, the claim its reporter Event: -want, +got:\n%s", diff)
	}
}

// testTraceOutputs checks the table, wide and YAML outputs and the logs.
func testTraceOutputs(t *testing.T, p *plugin) {
	t.Run("Table", func(t *testing.T) {
		r := p.run(t, "trace", "ws/stalled", "-n", nsA)
		lines := strings.Split(r.stdout, "\n")
		wantInOrder := []string{
			"NAME ",
			"Workspace/stalled ",
			"├─ClusterClass/standard ",
			"├─Deployment/stalled ",
			"│ └─ReplicaSet/stalled-7d4b9c ",
			"│   └─Pod/stalled-7d4b9c-ax2k9 ",
			"│         Warning Failed ",
			"├─Service/stalled ",
			"└─ConfigMap/stalled-config ",
		}
		i := 0
		for _, l := range lines {
			if i < len(wantInOrder) && strings.HasPrefix(l, wantInOrder[i]) {
				i++
			}
		}
		if i < len(wantInOrder) {
			t.Errorf("trace ws/stalled: no line starting %q after the ones before it; output:\n%s", wantInOrder[i], r.stdout)
		}
		for _, want := range []string{"ImagePullBackOff", "(x7) from kubelet", `Back-off pulling image "formahub/formspec-resource:9.9.9"`} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("trace ws/stalled: no %q in the output:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("EventsOfReadyNodes", func(t *testing.T) {
		const normal = "Normal ScalingReplicaSet"
		if r := p.run(t, "trace", "ws/shop", "-n", nsA); strings.Contains(r.stdout, normal) {
			t.Errorf("trace ws/shop: the table shows a Normal Event of a Ready node:\n%s", r.stdout)
		}
		r := p.run(t, "trace", "ws/shop", "-n", nsA, "-o", "wide")
		if !strings.Contains(r.stdout, normal) || !strings.HasPrefix(r.stdout, "NAMESPACE ") || !strings.Contains(r.stdout, "\n"+nsA+" ") {
			t.Errorf("trace ws/shop -o wide: want a NAMESPACE column and every node's Events:\n%s", r.stdout)
		}
		if r := p.run(t, "trace", "ws/shop", "-n", nsA, "-o", "wide", "--events", "0"); strings.Contains(r.stdout, normal) {
			t.Errorf("trace --events 0: Events shown:\n%s", r.stdout)
		}
	})
	t.Run("YAMLIsJSON", func(t *testing.T) {
		j := p.run(t, "trace", "ws/billing", "-n", nsA, "-o", "json")
		y := p.run(t, "trace", "ws/billing", "-n", nsA, "-o", "yaml")
		var fromJSON, fromYAML any
		if err := json.Unmarshal([]byte(j.stdout), &fromJSON); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(y.stdout), &fromYAML); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(fromJSON, fromYAML); diff != "" {
			t.Errorf("-o yaml against -o json: -json, +yaml:\n%s", diff)
		}
		if y.code != 1 || j.code != 1 {
			t.Errorf("exit codes: json %d, yaml %d; want 1 for a Degraded workspace", j.code, y.code)
		}
	})
	t.Run("DebugLog", func(t *testing.T) {
		r := p.run(t, "trace", "ws/shop", "-n", nsA, "-o", "json", "--log-level", "debug", "--log-format", "json")
		n := 0
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			var line struct {
				Msg  string `json:"msg"`
				Path string `json:"path"`
			}
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatalf("--log-format json: stderr line %q is not JSON: %v", l, err)
			}
			if line.Msg == "api request" {
				n++
			}
		}
		if n == 0 {
			t.Errorf("--log-level debug: no api request lines on stderr:\n%s", r.stderr)
		}
	})
}

// testTraceNames checks that KIND resolves the way kubectl resolves it,
// and the exit codes of what does not.
func testTraceNames(t *testing.T, p *plugin) {
	cases := map[string]struct {
		reason string
		args   []string
		code   int
		stderr string
	}{
		"TypeAndName":       {reason: "KIND NAME, as kubectl get takes it.", args: []string{"ws", "shop", "-n", nsA}, code: 0},
		"Singular":          {reason: "The singular.", args: []string{"workspace/shop", "-n", nsA}, code: 0},
		"Qualified":         {reason: "plural.group.", args: []string{"workspaces.formspec.dev/shop", "-n", nsA}, code: 0},
		"ClaimShortName":    {reason: "rclaim is ours.", args: []string{"rclaim/orders", "-n", nsA}, code: 0},
		"ClaimQualified":    {reason: "So is resourceclaims.formspec.dev.", args: []string{"resourceclaims.formspec.dev/orders", "-n", nsA}, code: 0},
		"DatastoreShort":    {reason: "dstore.", args: []string{"dstore/orders-db", "-n", nsData}, code: 0},
		"NamespaceFlag":     {reason: "--namespace as kubectl spells it in full.", args: []string{"datastore/orders-db", "--namespace=" + nsData}, code: 0},
		"BareResourceClaim": {reason: "A bare resourceclaim is Kubernetes' DRA API: a usage mistake that points to rclaim.", args: []string{"resourceclaim/orders", "-n", nsA}, code: 2, stderr: "a FormSpec ResourceClaim is rclaim/NAME"},
		"OtherKind":         {reason: "trace reads only our three kinds.", args: []string{"deployment/shop", "-n", nsA}, code: 2, stderr: "trace reads workspace (ws), rclaim and datastore (dstore)"},
		"UnknownKind":       {reason: "A kind the server does not serve is reported as kubectl reports it.", args: []string{"wrkspace/shop", "-n", nsA}, code: 3, stderr: `doesn't have a resource type "wrkspace"`},
		"NotFound":          {reason: "A missing object.", args: []string{"ws/nope", "-n", nsA}, code: 3, stderr: `"nope" not found`},
		"WrongNamespace":    {reason: "-n decides where to look.", args: []string{"ws/shop", "-n", nsB}, code: 3, stderr: `"shop" not found`},
		"NoName":            {reason: "A kind alone is not an object.", args: []string{"ws"}, code: 2, stderr: "want one object"},
		"TwoObjects":        {reason: "One object at a time.", args: []string{"ws/shop", "ws/idle"}, code: 2, stderr: "want one object"},
		"BadOutput":         {reason: "-o takes wide, json or yaml.", args: []string{"ws/shop", "-o", "xml"}, code: 2, stderr: "--output must be wide, json or yaml"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := p.run(t, append([]string{"trace"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("%s\ntrace %v: exit %d, stderr %q; want exit %d and stderr containing %q", tc.reason, tc.args, r.code, r.stderr, tc.code, tc.stderr)
			}
			if tc.code == 2 && !strings.HasPrefix(r.stderr, "kubectl formspec trace: ") {
				t.Errorf("trace %v: a usage mistake is reported first; stderr %q", tc.args, r.stderr)
			}
		})
	}
}

// testKubectlRunsPlugin runs the plugin the way users do, through kubectl,
// which finds it on the PATH by its name.
func testKubectlRunsPlugin(t *testing.T, p *plugin) {
	kubectl := ""
	if dir := os.Getenv("FORMSPEC_NODE_BIN"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "kubectl")); err == nil {
			kubectl = filepath.Join(dir, "kubectl")
		}
	}
	if kubectl == "" {
		var err error
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Skip("no kubectl: neither FORMSPEC_NODE_BIN (make node-binaries, as root) nor the PATH has one to run the plugin through")
		}
	}
	t.Setenv("PATH", filepath.Dir(p.bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	list := p.runCommand(t, kubectl, "plugin", "list")
	if !strings.Contains(list.stdout, p.bin) {
		t.Errorf("kubectl plugin list does not list %s:\n%s%s", p.bin, list.stdout, list.stderr)
	}
	r := p.runCommand(t, kubectl, "formspec", "trace", "ws/shop", "-n", nsA)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "NAME ") || !strings.Contains(r.stdout, "\nWorkspace/shop ") {
		t.Errorf("kubectl formspec trace ws/shop: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
