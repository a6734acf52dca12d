// Package v1alpha1 holds the Go types of the formspec.dev/v1alpha1 custom
// resources: ClusterClass, Workspace, Datastore and ResourceClaim. They are
// the contract of SPEC §2; the CRDs in deploy/crds/ describe the same fields.
// The hooks only ever decode these types from Metacontroller's requests and
// encode their status, so there is no deepcopy or scheme registration.
package v1alpha1

// Group and Version of every type in this package.
const (
	Group      = "formspec.dev"
	Version    = "v1alpha1"
	APIVersion = Group + "/" + Version
)
