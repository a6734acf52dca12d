package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/formspec/formspec-hooks/hooks/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/handoff"
	"github.com/formspec/formspec-hooks/hooks/reporter"
	"github.com/formspec/formspec-hooks/hooks/server"
)

// TestRestartDirectiveRollsPods follows a restart_required directive from
// Cluster Control through the real reporter, onto the Workspace as its
// formspec.dev/artifact-binary-hash annotation, and through the real hook
// server: the workspace's pod template takes the new hash, and once the
// pods run it the next status reports the directive consumed. The hook
// reads only its request; the annotation is all it needs.
func TestRestartDirectiveRollsPods(t *testing.T) {
	const hash = "sha256:9c41be"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cc := clustercontrol.New(clustercontrol.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cc.Serve(ctx, ln) }()
	cc.SetDirective("team-a", "acme", hash)

	body, err := os.ReadFile(filepath.Join(fixturesDir, "workspace", "sync", "steady-ready", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	parent := &unstructured.Unstructured{Object: req["parent"].(map[string]any)}
	workspaces := schema.GroupVersionResource{Group: "formspec.dev", Version: "v1alpha1", Resource: "workspaces"}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{workspaces: "WorkspaceList"}, parent.DeepCopy())

	rep, err := reporter.New(reporter.Config{
		ClusterControlURL:    "http://" + ln.Addr().String(),
		Reporter:             "reporter-0",
		Kube:                 &reporter.KubeClients{Dynamic: dyn},
		NodeHealthInterval:   time.Hour,
		DeployStatusInterval: 10 * time.Millisecond,
		RequestTimeout:       5 * time.Second,
		BackoffBase:          time.Millisecond,
		BackoffMax:           10 * time.Millisecond,
		NodeStaleIntervals:   4,
		PodStaleAfter:        time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := routerWithReporter(ctx, t, rep)
	// Metacontroller sees the Workspace change and syncs with it.
	waitUntil(t, "the reporter to write the directive onto the Workspace", func() bool {
		ws, err := dyn.Resource(workspaces).Namespace("team-a").Get(ctx, "acme", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ws.GetAnnotations()["formspec.dev/artifact-binary-hash"] != hash {
			return false
		}
		req["parent"] = ws.Object
		return true
	})
	annotated, _ := json.Marshal(req)
	desired := templateHash(t, post(h, "/v1/workspace/sync", annotated, nil).Body.Bytes())
	if desired != hash {
		t.Fatalf("pod template artifact hash: got %q, want the directive's %q", desired, hash)
	}

	// The Deployment has rolled: the observed template carries the hash.
	dep := req["children"].(map[string]any)["Deployment.apps/v1"].(map[string]any)["team-a/acme"].(map[string]any)
	tmplMeta := dep["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	tmplMeta["annotations"].(map[string]any)["formspec.dev/artifact-binary-hash"] = hash
	rolled, _ := json.Marshal(req)
	rec := post(h, "/v1/workspace/sync", rolled, nil)
	var resp struct {
		Status struct {
			ArtifactHash string `json:"artifactHash"`
		} `json:"status"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Status.ArtifactHash != hash {
		t.Fatalf("status.artifactHash after the rollout: got %q, want %q", resp.Status.ArtifactHash, hash)
	}

	waitUntil(t, "Cluster Control to hear the directive was consumed", func() bool { return len(cc.Consumed()) > 0 })
	want := []clustercontrol.Consumption{{Namespace: "team-a", Name: "acme", Action: "restart_required", ArtifactHash: hash}}
	if diff := cmp.Diff(want, cc.Consumed()); diff != "" {
		t.Errorf("consumed: -want, +got:\n%s", diff)
	}
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

// routerWithReporter runs rep and serves its localhost API, and returns
// the hook routes with fixtureConfig whose observations reach rep through
// a real hand-off client, as in a pod. Everything stops with ctx and the
// test.
func routerWithReporter(ctx context.Context, t *testing.T, rep *reporter.Reporter) http.Handler {
	t.Helper()
	go func() { _ = rep.Run(ctx) }()
	sidecar := httptest.NewServer(rep.LocalHandler())
	t.Cleanup(sidecar.Close)
	client, err := handoff.New(sidecar.URL, handoff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = client.Run(ctx) }()
	cfg := fixtureConfig()
	cfg.reports = client
	return hookHandler(t, cfg, server.Config{})
}
