package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// TestAnswerLike checks that --answer-like answers with the hook server's
// objects for the parent at hand: the fixture's children and status, with
// only its workspace's name, namespace and generation changed.
func TestAnswerLike(t *testing.T) {
	fixture := filepath.Join("..", "..", "..", "fixtures", "workspace", "sync", "first-sync", "response.json")
	like, err := readAnswer(fixture)
	if err != nil {
		t.Fatal(err)
	}
	cl := classes{hpa: "elastic", like: &like}
	body := `{"parent":{"metadata":{"name":"ws-00042","namespace":"scale-04","generation":3},"spec":{"clusterClass":"elastic"}}}`
	out, err := cl.workspaceSync([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{`"acme"`, `"acme-config"`, `"team-a"`} {
		if strings.Contains(string(out), old) {
			t.Errorf("the answer still names the fixture's workspace (%s): %s", old, out)
		}
	}

	type response struct {
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
			Conditions         []struct {
				ObservedGeneration int64 `json:"observedGeneration"`
			} `json:"conditions"`
		} `json:"status"`
		Children []child `json:"children"`
	}
	var got, want response
	decodeAnswers(t, out, fixture, &got, &want)
	if got.Status.ObservedGeneration != 3 || len(got.Status.Conditions) != len(want.Status.Conditions) {
		t.Errorf("status observes generation %d with %d conditions, want 3 with %d", got.Status.ObservedGeneration, len(got.Status.Conditions), len(want.Status.Conditions))
	}
	for i, c := range got.Status.Conditions {
		if c.ObservedGeneration != 3 {
			t.Errorf("condition %d observes generation %d, want 3", i, c.ObservedGeneration)
		}
	}
	// The fixture's children, then the class's extra one.
	if len(got.Children) != len(want.Children)+1 || got.Children[len(got.Children)-1].Kind != "HorizontalPodAutoscaler" {
		t.Fatalf("children %v, want the fixture's %d and a HorizontalPodAutoscaler", kinds(got.Children), len(want.Children))
	}
	for i, w := range want.Children {
		g := got.Children[i]
		if g.Kind != w.Kind || g.Metadata.Namespace != "scale-04" || !strings.HasPrefix(g.Metadata.Name, "ws-00042") {
			t.Errorf("child %d is %s %s/%s, want the fixture's %s for ws-00042 in scale-04", i, g.Kind, g.Metadata.Namespace, g.Metadata.Name, w.Kind)
		}
		// The spec is the fixture's, names aside: the same fields to apply.
		wantSpec := strings.NewReplacer(`"acme"`, `"ws-00042"`, `"acme-config"`, `"ws-00042-config"`, `"team-a"`, `"scale-04"`).Replace(string(w.Spec))
		if diff := cmp.Diff(decodeJSON(t, wantSpec), decodeJSON(t, string(g.Spec))); diff != "" {
			t.Errorf("%s spec differs from the fixture's (-fixture +answer):\n%s", g.Kind, diff)
		}
	}
}

// child is what TestAnswerLike reads of a child.
type child struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
}

func kinds(objs []child) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.Kind)
	}
	return out
}

// decodeAnswers decodes the trivial hook's answer out into got and the
// hook server's answer in fixture into want.
func decodeAnswers(t *testing.T, out []byte, fixture string, got, want any) {
	t.Helper()
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatalf("the answer is not JSON: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, want); err != nil {
		t.Fatal(err)
	}
}

// decodeJSON decodes s, or is nil for an empty spec.
func decodeJSON(t *testing.T, s string) any {
	t.Helper()
	if s == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return v
}

