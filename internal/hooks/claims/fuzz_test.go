package claims_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// FuzzVerify feeds arbitrary claim fields, keys and signatures to Verify.
// Whatever they are, Verify must not panic, must only grant a claim whose
// fields are exactly the ones the owner signed, and must never put the
// signature into its message. The seeds include a forged claim for every
// weak key.
func FuzzVerify(f *testing.F) {
	signed := claimstest.SignClaim(claimstest.Claim(), claimstest.Owner)
	s := signed.Spec
	f.Add(signed.Namespace, s.Datastore.Namespace, s.Datastore.Name, s.Workspace, s.Permission, s.GrantedBy, s.GrantedAt, s.ExpiresAt, s.Signature, s.SignatureVersion, claimstest.PublicHex(claimstest.Owner))
	f.Add(signed.Namespace, s.Datastore.Namespace, s.Datastore.Name, "shop|read", "admin", "ops", s.GrantedAt, "", s.Signature, "v1", claimstest.PublicHex(claimstest.Owner))
	f.Add("", "", "", "", "", "", "", "", "", "", "")
	f.Add("team-a", "data", "orders-db", "shop", "read", "x", "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", strings.Repeat("A", 86), "v2", strings.Repeat("f", 64))
	// The weak-key corpus, each with a claim forged for it (admin, to make
	// the point): plain ed25519 would grant every one.
	for _, k := range append(append([]claimstest.WeakKey{}, claimstest.SmallOrderKeys...), claimstest.NonCanonicalSmallOrderKeys...) {
		c := claimstest.Claim()
		c.Spec.Permission = v1alpha1.PermissionAdmin
		forged := claimstest.Forge(c, k.Hex)
		fs := forged.Spec
		f.Add(forged.Namespace, fs.Datastore.Namespace, fs.Datastore.Name, fs.Workspace, fs.Permission, fs.GrantedBy, fs.GrantedAt, fs.ExpiresAt, fs.Signature, fs.SignatureVersion, k.Hex)
	}
	f.Fuzz(func(t *testing.T, claimNS, dsNS, dsName, workspace, permission, grantedBy, grantedAt, expiresAt, signature, version, key string) {
		c := claimstest.Claim()
		c.Namespace = claimNS
		c.Spec = v1alpha1.ResourceClaimSpec{
			Datastore: v1alpha1.DatastoreClaimRef{Namespace: dsNS, Name: dsName},
			Workspace: workspace, Permission: permission, GrantedBy: grantedBy,
			GrantedAt: grantedAt, ExpiresAt: expiresAt, Signature: signature, SignatureVersion: version,
		}
		ds := claimstest.Datastore()
		ds.Spec.OwnerPublicKey = key
		ds.Spec.OwnerPublicKeys = nil
		d := claims.Verify(c, ds, claimstest.Secret(), claimstest.Now, claims.Options{AcceptV1: true})
		if d.Reason == "" || d.Message == "" {
			t.Fatalf("Verify() gave an empty reason or message: %+v", d)
		}
		if len(signature) > 8 && strings.Contains(d.Message, signature) {
			t.Fatalf("Verify() message quotes the signature")
		}
		if !d.Allowed {
			return
		}
		// A grant must be the very grant the fixture owner signed (up to
		// the two spellings of its signature and the defaulted namespace),
		// because no other key can sign and we never know the private key
		// of a random public one.
		if key != claimstest.PublicHex(claimstest.Owner) && !strings.EqualFold(key, claimstest.PublicHex(claimstest.Owner)) {
			t.Fatalf("Verify() granted a claim against an unknown key")
		}
		if grant.Of(c) != grant.Of(signed) && grant.Version(c) == v1alpha1.SignatureV2 {
			t.Fatalf("Verify() granted a changed v2 grant: %+v", grant.Of(c))
		}
		if _, err := time.Parse(time.RFC3339, grantedAt); err != nil {
			t.Fatalf("Verify() granted a claim with an unparsable grantedAt")
		}
	})
}

// FuzzEndpoint: whatever a Secret's uri holds, the endpoint taken from it
// is empty or lies wholly after the URI's last '@', so no part of a
// userinfo (a password with '/', '?', '#' or '@' in it included) reaches
// a Datastore's status.
func FuzzEndpoint(f *testing.F) {
	f.Add("mongodb://u:pw@m1:27017,m2:27017/db")
	f.Add("mongodb://app:1234/5678@db:27017")
	f.Add("mongodb://app:/s3cret@db")
	f.Add("mongodb://app:p@ss@[fd00::1]:27017/x?y=z#w")
	f.Fuzz(func(t *testing.T, uri string) {
		got := claims.Endpoint(&corev1.Secret{Data: map[string][]byte{"uri": []byte(uri)}})
		if got == "" {
			return
		}
		i := strings.LastIndex(uri, got)
		if i < 0 || strings.Contains(uri[i:], "@") || strings.ContainsAny(got, "@/?#%") {
			t.Fatalf("Endpoint(%q) = %q, which is not a host list after the last '@'", uri, got)
		}
	})
}
