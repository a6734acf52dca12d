package filereload

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
)

// TestCABundle checks what a CA bundle file loads to: every certificate in
// the pool, and the earliest expiry among them.
func TestCABundle(t *testing.T) {
	pki := testpki.New(t)
	soon, late := time.Now().Add(time.Hour).Truncate(time.Second), time.Now().Add(48*time.Hour).Truncate(time.Second)
	lateFile, _, _ := pki.IssueValid(t, "late", 2, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0), time.Now().Add(-time.Hour), late)
	soonFile, _, _ := pki.IssueValid(t, "soon", 3, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0), time.Now().Add(-time.Hour), soon)
	read := func(name string) string {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	key := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n"
	cases := map[string]struct {
		reason       string
		content      string
		wantNotAfter time.Time
		wantCerts    []string // the files whose certificate the pool holds
		wantErr      error
	}{
		"One":           {reason: "One certificate: its expiry.", content: read(lateFile), wantNotAfter: late, wantCerts: []string{lateFile}},
		"EarliestLast":  {reason: "The earliest expiry wherever it is in the file.", content: read(lateFile) + read(soonFile), wantNotAfter: soon, wantCerts: []string{lateFile, soonFile}},
		"EarliestFirst": {reason: "The earliest expiry wherever it is in the file.", content: read(soonFile) + read(lateFile), wantNotAfter: soon, wantCerts: []string{lateFile, soonFile}},
		"OtherBlocks":   {reason: "Blocks that are not certificates are skipped, as AppendCertsFromPEM does.", content: key + read(lateFile), wantNotAfter: late, wantCerts: []string{lateFile}},
		"NoCertificate": {reason: "A bundle without certificates is broken.", content: key, wantErr: cmpopts.AnyError},
		"NotPEM":        {reason: "Neither is a file without PEM.", content: "hello", wantErr: cmpopts.AnyError},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ca.crt")
			write(t, path, tc.content, 1000)
			got, err := NewCABundle(path, Options{Name: "ca"}).Get()
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.wantNotAfter, got.NotAfter, cmpopts.EquateApproxTime(0)); diff != "" {
				t.Errorf("%s\nNotAfter: -want, +got:\n%s", tc.reason, diff)
			}
			want := x509.NewCertPool()
			for _, f := range tc.wantCerts {
				want.AppendCertsFromPEM([]byte(read(f)))
			}
			if !want.Equal(got.Pool) {
				t.Errorf("%s\nthe pool does not hold exactly the certificates of %v", tc.reason, tc.wantCerts)
			}
		})
	}
}
