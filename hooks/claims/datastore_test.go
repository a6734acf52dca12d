package claims_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/claims"
	"github.com/formspec/formspec-hooks/hooks/claims/claimstest"
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

func TestCheckDatastore(t *testing.T) {
	cases := map[string]struct {
		reason string
		change func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret
		want   string
	}{
		"Valid": {
			reason: "The test world's Datastore is valid.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { return s },
			want:   claims.ReasonValidated,
		},
		"UnsupportedDriver": {
			reason: "Only four drivers exist.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { ds.Spec.Driver = "oracle"; return s },
			want:   claims.ReasonUnsupportedDriver,
		},
		"BadRotatedKey": {
			reason: "Every listed key must parse, not just the first.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.OwnerPublicKeys = append(ds.Spec.OwnerPublicKeys, "abc")
				return s
			},
			want: claims.ReasonInvalidPublicKey,
		},
		"TenantNamespaceWildcard": {
			reason: "There is no */workspace.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.AllowedTenants = []string{"*/shop"}
				return s
			},
			want: claims.ReasonInvalidTenant,
		},
		"TenantNoSlash": {
			reason: "A tenant is namespace/workspace.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.AllowedTenants = []string{"team-a"}
				return s
			},
			want: claims.ReasonInvalidTenant,
		},
		"NoSecretRef": {
			reason: "A Datastore must name its Secret.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.EndpointSecretRef.Name = ""
				return s
			},
			want: claims.ReasonSecretNotFound,
		},
		"SecretMissing": {
			reason: "The named Secret does not exist.",
			change: func(*v1alpha1.Datastore, *corev1.Secret) *corev1.Secret { return nil },
			want:   claims.ReasonSecretNotFound,
		},
		"SecretInOtherNamespace": {
			reason: "Only a Secret in the Datastore's namespace counts.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { s.Namespace = "elsewhere"; return s },
			want:   claims.ReasonSecretNotFound,
		},
		"SecretNotLabeled": {
			reason: "The label is consent.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { s.Labels = nil; return s },
			want:   claims.ReasonSecretNotLabeled,
		},
		"MissingHost": {
			reason: "Postgres needs a host.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { delete(s.Data, "host"); return s },
			want:   claims.ReasonMissingKeys,
		},
		"PasswordOnlyPerPermission": {
			reason: "A key given for every permission is complete.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				delete(s.Data, "password")
				s.Data["read.password"], s.Data["readwrite.password"] = []byte("r"), []byte("rw")
				return s
			},
			want: claims.ReasonValidated,
		},
		"PasswordMissingForOnePermission": {
			reason: "A key given for some permissions only is missing for the others.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				delete(s.Data, "password")
				s.Data["read.password"] = []byte("r")
				return s
			},
			want: claims.ReasonMissingKeys,
		},
		"MongoURI": {
			reason: "A MongoDB URI alone is enough.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.Driver = v1alpha1.DriverMongoDB
				s.Data = map[string][]byte{"uri": []byte("mongodb://u:p@m1:27017,m2:27017/orders")}
				return s
			},
			want: claims.ReasonValidated,
		},
		"RedisWithoutPassword": {
			reason: "Redis needs only host and port.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.Driver = v1alpha1.DriverRedis
				s.Data = map[string][]byte{"host": []byte("r"), "port": []byte("6379")}
				return s
			},
			want: claims.ReasonValidated,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ds := claimstest.Datastore()
			s := tc.change(ds, claimstest.Secret())
			got := claims.CheckDatastore(ds, s)
			if diff := cmp.Diff(tc.want, got.Reason); diff != "" {
				t.Errorf("%s\nCheckDatastore(): -want, +got:\n%s\nmessage: %s", tc.reason, diff, got.Message)
			}
			if got.Allowed != (tc.want == claims.ReasonValidated) {
				t.Errorf("CheckDatastore(): Allowed = %v with reason %s", got.Allowed, got.Reason)
			}
		})
	}
}

func TestTenantAllowed(t *testing.T) {
	allowed := []string{"team-a/shop", "team-b/*", "bad entry/*"}
	cases := map[string]struct {
		reason        string
		ns, workspace string
		want          bool
	}{
		"Exact":          {reason: "namespace/workspace matches itself.", ns: "team-a", workspace: "shop", want: true},
		"OtherWorkspace": {reason: "Only the named workspace.", ns: "team-a", workspace: "blog"},
		"Wildcard":       {reason: "namespace/* matches every workspace there.", ns: "team-b", workspace: "anything", want: true},
		"Prefix":         {reason: "No prefix matching on namespaces.", ns: "team-bb", workspace: "shop"},
		"Malformed":      {reason: "A malformed entry matches nothing.", ns: "bad entry", workspace: "x"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := claims.TenantAllowed(allowed, tc.ns, tc.workspace); got != tc.want {
				t.Errorf("%s\nTenantAllowed(%s/%s) = %v, want %v", tc.reason, tc.ns, tc.workspace, got, tc.want)
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	cases := map[string]struct {
		reason string
		data   map[string]string
		want   string
	}{
		"HostPort": {reason: "host:port.", data: map[string]string{"host": "db", "port": "5432"}, want: "db:5432"},
		"IPv6":     {reason: "IPv6 hosts are bracketed.", data: map[string]string{"host": "fd00::1", "port": "5432"}, want: "[fd00::1]:5432"},
		"URI":      {reason: "A URI's hosts, without its credentials.", data: map[string]string{"uri": "mongodb://u:pw@m1:27017,m2:27017/db"}, want: "m1:27017,m2:27017"},
		"BadURI":   {reason: "An unparsable URI gives nothing (its parse error would quote it).", data: map[string]string{"uri": "mongodb://u:pw@%zz"}, want: ""},
		"Nothing":  {reason: "No host, no endpoint.", data: map[string]string{"password": "x"}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &corev1.Secret{Data: map[string][]byte{}}
			for k, v := range tc.data {
				s.Data[k] = []byte(v)
			}
			if diff := cmp.Diff(tc.want, claims.Endpoint(s)); diff != "" {
				t.Errorf("%s\nEndpoint(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
