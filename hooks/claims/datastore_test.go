package claims_test

import (
	"fmt"
	"strings"
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

// checkCase is one CheckDatastore case: a change to the valid Datastore
// and Secret, and the reason it should end with.
type checkCase struct {
	reason string
	change func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret
	want   string
}

func TestCheckDatastore(t *testing.T) {
	cases := map[string]checkCase{
		"Valid": {
			reason: "The test world's Datastore is valid.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { return s },
			want:   v1alpha1.ReasonValidated,
		},
		"UnsupportedDriver": {
			reason: "Only four drivers exist.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { ds.Spec.Driver = "oracle"; return s },
			want:   v1alpha1.ReasonUnsupportedDriver,
		},
		"BadRotatedKey": {
			reason: "Every listed key must parse, not just the first.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.OwnerPublicKeys = append(ds.Spec.OwnerPublicKeys, "abc")
				return s
			},
			want: v1alpha1.ReasonInvalidPublicKey,
		},
		"KeyNotAPoint": {
			reason: "64 hex characters that are no point of the curve verify nothing: invalid.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.OwnerPublicKeys = append(ds.Spec.OwnerPublicKeys, claimstest.NotAPointKey)
				return s
			},
			want: v1alpha1.ReasonInvalidPublicKey,
		},
		"TooManyKeys": {
			reason: "The CRD allows 16 rotated keys; a request with more is refused before any is parsed.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				for range v1alpha1.MaxOwnerPublicKeys + 1 {
					ds.Spec.OwnerPublicKeys = append(ds.Spec.OwnerPublicKeys, ds.Spec.OwnerPublicKey)
				}
				return s
			},
			want: v1alpha1.ReasonInvalidPublicKey,
		},
		"TooManyTenants": {
			reason: "The CRD allows 256 tenants; more would make every claim walk them all.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				for i := range v1alpha1.MaxAllowedTenants + 1 {
					ds.Spec.AllowedTenants = append(ds.Spec.AllowedTenants, fmt.Sprintf("team-%d/*", i))
				}
				return s
			},
			want: v1alpha1.ReasonInvalidTenant,
		},
		"TenantNamespaceWildcard": {
			reason: "There is no */workspace.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.AllowedTenants = []string{"*/shop"}
				return s
			},
			want: v1alpha1.ReasonInvalidTenant,
		},
		"TenantNoSlash": {
			reason: "A tenant is namespace/workspace.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.AllowedTenants = []string{"team-a"}
				return s
			},
			want: v1alpha1.ReasonInvalidTenant,
		},
		"NoSecretRef": {
			reason: "A Datastore must name its Secret.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.EndpointSecretRef.Name = ""
				return s
			},
			want: v1alpha1.ReasonSecretNotFound,
		},
		"SecretMissing": {
			reason: "The named Secret does not exist.",
			change: func(*v1alpha1.Datastore, *corev1.Secret) *corev1.Secret { return nil },
			want:   v1alpha1.ReasonSecretNotFound,
		},
		"SecretInOtherNamespace": {
			reason: "Only a Secret in the Datastore's namespace counts.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { s.Namespace = "elsewhere"; return s },
			want:   v1alpha1.ReasonSecretNotFound,
		},
		"SecretNotLabeled": {
			reason: "The label is consent.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { s.Labels = nil; return s },
			want:   v1alpha1.ReasonSecretNotLabeled,
		},
		"MissingHost": {
			reason: "Postgres needs a host.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret { delete(s.Data, "host"); return s },
			want:   v1alpha1.ReasonMissingKeys,
		},
		"PasswordOnlyPerPermission": {
			reason: "A key given for every permission is complete.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				delete(s.Data, "password")
				s.Data["read.password"], s.Data["readwrite.password"] = []byte("r"), []byte("rw")
				return s
			},
			want: v1alpha1.ReasonValidated,
		},
		"PasswordMissingForOnePermission": {
			reason: "A key given for some permissions only is missing for the others.",
			change: func(_ *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				delete(s.Data, "password")
				s.Data["read.password"] = []byte("r")
				return s
			},
			want: v1alpha1.ReasonMissingKeys,
		},
		"MongoURI": {
			reason: "A MongoDB URI alone is enough.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.Driver = v1alpha1.DriverMongoDB
				s.Data = map[string][]byte{"uri": []byte("mongodb://u:p@m1:27017,m2:27017/orders")}
				return s
			},
			want: v1alpha1.ReasonValidated,
		},
		"RedisWithoutPassword": {
			reason: "Redis needs only host and port.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.Driver = v1alpha1.DriverRedis
				s.Data = map[string][]byte{"host": []byte("r"), "port": []byte("6379")}
				return s
			},
			want: v1alpha1.ReasonValidated,
		},
	}
	// One weak key refuses the whole Datastore, whether it is the only
	// key, the first or a rotated one beside sound keys.
	for _, k := range claimstest.WeakKeys() {
		cases["WeakOnlyKey"+k.Name] = checkCase{
			reason: "A small-order or non-canonical key would verify forged grants.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.OwnerPublicKey, ds.Spec.OwnerPublicKeys = k.Hex, nil
				return s
			},
			want: v1alpha1.ReasonWeakPublicKey,
		}
		cases["WeakRotatedKey"+k.Name] = checkCase{
			reason: "A weak key beside sound ones refuses the Datastore all the same.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.OwnerPublicKeys = append(ds.Spec.OwnerPublicKeys, k.Hex)
				return s
			},
			want: v1alpha1.ReasonWeakPublicKey,
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ds := claimstest.Datastore()
			s := tc.change(ds, claimstest.Secret())
			got := claims.CheckDatastore(ds, s)
			if diff := cmp.Diff(tc.want, got.Reason); diff != "" {
				t.Errorf("%s\nCheckDatastore(): -want, +got:\n%s\nmessage: %s", tc.reason, diff, got.Message)
			}
			if got.Allowed != (tc.want == v1alpha1.ReasonValidated) {
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
		// secret is text of the credentials that must not be in the result.
		secret string
	}{
		"HostPort":      {reason: "host:port.", data: map[string]string{"host": "db", "port": "5432"}, want: "db:5432"},
		"IPv6":          {reason: "IPv6 hosts are bracketed.", data: map[string]string{"host": "fd00::1", "port": "5432"}, want: "[fd00::1]:5432"},
		"HostWithUser":  {reason: "A host key holding userinfo is not a host.", data: map[string]string{"host": "app:pw@db", "port": "5432"}, want: "", secret: "pw"},
		"PortNotNumber": {reason: "A port must be a number.", data: map[string]string{"host": "db", "port": "pw"}, want: "", secret: "pw"},
		"URI":           {reason: "A URI's hosts, without its credentials.", data: map[string]string{"uri": "mongodb://u:pw@m1:27017,m2:27017/db"}, want: "m1:27017,m2:27017", secret: "pw"},
		"URINoUser":     {reason: "A URI without credentials.", data: map[string]string{"uri": "mongodb://m1.data.svc:27017/orders?replicaSet=rs0"}, want: "m1.data.svc:27017"},
		"URINoPort":     {reason: "The port is optional.", data: map[string]string{"uri": "mongodb+srv://u:pw@cluster0.example.net/orders"}, want: "cluster0.example.net", secret: "pw"},
		"URIIPv6":       {reason: "Bracketed IPv6 hosts.", data: map[string]string{"uri": "mongodb://u:pw@[fd00::1]:27017,[fd00::2]/db"}, want: "[fd00::1]:27017,[fd00::2]", secret: "pw"},
		"URIAtInPassword": {
			reason: "An unescaped '@' in the password: userinfo runs to the last '@'.",
			data:   map[string]string{"uri": "mongodb://app:p@ss@db:27017/orders"}, want: "db:27017", secret: "p@ss",
		},
		"URISlashInNumericPassword": {
			reason: "An unescaped '/' ends a parsed authority at app:1234, which looks like host:port.",
			data:   map[string]string{"uri": "mongodb://app:1234/5678@db:27017"}, want: "", secret: "1234",
		},
		"URISlashFirstInPassword": {
			reason: "A password starting with '/' leaves 'app:' as the authority.",
			data:   map[string]string{"uri": "mongodb://app:/s3cret@db"}, want: "", secret: "app",
		},
		"URISlashNoPath": {
			reason: "The same with hosts that would pass the host check on their own.",
			data:   map[string]string{"uri": "mongodb://db1:27017/x@db2:27017"}, want: "",
		},
		"URIQuestionInPassword": {
			reason: "'?' ends the authority too.",
			data:   map[string]string{"uri": "mongodb://app:2718?2818@db:27017"}, want: "", secret: "2718",
		},
		"URIHashInPassword": {
			reason: "'#' ends the authority too.",
			data:   map[string]string{"uri": "mongodb://app:2718#2818@db:27017"}, want: "", secret: "2718",
		},
		"URISlashInUserOnly": {
			reason: "A username with a '/' and no password.",
			data:   map[string]string{"uri": "mongodb://team/app@db:27017"}, want: "", secret: "team",
		},
		"URIPercentHost": {
			reason: "A percent-encoded host is not plain.",
			data:   map[string]string{"uri": "mongodb://u:pw@db%2Fx:27017"}, want: "", secret: "pw",
		},
		"URIBadPort": {
			reason: "A non-numeric port after the last '@' is not a port.",
			data:   map[string]string{"uri": "mongodb://db:s3cret"}, want: "", secret: "s3cret",
		},
		"URIPortOutOfRange": {
			reason: "Ports stop at 65535.",
			data:   map[string]string{"uri": "mongodb://db:2718281828"}, want: "", secret: "2718281828",
		},
		"URIEmptyHost": {
			reason: "An empty entry in the host list.",
			data:   map[string]string{"uri": "mongodb://u:pw@db:27017,/orders"}, want: "", secret: "pw",
		},
		"URINoHosts": {
			reason: "Credentials and no host.",
			data:   map[string]string{"uri": "mongodb://u:pw@/orders"}, want: "", secret: "pw",
		},
		"URINoScheme": {
			reason: "Not a URI at all.",
			data:   map[string]string{"uri": "u:pw@db:27017"}, want: "", secret: "pw",
		},
		"BadURI":  {reason: "An unparsable URI gives nothing (its parse error would quote it).", data: map[string]string{"uri": "mongodb://u:pw@%zz"}, want: "", secret: "pw"},
		"Nothing": {reason: "No host, no endpoint.", data: map[string]string{"password": "x"}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &corev1.Secret{Data: map[string][]byte{}}
			for k, v := range tc.data {
				s.Data[k] = []byte(v)
			}
			got := claims.Endpoint(s)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nEndpoint(): -want, +got:\n%s", tc.reason, diff)
			}
			if tc.secret != "" && strings.Contains(got, tc.secret) {
				t.Errorf("%s\nEndpoint() = %q holds credentials %q", tc.reason, got, tc.secret)
			}
		})
	}
}
