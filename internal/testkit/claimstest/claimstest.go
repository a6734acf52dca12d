// Package claimstest holds what tests and fixtures need to sign claims: key
// pairs derived from fixed, public seeds, a valid Datastore, endpoint
// Secret and signed ResourceClaim to start each test case from, and the
// adversarial corpus of weak owner keys (small-order and non-canonical
// points) with the forgery they allow.
//
// The keys are public knowledge by construction; they must never verify a
// real grant. Deriving them from a seed means the repository stores no
// private key, and ed25519 signatures being deterministic, every fixture
// comes out byte for byte the same on each regeneration.
package claimstest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
)

// Key returns the private key derived from a name: the seed is
// sha256("formspec-hooks test key: " + name).
func Key(name string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("formspec-hooks test key: " + name))
	return ed25519.NewKeyFromSeed(seed[:])
}

// PublicHex returns a private key's public key as a Datastore carries it.
func PublicHex(priv ed25519.PrivateKey) string {
	return grant.FormatPublicKey(priv.Public().(ed25519.PublicKey))
}

// Fixed names, time and keys of the test world.
var (
	// Owner signs the grants of the Datastore built by Datastore.
	Owner = Key("owner")
	// Rotated is a second owner key listed in ownerPublicKeys.
	Rotated = Key("rotated")
	// Stranger is a key the Datastore does not know.
	Stranger = Key("stranger")
	// Now is the clock of every test and fixture: 2026-01-01T00:00:00Z.
	Now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Names of the test world's objects.
const (
	DatastoreNamespace = "data"
	DatastoreName      = "orders-db"
	SecretName         = "orders-db-endpoint"
	ClaimNamespace     = "team-a"
	ClaimName          = "orders"
	Workspace          = "shop"
	// Password is the endpoint Secret's password: recognizable, so that a
	// test can search outputs and logs for it.
	Password = "s3cr3t-PASSWORD-must-never-leak"
	// AdminPassword is the admin-only password.
	AdminPassword = "adm1n-PASSWORD-must-never-leak"
	// SlashPasswordPrefix starts SlashPassword. A URI parser that ends the
	// authority at the password's unescaped '/' reads
	// "user:<SlashPasswordPrefix>" as host:port, so this is the part that
	// would reach a status; it is long enough not to turn up by chance.
	SlashPasswordPrefix = "2718281828459045"
	// SlashPassword is the password of MongoSecret's URI, written with an
	// unescaped '/' as people paste them.
	SlashPassword = SlashPasswordPrefix + "/" + Password
)

// Datastore returns a valid postgres Datastore owned by Owner (and
// Rotated), allowing ClaimNamespace/Workspace.
func Datastore() *v1alpha1.Datastore {
	return &v1alpha1.Datastore{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Datastore"},
		ObjectMeta: metav1.ObjectMeta{
			Name: DatastoreName, Namespace: DatastoreNamespace,
			UID: "6f1c2f4e-0d1a-4c55-9a57-3d5e2b7c9a10", Generation: 1, ResourceVersion: "4100",
			CreationTimestamp: metav1.NewTime(Now.Add(-72 * time.Hour)),
		},
		Spec: v1alpha1.DatastoreSpec{
			Driver:            v1alpha1.DriverPostgres,
			EndpointSecretRef: v1alpha1.SecretRef{Name: SecretName},
			AllowedTenants:    []string{ClaimNamespace + "/" + Workspace, "team-b/*"},
			Owner:             "data-team@example.com",
			OwnerPublicKey:    PublicHex(Owner),
			OwnerPublicKeys:   []string{PublicHex(Rotated)},
		},
	}
}

// Secret returns the Datastore's labelled endpoint Secret, with an
// admin-only password override.
func Secret() *corev1.Secret {
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: SecretName, Namespace: DatastoreNamespace,
			UID: "0b6f7a8e-5c3d-4e21-8f90-1a2b3c4d5e6f", ResourceVersion: "4001",
			CreationTimestamp: metav1.NewTime(Now.Add(-72 * time.Hour)),
			Labels:            map[string]string{v1alpha1.LabelDatastore: DatastoreName},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			"host":           []byte("orders-db.data.svc.cluster.local"),
			"port":           []byte("5432"),
			"database":       []byte("orders"),
			"username":       []byte("orders_app"),
			"password":       []byte(Password),
			"admin.username": []byte("orders_admin"),
			"admin.password": []byte(AdminPassword),
		},
	}
}

