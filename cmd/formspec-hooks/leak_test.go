package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/server"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// TestNoSecretLeaks runs the claim and datastore hooks through the real
// server with debug logging, granted and denied, with a broken request that
// carries the secret, and then scrapes the metrics: the endpoint Secret's
// password (plain or base64) and the grant's signature must appear in no
// log line, no error body, no status and no metric.
func TestNoSecretLeaks(t *testing.T) {
	h, logs, metrics := observedHandler(t)

	claim := claimstest.SignClaim(claimstest.Claim(), claimstest.Owner)
	denied := claimstest.SignClaim(claimstest.Claim(), claimstest.Stranger)
	related := func() metacontroller.ObjectMap {
		return metacontroller.ObjectMap{
			"Datastore.formspec.dev/v1alpha1": {"data/orders-db": mustJSON(t, claimstest.Datastore())},
			"Secret.v1":                       {"data/orders-db-endpoint": mustJSON(t, claimstest.Secret())},
		}
	}
	decorator := func(obj any, rel metacontroller.ObjectMap) []byte {
		return mustJSON(t, metacontroller.DecoratorRequest{Object: mustJSON(t, obj), Attachments: metacontroller.ObjectMap{}, Related: rel})
	}
	// A MongoDB URI whose password holds an unescaped '/': parsed as a URL,
	// "orders_app:<digits>" would pass for the host and land in
	// status.endpoint.
	mongo := metacontroller.ObjectMap{
		"Datastore.formspec.dev/v1alpha1": {"data/orders-db": mustJSON(t, claimstest.MongoDatastore())},
		"Secret.v1":                       {"data/orders-db-endpoint": mustJSON(t, claimstest.MongoSecret())},
	}
	broken := related()
	broken["Secret.v1"]["data/orders-db-endpoint"] = json.RawMessage(`{"metadata":{"name":"orders-db-endpoint","namespace":"data","labels":{"formspec.dev/datastore":"orders-db"}},"data":{"password":"` + claimstest.Password + `!"}}`)

	secrets := []string{
		claimstest.Password,
		claimstest.AdminPassword,
		base64.StdEncoding.EncodeToString([]byte(claimstest.Password)),
		claim.Spec.Signature,
		denied.Spec.Signature,
		claimstest.SlashPassword,
		claimstest.SlashPasswordPrefix,
		base64.StdEncoding.EncodeToString([]byte(claimstest.SlashPassword)),
	}
	requests := map[string]struct {
		path string
		body []byte
	}{
		"Granted":         {"/v1/resourceclaim/sync", decorator(claim, related())},
		"Denied":          {"/v1/resourceclaim/sync", decorator(denied, related())},
		"BrokenSecret":    {"/v1/resourceclaim/sync", decorator(claim, broken)},
		"Datastore":       {"/v1/datastore/sync", decorator(claimstest.Datastore(), related())},
		"DatastoreBroken": {"/v1/datastore/sync", decorator(claimstest.Datastore(), broken)},
		"DatastoreMongo":  {"/v1/datastore/sync", decorator(claimstest.MongoDatastore(), mongo)},
		"GrantedMongo":    {"/v1/resourceclaim/sync", decorator(claim, mongo)},
		"InvalidJSON":     {"/v1/resourceclaim/sync", []byte(`{"object": {"password": "` + claimstest.Password + `"`)},
	}
	var answers bytes.Buffer
	for name, r := range requests {
		rec := post(h, r.path, r.body, nil)
		if (name == "Granted" || name == "GrantedMongo" || name == "DatastoreMongo") && rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d, body %q", name, rec.Code, rec.Body.String())
		}
		if rec.Code == http.StatusOK {
			// Only the status is the hook's own words; the attachment is
			// the credentials Secret, which must hold the password.
			var resp metacontroller.DecoratorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			answers.Write(mustJSON(t, resp.Status))
		} else {
			answers.Write(rec.Body.Bytes())
		}
	}
	scrape := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))

	if !strings.Contains(scrape.Body.String(), `reason="InvalidSignature"`) {
		t.Errorf("the denial must be counted by reason in the metrics")
	}
	for _, where := range []struct{ name, text string }{
		{"logs", logs.String()},
		{"statuses and error bodies", answers.String()},
		{"metrics", scrape.Body.String()},
	} {
		for _, s := range secrets {
			if strings.Contains(where.text, s) {
				t.Errorf("%s contain secret material %q", where.name, s)
			}
		}
	}
	if logs.Len() == 0 {
		t.Errorf("debug logging produced nothing: the test would prove nothing")
	}
}

// observedHandler is the fixture server with debug logs written to a
// buffer and its own metrics, for tests that search both.
func observedHandler(t *testing.T) (http.Handler, *bytes.Buffer, *server.Metrics) {
	t.Helper()
	logs := &bytes.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	metrics := server.NewMetrics()
	cfg := fixtureConfig()
	cfg.logger, cfg.decisions = logger, metrics
	return hookHandler(t, cfg, server.Config{Logger: logger, Metrics: metrics}), logs, metrics
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
