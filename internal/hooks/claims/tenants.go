package claims

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

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