// MongoDatastore returns Datastore() with the mongodb driver, the Datastore
// of MongoSecret.
func MongoDatastore() *v1alpha1.Datastore {
	ds := Datastore()
	ds.Spec.Driver = v1alpha1.DriverMongoDB
	return ds
}

// MongoSecret returns the labelled endpoint Secret of MongoDatastore: a
// connection string alone, whose password (SlashPassword) holds an
// unescaped '/'.
func MongoSecret() *corev1.Secret {
	s := Secret()
	s.Data = map[string][]byte{
		"uri": []byte("mongodb://orders_app:" + SlashPassword + "@orders-db-0.data.svc:27017,orders-db-1.data.svc:27017/orders"),
	}
	return s
}

// Claim returns an unsigned v2 read claim of ClaimNamespace/Workspace on
// the Datastore, granted an hour before Now. Sign it with SignClaim.
func Claim() *v1alpha1.ResourceClaim {
	return &v1alpha1.ResourceClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ClaimName, Namespace: ClaimNamespace,
			UID: "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a", Generation: 1, ResourceVersion: "5200",
			CreationTimestamp: metav1.NewTime(Now.Add(-time.Hour)),
		},
		Spec: v1alpha1.ResourceClaimSpec{
			Datastore:        v1alpha1.DatastoreClaimRef{Name: DatastoreName, Namespace: DatastoreNamespace},
			Workspace:        Workspace,
			Permission:       v1alpha1.PermissionRead,
			GrantedBy:        "data-team@example.com",
			GrantedAt:        Now.Add(-time.Hour).Format(time.RFC3339),
			SignatureVersion: v1alpha1.SignatureV2,
		},
	}
}

// SignClaim signs the claim in place with its own signatureVersion and
// returns it. It panics on a claim that cannot be signed: a test that
// wants a bad signature writes one by hand.
func SignClaim(c *v1alpha1.ResourceClaim, priv ed25519.PrivateKey) *v1alpha1.ResourceClaim {
	sig, err := grant.Sign(grant.Of(c), grant.Version(c), priv)
	if err != nil {
		panic("claimstest: cannot sign claim: " + err.Error())
	}
	c.Spec.Signature = sig
	return c
}

// WeakKey is a public key encoding that must never verify a grant.
type WeakKey struct {
	// Name says which point it is and how it is written.
	Name string
	// Hex is the key as a Datastore would carry it.
	Hex string
}

// Canonical encodings of the points of order 4 and 8, written as every
// point is: y in little-endian with the sign of x in the top bit. The
// eight small-order points have y = 1 (the identity), p-1 (order 2), 0
// (order 4, x = ±sqrt(-1)) and two values y8, p-y8 (order 8, two signs of
// x each), where p = 2^255-19.
var (
	order4Hex  = strings.Repeat("00", 32)
	order8aHex = "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a"
	order8bHex = "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"
)

// IdentityKey is the identity point as a public key, 01 then 62 zeros:
// the key of the reported forgery, under which R = identity, S = 0
// verifies every message with plain ed25519.
var IdentityKey = "01" + strings.Repeat("00", 31)

// Order2Key is the point of order 2 (y = p-1, x = 0) as a public key.
var Order2Key = "ec" + strings.Repeat("ff", 30) + "7f"

