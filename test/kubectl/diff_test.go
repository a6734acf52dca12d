package kubectl

import (
	"maps"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// outcomes reads diff's table: each workspace's line, "ns/name  outcome".
func outcomes(t *testing.T, stdout string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(stdout, "\n") {
		if l == "" || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "WORKSPACE ") || !strings.Contains(l, "/") {
			continue
		}
		ws, outcome, ok := strings.Cut(l, "   ")
		if !ok {
			continue
		}
		out[ws] = strings.TrimSpace(outcome)
	}
	return out
}

func diffOutcomes(t *testing.T, p *plugin, args ...string) (map[string]string, result) {
	t.Helper()
	r := p.run(t, append(append([]string{"diff"}, hookFlags...), args...)...)
	return outcomes(t, r.stdout), r
}

// terminating is how diff lists a Workspace being deleted.
const terminating = "terminating (not compared: its finalize hook decides)"

// testDiffUnchanged runs diff with the hook server's flags the world was
// synced with: whatever state a workspace is in, nothing would change.
func testDiffUnchanged(t *testing.T, p *plugin) {
	got, r := diffOutcomes(t, p, "-n", nsA, "--exit-code")
	want := map[string]string{
		nsA + "/billing": "unchanged", nsA + "/classless": "unchanged", nsA + "/idle": "unchanged",
		nsA + "/invalid": "unchanged", nsA + "/leaving": terminating, nsA + "/quota": "unchanged",
		nsA + "/scaled": "unchanged", nsA + "/shop": "unchanged", nsA + "/stalled": "unchanged",
	}
	if diff := cmp.Diff(want, got); diff != "" || r.code != 0 {
		t.Errorf("diff -n %s --exit-code: exit %d (want 0); outcomes -want, +got:\n%s\nstdout:\n%s\nstderr:\n%s", nsA, r.code, diff, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "\n9 workspaces: 8 unchanged, 1 terminating\n") {
		t.Errorf("diff: no summary line:\n%s", r.stdout)
	}
	all, r := diffOutcomes(t, p, "--all-namespaces", "--exit-code")
	want[nsB+"/api"], want[nsB+"/web"] = "unchanged", "unchanged"
	if diff := cmp.Diff(want, all); diff != "" || r.code != 0 {
		t.Errorf("diff -A --exit-code: exit %d (want 0); outcomes -want, +got:\n%s\nstderr:\n%s", r.code, diff, r.stderr)
	}
}

// testDiffFlags runs diff with hook server flags other than the
// install's: each workspace whose pods the hooks build shows them rolling,
// with the field that changes; a workspace whose class is missing keeps
// its children as they are.
func testDiffFlags(t *testing.T, p *plugin) {
	got, r := diffOutcomes(t, p, "-n", nsA, "--resource-image", "registry.example.com/formspec-resource")
	if r.code != 0 {
		t.Errorf("diff without --exit-code: exit %d, want 0 whatever changes; stderr:\n%s", r.code, r.stderr)
	}
	roll := "pods would roll"
	want := map[string]string{
		nsA + "/billing": roll, nsA + "/classless": "unchanged", nsA + "/idle": roll,
		nsA + "/invalid": roll, nsA + "/leaving": terminating, nsA + "/quota": roll,
		nsA + "/scaled": roll, nsA + "/shop": roll, nsA + "/stalled": roll,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("diff --resource-image registry.example.com/formspec-resource: outcomes -want, +got:\n%s\nstdout:\n%s", diff, r.stdout)
	}
	for _, line := range []string{
		"  Deployment/shop: would change\n",
		`    spec.template.spec.containers[resource].image: "formahub/formspec-resource:1.4.0" → "registry.example.com/formspec-resource:1.4.0"` + "\n",
		`    spec.template.spec.containers[resource].image: "formahub/formspec-resource:9.9.9" → "registry.example.com/formspec-resource:9.9.9"` + "\n",
	} {
		if !strings.Contains(r.stdout, line) {
			t.Errorf("diff --resource-image: no line %q in:\n%s", line, r.stdout)
		}
	}
	if _, r := diffOutcomes(t, p, "-n", nsA, "--resource-image", "registry.example.com/formspec-resource", "--exit-code"); r.code != 1 {
		t.Errorf("diff --exit-code with changes: exit %d, want 1", r.code)
	}

	// Without the install's --cluster-control-url the environment differs,
	// and diff warns that it must be given.
	r = p.run(t, "diff", "-n", nsA, "--resource-image", hookConfig.ResourceImage, "--default-version", hookConfig.DefaultVersion)
	if !strings.Contains(r.stderr, "no --cluster-control-url") || !strings.Contains(r.stdout, `env[CONTROL_CLUSTER_URL].value: "`+hookConfig.ControlClusterURL+`" → (none)`) {
		t.Errorf("diff without --cluster-control-url: want a warning and the environment change\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

// testDiffChanges changes what the hooks read and checks that diff shows
// exactly the change and writes nothing.
func testDiffChanges(t *testing.T, p *plugin, w *world) {
	// A class change that only moves the HPA's bound.
	if _, err := w.c.MergePatch(v1alpha1.APIVersion, "ClusterClass", "", "elastic", "", map[string]any{"spec": map[string]any{"scaling": map[string]any{"maxReplicas": 6}}}); err != nil {
		t.Fatal(err)
	}
	got, r := diffOutcomes(t, p, "-n", nsB, "--exit-code")
	if diff := cmp.Diff(map[string]string{nsB + "/api": "changed", nsB + "/web": "unchanged"}, got); diff != "" || r.code != 1 {
		t.Errorf("diff after the class's maxReplicas changed: exit %d (want 1); -want, +got:\n%s\nstdout:\n%s", r.code, diff, r.stdout)
	}
	if want := "  HorizontalPodAutoscaler/api: would change\n    spec.maxReplicas: 4 → 6\n"; !strings.Contains(r.stdout, want) {
		t.Errorf("diff: want\n%s\nin:\n%s", want, r.stdout)
	}
	hpa := as[autoscalingv2.HorizontalPodAutoscaler](t, w.get("autoscaling/v2", "HorizontalPodAutoscaler", nsB, "api"))
	if hpa.Spec.MaxReplicas != 4 {
		t.Errorf("after diff the live HPA has maxReplicas %d: diff wrote to the cluster", hpa.Spec.MaxReplicas)
	}

	// A class that loses auto-scaling: the HPA would go.
	if _, err := w.c.MergePatch(v1alpha1.APIVersion, "ClusterClass", "", "elastic", "", map[string]any{"spec": map[string]any{"features": nil}}); err != nil {
		t.Fatal(err)
	}
	if _, r := diffOutcomes(t, p, "-n", nsB); !strings.Contains(r.stdout, "  HorizontalPodAutoscaler/api: would be deleted\n") {
		t.Errorf("diff after the class lost auto-scaling: no deletion in:\n%s", r.stdout)
	}

	// A config change rolls the pods: the ConfigMap and the hash on the pod
	// template change.
	if _, err := w.c.MergePatch(v1alpha1.APIVersion, "Workspace", nsB, "web", "", map[string]any{"spec": map[string]any{"config": map[string]any{"GREETING": "bonjour"}}}); err != nil {
		t.Fatal(err)
	}
	// A Workspace Metacontroller has not synced yet: its children would be
	// created.
	w.create(map[string]any{
		"apiVersion": v1alpha1.APIVersion, "kind": "Workspace",
		"metadata": map[string]any{"name": "fresh", "namespace": nsB},
		"spec":     map[string]any{"clusterClass": "standard"},
	})
	got, r = diffOutcomes(t, p, "-n", nsB, "--exit-code")
	if diff := cmp.Diff(map[string]string{nsB + "/api": "changed", nsB + "/fresh": "changed", nsB + "/web": "pods would roll"}, got); diff != "" || r.code != 1 {
		t.Errorf("diff after the config change: exit %d (want 1); -want, +got:\n%s\nstdout:\n%s", r.code, diff, r.stdout)
	}
	for _, want := range []string{
		"  Deployment/web: would change\n    spec.template.metadata.annotations[formspec.dev/config-hash]: ",
		"  ConfigMap/web-config: would change\n    data.GREETING: \"hello\" → \"bonjour\"\n",
		"  Deployment/fresh: would be created\n  Service/fresh: would be created\n  ConfigMap/fresh-config: would be created\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("diff: want\n%s\nin:\n%s", want, r.stdout)
		}
	}
}

// testDiffErrors checks the exit codes of a diff that cannot be made:
// above 1, as kubectl diff has them, with or without --exit-code.
func testDiffErrors(t *testing.T, p *plugin) {
	cases := map[string]struct {
		reason string
		args   []string
		code   int
		stderr string
	}{
		"NoCluster":      {reason: "An API server that cannot be reached.", args: []string{"--exit-code", "--default-version", "1.8.2", "--server", "https://127.0.0.1:1"}, code: 3, stderr: "kubectl formspec diff: "},
		"StrayArgument":  {reason: "diff takes no arguments.", args: []string{"--exit-code", "shop"}, code: 2, stderr: `unexpected arguments ["shop"]`},
		"ImageDigest":    {reason: "--resource-image is checked as serve checks it: a digest cannot be honoured.", args: []string{"--resource-image", "formahub/formspec-resource@sha256:0"}, code: 2, stderr: "--resource-image \"formahub/formspec-resource@sha256:0\" has a digest"},
		"NoVersion":      {reason: "As serve, diff has no implicit latest: the version the install runs must be given.", args: []string{"--exit-code"}, code: 2, stderr: "--default-version is required"},
		"BadControlURL":  {reason: "--cluster-control-url must be http(s).", args: []string{"--default-version", "1.8.2", "--cluster-control-url", "ftp://x"}, code: 2, stderr: "--cluster-control-url must be an http or https URL"},
		"NoFieldManager": {reason: "The field manager decides what an apply owns.", args: []string{"--default-version", "1.8.2", "--field-manager", ""}, code: 2, stderr: "--field-manager must not be empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := p.run(t, append([]string{"diff"}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("%s\ndiff %v: exit %d, stderr %q; want exit %d and stderr containing %q", tc.reason, tc.args, r.code, r.stderr, tc.code, tc.stderr)
			}
		})
	}
}

// testDiffCredentialsFrom010 makes the granted claim of team-a and its
// credentials Secret look as version 0.1.0's hooks left them (a
// credentialsHash made from the credentials, no revision on the Secret),
// with the workspace synced on it, and checks that diff says the
// workspace's pods would roll, on the credentials-hash annotation: the
// roll every workspace with a claim takes on the upgrade to 0.2.0. Then it
// puts the claim back as this version's hook writes it: nothing rolls.
func testDiffCredentialsFrom010(t *testing.T, p *plugin, w *world) {
	claim := w.get(v1alpha1.APIVersion, "ResourceClaim", nsA, claimstest.ClaimName)
	current := claim["status"].(map[string]any)
	secretName := current["binding"].(map[string]any)["name"].(string)
	old := maps.Clone(current)
	old["credentialsHash"] = "sha256:" + strings.Repeat("3c", 32)
	w.putStatus(claim, old)
	if _, err := w.c.MergePatch("v1", "Secret", nsA, secretName, "", map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationCredentialsRevision: nil}},
	}); err != nil {
		t.Fatal(err)
	}
	w.sync(nsA, "shop", nil)

	got, r := diffOutcomes(t, p, "-n", nsA)
	if got[nsA+"/shop"] != "pods would roll" || !strings.Contains(r.stdout, "spec.template.metadata.annotations[formspec.dev/credentials-hash]: ") {
		t.Errorf("diff of a workspace whose claim 0.1.0 granted: outcome %q, want \"pods would roll\" on the credentials-hash annotation\nstdout:\n%s\nstderr:\n%s",
			got[nsA+"/shop"], r.stdout, r.stderr)
	}

	// As this version's hook writes them: the Secret at revision 1, the
	// hash from it. The workspace synced on that rolls nothing more.
	if _, err := w.c.MergePatch("v1", "Secret", nsA, secretName, "", map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationCredentialsRevision: "1"}},
	}); err != nil {
		t.Fatal(err)
	}
	_, _, uid := metaOf(claim)
	fixed := maps.Clone(current)
	fixed["credentialsHash"] = claims.CredentialsHash(types.UID(uid), 1)
	w.putStatus(claim, fixed)
	w.sync(nsA, "shop", nil)
	if got, r := diffOutcomes(t, p, "-n", nsA); got[nsA+"/shop"] != "unchanged" {
		t.Errorf("diff once the claim is as this version writes it: outcome %q, want unchanged\nstdout:\n%s", got[nsA+"/shop"], r.stdout)
	}
}
