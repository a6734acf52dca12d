package claims_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/claims"
	"github.com/formspec/formspec-hooks/hooks/claims/claimstest"
)

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
