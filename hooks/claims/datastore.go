package claims

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

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

// PublicKeys parses every owner key of a Datastore, ownerPublicKey first.
func PublicKeys(ds *v1alpha1.Datastore) ([][]byte, error) {
	var raw []string
	if ds.Spec.OwnerPublicKey != "" {
		raw = append(raw, ds.Spec.OwnerPublicKey)
	}
	if n := len(ds.Spec.OwnerPublicKeys); n > v1alpha1.MaxOwnerPublicKeys {
		return nil, fmt.Errorf("%w: spec.ownerPublicKeys has %d entries, more than the %d allowed", grant.ErrMalformedPublicKey, n, v1alpha1.MaxOwnerPublicKeys)
	}
	raw = append(raw, ds.Spec.OwnerPublicKeys...)
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: the Datastore has neither ownerPublicKey nor ownerPublicKeys", grant.ErrMalformedPublicKey)
	}
	keys := make([][]byte, 0, len(raw))
	for i, s := range raw {
		k, err := grant.ParsePublicKey(s)
		if err != nil {
			return nil, fmt.Errorf("owner key %d of %d: %w", i+1, len(raw), err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// ErrInvalidTenant is wrapped by errors about an allowedTenants entry.
var ErrInvalidTenant = errors.New("invalid allowedTenants entry")

// CheckTenant reports whether an allowedTenants entry has the form
// "namespace/workspace" or "namespace/*". There is no namespace wildcard:
// a Datastore owner names every namespace that may claim it.
func CheckTenant(entry string) error {
	ns, ws, ok := strings.Cut(entry, "/")
	if !ok {
		return fmt.Errorf("%w: %q is not namespace/workspace or namespace/*", ErrInvalidTenant, entry)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("%w: %q: the namespace is not a valid namespace name", ErrInvalidTenant, entry)
	}
	if ws != "*" {
		if errs := validation.IsDNS1123Subdomain(ws); len(errs) > 0 {
			return fmt.Errorf("%w: %q: the workspace is neither \"*\" nor a valid object name", ErrInvalidTenant, entry)
		}
	}
	return nil
}

// TenantAllowed reports whether a workspace in a namespace matches one of
// the entries. An empty list allows nobody: access is granted, never
// assumed. Malformed entries match nothing.
func TenantAllowed(allowed []string, namespace, workspace string) bool {
	for _, entry := range allowed {
		if CheckTenant(entry) != nil {
			continue
		}
		ns, ws, _ := strings.Cut(entry, "/")
		if ns == namespace && (ws == "*" || ws == workspace) {
			return true
		}
	}
	return false
}

// CheckDatastore validates a Datastore and its endpoint Secret (nil when
// not found). It checks the spec first, so a Datastore that is wrong on its
// own says so even before its Secret exists. The message never quotes a
// Secret value, but it does name the Secret, the keys it lacks and a
// malformed allowedTenants entry: it is written for the Datastore's own
// status, and Verify only passes it on to a claim whose signature, tenant
// and dates have all been accepted.
func CheckDatastore(ds *v1alpha1.Datastore, secret *corev1.Secret) Decision {
	deny := func(reason, format string, args ...any) Decision {
		return Decision{Reason: reason, Message: fmt.Sprintf(format, args...)}
	}
	if requiredKeys[ds.Spec.Driver] == nil {
		return deny(v1alpha1.ReasonUnsupportedDriver, "spec.driver %q is not one of postgres, mysql, redis, mongodb", ds.Spec.Driver)
	}
	if _, err := PublicKeys(ds); err != nil {
		// One weak key refuses the whole Datastore, not just that key: the
		// Datastore would otherwise report Validated while listing a key
		// anyone can sign with, and its owner would not look.
		if errors.Is(err, grant.ErrWeakPublicKey) {
			return deny(v1alpha1.ReasonWeakPublicKey, "%v; such a key must never verify a grant: remove it, and list only keys made by formspec-hooks claim keygen", err)
		}
		return deny(v1alpha1.ReasonInvalidPublicKey, "%v; every owner key must be an ed25519 public key in 64 hexadecimal characters (formspec-hooks claim keygen prints one)", err)
	}
	if n := len(ds.Spec.AllowedTenants); n > v1alpha1.MaxAllowedTenants {
		return deny(v1alpha1.ReasonInvalidTenant, "spec.allowedTenants has %d entries, more than the %d allowed; use namespace/* entries", n, v1alpha1.MaxAllowedTenants)
	}
	for _, t := range ds.Spec.AllowedTenants {
		if err := CheckTenant(t); err != nil {
			return deny(v1alpha1.ReasonInvalidTenant, "spec.allowedTenants: %v", err)
		}
	}
	ref := ds.Spec.EndpointSecretRef.Name
	if ref == "" {
		return deny(v1alpha1.ReasonSecretNotFound, "spec.endpointSecretRef.name is empty")
	}
	if secret == nil || secret.Name != ref || secret.Namespace != ds.Namespace {
		return deny(v1alpha1.ReasonSecretNotFound, "Secret %s/%s named by spec.endpointSecretRef was not found", ds.Namespace, ref)
	}
	if secret.Labels[v1alpha1.LabelDatastore] != ds.Name {
		return deny(v1alpha1.ReasonSecretNotLabeled, "Secret %s/%s must carry the label %s=%s: the label is its owner's consent to having its data projected into claims",
			ds.Namespace, ref, v1alpha1.LabelDatastore, ds.Name)
	}
	var missing []string
	for _, p := range Permissions {
		for _, k := range missingKeys(secret.Data, ds.Spec.Driver, p) {
			missing = append(missing, p+":"+k)
		}
	}
	if len(missing) > 0 {
		return deny(v1alpha1.ReasonMissingKeys, "Secret %s/%s lacks keys a %s connection needs (permission:key): %s; set them unprefixed or as <permission>.<key>",
			ds.Namespace, ref, ds.Spec.Driver, strings.Join(missing, ", "))
	}
	return Decision{Allowed: true, Reason: v1alpha1.ReasonValidated,
		Message: fmt.Sprintf("Secret %s/%s holds a complete %s endpoint", ds.Namespace, ref, ds.Spec.Driver)}
}

// Endpoint returns the "host:port" a Datastore's Secret points at, for the
// Datastore's status, or "" when it cannot tell. For a MongoDB URI it is the
// URI's host list, "h1:p1,h2:p2".
//
// status.endpoint is readable by everyone who can read the Datastore, so
// Endpoint returns only what it can prove is a host list and "" for
// anything else. A password is meant to be percent-encoded in a URI, but
// people paste raw ones: with "mongodb://app:1234/5678@db" a URI parser
// ends the authority at the first '/' and takes "app:1234" (the user and
// the start of the password) for host:port. So the authority is cut out by
// hand, its userinfo dropped up to its last '@', and the result refused if
// any '@' follows the authority (a password holding '/', '?' or '#') or if
// any host is not a plain hostname or IP address with an optional numeric
// port. The "host" and "port" keys are held to the same rule.
func Endpoint(secret *corev1.Secret) string {
	if secret == nil {
		return ""
	}
	host, port := string(secret.Data["host"]), string(secret.Data["port"])
	if host != "" && port != "" {
		if (plainHost(host) || net.ParseIP(host) != nil) && plainPort(port) {
			return net.JoinHostPort(host, port)
		}
		return ""
	}
	if uri := string(secret.Data["uri"]); uri != "" {
		return uriHosts(uri)
	}
	return ""
}

// uriHosts returns the host list of a URI "scheme://[userinfo@]hosts[/...]"
// when every host in it is plain, and "" otherwise (see Endpoint).
func uriHosts(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok || scheme == "" || strings.IndexFunc(scheme, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')
	}) >= 0 {
		return ""
	}
	authority, after := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, after = rest[:i], rest[i:]
	}
	// An '@' after the authority means the authority ended inside the
	// userinfo: what looks like hosts is part of the credentials.
	if strings.Contains(after, "@") {
		return ""
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		authority = authority[i+1:]
	}
	if authority == "" {
		return ""
	}
	for _, hp := range strings.Split(authority, ",") {
		if !hostPort(hp) {
			return ""
		}
	}
	return authority
}

// hostPort reports whether s is a plain host with an optional numeric
// port: "name", "name:27017", "10.0.0.1:27017", "[fd00::1]:27017".
func hostPort(s string) bool {
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return false
		}
		ip, port := s[1:end], s[end+1:]
		if net.ParseIP(ip) == nil || !strings.Contains(ip, ":") {
			return false
		}
		return port == "" || strings.HasPrefix(port, ":") && plainPort(port[1:])
	}
	host, port, hasPort := strings.Cut(s, ":")
	if hasPort && !plainPort(port) {
		return false
	}
	return plainHost(host)
}

// plainHost reports whether s is a DNS name or IPv4 address: letters,
// digits, '-', '_' and '.', at most 253 characters. Nothing that a URI
// uses as a delimiter, and nothing percent-encoded, gets through.
func plainHost(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// plainPort reports whether s is a decimal TCP port, 1 to 65535.
func plainPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
		n = 10*n + int(r-'0')
	}
	return n >= 1 && n <= 65535
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
