package integration

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// testKey is a well-formed hex ed25519 public key.
var testKey = strings.Repeat("0123456789abcdef", 4)

// testDigest is a well-formed signature digest.
var testDigest = "sha256:" + strings.Repeat("0123456789abcdef", 4)

func testDatastore(t *testing.T, c *controlplane.Client) {
	base := with(t, controlplane.Object{
		"apiVersion": v1alpha1.APIVersion,
		"kind":       "Datastore",
		"metadata":   map[string]any{"name": "orders", "namespace": "default"},
		"spec": map[string]any{
			"driver":            "postgres",
			"endpointSecretRef": map[string]any{"name": "orders-endpoint"},
			"ownerPublicKey":    testKey,
			"allowedTenants":    []any{"team-a/acme", "team-b/*"},
		},
	}, nil)
	full := jsonCopy(t, v1alpha1.Datastore{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Datastore"},
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "default"},
		Spec: v1alpha1.DatastoreSpec{
			Driver:            v1alpha1.DriverMongoDB,
			EndpointSecretRef: v1alpha1.SecretRef{Name: "orders-endpoint"},
			AllowedTenants:    []string{"team-a/acme"},
			Owner:             "dba@example.com",
			Capacity:          json.RawMessage(`{"storage":"100Gi","connections":200}`),
			OwnerPublicKey:    testKey,
			OwnerPublicKeys:   []string{strings.ToUpper(testKey), strings.Repeat("f", 64)},
			GrantPolicy: &v1alpha1.GrantPolicy{
				AcceptV1Signatures: true,
				MaxLifetime:        "2160h",
				RevokedBefore:      "2026-01-02T15:04:05+07:00",
				RevokedSignatures:  []string{testDigest},
			},
		},
	}).(map[string]any)

	runSchemaCases(t, c, map[string]schemaCase{
		"Typical": {
			reason: "A postgres datastore with one key and tenants is valid.",
			obj:    base,
		},
		"GoTypeFullyPopulated": {
			reason: "Every field of v1alpha1.DatastoreSpec, as the Go type encodes it, is in the schema and nothing is pruned.",
			obj:    full,
		},
		"CapacityScalar": {
			reason: "capacity is carried as any JSON value.",
			obj:    with(t, base, fields{"spec.capacity": "100Gi"}),
		},
		"OnlyKeyList": {
			reason: "ownerPublicKeys alone is enough.",
			obj:    with(t, base, fields{"spec.ownerPublicKey": remove{}, "spec.ownerPublicKeys": []any{testKey}}),
		},
		"NoTenants": {
			reason: "allowedTenants may be empty (nobody may claim yet).",
			obj:    with(t, base, fields{"spec.allowedTenants": remove{}}),
		},
		"GrantPolicyLifetimeUnits": {
			reason: "maxLifetime takes a Go duration in any unit CEL's duration() knows.",
			obj:    with(t, base, fields{"spec.grantPolicy": map[string]any{"maxLifetime": "720h30m1.5s"}}),
		},
		"GrantPolicyLifetimeInDays": {
			reason:   "A day is no duration unit; \"90d\" must not read as no limit.",
			obj:      with(t, base, fields{"spec.grantPolicy": map[string]any{"maxLifetime": "90d"}}),
			wantErrs: []string{"spec.grantPolicy.maxLifetime", "must be a positive duration"},
		},
		"GrantPolicyLifetimeZero": {
			reason:   "A zero lifetime is refused, not read as no limit.",
			obj:      with(t, base, fields{"spec.grantPolicy": map[string]any{"maxLifetime": "0s"}}),
			wantErrs: []string{"spec.grantPolicy.maxLifetime", "must be a positive duration"},
		},
		"GrantPolicyRevokedBeforeNotATime": {
			reason:   "revokedBefore is an RFC 3339 timestamp.",
			obj:      with(t, base, fields{"spec.grantPolicy": map[string]any{"revokedBefore": "2026-01-02"}}),
			wantErrs: []string{"spec.grantPolicy.revokedBefore", "must be an RFC 3339 timestamp"},
		},
		"GrantPolicyRevokedSignatureItself": {
			reason:   "A revoked entry is the signature's digest; the signature pasted instead is refused.",
			obj:      with(t, base, fields{"spec.grantPolicy": map[string]any{"revokedSignatures": []any{strings.Repeat("A", 86) + "=="}}}),
			wantErrs: []string{"spec.grantPolicy.revokedSignatures[0]"},
		},
		"BadDriver": {
			reason:   "driver is one of postgres, mysql, redis, mongodb.",
			obj:      with(t, base, fields{"spec.driver": "sqlite"}),
			wantErrs: []string{`spec.driver: Unsupported value: "sqlite"`},
		},
		"NoDriver": {
			reason:   "driver is required.",
			obj:      with(t, base, fields{"spec.driver": remove{}}),
			wantErrs: []string{"spec.driver: Required value"},
		},
		"NoEndpointSecretRef": {
			reason:   "endpointSecretRef is required.",
			obj:      with(t, base, fields{"spec.endpointSecretRef": remove{}}),
			wantErrs: []string{"spec.endpointSecretRef: Required value"},
		},
		"NoEndpointSecretName": {
			reason:   "endpointSecretRef.name is required.",
			obj:      with(t, base, fields{"spec.endpointSecretRef": map[string]any{}}),
			wantErrs: []string{"spec.endpointSecretRef.name: Required value"},
		},
		"ShortKey": {
			reason:   "An ed25519 public key is 32 bytes: 64 hex characters.",
			obj:      with(t, base, fields{"spec.ownerPublicKey": testKey[:63]}),
			wantErrs: []string{"spec.ownerPublicKey", "should match"},
		},
		"NonHexKey": {
			reason:   "The key is hex.",
			obj:      with(t, base, fields{"spec.ownerPublicKey": strings.Repeat("g", 64)}),
			wantErrs: []string{"spec.ownerPublicKey", "should match"},
		},
		"BadKeyInList": {
			reason:   "Every listed key is 64 hex characters.",
			obj:      with(t, base, fields{"spec.ownerPublicKeys": []any{testKey, "abc"}}),
			wantErrs: []string{"spec.ownerPublicKeys[1]", "should match"},
		},
		"NoKeys": {
			reason:   "Without a key no claim could ever verify.",
			obj:      with(t, base, fields{"spec.ownerPublicKey": remove{}}),
			wantErrs: []string{"at least one of ownerPublicKey or ownerPublicKeys must be set"},
		},
		"EmptyKeyList": {
			reason:   "An empty key list is no key.",
			obj:      with(t, base, fields{"spec.ownerPublicKey": remove{}, "spec.ownerPublicKeys": []any{}}),
			wantErrs: []string{"at least one of ownerPublicKey or ownerPublicKeys must be set"},
		},
		"TenantWithoutWorkspace": {
			reason:   "A tenant is namespace/workspace or namespace/*.",
			obj:      with(t, base, fields{"spec.allowedTenants": []any{"team-a"}}),
			wantErrs: []string{"spec.allowedTenants[0]", "should match"},
		},
		"TenantWildcardNamespace": {
			reason:   "Only the workspace part may be a wildcard.",
			obj:      with(t, base, fields{"spec.allowedTenants": []any{"*/acme"}}),
			wantErrs: []string{"spec.allowedTenants[0]", "should match"},
		},
		"TenantUppercase": {
			reason:   "Namespaces and workspace names are lowercase DNS labels.",
			obj:      with(t, base, fields{"spec.allowedTenants": []any{"team-a/acme", "Team-B/acme"}}),
			wantErrs: []string{"spec.allowedTenants[1]", "should match"},
		},
		"TenantExtraSegment": {
			reason:   "A tenant has exactly two parts.",
			obj:      with(t, base, fields{"spec.allowedTenants": []any{"team-a/acme/x"}}),
			wantErrs: []string{"spec.allowedTenants[0]", "should match"},
		},
		"DuplicateTenant": {
			reason:   "allowedTenants is a set.",
			obj:      with(t, base, fields{"spec.allowedTenants": []any{"team-a/acme", "team-a/acme"}}),
			wantErrs: []string{"spec.allowedTenants[1]", "Duplicate value"},
		},
	})
}
