// Package v1alpha1 holds the Go types of the formspec.dev/v1alpha1 custom
// resources: ClusterClass, Workspace, Datastore and ResourceClaim. They are
// the contract between users and the hooks; the CRDs in deploy/crds/
// describe the same fields.
//
// Who imports it: every part of this repository, and third parties that
// build against the same CRDs (their own controllers, tools and tests); it
// is public for them.
// The hooks only ever decode these types from Metacontroller's requests and
// encode their status, so there is no deepcopy or scheme registration.
package v1alpha1

// Group and Version of every type in this package.
const (
	Group      = "formspec.dev"
	Version    = "v1alpha1"
	APIVersion = Group + "/" + Version
)

// The CRDs' maxItems on the lists a hook walks. The API server enforces
// them on what it stores; the hooks apply them again, because a hook
// request is not guaranteed to come from that API server, and each list's
// size multiplies the work of a sync.
const (
	// MaxWorkspaceDatastores bounds WorkspaceSpec.Datastores.
	MaxWorkspaceDatastores = 32
	// MaxAllowedTenants bounds DatastoreSpec.AllowedTenants.
	MaxAllowedTenants = 256
	// MaxOwnerPublicKeys bounds DatastoreSpec.OwnerPublicKeys.
	MaxOwnerPublicKeys = 16
)
