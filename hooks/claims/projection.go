package claims

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/claims/grant"
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

// CredentialsHash is the digest of projected credentials that a claim's
// status carries, so a workspace can roll its pods when they change
// without reading the Secret. It is "sha256:" and the hex SHA-256 of the
// keys in order, each key and value length-prefixed (as in MessageV2) so
// that no two different maps share an input.
//
// Like any unkeyed digest it lets someone who can read the claim confirm a
// guess of every value at once; generated passwords keep that useless.
func CredentialsHash(data map[string][]byte) string {
	fields := make([]string, 0, 2*len(data))
	for _, k := range SortedKeys(data) {
		fields = append(fields, k, string(data[k]))
	}
	sum := sha256.Sum256(grant.PAE(fields...))
	return "sha256:" + hex.EncodeToString(sum[:])
}
