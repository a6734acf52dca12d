// Package weburl checks the http(s) addresses the commands are given:
// Cluster Control, the reporter sidecar, the interceptors' admin port;
// and cuts them down to what may be logged.
//
// An address is logged at start-up, written into every workspace's pod
// spec (CONTROL_CLUSTER_URL) and quoted by whoever reports it wrong, so
// it must not carry a credential: a user or password before "@", a query
// string ("?token=…") and a fragment are refused, and no error here
// repeats the address it was given. What is logged of an address, at
// start or in a failed call's error, is its Origin alone, so that a path
// is never taken for something safe to print either.
package weburl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// ErrUserinfo is a URL with a user or password in it.
var ErrUserinfo = errors.New(`must not carry a user or password (the "user:password@" part): an address is logged and copied into pod specs; give a credential in a file`)

// ErrQuery is a URL with a query string or a fragment: the place a token
// is pasted when there is nowhere else for it.
var ErrQuery = errors.New(`must not carry a query string or a fragment (the "?…" or "#…" part): an address is logged and copied into pod specs; give a credential in a file`)

// Parse parses raw as an absolute http or https URL with a host and
// neither user nor password, query nor fragment. name says what the
// address is (a flag, or "reporter URL") and heads the error, which names
// the part that is wrong and never quotes raw.
func Parse(name, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		// url.Error quotes the whole URL: leave it out.
		return nil, fmt.Errorf("%s must be an http or https URL: it does not parse", name)
	case u.User != nil:
		return nil, fmt.Errorf("%s %w", name, ErrUserinfo)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(raw, "#"):
		// url.Parse cuts the fragment at the first "#" and the query at
		// the first "?" before it: a bare "?" or "#" counts too.
		return nil, fmt.Errorf("%s %w", name, ErrQuery)
	case u.Scheme != "http" && u.Scheme != "https":
		if u.Scheme == "" || u.Opaque != "" {
			// Without "//", what looks like a scheme may be the user
			// name of "user:password@host".
			return nil, fmt.Errorf("%s must be an http or https URL: it has no http:// or https://", name)
		}
		return nil, fmt.Errorf("%s must be an http or https URL, not %s", name, u.Scheme)
	case u.Host == "":
		return nil, fmt.Errorf("%s must be an http or https URL: it has no host", name)
	}
	return u, nil
}

// Origin is what may be logged of u: its scheme and host (with the port),
// never a user, path, query or fragment.
func Origin(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
}

// RedactError returns err with the URL a *url.Error quotes cut to its
// Origin. An http.Client's errors are *url.Error, whose text is the method
// and the whole request URL; use RedactError on them before they are
// logged or wrapped. Any other error is returned as it is.
func RedactError(err error) error {
	ue, ok := err.(*url.Error)
	if !ok {
		return err
	}
	u, perr := url.Parse(ue.URL)
	origin := ""
	if perr == nil {
		origin = Origin(u)
	}
	return &url.Error{Op: ue.Op, URL: origin, Err: ue.Err}
}

// IsLoopback reports whether u names this host: localhost or a loopback
// IP. Traffic to it never crosses a network (in a pod: never leaves the
// pod).
func IsLoopback(u *url.URL) bool {
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
