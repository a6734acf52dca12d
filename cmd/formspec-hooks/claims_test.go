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

	"github.com/formspec/formspec-hooks/hooks/claims/claimstest"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
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
