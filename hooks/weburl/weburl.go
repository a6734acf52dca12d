// Package weburl checks the http(s) addresses the commands are given:
// Cluster Control, the reporter sidecar, the interceptors' admin port.
//
// An address is logged at start-up, written into every workspace's pod
// spec (CONTROL_CLUSTER_URL) and quoted by whoever reports it wrong, so
// it must not carry a credential: a user or password before "@" is
// refused, and no error here repeats the address it was given.
package weburl

import (
	"errors"
	"fmt"
	"net/url"
)

// ErrUserinfo is a URL with a user or password in it.
var ErrUserinfo = errors.New(`must not carry a user or password (the "user:password@" part): an address is logged and copied into pod specs; give a credential in a file`)

// Parse parses raw as an absolute http or https URL with a host and
// neither user nor password. name says what the address is (a flag, or
// "reporter URL") and heads the error, which names the part that is wrong
// and never quotes raw.
func Parse(name, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		// url.Error quotes the whole URL: leave it out.
		return nil, fmt.Errorf("%s must be an http or https URL: it does not parse", name)
	case u.User != nil:
		return nil, fmt.Errorf("%s %w", name, ErrUserinfo)
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
