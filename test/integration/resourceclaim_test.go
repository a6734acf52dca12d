package integration

import (
	"bytes"
	"encoding/base64"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// testSignature is the base64 of 64 bytes, the shape of an ed25519
// signature.
var testSignature = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, 64))

func testResourceClaim(t *testing.T, c *controlplane.Client) {
	base := with(t, controlplane.Object{
		"apiVersion": v1alpha1.APIVersion,
		"kind":       "ResourceClaim",
		"metadata":   map[string]any{"name": "acme-orders", "namespace": "default"},
		"spec": map[string]any{
			"datastore":        map[string]any{"name": "orders"},
			"workspace":        "acme",
			"permission":       "read",
			"grantedBy":        "dba@example.com",
			"grantedAt":        "2026-01-02T15:04:05Z",
			"signature":        testSignature,
			"signatureVersion": "v2",
		},
	}, nil)
	full := jsonCopy(t, v1alpha1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "acme-orders", Namespace: "default"},
		Spec: v1alpha1.ResourceClaimSpec{
			Datastore:        v1alpha1.DatastoreClaimRef{Name: "orders", Namespace: "shared"},
			Workspace:        "acme",
			Permission:       v1alpha1.PermissionReadWrite,
			GrantedBy:        "Dana Admin <dba@example.com>",
			GrantedAt:        "2026-01-02T15:04:05.123456789+07:00",
			ExpiresAt:        "2026-02-02T15:04:05Z",
			Signature:        testSignature,
			SignatureVersion: v1alpha1.SignatureV2,
		},
	}).(map[string]any)

	runSchemaCases(t, c, map[string]schemaCase{
		"Typical": {
			reason: "A v2 read grant without expiry is valid.",
			obj:    base,
		},
		"GoTypeFullyPopulated": {
			reason: "Every field of v1alpha1.ResourceClaimSpec, as the Go type encodes it, is in the schema and nothing is pruned.",
			obj:    full,
		},
		"SignatureVersionDefault": {
			reason:   "signatureVersion defaults to v1, the original operator's message format.",
			obj:      with(t, base, fields{"spec.signatureVersion": remove{}}),
			wantSpec: with(t, base, fields{"spec.signatureVersion": "v1"})["spec"],
		},
		"Unsigned": {
			reason: "A claim may be created before it is signed; the hook denies it until then.",
			obj:    with(t, base, fields{"spec.signature": remove{}}),
		},
		"ExpiryComparedAsTime": {
			reason: "expiresAt is compared as a time, not a string: 09:00Z is after 15:04+07:00 (08:04Z).",
			obj:    with(t, base, fields{"spec.grantedAt": "2026-01-02T15:04:05+07:00", "spec.expiresAt": "2026-01-02T09:00:00Z"}),
		},
		"ExpiryBeforeGrantAsTime": {
			reason:   "14:00+07:00 (07:00Z) is before 08:00Z although it sorts after it as a string.",
			obj:      with(t, base, fields{"spec.grantedAt": "2026-01-02T08:00:00Z", "spec.expiresAt": "2026-01-02T14:00:00+07:00"}),
			wantErrs: []string{"spec.expiresAt", "expiresAt must be after grantedAt"},
		},
		"ExpiryEqualsGrant": {
			reason:   "A grant that expires when it is granted is never valid.",
			obj:      with(t, base, fields{"spec.expiresAt": "2026-01-02T15:04:05Z"}),
			wantErrs: []string{"spec.expiresAt", "expiresAt must be after grantedAt"},
		},
		"MissingRequired": {
			reason:   "datastore, workspace, permission, grantedBy and grantedAt are the signed grant and required.",
			obj:      with(t, base, fields{"spec.datastore": remove{}, "spec.workspace": remove{}, "spec.permission": remove{}, "spec.grantedBy": remove{}, "spec.grantedAt": remove{}}),
			wantErrs: []string{"spec.datastore: Required value", "spec.workspace: Required value", "spec.permission: Required value", "spec.grantedBy: Required value", "spec.grantedAt: Required value"},
		},
		"MissingDatastoreName": {
			reason:   "datastore.name is required.",
			obj:      with(t, base, fields{"spec.datastore": map[string]any{"namespace": "shared"}}),
			wantErrs: []string{"spec.datastore.name: Required value"},
		},
		"BadPermission": {
			reason:   "permission is read, readwrite or admin.",
			obj:      with(t, base, fields{"spec.permission": "write"}),
			wantErrs: []string{`spec.permission: Unsupported value: "write"`},
		},
		"BadSignatureVersion": {
			reason:   "signatureVersion is v1 or v2.",
			obj:      with(t, base, fields{"spec.signatureVersion": "v3"}),
			wantErrs: []string{`spec.signatureVersion: Unsupported value: "v3"`},
		},
		"PipeInGrantedBy": {
			reason:   "A '|' in a v1-signed field would let two grants share a message.",
			obj:      with(t, base, fields{"spec.grantedBy": "alice|admin"}),
			wantErrs: []string{"spec.grantedBy", "must not contain '|' or control characters"},
		},
		"NewlineInGrantedBy": {
			reason:   "Control characters are rejected.",
			obj:      with(t, base, fields{"spec.grantedBy": "alice\n"}),
			wantErrs: []string{"spec.grantedBy", "must not contain '|' or control characters"},
		},
		"C1ControlInGrantedBy": {
			reason:   "C1 control characters (U+0080-U+009F) are control characters too.",
			obj:      with(t, base, fields{"spec.grantedBy": "alice\u0085"}),
			wantErrs: []string{"spec.grantedBy", "must not contain '|' or control characters"},
		},
		"PipeInWorkspace": {
			reason:   "workspace is a DNS label, which has no '|'.",
			obj:      with(t, base, fields{"spec.workspace": "acme|x"}),
			wantErrs: []string{"spec.workspace", "should match"},
		},
		"PipeInDatastoreName": {
			reason:   "datastore.name is a DNS subdomain, which has no '|'.",
			obj:      with(t, base, fields{"spec.datastore.name": "orders|x"}),
			wantErrs: []string{"spec.datastore.name", "should match"},
		},
		"PipeInDatastoreNamespace": {
			reason:   "datastore.namespace is a DNS label, which has no '|'.",
			obj:      with(t, base, fields{"spec.datastore.namespace": "shared|x"}),
			wantErrs: []string{"spec.datastore.namespace", "should match"},
		},
		"PipeInGrantedAt": {
			reason:   "grantedAt is an RFC 3339 timestamp, which has no '|'.",
			obj:      with(t, base, fields{"spec.grantedAt": "2026-01-02T15:04:05Z|"}),
			wantErrs: []string{"spec.grantedAt", "must be an RFC 3339 timestamp"},
		},
		"GrantedAtWithSpace": {
			reason:   "RFC 3339 separates date and time with T.",
			obj:      with(t, base, fields{"spec.grantedAt": "2026-01-02 15:04:05Z"}),
			wantErrs: []string{"spec.grantedAt", "must be an RFC 3339 timestamp"},
		},
		"GrantedAtWithoutZone": {
			reason:   "RFC 3339 requires an offset.",
			obj:      with(t, base, fields{"spec.grantedAt": "2026-01-02T15:04:05"}),
			wantErrs: []string{"spec.grantedAt", "must be an RFC 3339 timestamp"},
		},
		"ExpiresAtDateOnly": {
			reason:   "A date is not a timestamp.",
			obj:      with(t, base, fields{"spec.expiresAt": "2026-02-01"}),
			wantErrs: []string{"spec.expiresAt", "must be an RFC 3339 timestamp"},
		},
		"ShortSignature": {
			reason:   "An ed25519 signature is 64 bytes, 88 base64 characters.",
			obj:      with(t, base, fields{"spec.signature": base64.StdEncoding.EncodeToString(make([]byte, 32))}),
			wantErrs: []string{"spec.signature", "should match"},
		},
		"URLSafeSignature": {
			reason:   "The signature is standard base64, not the URL-safe alphabet.",
			obj:      with(t, base, fields{"spec.signature": base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 64))}),
			wantErrs: []string{"spec.signature", "should match"},
		},
		"UnpaddedSignature": {
			reason:   "The signature is padded standard base64.",
			obj:      with(t, base, fields{"spec.signature": base64.RawStdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, 64))}),
			wantErrs: []string{"spec.signature", "should match"},
		},
	})
}
