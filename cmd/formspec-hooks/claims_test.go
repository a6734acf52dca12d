package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// TestClaimFindingsOverHTTP posts two resourceclaim fixtures through the
// real server with metrics and debug logging, and checks what reaches the
// metrics and the logs: a claim forged for a Datastore whose owner key is
// the identity point (R = identity, S = 0) is denied with no Secret and
// counted as a denial, and a credentials Secret carrying Metacontroller's
// last-applied copy is counted as a finding, with nothing of the copy in
// logs or metrics.
func TestClaimFindingsOverHTTP(t *testing.T) {
	h, logs, metrics := observedHandler(t)
	type outcome struct {
		Code        int
		Attachments int
		Reasons     []string
	}
	cases := map[string]struct {
		reason string
		want   outcome
	}{
		"denied-forged-identity-key": {
			reason: "The forged admin claim gets no Secret.",
			want:   outcome{Code: http.StatusOK, Reasons: []string{"InvalidSignature", "InvalidSignature"}},
		},
		"granted-credentials-exposed": {
			reason: "The exposed Secret is still granted, and the claim says what to fix.",
			want:   outcome{Code: http.StatusOK, Attachments: 1, Reasons: []string{"Granted", "Granted", "LastAppliedAnnotation"}},
		},
	}
	var statuses bytes.Buffer
	for name, tc := range cases {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "resourceclaim", "sync", name, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		rec := post(h, "/v1/resourceclaim/sync", body, nil)
		var resp struct {
			Status struct {
				Conditions []struct{ Reason string } `json:"conditions"`
			} `json:"status"`
			Attachments []metacontroller.Object `json:"attachments"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("%s: %v: %s", name, err, rec.Body.String())
		}
		got := outcome{Code: rec.Code, Attachments: len(resp.Attachments)}
		for _, c := range resp.Status.Conditions {
			got.Reasons = append(got.Reasons, c.Reason)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: %s\n-want, +got:\n%s", name, tc.reason, diff)
		}
		status, _ := json.Marshal(resp.Status)
		statuses.Write(status)
	}

	scrape := httptest.NewRecorder()
	metrics.Handler().ServeHTTP(scrape, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, c := range []struct{ decision, reason string }{
		{"denied", "InvalidSignature"},
		{"granted", "Granted"},
		{"exposed", "LastAppliedAnnotation"},
	} {
		line := `formspec_hooks_decisions_total{decision="` + c.decision + `",hook="resourceclaim",reason="` + c.reason + `"} 1` + "\n"
		if !strings.Contains(scrape.Body.String(), line) {
			t.Errorf("metrics lack %q", line)
		}
	}
	for _, secret := range []string{
		claimstest.Password,
		base64.StdEncoding.EncodeToString([]byte(claimstest.Password)),
		"last-applied-configuration\":", // the annotation's value as an object key
	} {
		for where, text := range map[string]string{"logs": logs.String(), "metrics": scrape.Body.String(), "statuses": statuses.String()} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contain %q", where, secret)
			}
		}
	}
}

// TestGrantedStatusHoldsNothingOfThePassword posts every granted
// resourceclaim fixture twice through the real server: as it is, and with
// every password of the Datastore's Secret (and of the credentials Secret
// observed, which holds the same credentials) replaced by another. The
// claim's status, which the built-in view role reads and from which the
// workspace's pod-template annotation is derived, must come out byte for
// byte the same: nothing in it depends on a password, so nobody who reads
// it can test a guess. When status.credentialsHash was a digest of the
// credentials, every granted case failed here.
func TestGrantedStatusHoldsNothingOfThePassword(t *testing.T) {
	h, _, _ := observedHandler(t)
	dirs, err := filepath.Glob(filepath.Join(fixturesDir, "resourceclaim", "sync", "granted-*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no granted resourceclaim fixtures (%v)", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			body, err := os.ReadFile(filepath.Join(dir, "request.json"))
			if err != nil {
				t.Fatal(err)
			}
			other, n := otherPasswords(t, body)
			if n == 0 {
				t.Fatal("the request holds no password to change")
			}
			var statuses [2]string
			for i, req := range [][]byte{body, other} {
				rec := post(h, "/v1/resourceclaim/sync", req, nil)
				var resp struct {
					Status      json.RawMessage         `json:"status"`
					Attachments []metacontroller.Object `json:"attachments"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &resp); rec.Code != http.StatusOK || err != nil {
					t.Fatalf("status %d (%v): %s", rec.Code, err, rec.Body.String())
				}
				if len(resp.Attachments) != 1 {
					t.Fatalf("%d attachments, want the credentials Secret", len(resp.Attachments))
				}
				statuses[i] = string(resp.Status)
			}
			if diff := cmp.Diff(statuses[0], statuses[1]); diff != "" {
				t.Errorf("the status changes with the password (-as posted, +other passwords):\n%s", diff)
			}
		})
	}
}

// otherPasswords returns a sync request with every value of a key named
// like a password ("password", "admin.password") in the related endpoint
// Secret replaced, and the same values replaced wherever the observed
// credentials Secret holds them, so that the request is the same grant
// with other credentials, seen the same way. n counts the replaced values.
func otherPasswords(t *testing.T, body []byte) (out []byte, n int) {
	t.Helper()
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	replaced := map[string]string{}
	secrets, _ := req["related"].(map[string]any)["Secret.v1"].(map[string]any)
	for _, s := range secrets {
		data, _ := s.(map[string]any)["data"].(map[string]any)
		for k, v := range data {
			if k == "password" || strings.HasSuffix(k, ".password") {
				old := v.(string)
				raw, err := base64.StdEncoding.DecodeString(old)
				if err != nil {
					t.Fatal(err)
				}
				replaced[old] = base64.StdEncoding.EncodeToString(append(raw, "-and-then-another"...))
				data[k] = replaced[old]
				n++
			}
		}
	}
	attached, _ := req["attachments"].(map[string]any)["Secret.v1"].(map[string]any)
	for _, s := range attached {
		data, _ := s.(map[string]any)["data"].(map[string]any)
		for k, v := range data {
			if r, ok := replaced[v.(string)]; ok {
				data[k] = r
			}
		}
	}
	out, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return out, n
}
