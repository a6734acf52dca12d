package server

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/formspec/formspec-hooks/internal/testkit/testpki"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

// TestServingCertificateValidity serves, through a real server over TLS, a
// serving certificate that has expired at start, then a valid one swapped
// in, then an expired and a not yet valid one: the server is ready exactly
// while the certificate is valid, says which file is at fault and never
// what it holds, logs each crossing once, and exports the expiry of the
// certificate it serves and of the client CA bundle.
func TestServingCertificateValidity(t *testing.T) {
	pki := testpki.New(t)
	now := time.Now().Truncate(time.Second)
	expired, valid, future := [2]time.Time{now.Add(-2 * time.Hour), now.Add(-time.Hour)},
		[2]time.Time{now.Add(-time.Hour), now.Add(time.Hour)}, [2]time.Time{now.Add(time.Hour), now.Add(2 * time.Hour)}
	certFile, keyFile, _ := pki.IssueValid(t, "server", 100, x509.ExtKeyUsageServerAuth, time.Unix(1000, 0), expired[0], expired[1])
	// The client CA bundle: the CA and, expiring first, another
	// certificate, whose expiry is the bundle's.
	caExpiry := now.Add(30 * time.Minute)
	other, _, _ := pki.IssueValid(t, "other-ca", 900, x509.ExtKeyUsageClientAuth, time.Unix(1000, 0), valid[0], caExpiry)
	caFile := filepath.Join(pki.Dir, "client-ca.crt")
	writeFile(t, caFile, readFile(t, pki.CAFile)+readFile(t, other), time.Unix(1000, 0))
	_, _, clientCert := pki.Issue(t, "metacontroller", 200, x509.ExtKeyUsageClientAuth, time.Unix(1000, 0))

	var logs testsync.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	tlsCfg, files, err := TLSConfig(certFile, keyFile, caFile, logger)
	if err != nil {
		t.Fatalf("TLSConfig with an expired serving certificate: %v, want it served", err)
	}
	hookURL, metricsURL, _ := startServer(t, Config{TLS: tlsCfg, Credentials: files, Logger: logger})

	type state struct {
		Ready          string
		ServedSerial   int64
		ServingExpiry  time.Time
		ClientCAExpiry time.Time
	}
	observe := func() state {
		expiry := scrapeExpiry(t, metricsURL)
		return state{Ready: readyz(t, metricsURL), ServedSerial: servedSerialUnverified(t, hookURL, clientCert),
			ServingExpiry: expiry["tls-serving-pair"], ClientCAExpiry: expiry["tls-client-ca"]}
	}
	steps := []struct {
		reason   string
		serial   int64
		validity [2]time.Time
		want     state
	}{
		{reason: "Expired at start: served, but not ready; the probe names the file.", validity: expired,
			want: state{Ready: "serving certificate tls-serving-pair has expired\n", ServedSerial: 100, ServingExpiry: expired[1]}},
		{reason: "A valid certificate swapped in: ready.", serial: 101, validity: valid,
			want: state{Ready: "ok\n", ServedSerial: 101, ServingExpiry: valid[1]}},
		{reason: "An expired certificate swapped in: not ready again.", serial: 102, validity: expired,
			want: state{Ready: "serving certificate tls-serving-pair has expired\n", ServedSerial: 102, ServingExpiry: expired[1]}},
		{reason: "A certificate not yet valid: not ready either.", serial: 103, validity: future,
			want: state{Ready: "serving certificate tls-serving-pair is not yet valid\n", ServedSerial: 103, ServingExpiry: future[1]}},
		{reason: "Valid again: ready.", serial: 104, validity: valid,
			want: state{Ready: "ok\n", ServedSerial: 104, ServingExpiry: valid[1]}},
	}
	for i, s := range steps {
		if s.serial != 0 {
			// A renewal writes new files in place, as cert-manager's
			// volume does, each with a modification time of its own.
			pki.IssueValid(t, "server", s.serial, x509.ExtKeyUsageServerAuth, time.Unix(1000+int64(i), 0), s.validity[0], s.validity[1])
		}
		s.want.ClientCAExpiry = caExpiry
		if diff := cmp.Diff(s.want, observe()); diff != "" {
			t.Errorf("step %d: %s\n-want, +got:\n%s", i, s.reason, diff)
		}
	}
	// A broken pair has no expiry to export, and is reported as broken.
	writeFile(t, keyFile, "not a key", time.Unix(2000, 0))
	if got, ok := scrapeExpiry(t, metricsURL)["tls-serving-pair"]; ok {
		t.Errorf("a broken serving pair has an expiry series: %v", got)
	}
	if diff := cmp.Diff("credentials file tls-serving-pair is broken\n", readyz(t, metricsURL)); diff != "" {
		t.Errorf("readyz with a broken pair: -want, +got:\n%s", diff)
	}

	// Each crossing is logged once, however often the probe, the scrape and
	// the handshakes asked; the log never carries the certificate.
	if diff := cmp.Diff([]int{2, 2}, []int{
		strings.Count(logs.String(), "serving certificate outside its validity period"),
		strings.Count(logs.String(), "serving certificate valid again"),
	}); diff != "" {
		t.Errorf("log lines (outside validity, valid again): -want, +got:\n%s\nlogs:\n%s", diff, logs.String())
	}
	if strings.Contains(logs.String(), "BEGIN") {
		t.Errorf("the log quotes a PEM file:\n%s", logs.String())
	}
}

func readyz(t *testing.T, metricsURL string) string {
	t.Helper()
	_, body := get(t, http.DefaultClient, metricsURL+"/readyz")
	return body
}

// servedSerialUnverified returns the serial number of the certificate the
// server presents, without verifying it: a client that checks would
// refuse an expired one before there is anything to look at.
func servedSerialUnverified(t *testing.T, url string, cert tls.Certificate) int64 {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		DisableKeepAlives: true,
	}}
	resp, err := client.Get(url + "/")
	if err != nil {
		t.Fatalf("GET over TLS: %v", err)
	}
	defer resp.Body.Close()
	return resp.TLS.PeerCertificates[0].SerialNumber.Int64()
}

// scrapeExpiry returns formspec_hooks_certificate_expiry_timestamp_seconds
// by file.
func scrapeExpiry(t *testing.T, metricsURL string) map[string]time.Time {
	t.Helper()
	resp, err := http.Get(metricsURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	if f := families["formspec_hooks_certificate_expiry_timestamp_seconds"]; f != nil {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "file" {
					out[l.GetValue()] = time.Unix(int64(m.GetGauge().GetValue()), 0)
				}
			}
		}
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
