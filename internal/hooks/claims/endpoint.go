package claims

import (
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

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