// SmallOrderKeys are the canonical encodings of the eight points of order
// 1, 2, 4 and 8: with any of them as an owner key, a "signature" made
// without a private key verifies under plain ed25519 (see Forge).
var SmallOrderKeys = []WeakKey{
	{"Identity", IdentityKey},
	{"Order2", Order2Key},
	{"Order4", order4Hex},
	{"Order4Negative", withSign(order4Hex)},
	{"Order8a", order8aHex},
	{"Order8aNegative", withSign(order8aHex)},
	{"Order8b", order8bHex},
	{"Order8bNegative", withSign(order8bHex)},
}

// NonCanonicalSmallOrderKeys are the other encodings of small-order points
// that decoders accept: the sign bit set where x = 0 (the identity and the
// point of order 2), and y written as p or p+1 instead of 0 or 1. No other
// exist: y8+p and p-1+p do not fit in 255 bits.
var NonCanonicalSmallOrderKeys = []WeakKey{
	{"IdentityNegativeZero", withSign(IdentityKey)},
	{"Order2NegativeZero", withSign(Order2Key)},
	{"IdentityYPlusP", "ee" + strings.Repeat("ff", 30) + "7f"},
	{"IdentityYPlusPNegativeZero", "ee" + strings.Repeat("ff", 31)},
	{"Order4YIsP", "ed" + strings.Repeat("ff", 30) + "7f"},
	{"Order4YIsPNegative", "ed" + strings.Repeat("ff", 31)},
}

// NonCanonicalKey is a point of prime order written non-canonically, with
// y = p+3 for the point whose y is 3: harmless to verify with, refused all
// the same, so that a key has one spelling.
var NonCanonicalKey = WeakKey{"YPlusP", "f0" + strings.Repeat("ff", 30) + "7f"}

// NotAPointKey is 32 bytes that decode to no point of the curve (y = 2).
var NotAPointKey = "02" + strings.Repeat("00", 31)

// WeakKeys lists every weak key above: SmallOrderKeys,
// NonCanonicalSmallOrderKeys and NonCanonicalKey.
func WeakKeys() []WeakKey {
	out := append([]WeakKey{}, SmallOrderKeys...)
	out = append(out, NonCanonicalSmallOrderKeys...)
	return append(out, NonCanonicalKey)
}

func withSign(h string) string {
	b, _ := hex.DecodeString(h)
	b[31] |= 0x80
	return hex.EncodeToString(b)
}

// Forge signs the claim in place without any private key, for a
// small-order owner key (hex): S = 0 and R one of the eight small-order
// points, the one equal to -[k]A if any (k, the message hash, depends on
// R). The result verifies under plain ed25519.Verify, which is the attack
// package grant must refuse. With the identity key R = identity works for
// every claim; with the others a given claim has a forgery only by chance
// (one in two to one in eight), so Forge moves spec.grantedAt back a second
// at a time until one exists, at most 64 times. It panics when none does,
// which for a key not of small order is always.
func Forge(c *v1alpha1.ResourceClaim, keyHex string) *v1alpha1.ResourceClaim {
	pub, err := hex.DecodeString(keyHex)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		panic("claimstest: Forge needs a 64-hex-character key")
	}
	grantedAt, err := time.Parse(time.RFC3339, c.Spec.GrantedAt)
	if err != nil {
		panic("claimstest: Forge needs an RFC 3339 grantedAt")
	}
	for range 64 {
		msg, err := grant.Of(c).Message(grant.Version(c))
		if err != nil {
			panic("claimstest: cannot forge claim: " + err.Error())
		}
		for _, r := range SmallOrderKeys {
			sig, _ := hex.DecodeString(r.Hex + strings.Repeat("00", 32))
			if ed25519.Verify(pub, msg, sig) {
				c.Spec.Signature = grant.FormatSignature(sig)
				return c
			}
		}
		grantedAt = grantedAt.Add(-time.Second)
		c.Spec.GrantedAt = grantedAt.UTC().Format(time.RFC3339)
	}
	panic("claimstest: no forgery for this key: it is not of small order")
}
