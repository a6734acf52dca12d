package helm

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// addOnWords are what any object rendered for wake on request carries: the
// add-on's API group, its interceptor, the controller's name.
var addOnWords = []string{"http.keda.sh", "interceptor", "formspec-wake", "/v1/wake/"}

// TestWakeOnRequestOff renders every release, none of which sets
// wakeOnRequest: nothing of the add-on may be rendered, not a controller,
// not a rule, not a flag.
func TestWakeOnRequestOff(t *testing.T) {
	for name, r := range releases {
		t.Run(name, func(t *testing.T) {
			for _, obj := range render(t, r).objects {
				raw, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range addOnWords {
					if strings.Contains(strings.ToLower(string(raw)), w) {
						t.Errorf("%s mentions %q without wakeOnRequest.enabled", identity(obj), w)
					}
				}
			}
		})
	}
}

// TestWakeOnRequestOn renders wakeOnRequest.enabled: the wake controller
// on the hook Service like the others, Metacontroller's right to the
// routes, and the reporter told where the interceptors are.
func TestWakeOnRequestOn(t *testing.T) {
	objs := render(t, valueRelease(required+"wakeOnRequest: {enabled: true, interceptorAdminURL: 'http://interceptor-admin.keda:9090', pollInterval: 100ms}")).objects
	byID := map[string]controlplane.Object{}
	for _, o := range objs {
		byID[identity(o)] = o
	}
	for _, id := range []string{"DecoratorController/formspec-wake", "ClusterRole/formspec-metacontroller-wake", "ClusterRoleBinding/formspec-metacontroller-wake"} {
		if byID[id] == nil {
			t.Fatalf("%s not rendered", id)
		}
	}
	dc := byID["DecoratorController/formspec-wake"]
	want := []any{map[string]any{"apiVersion": "http.keda.sh/v1beta1", "resource": "interceptorroutes", "updateStrategy": map[string]any{"method": "InPlace"}}}
	if diff := cmp.Diff(want, get(dc, "spec.attachments")); diff != "" {
		t.Errorf("attachments: -want, +got:\n%s", diff)
	}
	for hook, path := range map[string]string{"sync": "/v1/wake/sync", "customize": "/v1/wake/customize"} {
		if got, want := webhookURL(get(dc, "spec.hooks."+hook)), "https://formspec-hooks.formspec-system:443"+path; got != want {
			t.Errorf("%s hook calls %s, want %s", hook, got, want)
		}
	}
	if diff := cmp.Diff(get(byID["CompositeController/formspec-workspace"], "spec.endpointConfigs"), get(dc, "spec.endpointConfigs")); diff != "" {
		t.Errorf("endpointConfigs differ from the workspace controller's: -workspace, +wake:\n%s", diff)
	}
	rules := get(byID["ClusterRole/formspec-metacontroller-wake"], "rules")
	if diff := cmp.Diff([]any{map[string]any{"apiGroups": []any{"http.keda.sh"}, "resources": []any{"interceptorroutes"},
		"verbs": []any{"get", "list", "watch", "create", "update", "patch", "delete"}}}, rules); diff != "" {
		t.Errorf("rules: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]any{map[string]any{"kind": "ServiceAccount", "name": "metacontroller", "namespace": "metacontroller"}},
		get(byID["ClusterRoleBinding/formspec-metacontroller-wake"], "subjects")); diff != "" {
		t.Errorf("subjects: -want, +got:\n%s", diff)
	}
	var args []any
	for _, c := range get(byID["Deployment/formspec-system/formspec-hooks"], "spec.template.spec.containers").([]any) {
		if get(c, "name") == "reporter" {
			args, _ = get(c, "args").([]any)
		}
	}
	for _, want := range []string{"--interceptor-admin-url=http://interceptor-admin.keda:9090", "--interceptor-poll-interval=100ms"} {
		if !slices.Contains(args, any(want)) {
			t.Errorf("reporter args %v lack %s", args, want)
		}
	}
}

// TestNeedsReporter: what only the reporter does cannot be asked for
// without it, so the chart refuses the combination: nothing would wake a
// workspace on request, and no claims summary would be written, so no
// workspace would get its credentials.
func TestNeedsReporter(t *testing.T) {
	chrt, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for values, want := range map[string]string{
		"wakeOnRequest: {enabled: true}":     "wakeOnRequest.enabled needs reporter.enabled",
		"claims: {workspaceClaims: summary}": "claims.workspaceClaims=summary needs reporter.enabled",
	} {
		vals, err := chartutil.ReadValues([]byte(required + "reporter: {enabled: false}\n" + values))
		if err != nil {
			t.Fatal(err)
		}
		if err := renderErr(t, chrt, vals); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("render with %s: got %v, want an error containing %q", values, err, want)
		}
	}
}
