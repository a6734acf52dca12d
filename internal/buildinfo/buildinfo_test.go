package buildinfo

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestString(t *testing.T) {
	cases := map[string]struct {
		reason string
		info   Info
		want   string
	}{
		"Release": {reason: "A release build with its revision.", info: Info{Version: "0.1.0", Revision: "0a1b2c3", GoVersion: "go1.26.8"}, want: "0.1.0 (revision 0a1b2c3, go1.26.8)"},
		"Dirty":   {reason: "Uncommitted changes are visible.", info: Info{Version: "0.1.0", Revision: "0a1b2c3", Modified: true, GoVersion: "go1.26.8"}, want: "0.1.0 (revision 0a1b2c3-dirty, go1.26.8)"},
		"NoVCS":   {reason: "A build without VCS data says so rather than printing nothing.", info: Info{Version: "0.1.0", GoVersion: "go1.26.8"}, want: "0.1.0 (revision unknown, go1.26.8)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.info.String()); diff != "" {
				t.Errorf("%s\nString(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestGetAndCollector(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	for _, stamped := range []string{"", "v9.8.7"} {
		version = stamped
		want := stamped
		if want == "" {
			want = Release() // what a plain go build says
		}
		i := Get()
		if i.Version != want {
			t.Errorf("with version=%q: Get().Version = %q, want %q", stamped, i.Version, want)
		}
		exposition := `
# HELP demo_build_info Always 1; its labels say which build is running.
# TYPE demo_build_info gauge
demo_build_info{goversion="` + i.GoVersion + `",revision="` + i.Revision + `",version="` + want + `"} 1
`
		if err := testutil.CollectAndCompare(Collector("demo"), strings.NewReader(exposition)); err != nil {
			t.Errorf("with version=%q: %v", stamped, err)
		}
	}
}
