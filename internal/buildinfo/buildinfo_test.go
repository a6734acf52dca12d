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

func TestChangelogHeading(t *testing.T) {
	cases := map[string]struct {
		reason  string
		version string
		want    string
	}{
		"Release":      {reason: "A release has an entry of its own.", version: "0.2.0", want: "## [0.2.0]"},
		"Candidate":    {reason: "A release candidate is cut like a release.", version: "0.2.0-rc.1", want: "## [0.2.0-rc.1]"},
		"Development":  {reason: "Main between releases collects its changes under Unreleased.", version: "0.2.0-dev", want: "## [Unreleased]"},
		"NotDevSuffix": {reason: "Only the -dev suffix marks main; -devel is some other pre-release.", version: "0.2.0-devel", want: "## [0.2.0-devel]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ChangelogHeading(tc.version)); diff != "" {
				t.Errorf("%s\nChangelogHeading(%q): -want, +got:\n%s", tc.reason, tc.version, diff)
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
