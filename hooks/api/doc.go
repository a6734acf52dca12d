// Package api is the public face of this module: its subpackages are the
// only packages meant to be imported from outside the repository. They are
// the contracts between the three processes and with the users' objects:
//
//   - v1alpha1: the Go types of the custom resources, and every label,
//     annotation, condition type and reason they carry;
//   - observation: the hand-off from the hook server to its sidecar;
//   - clustercontrol: the reporter's API with Cluster Control.
//
// Everything else (the hooks, the transport, the sidecar, the command-line
// plumbing, the test kits) is under internal/ and may change without
// notice. A contract imports only other contracts, so that each side of a
// seam depends on the contract and never on the other side.
package api
