package claims_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
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

func TestCredentialsRevision(t *testing.T) {
	data := map[string][]byte{"host": []byte("h"), "password": []byte("p")}
	observed := func(revision string, d map[string][]byte) *corev1.Secret {
		s := &corev1.Secret{Data: d}
		if revision != "" {
			s.Annotations = map[string]string{v1alpha1.AnnotationCredentialsRevision: revision}
		}
		return s
	}
	cases := map[string]struct {
		reason   string
		observed *corev1.Secret
		want     int64
	}{
		"FirstSecret":    {reason: "No Secret yet: the first revision.", want: 1},
		"Unchanged":      {reason: "The Secret holds the credentials: its revision stays.", observed: observed("4", data), want: 4},
		"Rotated":        {reason: "The Secret holds other credentials: one more.", observed: observed("4", map[string][]byte{"host": []byte("h"), "password": []byte("q")}), want: 5},
		"KeyAdded":       {reason: "A key more is other credentials.", observed: observed("4", map[string][]byte{"host": []byte("h")}), want: 5},
		"MadeBefore":     {reason: "A Secret of a version without revisions, the same data: revision 1, so nothing rolls but the hash's form.", observed: observed("", data), want: 1},
		"MadeBeforeDiff": {reason: "The same, with other data: revision 2.", observed: observed("", map[string][]byte{}), want: 2},
		"NotANumber":     {reason: "A value that is no positive number counts as 1.", observed: observed("seven", data), want: 1},
		"Negative":       {reason: "Nor a negative one.", observed: observed("-3", data), want: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, claims.CredentialsRevision(tc.observed, data)); diff != "" {
				t.Errorf("%s\nCredentialsRevision(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestCredentialsHash pins what the hash depends on: the claim and the
// revision, each of which changes it, and nothing else.
func TestCredentialsHash(t *testing.T) {
	base := claims.CredentialsHash("uid-1", 1)
	for name, other := range map[string]string{
		"AnotherRevision": claims.CredentialsHash("uid-1", 2),
		"AnotherClaim":    claims.CredentialsHash("uid-2", 1),
	} {
		if other == base {
			t.Errorf("%s: CredentialsHash() = %s, the same as for uid-1 revision 1", name, other)
		}
	}
	// Length-prefixed fields: the UID and the revision cannot trade digits.
	if a, b := claims.CredentialsHash("uid-1", 11), claims.CredentialsHash("uid-11", 1); a == b {
		t.Errorf("CredentialsHash() of uid-1 revision 11 and of uid-11 revision 1 are both %s", a)
	}
	if again := claims.CredentialsHash("uid-1", 1); again != base {
		t.Errorf("CredentialsHash() = %s, then %s for the same input", base, again)
	}
}
