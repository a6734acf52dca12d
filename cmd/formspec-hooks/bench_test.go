package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/formspec/formspec-hooks/internal/handoff"
	"github.com/formspec/formspec-hooks/internal/server"
	"github.com/formspec/formspec-hooks/test/coldcache"
)

// BenchmarkWorkspaceSync posts Workspace sync fixtures through the real
// router and handler, without the network.
//
//	go test ./cmd/formspec-hooks -run '^$' -bench WorkspaceSync -benchmem
//
// Its "served" variants add what serve adds to every call: a bearer token
// checked against its file (filereload's check per call), and the hand-off queue to the
// reporter, whose Send encodes each observation (no sidecar posts here, so
// the queue coalesces the repeated status in place).
func BenchmarkWorkspaceSync(b *testing.B) {
	bare := fixtureHandler(b)
	served, header := servedHandler(b)
	for _, name := range []string{"first-sync", "steady-ready", "auto-scaling-hpa-scaled", "credentials-mixed"} {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "workspace", "sync", name, "request.json"))
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range []struct {
			name   string
			h      http.Handler
			header http.Header
		}{{name, bare, nil}, {name + "/served", served, header}} {
			b.Run(v.name, func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if rec := post(v.h, "/v1/workspace/sync", body, v.header); rec.Code != http.StatusOK {
						b.Fatalf("status %d", rec.Code)
					}
				}
			})
		}
	}
}

// servedHandler is fixtureHandler with a token file and a hand-off client,
// as serve configures them, and the header that passes the token check.
func servedHandler(b *testing.B) (http.Handler, http.Header) {
	b.Helper()
	const token = "bench-token-0123456789abcdef"
	file := filepath.Join(b.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	tokens := filereload.NewTokens(file, filereload.Options{Name: "auth-tokens"})
	if err := tokens.Err(); err != nil {
		b.Fatal(err)
	}
	cfg := fixtureConfig()
	reports, err := handoff.New(cfg.reporterURL, handoff.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cfg.reports = reports
	return hookHandler(b, cfg, server.Config{Tokens: tokens}), http.Header{"Authorization": {"Bearer " + token}}
}

// BenchmarkPodsSync posts the workspace-pods fixture, the hook Metacontroller
// calls most in a steady fleet, through the real router and handler.
//
//	go test ./cmd/formspec-hooks -run '^$' -bench PodsSync -benchmem
func BenchmarkPodsSync(b *testing.B) {
	benchFixtures(b, "/v1/pods/sync", "running-pod")
}

// BenchmarkClaimSync posts ResourceClaim sync fixtures through the real
// router and handler: a claim's every resync verifies its grant again.
// granted-unchanged-managed-fields is granted-unchanged as Metacontroller
// sends it, every object with its managedFields.
//
//	go test ./cmd/formspec-hooks -run '^$' -bench ClaimSync -benchmem
func BenchmarkClaimSync(b *testing.B) {
	benchFixtures(b, "/v1/resourceclaim/sync", "granted-unchanged", "granted-unchanged-managed-fields", "granted-rotated-key", "denied-stranger-key")
}

// BenchmarkWorkspaceCustomize posts the Workspace customize fixtures, half
// of the calls while a fleet converges, through the real router and
// handler.
//
//	go test ./cmd/formspec-hooks -run '^$' -bench WorkspaceCustomize -benchmem
func BenchmarkWorkspaceCustomize(b *testing.B) {
	benchFixtures(b, "/v1/workspace/customize", "class-only", "with-datastores")
}

// benchFixtures posts each named fixture of path's hook (the fixtures
// directory of the path without /v1/) as a sub-benchmark.
func benchFixtures(b *testing.B, path string, names ...string) {
	h := fixtureHandler(b)
	for _, name := range names {
		body, err := os.ReadFile(filepath.Join(fixturesDir, strings.TrimPrefix(path, "/v1/"), name, "request.json"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if rec := post(h, path, body, nil); rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}

// BenchmarkColdCalls posts coldcache.Calls through the served handler (token check
// and hand-off included), with the processor's L1 and L2 caches overwritten
// before every call (test/coldcache), as a call finds them under
// Metacontroller; set it beside test/e2e/trivialhook's BenchmarkColdAnswer.
// Each iteration also spends a few milliseconds, untimed, evicting.
//
//	go test ./cmd/formspec-hooks -run '^$' -bench ColdCalls -benchtime 3000x
func BenchmarkColdCalls(b *testing.B) {
	h, header := servedHandler(b)
	for _, c := range coldcache.Calls {
		body, err := os.ReadFile(filepath.Join(fixturesDir, c.Fixture, "request.json"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.Fixture, func(b *testing.B) {
			coldcache.Loop(b, func() {
				if rec := post(h, c.Path, body, header); rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			})
		})
	}
}
