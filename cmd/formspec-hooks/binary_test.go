package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/testkit/binaries"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
)

// runFlags reads RUN_FLAGS from the Makefile, so that this test starts the
// server exactly as `make run` does, on ports of its own.
func runFlags(t *testing.T, listen, metrics string) []string {
	t.Helper()
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RUN_FLAGS \?= ((?:.*\\\n)*.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no RUN_FLAGS in the Makefile")
	}
	flags := strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " "))
	for i, f := range flags {
		flags[i] = strings.NewReplacer("$(LISTEN)", listen, "$(METRICS)", metrics).Replace(f)
	}
	return flags
}

// freePorts returns n distinct free loopback addresses: each is held open
// until all are picked, so that two picked one after the other cannot be
// the same port. (Another process may still take one before it is used.)
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// TestServeBinaryAnswersFixtures builds formspec-hooks, starts `serve` with
// the Makefile's RUN_FLAGS (what `make run` uses) and posts every fixture
// to it over TCP, as test/curl-fixtures.sh does with curl: each answer must
// be its golden response.
func TestServeBinaryAnswersFixtures(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building and starting the server binary")
	}
	bin := filepath.Join(buildBinaries(t), "formspec-hooks")
	client := &http.Client{Timeout: 10 * time.Second}
	// One server for each set of a fixture's serve-flags, started with
	// RUN_FLAGS and those.
	start := func(flags string) (listen string) {
		ports := freePorts(t, 2)
		listen, metrics := ports[0], ports[1]
		binaries.Start(t, bin, append(append([]string{"serve"}, runFlags(t, listen, metrics)...), strings.Fields(flags)...)...)
		testsync.WaitFor(t, "the server to be ready", func() bool {
			resp, err := client.Get("http://" + metrics + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		return listen
	}
	listen := start("")
	listenFor := map[string]string{"": listen}

	for _, fc := range fixtureCases(t) {
		if listenFor[fc.flags] == "" {
			listenFor[fc.flags] = start(fc.flags)
		}
		listen := listenFor[fc.flags]
		body, err := os.ReadFile(filepath.Join(fc.dir, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Post(fmt.Sprintf("http://%s%s", listen, fc.path), "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want, err := os.ReadFile(filepath.Join(fc.dir, "response.json"))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d, body %q", fc.dir, resp.StatusCode, got)
			continue
		}
		if diff := cmp.Diff(string(normalize(t, want)), string(normalize(t, got))); diff != "" {
			t.Errorf("POST %s (%s): -want, +got:\n%s", fc.path, fc.dir, diff)
		}
	}

	// The probes answer on the metrics listener only (docs/security.md):
	// the hook listener, which Metacontroller reaches, has none to answer
	// without a token.
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := client.Get("http://" + listen + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if diff := cmp.Diff(http.StatusNotFound, resp.StatusCode); diff != "" {
			t.Errorf("GET %s on the hook listener: -want, +got:\n%s", p, diff)
		}
	}
}
