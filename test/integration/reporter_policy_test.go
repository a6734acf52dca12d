package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestReporterPolicy installs deploy/reporter (service account, RBAC and
// the ValidatingAdmissionPolicy) on a real API server and acts as the
// reporter, with a token the API server issued for its service account:
// the two directive annotations and the wake's overflow annotation can be
// written and removed (the hash only as a digest), an Event can be
// created, its own Lease held, and every other change to a Workspace, or
// to another Lease, is refused, whether RBAC or the policy refuses it. The same changes by another user pass,
// so the policy narrows the reporter only.
func TestReporterPolicy(t *testing.T) {
	cp, admin := startWithReporter(t, "serviceaccount.yaml", "rbac.yaml", "admission-policy.yaml")
	ws := controlplane.Object{
		"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace",
		"metadata": map[string]any{"name": "shop", "namespace": "team-a",
			"labels": map[string]any{"team": "a"}, "annotations": map[string]any{"owner.example/contact": "ops"}},
		"spec": map[string]any{"clusterClass": "standard", "owner": "team-a"},
	}
	if _, err := admin.Create(ws); err != nil {
		t.Fatalf("cannot create the workspace: %v", err)
	}

	raw, err := admin.Do(http.MethodPost, "/api/v1/namespaces/formspec-system/serviceaccounts/formspec-reporter/token",
		map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{}})
	if err != nil {
		t.Fatalf("cannot get a token for the reporter: %v", err)
	}
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil || tr.Status.Token == "" {
		t.Fatalf("no token in %s: %v", raw, err)
	}
	reporter, err := controlplane.NewClient(cp.URL, tr.Status.Token, cp.CACert)
	if err != nil {
		t.Fatal(err)
	}

	hash := "sha256:" + strings.Repeat("9b2c", 16)
	annotations := func(kv map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": kv}}
	}
	// Run in order: the allowed writes leave the object as the refused
	// ones expect it.
	cases := []struct {
		name        string
		reason      string
		subresource string
		patch       map[string]any
		wantCode    int // 0: allowed
	}{
		{name: "RestartDirective", reason: "restart_required writes the binary hash",
			patch: annotations(map[string]any{"formspec.dev/artifact-binary-hash": hash})},
		{name: "ShortHash", reason: "a hash is sha256: and 64 hex digits, not a prefix of one",
			patch: annotations(map[string]any{"formspec.dev/artifact-binary-hash": "sha256:9b2c"}), wantCode: http.StatusForbidden},
		{name: "UppercaseHash", reason: "one spelling per digest",
			patch: annotations(map[string]any{"formspec.dev/artifact-binary-hash": strings.ToUpper(hash)}), wantCode: http.StatusForbidden},
		{name: "HashWithMore", reason: "nothing after the digest reaches the pod template",
			patch: annotations(map[string]any{"formspec.dev/artifact-binary-hash": hash + "\nimage: evil"}), wantCode: http.StatusForbidden},
		{name: "HashWithoutAlgorithm", reason: "the value says it is a sha256 digest",
			patch: annotations(map[string]any{"formspec.dev/artifact-binary-hash": strings.TrimPrefix(hash, "sha256:")}), wantCode: http.StatusForbidden},
		{name: "IdleDirective", reason: "idle sets formspec.dev/idle",
			patch: annotations(map[string]any{"formspec.dev/idle": "true"})},
		{name: "SameAgain", reason: "a second reporter writing the same directive agrees",
			patch: annotations(map[string]any{"formspec.dev/idle": "true"})},
		{name: "WakeDirective", reason: "wake removes formspec.dev/idle",
			patch: annotations(map[string]any{"formspec.dev/idle": nil})},
		{name: "WakeOverflow", reason: "the cap on held requests sets formspec.dev/wake-overflow",
			patch: annotations(map[string]any{"formspec.dev/wake-overflow": "true"})},
		{name: "WakeOverflowFalse", reason: "formspec.dev/wake-overflow is \"true\" or absent",
			patch: annotations(map[string]any{"formspec.dev/wake-overflow": "false"}), wantCode: http.StatusForbidden},
		{name: "WakeOverflowEnds", reason: "the end of the wake removes it",
			patch: annotations(map[string]any{"formspec.dev/wake-overflow": nil})},
		{name: "Spec", reason: "the spec is the user's",
			patch: map[string]any{"spec": map[string]any{"owner": "mallory"}}, wantCode: http.StatusForbidden},
		{name: "SpecWithAnnotation", reason: "an allowed annotation does not carry a spec change through",
			patch: map[string]any{"metadata": map[string]any{"annotations": map[string]any{"formspec.dev/idle": "true"}},
				"spec": map[string]any{"clusterClass": "gold"}}, wantCode: http.StatusForbidden},
		{name: "OtherAnnotation", reason: "no other annotation may be added",
			patch: annotations(map[string]any{"example.com/x": "y"}), wantCode: http.StatusForbidden},
		{name: "RemoveOtherAnnotation", reason: "nor removed",
			patch: annotations(map[string]any{"owner.example/contact": nil}), wantCode: http.StatusForbidden},
		{name: "IdleFalse", reason: "formspec.dev/idle is \"true\" or absent",
			patch: annotations(map[string]any{"formspec.dev/idle": "false"}), wantCode: http.StatusForbidden},
		{name: "Labels", reason: "labels select children and pods",
			patch: map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "b"}}}, wantCode: http.StatusForbidden},
		{name: "Finalizers", reason: "a finalizer could block deletion",
			patch: map[string]any{"metadata": map[string]any{"finalizers": []any{"example.com/hold"}}}, wantCode: http.StatusForbidden},
		{name: "Status", reason: "RBAC gives no access to the status subresource", subresource: "status",
			patch: map[string]any{"status": map[string]any{"phase": "Ready"}}, wantCode: http.StatusForbidden},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", tc.subresource, tc.patch)
			var apiErr *controlplane.APIError
			switch {
			case tc.wantCode == 0 && err != nil:
				t.Errorf("%s: refused: %v", tc.reason, err)
			case tc.wantCode != 0 && err == nil:
				t.Errorf("%s: allowed, want %d", tc.reason, tc.wantCode)
			case tc.wantCode != 0 && !(errors.As(err, &apiErr) && apiErr.Code == tc.wantCode):
				t.Errorf("%s: got %v, want %d", tc.reason, err, tc.wantCode)
			case tc.wantCode != 0 && tc.subresource == "" && !strings.Contains(err.Error(), "formspec-reporter-workspace-annotations"):
				// RBAC allows the patch: only the policy may refuse it.
				t.Errorf("%s: refused, but not by the admission policy: %v", tc.reason, err)
			}
		})
	}

	got, err := admin.Get("formspec.dev/v1alpha1", "Workspace", "team-a", "shop")
	if err != nil {
		t.Fatal(err)
	}
	md := got["metadata"].(map[string]any)
	wantAnnotations := map[string]any{"owner.example/contact": "ops", "formspec.dev/artifact-binary-hash": hash}
	if a := md["annotations"].(map[string]any); len(a) != len(wantAnnotations) || a["formspec.dev/artifact-binary-hash"] != hash || a["owner.example/contact"] != "ops" {
		t.Errorf("annotations after the reporter's writes: got %v, want %v", a, wantAnnotations)
	}
	if spec := got["spec"].(map[string]any); spec["owner"] != "team-a" || spec["clusterClass"] != "standard" {
		t.Errorf("spec changed: %v", spec)
	}

	t.Run("ValueSetByOthersMayStay", func(t *testing.T) {
		// Someone else's formspec.dev/wake-overflow: "false" must not
		// block the reporter's other writes, such as a restart directive.
		if _, err := admin.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "",
			annotations(map[string]any{"formspec.dev/wake-overflow": "false", "formspec.dev/idle": "no"})); err != nil {
			t.Fatal(err)
		}
		if _, err := reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "",
			annotations(map[string]any{"formspec.dev/artifact-binary-hash": "sha256:" + strings.Repeat("77aa", 16)})); err != nil {
			t.Errorf("a restart directive beside values the reporter may not write: refused: %v", err)
		}
		// A person may write any hash; the reporter's other writes go
		// through beside it, and it may not write one like it.
		if _, err := admin.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "",
			annotations(map[string]any{"formspec.dev/artifact-binary-hash": "build-42"})); err != nil {
			t.Fatal(err)
		}
		if _, err := reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "",
			annotations(map[string]any{"formspec.dev/idle": "true"})); err != nil {
			t.Errorf("an idle beside a hash someone else wrote: refused: %v", err)
		}
		_, err := reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "",
			annotations(map[string]any{"formspec.dev/artifact-binary-hash": "build-43"}))
		if !strings.Contains(fmt.Sprint(err), "formspec-reporter-workspace-annotations") {
			t.Errorf("changing formspec.dev/artifact-binary-hash to something not a digest: got %v, want a refusal by the policy", err)
		}
		_, err = reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "",
			annotations(map[string]any{"formspec.dev/idle": "maybe"}))
		if !strings.Contains(fmt.Sprint(err), "formspec-reporter-workspace-annotations") {
			t.Errorf("changing formspec.dev/idle to another value than \"true\": got %v, want a refusal by the policy", err)
		}
		if _, err := reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "",
			annotations(map[string]any{"formspec.dev/wake-overflow": nil, "formspec.dev/idle": nil})); err != nil {
			t.Errorf("removing both: refused: %v", err)
		}
	})

	t.Run("SamePatternAsTheReporter", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "deploy", "reporter", "admission-policy.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `.matches("`+v1alpha1.ArtifactHashPattern+`")`) {
			t.Errorf("deploy/reporter/admission-policy.yaml does not match artifact hashes with v1alpha1.ArtifactHashPattern %s, which the reporter checks", v1alpha1.ArtifactHashPattern)
		}
	})
	t.Run("OthersUnaffected", func(t *testing.T) {
		if _, err := admin.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "",
			map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "b"}}}); err != nil {
			t.Errorf("the policy refused another user: %v", err)
		}
	})
	t.Run("ListForTheBudget", func(t *testing.T) {
		// The directive budget watches every Workspace; nothing needs a get.
		if _, err := reporter.Do(http.MethodGet, "/apis/formspec.dev/v1alpha1/workspaces?limit=1", nil); err != nil {
			t.Errorf("the reporter cannot list Workspaces for its budget: %v", err)
		}
		_, err := reporter.Get("formspec.dev/v1alpha1", "Workspace", "team-a", "shop")
		var apiErr *controlplane.APIError
		if !(errors.As(err, &apiErr) && apiErr.Code == http.StatusForbidden) {
			t.Errorf("the reporter can get a Workspace (got %v); it needs patch, list and watch only", err)
		}
	})
	t.Run("ListClaimsForTheSummary", func(t *testing.T) {
		// The claims summary is written from a watch of every claim;
		// nothing needs a get, nor any write.
		if _, err := reporter.Do(http.MethodGet, "/apis/formspec.dev/v1alpha1/resourceclaims?limit=1", nil); err != nil {
			t.Errorf("the reporter cannot list ResourceClaims for the claims summary: %v", err)
		}
		_, err := reporter.Get("formspec.dev/v1alpha1", "ResourceClaim", "team-a", "any")
		var apiErr *controlplane.APIError
		if !(errors.As(err, &apiErr) && apiErr.Code == http.StatusForbidden) {
			t.Errorf("the reporter can get a ResourceClaim (got %v); it needs list and watch only", err)
		}
	})
	t.Run("Lease", func(t *testing.T) {
		lease := func(ns, name string) map[string]any {
			return map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
				"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"holderIdentity": "reporter-0_1"}}
		}
		path := "/apis/coordination.k8s.io/v1/namespaces/"
		if _, err := reporter.Do(http.MethodPost, path+"formspec-system/leases", lease("formspec-system", "formspec-reporter")); err != nil {
			t.Fatalf("the reporter cannot create its Lease: %v", err)
		}
		raw, err := reporter.Do(http.MethodGet, path+"formspec-system/leases/formspec-reporter", nil)
		if err != nil {
			t.Fatalf("the reporter cannot read its Lease: %v", err)
		}
		var got struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		renewed := lease("formspec-system", "formspec-reporter")
		renewed["metadata"].(map[string]any)["resourceVersion"] = got.Metadata.ResourceVersion
		if _, err := reporter.Do(http.MethodPut, path+"formspec-system/leases/formspec-reporter", renewed); err != nil {
			t.Errorf("the reporter cannot renew its Lease: %v", err)
		}
		if _, err := admin.Do(http.MethodPost, path+"formspec-system/leases", lease("formspec-system", "other")); err != nil {
			t.Fatal(err)
		}
		for what, call := range map[string]func() error{
			"read another Lease of its namespace": func() error {
				_, err := reporter.Do(http.MethodGet, path+"formspec-system/leases/other", nil)
				return err
			},
			"update another Lease of its namespace": func() error {
				_, err := reporter.Do(http.MethodPut, path+"formspec-system/leases/other", lease("formspec-system", "other"))
				return err
			},
			"create a Lease in another namespace": func() error {
				_, err := reporter.Do(http.MethodPost, path+"team-a/leases", lease("team-a", "formspec-reporter"))
				return err
			},
			"delete its Lease": func() error {
				_, err := reporter.Do(http.MethodDelete, path+"formspec-system/leases/formspec-reporter", nil)
				return err
			},
		} {
			var apiErr *controlplane.APIError
			if err := call(); !(errors.As(err, &apiErr) && apiErr.Code == http.StatusForbidden) {
				t.Errorf("the reporter can %s (got %v); it needs its own Lease only", what, err)
			}
		}
	})
	t.Run("Event", func(t *testing.T) {
		ev := map[string]any{
			"apiVersion": "events.k8s.io/v1", "kind": "Event",
			"metadata":            map[string]any{"name": "shop.1", "namespace": "team-a"},
			"eventTime":           "2026-03-01T12:00:00.000000Z",
			"reportingController": "formspec.dev/reporter", "reportingInstance": "formspec.dev/reporter-pod",
			"action": "Rollout", "reason": "RollingOut", "type": "Normal", "note": "rolling",
			"regarding": map[string]any{"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace", "namespace": "team-a", "name": "shop"},
		}
		if _, err := reporter.Do(http.MethodPost, "/apis/events.k8s.io/v1/namespaces/team-a/events", ev); err != nil {
			t.Errorf("the reporter cannot create an Event: %v", err)
		}
		if _, err := reporter.Do(http.MethodDelete, "/apis/events.k8s.io/v1/namespaces/team-a/events/shop.1", nil); err == nil {
			t.Errorf("the reporter can delete Events; it needs create and patch only")
		}
	})
}

// startWithReporter starts an API server with the CRDs, the namespaces
// formspec-system and team-a, and files of deploy/reporter applied.
func startWithReporter(t *testing.T, files ...string) (*controlplane.ControlPlane, *controlplane.Client) {
	t.Helper()
	cp := controlplane.Start(t, controlplane.WithoutControllerManager())
	admin := cp.Client()
	if err := admin.InstallCRDs(crdFiles(t)...); err != nil {
		t.Fatalf("cannot install deploy/crds: %v", err)
	}
	ensureNamespace(t, admin, "formspec-system")
	ensureNamespace(t, admin, "team-a")
	for _, f := range files {
		if _, err := admin.ApplyYAMLFile(filepath.Join(controlplane.RepoRoot(t), "deploy", "reporter", f), fieldManager, false); err != nil {
			t.Fatalf("cannot apply deploy/reporter/%s: %v", f, err)
		}
	}
	return cp, admin
}
