package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/hooks/reporter/handoff"
	"github.com/formspec/formspec-hooks/hooks/server"
)

// TestRestartAnnotationRollsPods follows a restart through the real hook
// server: the reporter writes Cluster Control's restart_required hash onto
// the Workspace as formspec.dev/artifact-binary-hash; the sync stamps it on
// the pod template; once the pods run it the status reports it; and when
// the annotation is removed the pods keep the hash instead of rolling back.
func TestRestartAnnotationRollsPods(t *testing.T) {
	const hash = "sha256:9c41be"
	h := fixtureHandler(t)
	req := fixtureRequest(t, "steady-ready")
	annotations := map[string]any{"formspec.dev/artifact-binary-hash": hash}
	req["parent"].(map[string]any)["metadata"].(map[string]any)["annotations"] = annotations

	if got := templateHash(t, syncBody(t, h, req)); got != hash {
		t.Fatalf("pod template artifact hash: got %q, want the annotation's %q", got, hash)
	}

	// The Deployment has rolled: the observed template carries the hash.
	dep := req["children"].(map[string]any)["Deployment.apps/v1"].(map[string]any)["team-a/acme"].(map[string]any)
	tmplMeta := dep["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	tmplMeta["annotations"].(map[string]any)["formspec.dev/artifact-binary-hash"] = hash
	var resp struct {
		Status struct {
			ArtifactHash string `json:"artifactHash"`
		} `json:"status"`
	}
	if err := json.Unmarshal(syncBody(t, h, req), &resp); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hash, resp.Status.ArtifactHash); diff != "" {
		t.Fatalf("status.artifactHash after the rollout: -want, +got:\n%s", diff)
	}

	// The annotation is gone; the pods keep the hash they run.
	delete(annotations, "formspec.dev/artifact-binary-hash")
	if got := templateHash(t, syncBody(t, h, req)); got != hash {
		t.Errorf("after the annotation is removed the pod template must keep %q, got %q", hash, got)
	}
}

// TestSyncMakesNoNetworkCall serves Workspace syncs with the reporter
// hand-off pointed at a listener that fails the test on any connection.
// The hand-off's sender is not started, so nothing may connect: a sync
// reads only its request, and handing its observation over only queues it.
func TestSyncMakesNoNetworkCall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var connects atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			connects.Add(1)
			conn.Close()
		}
	}()
	defer ln.Close()
	client, err := handoff.New("http://"+ln.Addr().String(), handoff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := fixtureConfig()
	cfg.reporterURL, cfg.reports = "http://"+ln.Addr().String(), client
	h, err := server.NewRouter(hookRoutes(cfg), server.RouterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"steady-ready", "artifact-hash-change", "credentials-mixed", "cluster-class-missing"} {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "workspace", "sync", name, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		if rec := post(h, "/v1/workspace/sync", body, nil); rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", name, rec.Code, rec.Body)
		}
	}
	// A connection that was dialled is accepted within this grace period;
	// it is a wait for a late arrival, not a timing assertion.
	time.Sleep(50 * time.Millisecond)
	if n := connects.Load(); n != 0 {
		t.Errorf("the sync hooks opened %d connections; want none", n)
	}
}

func fixtureRequest(t *testing.T, name string) map[string]any {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(fixturesDir, "workspace", "sync", name, "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	return req
}

func syncBody(t *testing.T, h http.Handler, req map[string]any) []byte {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	rec := post(h, "/v1/workspace/sync", body, nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

func templateHash(t *testing.T, body []byte) string {
	t.Helper()
	var resp struct {
		Children []struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Metadata struct {
						Annotations map[string]string `json:"annotations"`
					} `json:"metadata"`
				} `json:"template"`
			} `json:"spec"`
		} `json:"children"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, c := range resp.Children {
		if c.Kind == "Deployment" {
			return c.Spec.Template.Metadata.Annotations["formspec.dev/artifact-binary-hash"]
		}
	}
	t.Fatalf("no Deployment in %s", body)
	return ""
}

// waitUntil polls cond for a bounded time; it is a wait, not a timing
// assertion.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWorkspaceObjectLimit shows that the Workspace hooks' request type is
// held to --max-objects like every other: a sync carrying more children and
// related objects than the limit is refused before the hook runs.
func TestWorkspaceObjectLimit(t *testing.T) {
	cfg := fixtureConfig()
	cfg.handlerOptions = append(cfg.handlerOptions, server.WithMaxObjects(2))
	h, err := server.NewRouter(hookRoutes(cfg), server.RouterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/workspace/sync", "/v1/workspace/finalize"} {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "workspace", "sync", "steady-ready", "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		if rec := post(h, path, body, nil); rec.Code != http.StatusRequestEntityTooLarge {
			t.Errorf("%s with 5 objects over a limit of 2: status %d (%q), want 413", path, rec.Code, rec.Body)
		}
	}
}
