package claims_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/claims"
)

func TestProject(t *testing.T) {
	data := map[string][]byte{
		"host":               []byte("h"),
		"password":           []byte("base"),
		"read.password":      []byte("r"),
		"admin.password":     []byte("a"),
		"admin.superuser":    []byte("yes"),
		"readwrite.":         []byte("empty key"),
		"tls.crt":            []byte("cert"),
		"type":               []byte("wrong"),
		"readwrite.password": []byte("rw"),
	}
	cases := map[string]struct {
		reason     string
		permission string
		want       map[string]string
	}{
		"Read": {
			reason:     "read.* overrides; admin.* and readwrite.* stay behind.",
			permission: v1alpha1.PermissionRead,
			want:       map[string]string{"host": "h", "password": "r", "tls.crt": "cert", "type": "postgres", "provider": "formspec"},
		},
		"Admin": {
			reason:     "admin.* overrides and adds admin-only keys.",
			permission: v1alpha1.PermissionAdmin,
			want:       map[string]string{"host": "h", "password": "a", "superuser": "yes", "tls.crt": "cert", "type": "postgres", "provider": "formspec"},
		},
		"ReadWrite": {
			reason:     "A bare \"readwrite.\" key names nothing and is skipped.",
			permission: v1alpha1.PermissionReadWrite,
			want:       map[string]string{"host": "h", "password": "rw", "tls.crt": "cert", "type": "postgres", "provider": "formspec"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]string{}
			for k, v := range claims.Project(data, v1alpha1.DriverPostgres, tc.permission) {
				got[k] = string(v)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nProject(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// checkCase is one CheckDatastore case: a change to the valid Datastore
// and Secret, and the reason it should end with.
type checkCase struct {
	reason string
	change func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret
	want   string
}
