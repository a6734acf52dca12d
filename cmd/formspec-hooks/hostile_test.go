package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/server"
)

// fixtureRequest reads a fixture's request as JSON values, to be grown
// into a hostile one.
func fixtureRequest(t testing.TB, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(fixturesDir, path, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	return req
}

// copyJSON is a deep copy of a JSON value.
func copyJSON(t testing.TB, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// related returns the request's related objects of one kind.
func related(req map[string]any, key string) map[string]any {
	return req["related"].(map[string]any)[key].(map[string]any)
}

// withFillers is a fixture's request with n copies of its first related
// object of kind (in key order), each given its name and key by fill.
func withFillers(t testing.TB, fixture, kind string, n int, fill func(obj map[string]any, i int) (key string)) []byte {
	t.Helper()
	req := fixtureRequest(t, fixture)
	objs := related(req, kind)
	proto := objs[slices.Min(slices.Collect(maps.Keys(objs)))]
	for i := range n {
		c := copyJSON(t, proto)
		c["metadata"].(map[string]any)["name"] = fmt.Sprintf("filler-%d", i)
		objs[fill(c, i)] = c
	}
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// manyClaims is the credentials-mixed Workspace sync with n more
// ResourceClaims in its namespace, each padded with pad bytes of
// annotations, as a tenant can create them.
func manyClaims(t testing.TB, n, pad int) []byte {
	t.Helper()
	return withFillers(t, "workspace/sync/credentials-mixed", "ResourceClaim.formspec.dev/v1alpha1", n, func(c map[string]any, i int) string {
		c["metadata"].(map[string]any)["annotations"] = map[string]any{"note": strings.Repeat("x", pad)}
		return fmt.Sprintf("team-a/filler-%d", i)
	})
}

// manyOwnerKeys is the granted-v2 ResourceClaim sync whose Datastore lists
// n more owner keys (each a well-formed but unrelated public key).
func manyOwnerKeys(t testing.TB, n int) []byte {
	t.Helper()
	req := fixtureRequest(t, "resourceclaim/sync/granted-v2")
	for _, d := range related(req, "Datastore.formspec.dev/v1alpha1") {
		spec := d.(map[string]any)["spec"].(map[string]any)
		keys, _ := spec["ownerPublicKeys"].([]any)
		for i := range n {
			keys = append(keys, fmt.Sprintf("%064x", i+1))
		}
		spec["ownerPublicKeys"] = keys
	}
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestCountsBeforeWork sends the two requests that cost most before
// anything counted them: a Workspace sync carrying 4,000 claims of its
// namespace (7 MB) and a ResourceClaim sync whose Datastore lists 120,000
// owner keys (one signature verification each, 6 s of CPU in all). Both
// are refused with 413 naming what was counted, before the hook does the
// work the count multiplies.
func TestCountsBeforeWork(t *testing.T) {
	h := hookHandler(t, fixtureConfig(), server.Config{MaxObjects: 1 << 20})
	cases := map[string]struct {
		reason string
		path   string
		body   []byte
		want   string
	}{
		"Claims": {
			reason: "A namespace's claims all come with every Workspace sync; past the cap none is decoded.",
			path:   "/v1/workspace/sync",
			body:   manyClaims(t, 4000, 800),
			want:   fmt.Sprintf(`{"error":"request carries more than %d related ResourceClaims"}`, workspace.MaxRelatedClaims),
		},
		"OwnerKeys": {
			reason: "Owner keys are counted before the first is tried.",
			path:   "/v1/resourceclaim/sync",
			body:   manyOwnerKeys(t, 120_000),
			want:   `{"error":"request carries more than 16 owner keys in the related Datastore"}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := post(h, tc.path, tc.body, nil)
			got := fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
			if want := fmt.Sprintf("%d %s", http.StatusRequestEntityTooLarge, tc.want); got != want {
				t.Errorf("%s\nanswer: got %s, want %s", tc.reason, got, want)
			}
		})
	}
}

// TestDecodedCost serves the largest requests the limits let through, in
// the shapes that decode into the most memory, and holds what each
// allocates while it is served (an upper bound on what it holds at once,
// the body's own buffer included) under 1 + server.DecodedCost bytes per
// body byte: what the in-flight budget charges it, the buffer and then
// DecodedCost per byte. A change that makes a shape cost more fails here, and
// the budget must then grow with it.
func TestDecodedCost(t *testing.T) {
	h := hookHandler(t, fixtureConfig(), server.Config{})
	cases := map[string]struct {
		reason string
		path   string
		body   []byte
		// warm is a small request of the same shape, served first: the
		// first request of a shape in a process also pays for what is
		// built once (the codec's programs for its types, about 7 MB),
		// which is no request's cost and must not decide the case.
		warm []byte
	}{
		"WorkspaceClaims": {
			reason: "A Workspace whose namespace holds as many claims as a request may carry, padded to nearly the body limit.",
			path:   "/v1/workspace/sync",
			body:   manyClaims(t, workspace.MaxRelatedClaims-3, 6000),
			warm:   manyClaims(t, 2, 10),
		},
		"WorkspaceSmallClaims": {
			reason: "The same number of small claims: more objects per byte.",
			path:   "/v1/workspace/sync",
			body:   manyClaims(t, workspace.MaxRelatedClaims-3, 0),
			warm:   manyClaims(t, 2, 0),
		},
		"ClaimSecrets": {
			reason: "A ResourceClaim whose Datastore's namespace holds as many labelled Secrets as a request may carry.",
			path:   "/v1/resourceclaim/sync",
			body:   manySecrets(t, resourceclaim.MaxRelatedSecrets-1, 100_000),
			warm:   manySecrets(t, 2, 100),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if int64(len(tc.body)) > server.Defaults.MaxBodyBytes {
				t.Fatalf("the request is %d bytes, over the body limit: the case is wrong", len(tc.body))
			}
			if rec := post(h, tc.path, tc.warm, nil); rec.Code != http.StatusOK {
				t.Fatalf("%s\nthe warm-up request: code %d: %s", tc.reason, rec.Code, rec.Body)
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rec := post(h, tc.path, tc.body, nil)
			runtime.ReadMemStats(&after)
			if rec.Code != http.StatusOK {
				t.Fatalf("%s\ncode %d: %s", tc.reason, rec.Code, rec.Body)
			}
			alloc := after.TotalAlloc - before.TotalAlloc
			factor := float64(alloc) / float64(len(tc.body))
			t.Logf("%d-byte body: %d bytes allocated, %.1f per body byte", len(tc.body), alloc, factor)
			if factor > 1+server.DecodedCost {
				t.Errorf("%s\n%.1f bytes allocated per body byte, over the 1 + %d the budget charges", tc.reason, factor, server.DecodedCost)
			}
		})
	}
}

// manySecrets is the granted-v2 ResourceClaim sync with n more Secrets
// labelled for its Datastore, each holding size bytes of data.
func manySecrets(t testing.TB, n, size int) []byte {
	t.Helper()
	return withFillers(t, "resourceclaim/sync/granted-v2", "Secret.v1", n, func(s map[string]any, i int) string {
		s["data"] = map[string]any{"blob": strings.Repeat("QUFB", size/4)}
		return fmt.Sprintf("%s/filler-%d", s["metadata"].(map[string]any)["namespace"], i)
	})
}

// BenchmarkWorstCase prints what the costliest requests within the limits
// cost to serve, one at a time: the CPU bound of one request in
// docs/security.md comes from it.
//
//	go test ./cmd/formspec-hooks -run '^$' -bench WorstCase -benchtime 20x
func BenchmarkWorstCase(b *testing.B) {
	h := hookHandler(b, fixtureConfig(), server.Config{})
	for name, c := range map[string]struct {
		path string
		body []byte
	}{
		"WorkspaceClaims":      {"/v1/workspace/sync", manyClaims(b, workspace.MaxRelatedClaims-3, 6000)},
		"WorkspaceSmallClaims": {"/v1/workspace/sync", manyClaims(b, workspace.MaxRelatedClaims-3, 0)},
		"ClaimSecrets":         {"/v1/resourceclaim/sync", manySecrets(b, resourceclaim.MaxRelatedSecrets-1, 100_000)},
		"ClaimOwnerKeys":       {"/v1/resourceclaim/sync", manyOwnerKeys(b, 15)},
		"ClaimOwnerKeysOver":   {"/v1/resourceclaim/sync", manyOwnerKeys(b, 120_000)},
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				if rec := post(h, c.path, c.body, nil); rec.Code != http.StatusOK && rec.Code != http.StatusRequestEntityTooLarge {
					b.Fatalf("code %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
