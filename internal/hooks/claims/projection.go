package claims

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
)

// requiredKeys lists, per driver, the sets of endpoint Secret keys that make
// a usable connection; one complete set is enough. The names are the
// Service Binding specification's well-known entries, so applications read
// them with any binding library.
var requiredKeys = map[string][][]string{
	v1alpha1.DriverPostgres: {{"host", "port", "username", "password", "database"}},
	v1alpha1.DriverMySQL:    {{"host", "port", "username", "password", "database"}},
	// Redis is often deployed without ACL users; a password is optional.
	v1alpha1.DriverRedis: {{"host", "port"}},
	// A MongoDB connection string carries everything (and replica set
	// members, which host and port cannot).
	v1alpha1.DriverMongoDB: {{"uri"}, {"host", "port", "username", "password", "database"}},
}

// RequiredKeys returns the alternative key sets the driver needs, or nil
// for an unknown driver.
func RequiredKeys(driver string) [][]string {
	sets := requiredKeys[driver]
	out := make([][]string, len(sets))
	for i, s := range sets {
		out[i] = slices.Clone(s)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Permissions lists every claim permission, in a fixed order.
var Permissions = []string{v1alpha1.PermissionRead, v1alpha1.PermissionReadWrite, v1alpha1.PermissionAdmin}

// DefaultProvider is the "provider" entry of projected credentials when the
// endpoint Secret names none.
const DefaultProvider = "formspec"

// Project returns the credentials a claim of the given permission receives
// from the endpoint Secret's data: every unprefixed key, overridden by the
// keys prefixed "<permission>." (with the prefix removed); keys prefixed for
// another permission are never copied, so a read claim cannot see the admin
// password. "type" is always the driver, because binding libraries pick the
// client by it; "provider" is kept when the Secret has one. The values are
// the Secret's own slices: callers must not modify them.
func Project(data map[string][]byte, driver, permission string) map[string][]byte {
	out := make(map[string][]byte, len(data)+2)
	for k, v := range data {
		if _, _, prefixed := permissionPrefix(k); !prefixed {
			out[k] = v
		}
	}
	for k, v := range data {
		if p, rest, prefixed := permissionPrefix(k); prefixed && p == permission && rest != "" {
			out[rest] = v
		}
	}
	out["type"] = []byte(driver)
	if len(out["provider"]) == 0 {
		out["provider"] = []byte(DefaultProvider)
	}
	return out
}

func permissionPrefix(key string) (permission, rest string, ok bool) {
	p, rest, found := strings.Cut(key, ".")
	if !found || !slices.Contains(Permissions, p) {
		return "", "", false
	}
	return p, rest, true
}

// missingKeys returns the keys a claim of the permission would lack, for
// the key set that comes closest; nil when one set is complete.
func missingKeys(data map[string][]byte, driver, permission string) []string {
	projected := Project(data, driver, permission)
	var best []string
	for i, set := range requiredKeys[driver] {
		var missing []string
		for _, k := range set {
			if len(projected[k]) == 0 {
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if i == 0 || len(missing) < len(best) {
			best = missing
		}
	}
	return best
}

// SortedKeys returns a map's keys in order, for deterministic output.
func SortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// The credentials a claim's workspace runs with are named without being
// described. Whoever can read Pods, ReplicaSets or the claim (the built-in
// "view" role, and so dashboards, GitOps and backup tools) reads
// status.credentialsHash and the pod-template annotation derived from it.
// A digest of the credentials there, keyed or not by anything such a
// reader can learn, would let them test password guesses offline: the
// host, port, database and user are public or guessable, and a million
// guesses of the password take a core about a second. So the value is
// derived from non-secret inputs only: the claim's UID and a revision that
// counts the versions of the credentials Secret's data. The revision lives
// on the Secret itself (v1alpha1.AnnotationCredentialsRevision), where the
// hook observes it on every sync, so the hook stays stateless and gives
// the same answer to the same request.

// CredentialsRevision is the revision of the credentials Secret that is to
// hold data: the observed Secret's revision while its data is data, one
// more once it differs (the credentials rotated), and 1 for a first
// Secret. A Secret observed without the annotation, as made before there
// was one, or with a value that is no positive number, counts as
// revision 1. observed is the credentials Secret as Metacontroller last
// saw it, nil when there is none.
func CredentialsRevision(observed *corev1.Secret, data map[string][]byte) int64 {
	if observed == nil {
		return 1
	}
	rev, err := strconv.ParseInt(observed.Annotations[v1alpha1.AnnotationCredentialsRevision], 10, 64)
	if err != nil || rev < 1 {
		rev = 1
	}
	if maps.EqualFunc(observed.Data, data, bytes.Equal) {
		return rev
	}
	return rev + 1
}

// credentialsDomain separates CredentialsHash's input from any other
// SHA-256 input.
const credentialsDomain = "formspec.dev/credentials/v2"

// CredentialsHash is a granted claim's status.credentialsHash: "sha256:"
// and the hex SHA-256 of the claim's UID and the credentials revision
// (CredentialsRevision), length-prefixed as in grant.MessageV2. It changes
// when the credentials rotate, and when the claim is created anew (a new
// UID), and at no other time; it says nothing about the credentials.
func CredentialsHash(claimUID types.UID, revision int64) string {
	sum := sha256.Sum256(grant.PAE(credentialsDomain, string(claimUID), strconv.FormatInt(revision, 10)))
	return "sha256:" + hex.EncodeToString(sum[:])
}
