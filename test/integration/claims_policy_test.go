package integration

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// claimsPolicy is the name of the policy that keeps the claims summary
// the reporter's (deploy/reporter/claims-policy.yaml).
const claimsPolicy = "formspec-workspace-claims-summary"

// TestClaimsSummaryPolicy installs deploy/reporter on a real API server
// and plays the attack the claims summary invites: a workspace's editor,
// who may create and update Workspaces, writes formspec.dev/claims
// herself to mount a Secret her workspace was never granted. The API
// server refuses it on create, on update and on removal, naming the
// annotation; the reporter's service account writes it; and the editor
// still edits everything else of a Workspace that carries it.
func TestClaimsSummaryPolicy(t *testing.T) {
	cp, admin := startWithReporter(t, "serviceaccount.yaml", "rbac.yaml", "admission-policy.yaml", "claims-policy.yaml")
	// The editor: a service account of team-a allowed everything on
	// Workspaces there, as a namespace's admin is.
	for _, o := range []controlplane.Object{
		{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "editor", "namespace": "team-a"}},
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "workspace-editor", "namespace": "team-a"},
			"rules": []any{map[string]any{"apiGroups": []any{"formspec.dev"}, "resources": []any{"workspaces"}, "verbs": []any{"*"}}}},
		{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "workspace-editor", "namespace": "team-a"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "workspace-editor"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "editor", "namespace": "team-a"}}},
	} {
		if _, err := admin.Create(o); err != nil {
			t.Fatalf("cannot create %s: %v", o["kind"], err)
		}
	}
	client := func(sa string) *controlplane.Client {
		ns, name, _ := strings.Cut(sa, "/")
		token, err := admin.ServiceAccountToken(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := controlplane.NewClient(cp.URL, token, cp.CACert)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	editor, reporter := client("team-a/editor"), client("formspec-system/formspec-reporter")

	// The forged summary: a Ready claim of another workspace, whose Secret
	// the hook would mount.
	forged := `{"claims":[{"name":"billing-db","datastore":{"name":"billing","namespace":"team-a"},"state":"Ready","secretName":"billing-db-credentials","credentialsHash":"sha256:1"}]}`
	workspace := func(name string, annotations map[string]any) controlplane.Object {
		md := map[string]any{"name": name, "namespace": "team-a"}
		if annotations != nil {
			md["annotations"] = annotations
		}
		return controlplane.Object{"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace", "metadata": md,
			"spec": map[string]any{"clusterClass": "standard", "owner": "team-a", "datastores": []any{map[string]any{"name": "orders-db"}}}}
	}
	annotate := func(value any) map[string]any {
		return map[string]any{"metadata": map[string]any{"annotations": map[string]any{claimsummary.Annotation: value}}}
	}
	refused := func(t *testing.T, what string, err error, message string) {
		t.Helper()
		var apiErr *controlplane.APIError
		switch {
		case err == nil:
			t.Errorf("%s: allowed, want refused by %s", what, claimsPolicy)
		case !(errors.As(err, &apiErr) && apiErr.Code == http.StatusForbidden) || !strings.Contains(err.Error(), claimsPolicy):
			t.Errorf("%s: got %v, want 403 from %s", what, err, claimsPolicy)
		case !strings.Contains(err.Error(), message):
			t.Errorf("%s: the refusal %q does not say %q", what, err, message)
		}
	}

	t.Run("ForgedOnCreate", func(t *testing.T) {
		_, err := editor.Create(workspace("forged", map[string]any{claimsummary.Annotation: forged}))
		refused(t, "an editor creating a Workspace with formspec.dev/claims", err,
			"may set the formspec.dev/claims annotation, which decides the credentials a workspace mounts; create the Workspace without it")
		if _, err := admin.Get("formspec.dev/v1alpha1", "Workspace", "team-a", "forged"); err == nil {
			t.Errorf("the Workspace with the forged summary exists")
		}
	})
	if _, err := editor.Create(workspace("shop", map[string]any{"owner.example/contact": "ops"})); err != nil {
		t.Fatalf("an editor creating a Workspace without the annotation: %v", err)
	}
	t.Run("ForgedOnUpdate", func(t *testing.T) {
		_, err := editor.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "", annotate(forged))
		refused(t, "an editor adding formspec.dev/claims", err, "may change or remove the formspec.dev/claims annotation")
	})
	t.Run("ReporterWrites", func(t *testing.T) {
		if _, err := reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "", annotate(`{"claims":[]}`)); err != nil {
			t.Fatalf("the reporter writing the summary: %v", err)
		}
		if _, err := reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "", annotate(forged)); err != nil {
			t.Errorf("the reporter changing the summary: %v", err)
		}
	})
	t.Run("ForgedChange", func(t *testing.T) {
		_, err := editor.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "", annotate(`{"claims":[]}`))
		refused(t, "an editor changing formspec.dev/claims", err, "may change or remove the formspec.dev/claims annotation")
		_, err = editor.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "", annotate(nil))
		refused(t, "an editor removing formspec.dev/claims", err, "may change or remove the formspec.dev/claims annotation")
	})
	t.Run("EditorEditsTheRest", func(t *testing.T) {
		if _, err := editor.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "", map[string]any{
			"metadata": map[string]any{"labels": map[string]any{"team": "b"}, "annotations": map[string]any{"owner.example/contact": "sre"}},
			"spec":     map[string]any{"owner": "team-b"},
		}); err != nil {
			t.Errorf("an editor changing the spec, labels and other annotations of a Workspace with a summary: %v", err)
		}
	})
	t.Run("ReporterStillNarrowed", func(t *testing.T) {
		// The reporter may write the summary, and still nothing else.
		_, err := reporter.MergePatch("formspec.dev/v1alpha1", "Workspace", "team-a", "shop", "", map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{claimsummary.Annotation: `{"claims":[]}`}},
			"spec":     map[string]any{"owner": "mallory"},
		})
		if !strings.Contains(errString(err), "formspec-reporter-workspace-annotations") {
			t.Errorf("the reporter changing the spec beside the summary: got %v, want a refusal by the reporter's policy", err)
		}
	})

	got, err := admin.Get("formspec.dev/v1alpha1", "Workspace", "team-a", "shop")
	if err != nil {
		t.Fatal(err)
	}
	if a := got["metadata"].(map[string]any)["annotations"].(map[string]any); a[claimsummary.Annotation] != forged {
		t.Errorf("formspec.dev/claims after the writes: got %v, want the reporter's last value", a[claimsummary.Annotation])
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