// TestAnswerLikeRefuses checks that an answer the trivial hook cannot make
// a template of is refused at start, with the file named.
func TestAnswerLikeRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"not-json":      `{"status":`,
		"no-generation": `{"status":{"phase":"Ready"},"children":[{"kind":"Deployment","metadata":{"name":"a","namespace":"b"}}]}`,
		"no-deployment": `{"status":{"observedGeneration":1},"children":[{"kind":"Service","metadata":{"name":"a","namespace":"b"}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := readAnswer(path); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("readAnswer(%s) = %v, want an error naming the file", name, err)
			}
		})
	}
	if _, err := readAnswer(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("a missing file was accepted")
	}
}

// TestClaimAnswerLike checks that --claim-answer-like grants the claim at
// hand as the fixture grants its own: the fixture's status and credentials
// Secret, with only the claim's name, namespace and generation changed.
func TestClaimAnswerLike(t *testing.T) {
	fixture := filepath.Join("..", "..", "..", "fixtures", "resourceclaim", "sync", "granted-v2", "response.json")
	like, err := readClaimAnswer(fixture)
	if err != nil {
		t.Fatal(err)
	}
	cl := classes{claim: &like}
	// A DecoratorController's sync request names the claim "object".
	body := `{"object":{"metadata":{"name":"ws-00042-db","namespace":"scale-04","generation":2},"spec":{"datastore":{"name":"store"}}}}`
	out, err := cl.claimSync([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{`"orders"`, `"orders-credentials"`, `"team-a"`} {
		if strings.Contains(string(out), old) {
			t.Errorf("the answer still names the fixture's claim (%s): %s", old, out)
		}
	}
	type secret struct {
		object
		Type string            `json:"type"`
		Data map[string]string `json:"data"`
	}
	type response struct {
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
			Conditions         []struct {
				Type               string `json:"type"`
				Status             string `json:"status"`
				ObservedGeneration int64  `json:"observedGeneration"`
			} `json:"conditions"`
			Binding struct {
				Name string `json:"name"`
			} `json:"binding"`
			CredentialsHash string `json:"credentialsHash"`
		} `json:"status"`
		Attachments []secret `json:"attachments"`
	}
	var got, want response
	decodeAnswers(t, out, fixture, &got, &want)
	if got.Status.ObservedGeneration != 2 || got.Status.Binding.Name != "ws-00042-db-credentials" || got.Status.CredentialsHash != want.Status.CredentialsHash {
		t.Errorf("status observes generation %d, binds %q with hash %q; want 2, ws-00042-db-credentials, the fixture's %q",
			got.Status.ObservedGeneration, got.Status.Binding.Name, got.Status.CredentialsHash, want.Status.CredentialsHash)
	}
	if len(got.Status.Conditions) != len(want.Status.Conditions) {
		t.Fatalf("%d conditions, want the fixture's %d", len(got.Status.Conditions), len(want.Status.Conditions))
	}
	for i, c := range got.Status.Conditions {
		w := want.Status.Conditions[i]
		if c.Type != w.Type || c.Status != w.Status || c.ObservedGeneration != 2 {
			t.Errorf("condition %d is %s=%s at generation %d, want the fixture's %s=%s at 2", i, c.Type, c.Status, c.ObservedGeneration, w.Type, w.Status)
		}
	}
	if len(got.Attachments) != 1 || len(want.Attachments) != 1 {
		t.Fatalf("%d attachments (the fixture has %d), want the one credentials Secret", len(got.Attachments), len(want.Attachments))
	}
	g, w := got.Attachments[0], want.Attachments[0]
	if g.Kind != "Secret" || g.Metadata.Name != "ws-00042-db-credentials" || g.Metadata.Namespace != "scale-04" ||
		g.Metadata.Labels["formspec.dev/resourceclaim"] != "ws-00042-db" {
		t.Errorf("attachment is %s %s/%s labelled %v, want Secret scale-04/ws-00042-db-credentials for claim ws-00042-db",
			g.Kind, g.Metadata.Namespace, g.Metadata.Name, g.Metadata.Labels)
	}
	if diff := cmp.Diff(w.Data, g.Data); diff != "" || g.Type != w.Type {
		t.Errorf("the Secret's type %q and data differ from the fixture's (%q; -fixture +answer):\n%s", g.Type, w.Type, diff)
	}

	// The fixture's own request is answered for its own claim.
	req, err := os.ReadFile(filepath.Join(filepath.Dir(fixture), "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	own, err := cl.claimSync(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(own), `"name":"orders-credentials","namespace":"team-a"`) {
		t.Errorf("the fixture's request is not answered with its claim's Secret: %s", own)
	}

	// The hook's path serves that answer; without a grant to copy, it
	// answers nothing.
	if got := post(t, cl, "/v1/resourceclaim/sync", body); got != string(out) {
		t.Errorf("/v1/resourceclaim/sync answered %s, want %s", got, out)
	}
	if got := post(t, classes{}, "/v1/resourceclaim/sync", body); got != `{}` {
		t.Errorf("without --claim-answer-like: %s; want {}", got)
	}
}

// TestClaimCustomize checks that a trivial hook granting claims asks for
// the claim's Datastore and its labelled Secrets, in the Datastore's
// namespace, as the hooks' customize does (the same-namespace and
// cross-namespace fixtures), and for nothing when it grants none.
func TestClaimCustomize(t *testing.T) {
	cl := classes{claim: &answer{}}
	var body string
	for _, name := range []string{"same-namespace", "cross-namespace"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "..", "..", "fixtures", "resourceclaim", "customize", name)
			req, err := os.ReadFile(filepath.Join(dir, "request.json"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, "response.json"))
			if err != nil {
				t.Fatal(err)
			}
			body = string(req)
			got := post(t, cl, "/v1/resourceclaim/customize", body)
			if diff := cmp.Diff(decodeJSON(t, string(want)), decodeJSON(t, got)); diff != "" {
				t.Errorf("customize answer differs from the hooks' (-hooks +trivial):\n%s", diff)
			}
		})
	}
	if got := post(t, classes{}, "/v1/resourceclaim/customize", body); got != `{}` {
		t.Errorf("without --claim-answer-like: %s; want {}", got)
	}
}

// post posts body to path of a trivial hook answering as cl does, and
// returns its answer, which must be a 200.
func post(t *testing.T, cl classes, path, body string) string {
	t.Helper()
	m := meters{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests"}, []string{"hook", "code"}),
		size:     prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "size"}, []string{"hook"}),
	}
	rec := httptest.NewRecorder()
	hooks(cl, m).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestClaimAnswerLikeRefuses checks that a claim answer the trivial hook
// cannot make a template of is refused at start, with the file named.
func TestClaimAnswerLikeRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"not-json":      `{"status":`,
		"no-generation": `{"status":{},"attachments":[{"kind":"Secret","metadata":{"name":"a-credentials","namespace":"b","labels":{"formspec.dev/resourceclaim":"a"}}}]}`,
		"no-secret":     `{"status":{"observedGeneration":1},"attachments":[]}`,
		"other-name":    `{"status":{"observedGeneration":1},"attachments":[{"kind":"Secret","metadata":{"name":"x","namespace":"b","labels":{"formspec.dev/resourceclaim":"a"}}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := readClaimAnswer(path); err == nil || !strings.Contains(err.Error(), path) {
				t.Errorf("readClaimAnswer(%s) = %v, want an error naming the file", name, err)
			}
		})
	}
}
