package datastore_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/internal/hooks/datastore"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

type counter struct{ calls []string }

func (c *counter) Record(hook, decision, reason string) {
	c.calls = append(c.calls, hook+"/"+decision+"/"+reason)
}

// TestNoLeaks checks that the endpoint Secret's password reaches no log
// line and no status, whatever the decision.
func TestNoLeaks(t *testing.T) {
	missing := claimstest.Secret()
	delete(missing.Data, "host")
	uriOnly := claimstest.Secret()
	uriOnly.Data = map[string][]byte{"uri": []byte("mongodb://u:" + claimstest.Password + "@%zz")}
	cases := map[string]struct {
		reason string
		want   string
	}{
		"Validated":   {reason: "A valid Datastore.", want: "datastore/validated/Validated"},
		"MissingKeys": {reason: "Names missing keys, quotes no value.", want: "datastore/denied/MissingKeys"},
		"BrokenURI":   {reason: "A URI that does not parse is not quoted.", want: "datastore/denied/MissingKeys"},
		"SlashInPassword": {
			reason: "A MongoDB password with an unescaped '/' puts no part of itself into status.endpoint.",
			want:   "datastore/validated/Validated",
		},
	}
	secrets := map[string]*corev1.Secret{"Validated": claimstest.Secret(), "MissingKeys": missing, "BrokenURI": uriOnly, "SlashInPassword": claimstest.MongoSecret()}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			c := &counter{}
			h := datastore.New(datastore.Options{
				Clock:     func() time.Time { return claimstest.Now },
				Logger:    slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				Decisions: c,
			})
			ds := claimstest.Datastore()
			switch name {
			case "BrokenURI":
				ds.Spec.Driver = "redis"
			case "SlashInPassword":
				ds = claimstest.MongoDatastore()
			}
			resp, err := h.Sync(t.Context(), request(t, ds, secrets[name]))
			if err != nil {
				t.Fatalf("Sync(): %v", err)
			}
			if diff := cmp.Diff(tc.want, strings.Join(c.calls, ",")); diff != "" {
				t.Errorf("%s\ncounted: -want, +got:\n%s", tc.reason, diff)
			}
			status, _ := json.Marshal(resp.Status)
			if logs.Len() == 0 {
				t.Fatal("no log lines: the test would prove nothing")
			}
			for _, secret := range []string{claimstest.Password, claimstest.AdminPassword, base64.StdEncoding.EncodeToString([]byte(claimstest.Password)), claimstest.SlashPasswordPrefix} {
				if strings.Contains(logs.String(), secret) || strings.Contains(string(status), secret) {
					t.Errorf("%s\nsecret material in log or status:\nlog: %s\nstatus: %s", tc.reason, logs.String(), status)
				}
			}
		})
	}
}

func TestDecisionsNil(t *testing.T) {
	h := datastore.New(datastore.Options{})
	if _, err := h.Sync(t.Context(), request(t, claimstest.Datastore(), claimstest.Secret())); err != nil {
		t.Fatalf("Sync() with no Decisions: %v", err)
	}
}
