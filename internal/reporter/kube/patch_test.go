package kube

import (
	"strings"
	"testing"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestDirectivePatch pins the one annotation each directive writes, and
// refuses an action it does not know rather than write nothing.
func TestDirectivePatch(t *testing.T) {
	hash := "sha256:" + strings.Repeat("ab", 32)
	cases := map[string]struct {
		reason  string
		d       ccapi.Directive
		want    string
		wantErr error
	}{
		"Restart": {reason: "a restart requests the hash", d: ccapi.Directive{Action: ccapi.ActionRestartRequired, ArtifactHash: hash},
			want: `{"metadata":{"annotations":{"formspec.dev/artifact-binary-hash":"` + hash + `"}}}`},
		"Idle": {reason: "an idle sets the idle annotation", d: ccapi.Directive{Action: ccapi.ActionIdle},
			want: `{"metadata":{"annotations":{"formspec.dev/idle":"true"}}}`},
		"Wake": {reason: "a wake removes it", d: ccapi.Directive{Action: ccapi.ActionWake},
			want: `{"metadata":{"annotations":{"formspec.dev/idle":null}}}`},
		"Unknown": {reason: "an unknown action writes nothing", d: ccapi.Directive{Action: "reboot"}, wantErr: cmpopts.AnyError},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DirectivePatch(tc.d)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nerror (-want, +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s\npatch (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}
