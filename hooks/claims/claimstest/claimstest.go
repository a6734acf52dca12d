// Package claimstest holds what tests and fixtures need to sign claims: key
// pairs derived from fixed, public seeds, and a valid Datastore, endpoint
// Secret and signed ResourceClaim to start each test case from.
//
// The keys are public knowledge by construction; they must never verify a
// real grant. Deriving them from a seed means the repository stores no
// private key, and ed25519 signatures being deterministic, every fixture
// comes out byte for byte the same on each regeneration.
package claimstest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/claims/grant"
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
