// Package handoff tests the seam between the hook server and its reporter
// sidecar across the process boundary, as in a pod: the formspec-hooks
// binary, built once for the package, hands what its hooks observe to a
// real reporter over localhost, and the reporter turns it into Events,
// Workspace annotations and reports to the reference Cluster Control.
// Kubernetes is a fake client here; test/e2e runs the same path under a
// real Metacontroller and API server.
package handoff

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

const fixturesDir = "../../fixtures"

// hooksBin is the formspec-hooks binary TestMain builds.
var hooksBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "formspec-handoff-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hooksBin = filepath.Join(dir, "formspec-hooks")
	if out, err := exec.Command("go", "build", "-o", hooksBin, "../../cmd/formspec-hooks").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/formspec-hooks: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// hooks is a running formspec-hooks serve.
type hooks struct{ url string }

// startHooks runs rep and serves its localhost API, then starts the hook
// server with the flags the golden fixtures were made with (Makefile
// RUN_FLAGS), handing its observations to rep. Everything stops with ctx
// and the test.
func startHooks(ctx context.Context, t *testing.T, rep *reporter.Reporter) *hooks {
	t.Helper()
	go func() { _ = rep.Run(ctx) }()
	sidecar := httptest.NewServer(rep.LocalHandler())
	t.Cleanup(sidecar.Close)
	listen, metrics := freeAddr(t), freeAddr(t)
	cmd := exec.Command(hooksBin, "serve", "--listen", listen, "--metrics-listen", metrics,
		"--resource-image", "formahub/formspec-resource", "--default-version", "latest",
		"--cluster-control-url", "http://formspec-ctl.formspec-system:7070",
		"--reporter-url", sidecar.URL, "--shutdown-delay", "0s")
	var logs testsync.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("formspec-hooks log:\n%s", logs.String())
		}
	})
	testsync.WaitFor(t, "formspec-hooks to be ready", func() bool {
		resp, err := http.Get("http://" + metrics + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return &hooks{url: "http://" + listen}
}

// post posts a hook request and returns the answer, which must be a 200.
func (h *hooks) post(t *testing.T, path string, body []byte) []byte {
	t.Helper()
	resp, err := http.Post(h.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, answer)
	}
	return answer
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestRestartDirectiveRollsPods follows a restart_required directive from
// Cluster Control through the real reporter, onto the Workspace as its
// formspec.dev/artifact-binary-hash annotation, and through the real hook
// server: the workspace's pod template takes the new hash, and once the
// pods run it the next status reports the directive consumed. The hook
// reads only its request; the annotation is all it needs.
func TestRestartDirectiveRollsPods(t *testing.T) {
	hash := "sha256:" + strings.Repeat("9c41be0d", 8)
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
	h := startHooks(ctx, t, rep)
	// The reporter writes directives only onto Workspaces the hook server
	// has synced: Metacontroller syncs this one first.
	h.post(t, "/v1/workspace/sync", body)
	// Metacontroller sees the Workspace change and syncs with it.
	testsync.WaitFor(t, "the reporter to write the directive onto the Workspace", func() bool {
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
	desired := templateHash(t, h.post(t, "/v1/workspace/sync", annotated))
	if desired != hash {
		t.Fatalf("pod template artifact hash: got %q, want the directive's %q", desired, hash)
	}

	// Metacontroller has applied the new template and the Deployment
	// controller is rolling it out: generation 2, one pod of the new
	// template beside the old one. No pod is known to run the hash yet,
	// so the status must not say it, and the report carrying this state
	// must not consume the directive.
	dep := req["children"].(map[string]any)["Deployment.apps/v1"].(map[string]any)["team-a/acme"].(map[string]any)
	dep["metadata"].(map[string]any)["generation"] = 2
	tmplMeta := dep["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	tmplMeta["annotations"].(map[string]any)["formspec.dev/artifact-binary-hash"] = hash
	dep["status"] = map[string]any{"observedGeneration": 2, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
	rolling, _ := json.Marshal(req)
	if got := statusHash(t, h.post(t, "/v1/workspace/sync", rolling)); got == hash {
		t.Fatalf("status.artifactHash while one of two pods runs the new template: got the directive's %q", got)
	}
	testsync.WaitFor(t, "Cluster Control to hear of the rollout in progress", func() bool {
		st := cc.Workspaces()["team-a/acme"].Status
		return st != nil && st.Replicas == 2
	})
	if got := cc.Consumed(); len(got) > 0 {
		t.Fatalf("the directive was reported consumed while the rollout was in progress: %v", got)
	}

	// The rollout has completed: the one pod left runs the new template.
	dep["status"] = map[string]any{"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}
	rolled, _ := json.Marshal(req)
	if got := statusHash(t, h.post(t, "/v1/workspace/sync", rolled)); got != hash {
		t.Fatalf("status.artifactHash after the rollout: got %q, want %q", got, hash)
	}

	testsync.WaitFor(t, "Cluster Control to hear the directive was consumed", func() bool { return len(cc.Consumed()) > 0 })
	want := []clustercontrol.Consumption{{Namespace: "team-a", Name: "acme", Action: "restart_required", ArtifactHash: hash}}
	if diff := cmp.Diff(want, cc.Consumed()); diff != "" {
		t.Errorf("consumed: -want, +got:\n%s", diff)
	}
}

// TestClaimDecisionEvents posts real resourceclaim requests, whose related
// Secrets carry credentials, through the hook server, the hand-off and the
// reporter into a fake API: the decisions arrive as Events on the claim,
// and no Event carries a credential value, the credentials hash or any
// signature.
func TestClaimDecisionEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewClientset()
	rep, err := reporter.New(reporter.Config{
		ClusterControlURL: "http://127.0.0.1:1",
		Reporter:          "reporter-0",
		Kube:              &reporter.KubeClients{Events: kube.EventsV1()},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := startHooks(ctx, t, rep)

	// Every string that must not reach an Event: the Secrets' values, the
	// claims' signatures and the credentials hashes the hook computes.
	var secrets []string
	for _, c := range []string{"denied-stranger-key", "granted-v2"} {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "resourceclaim", "sync", c, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		// Created and decided now, so a reporter seeing the claim for the
		// first time announces it.
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		obj := req["object"].(map[string]any)
		delete(obj, "status")
		obj["metadata"].(map[string]any)["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		secrets = append(secrets, obj["spec"].(map[string]any)["signature"].(string))
		for _, byName := range req["related"].(map[string]any) {
			for _, rel := range byName.(map[string]any) {
				data, _ := rel.(map[string]any)["data"].(map[string]any)
				for _, v := range data {
					raw, err := base64.StdEncoding.DecodeString(v.(string))
					if err != nil {
						t.Fatal(err)
					}
					secrets = append(secrets, v.(string), string(raw))
				}
			}
		}
		body, _ = json.Marshal(req)
		answer := h.post(t, "/v1/resourceclaim/sync", body)
		var resp struct {
			Status struct {
				CredentialsHash string `json:"credentialsHash"`
			} `json:"status"`
		}
		if err := json.Unmarshal(answer, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Status.CredentialsHash != "" {
			secrets = append(secrets, resp.Status.CredentialsHash, strings.TrimPrefix(resp.Status.CredentialsHash, "sha256:"))
		}
	}

	var reasons []string
	testsync.WaitFor(t, "an Event for each decision", func() bool {
		l, err := kube.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reasons = nil
		for _, ev := range l.Items {
			reasons = append(reasons, ev.Regarding.Kind+" "+ev.Type+" "+ev.Reason)
			raw, _ := json.Marshal(ev)
			for _, s := range secrets {
				if len(s) >= 8 && strings.Contains(string(raw), s) {
					t.Fatalf("Event %s carries secret material %q: %s", ev.Name, s, raw)
				}
			}
		}
		return len(reasons) == 2
	})
	want := map[string]bool{"ResourceClaim Warning ClaimDenied": true, "ResourceClaim Normal ClaimGranted": true}
	for _, r := range reasons {
		if !want[r] {
			t.Errorf("unexpected Event %q (all: %v)", r, reasons)
		}
	}
}

// statusHash returns status.artifactHash of a sync hook's answer.
func statusHash(t *testing.T, body []byte) string {
	t.Helper()
	var resp struct {
		Status struct {
			ArtifactHash string `json:"artifactHash"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return resp.Status.ArtifactHash
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
