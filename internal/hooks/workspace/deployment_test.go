package workspace

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestOverlaySecurityContext(t *testing.T) {
	cases := map[string]struct {
		reason string
		user   *corev1.SecurityContext
		want   *corev1.SecurityContext
	}{
		"Defaults": {
			reason: "Without user settings the hardened defaults apply.",
			want:   defaultContainerSecurityContext(),
		},
		"OneField": {
			reason: "Setting one field keeps every other default.",
			user:   &corev1.SecurityContext{RunAsUser: ptr.To[int64](10001)},
			want: func() *corev1.SecurityContext {
				d := defaultContainerSecurityContext()
				d.RunAsUser = ptr.To[int64](10001)
				return d
			}(),
		},
		"OverrideDefault": {
			reason: "A field the user sets wins over the default, even when it weakens it.",
			user:   &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(false)},
			want: func() *corev1.SecurityContext {
				d := defaultContainerSecurityContext()
				d.ReadOnlyRootFilesystem = ptr.To(false)
				return d
			}(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := overlay(defaultContainerSecurityContext(), tc.user)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\noverlay: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestBindingVolumeName(t *testing.T) {
	short := bindingVolumeName("orders")
	if short != "binding-orders" {
		t.Errorf("short claim: got %q, want binding-orders", short)
	}
	long1 := bindingVolumeName(strings.Repeat("a", 100))
	long2 := bindingVolumeName(strings.Repeat("a", 99) + "b")
	if len(long1) > 63 || len(long2) > 63 {
		t.Errorf("volume names must be DNS labels: %q (%d), %q (%d)", long1, len(long1), long2, len(long2))
	}
	if long1 == long2 {
		t.Errorf("two long claims that share a prefix must get different volume names: %q", long1)
	}
}
