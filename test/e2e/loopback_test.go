package e2e

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestLoopbackWebhooks checks the one change the end-to-end tests make to
// the controller definitions: each webhook's address, and nothing else.
// It needs no binaries.
func TestLoopbackWebhooks(t *testing.T) {
	const base = "http://127.0.0.1:4242"
	cases := map[string]struct {
		reason  string
		in      string
		want    string
		wantErr bool
	}{
		"ServiceAndPath": {
			reason: "service and path give way to a loopback url; timeout and etag stay",
			in: `
kind: CompositeController
metadata: {name: ws}
spec:
  resyncPeriodSeconds: 60
  hooks:
    sync:
      version: v2
      webhook:
        service: {name: formspec-hooks, namespace: formspec-system, port: 80}
        path: /v1/workspace/sync
        timeout: 10s
        etag: {enabled: true, cacheTimeoutSeconds: 600, cacheCleanupSeconds: 300}
`,
			want: `
kind: CompositeController
metadata: {name: ws}
spec:
  resyncPeriodSeconds: 60
  hooks:
    sync:
      version: v2
      webhook:
        url: http://127.0.0.1:4242/v1/workspace/sync
        timeout: 10s
        etag: {enabled: true, cacheTimeoutSeconds: 600, cacheCleanupSeconds: 300}
`,
		},
		"URL": {
			reason: "a url keeps its path on the loopback host",
			in: `
kind: DecoratorController
metadata: {name: nodes}
spec:
  hooks:
    sync:
      version: v2
      webhook: {url: "http://formspec-hooks.formspec-system/v1/nodes/sync", timeout: 10s}
    customize:
      webhook: {service: {name: x, namespace: y}, path: /v1/nodes/customize}
`,
			want: `
kind: DecoratorController
metadata: {name: nodes}
spec:
  hooks:
    sync:
      version: v2
      webhook: {url: "http://127.0.0.1:4242/v1/nodes/sync", timeout: 10s}
    customize:
      webhook: {url: "http://127.0.0.1:4242/v1/nodes/customize"}
`,
		},
		"NoHooks": {
			reason:  "a definition without hooks is not a controller definition",
			in:      `{kind: CompositeController, metadata: {name: x}, spec: {}}`,
			wantErr: true,
		},
		"NoPath": {
			reason:  "a webhook that names no path cannot be pointed anywhere",
			in:      `{kind: CompositeController, metadata: {name: x}, spec: {hooks: {sync: {webhook: {service: {name: a, namespace: b}}}}}}`,
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj := decodeOne(t, tc.in)
			err := loopbackWebhooks(obj, base)
			if diff := cmp.Diff(tc.wantErr, err != nil); diff != "" {
				t.Fatalf("%s\nerror %v: -want, +got:\n%s", tc.reason, err, diff)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff(decodeOne(t, tc.want), obj); diff != "" {
				t.Errorf("%s\nloopbackWebhooks: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func decodeOne(t *testing.T, doc string) controlplane.Object {
	t.Helper()
	objs, err := controlplane.DecodeYAML([]byte(doc))
	if err != nil || len(objs) != 1 {
		t.Fatalf("decoding %q: %d objects, %v", doc, len(objs), err)
	}
	return objs[0]
}
