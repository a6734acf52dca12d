package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPprof checks that the profiler is on the metrics listener only when
// asked for, and never on the hook listener.
func TestPprof(t *testing.T) {
	cases := map[string]struct {
		reason string
		pprof  bool
		want   map[string]int
	}{
		"Off": {
			reason: "By default nothing under /debug/pprof/ is served.",
			want:   map[string]int{"metrics /debug/pprof/": http.StatusNotFound, "metrics /debug/pprof/heap": http.StatusNotFound, "hooks /debug/pprof/": http.StatusNotFound},
		},
		"On": {
			reason: "Config.Pprof serves the index and named profiles on the metrics listener only.",
			pprof:  true,
			want:   map[string]int{"metrics /debug/pprof/": http.StatusOK, "metrics /debug/pprof/heap": http.StatusOK, "hooks /debug/pprof/": http.StatusNotFound},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv, err := New(Config{Pprof: tc.pprof})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for key := range tc.want {
				h := srv.MetricsHandler()
				listener, path, _ := strings.Cut(key, " ")
				if listener == "hooks" {
					h = srv.Handler()
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				got[key] = rec.Code
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nstatus by listener and path: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
