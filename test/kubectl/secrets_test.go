package kubectl

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// testNoSecretData checks, over every run of the plugin the other tests
// made, that no Secret's data reached it, let alone its output: every
// request for a Secret asked for its metadata only, no answer carried a
// password, and nothing printed holds one.
func testNoSecretData(t *testing.T, p *plugin, w *world) {
	// The Secrets the traces show do hold the passwords.
	for _, s := range []struct{ ns, name string }{{nsA, claimstest.ClaimName + "-credentials"}, {nsData, claimstest.SecretName}} {
		data, _ := w.get("v1", "Secret", s.ns, s.name)["data"].(map[string]any)
		if data["password"] != base64.StdEncoding.EncodeToString([]byte(claimstest.Password)) {
			t.Fatalf("Secret %s/%s does not hold the password this test looks for", s.ns, s.name)
		}
	}
	var secrets [][]byte
	for _, s := range []string{claimstest.Password, claimstest.AdminPassword} {
		secrets = append(secrets, []byte(s), []byte(base64.StdEncoding.EncodeToString([]byte(s))))
	}
	requests := p.proxy.recordedRequests()
	asked := 0
	for _, r := range requests {
		if strings.Contains(r.path, "/secrets") {
			asked++
			if !strings.Contains(r.accept, "as=PartialObjectMetadata") {
				t.Errorf("%s %s asked for %q: a Secret is read as metadata only", r.method, r.path, r.accept)
			}
		}
		for _, s := range secrets {
			if bytes.Contains(r.body, s) {
				t.Errorf("the answer to %s %s holds Secret data", r.method, r.path)
			}
		}
	}
	if asked == 0 {
		t.Fatalf("of %d requests none was for a Secret: the traces did not look at the Secrets they show", len(requests))
	}
	p.mu.Lock()
	printed := p.printed
	p.mu.Unlock()
	for _, out := range printed {
		for _, s := range secrets {
			if strings.Contains(out, string(s)) {
				t.Errorf("the plugin printed Secret data:\n%s", out)
			}
		}
	}
}
