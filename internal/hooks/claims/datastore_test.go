package claims_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
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
		"GrantPolicyValid": {
			reason: "A grant policy with every field set, well formed.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{AcceptV1Signatures: true, MaxLifetime: "2160h", RevokedBefore: "2025-06-01T00:00:00Z",
					RevokedSignatures: []string{"sha256:" + strings.Repeat("0f", 32)}}
				return s
			},
			want: v1alpha1.ReasonValidated,
		},
		"MaxLifetimeNotADuration": {
			reason: "maxLifetime is a Go duration; a limit that does not parse must not be read as none.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{MaxLifetime: "90d"}
				return s
			},
			want: v1alpha1.ReasonInvalidGrantPolicy,
		},
		"MaxLifetimeNotPositive": {
			reason: "A zero or negative lifetime is no limit anyone means.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{MaxLifetime: "-1h"}
				return s
			},
			want: v1alpha1.ReasonInvalidGrantPolicy,
		},
		"RevokedBeforeNotATime": {
			reason: "revokedBefore is RFC 3339.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{RevokedBefore: "yesterday"}
				return s
			},
			want: v1alpha1.ReasonInvalidGrantPolicy,
		},
		"RevokedSignatureNotADigest": {
			reason: "A revoked entry is a digest, not the signature itself.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{RevokedSignatures: []string{strings.Repeat("A", 86) + "=="}}
				return s
			},
			want: v1alpha1.ReasonInvalidGrantPolicy,
		},
		"TooManyRevokedSignatures": {
			reason: "The list is capped; older grants are revoked by date.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{}
				for range v1alpha1.MaxRevokedSignatures + 1 {
					ds.Spec.GrantPolicy.RevokedSignatures = append(ds.Spec.GrantPolicy.RevokedSignatures, "sha256:"+strings.Repeat("0f", 32))
				}
				return s
			},
			want: v1alpha1.ReasonInvalidGrantPolicy,
		},
		"KeysPinned": {
			reason: "The Secret pins every key the Datastore lists, in any case and order.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				s.Annotations = map[string]string{v1alpha1.AnnotationOwnerPublicKeys: ds.Spec.OwnerPublicKeys[0] + "\n" + strings.ToUpper(ds.Spec.OwnerPublicKey)}
				return s
			},
			want: v1alpha1.ReasonValidated,
		},
		"KeyNotPinned": {
			reason: "The Datastore lists a key the Secret does not pin.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				s.Annotations = map[string]string{v1alpha1.AnnotationOwnerPublicKeys: ds.Spec.OwnerPublicKey}
				return s
			},
			want: v1alpha1.ReasonOwnerKeyNotPinned,
		},
		"PinsEmpty": {
			reason: "An empty pin list pins nothing: no key may be used, rather than every key.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				s.Annotations = map[string]string{v1alpha1.AnnotationOwnerPublicKeys: " , "}
				return s
			},
			want: v1alpha1.ReasonOwnerKeyNotPinned,
		},
		"PinNotAKey": {
			reason: "A pinned entry that is no public key refuses the Datastore.",
			change: func(ds *v1alpha1.Datastore, s *corev1.Secret) *corev1.Secret {
				s.Annotations = map[string]string{v1alpha1.AnnotationOwnerPublicKeys: ds.Spec.OwnerPublicKey + "," + ds.Spec.OwnerPublicKeys[0] + ",abc"}
				return s
			},
			want: v1alpha1.ReasonOwnerKeyNotPinned,
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
