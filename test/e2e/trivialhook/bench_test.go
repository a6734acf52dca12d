package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/formspec/formspec-hooks/test/coldcache"
)

// BenchmarkAnswer posts the fixtures that cmd/formspec-hooks's
// BenchmarkWorkspaceSync and BenchmarkPodsSync post, through the trivial
// hook's handlers and without the network, so that the two hooks' own cost
// per call can be set side by side (docs/performance.md, "Scale under
// Metacontroller").
//
//	go test ./test/e2e/trivialhook -run '^$' -bench Answer -benchmem
func BenchmarkAnswer(b *testing.B) {
	benchAnswers(b, false, []coldcache.Call{
		{Path: "/v1/workspace/sync", Fixture: "workspace/sync/first-sync"},
		{Path: "/v1/workspace/sync", Fixture: "workspace/sync/steady-ready"},
		{Path: "/v1/workspace/sync", Fixture: "workspace/sync/auto-scaling-hpa-scaled"},
		{Path: "/v1/workspace/sync", Fixture: "workspace/sync/credentials-mixed"},
		{Path: "/v1/pods/sync", Fixture: "pods/sync/running-pod"},
		{Path: "/v1/workspace/customize", Fixture: "workspace/customize/class-only"},
		{Path: "/v1/workspace/customize", Fixture: "workspace/customize/with-datastores"},
	})
}

// BenchmarkColdAnswer posts coldcache.Calls, as cmd/formspec-hooks's
// BenchmarkColdCalls does, with the processor's L1 and L2 caches overwritten
// before every call (test/coldcache), as a call finds them under
// Metacontroller.
//
//	go test ./test/e2e/trivialhook -run '^$' -bench ColdAnswer -benchtime 3000x
func BenchmarkColdAnswer(b *testing.B) {
	benchAnswers(b, true, coldcache.Calls)
}

// benchAnswers posts each call's fixture as a sub-benchmark, cold or in a
// plain loop.
func benchAnswers(b *testing.B, cold bool, calls []coldcache.Call) {
	m := meters{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests"}, []string{"hook", "code"}),
		size:     prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "size"}, []string{"hook"}),
	}
	// The auto-scaling fixture's class, so that the trivial hook adds the
	// HorizontalPodAutoscaler the hooks render, and the grant TestScale
	// has it give every claim (FORMSPEC_E2E_SCALE_TRIVIAL_ANSWER), so that
	// it answers claims as it does there.
	claim, err := readClaimAnswer(filepath.Join("..", "..", "..", "fixtures", "resourceclaim", "sync", "granted-v2", "response.json"))
	if err != nil {
		b.Fatal(err)
	}
	h := hooks(classes{hpa: "elastic", claim: &claim}, m)
	for _, c := range calls {
		body, err := os.ReadFile(filepath.Join("..", "..", "..", "fixtures", c.Fixture, "request.json"))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.Fixture, func(b *testing.B) {
			// call fails the sub-benchmark it runs in, from its goroutine.
			call := func() {
				req := httptest.NewRequest(http.MethodPost, c.Path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			if cold {
				coldcache.Loop(b, call)
				return
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				call()
			}
		})
	}
}
