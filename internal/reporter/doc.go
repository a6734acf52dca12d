// Package reporter is the sidecar that reports what the hook server observes
// to Cluster Control and carries Cluster Control's directives and the hooks'
// decisions into the cluster: node health on a timer, workspace status on
// change and again at an interval, directives written onto Workspaces as
// annotations, and decisions recorded as Events on the user's objects.
//
// Everything it holds is bounded by the number of workspaces, tombstones,
// nodes, pods and claims (each capped), never by how long Cluster Control
// has been unreachable: workspace reports are coalesced per workspace,
// latest state wins, and node reports are rebuilt from the latest state on
// every send.
//
// This package keeps the loops and the wiring; each part it wires is a
// package of its own, testable alone, and none of them imports another
// part's loops:
//   - state: what the reporter knows and decides, without I/O: workspaces,
//     the report queue, directives and their budget, nodes, claims, the
//     Events these call for.
//   - ccclient: the Cluster Control client: one call and what its answer
//     means, the token and TLS files, backoff, the plain-http guard.
//   - kube: the Kubernetes API: Workspace patches, Events, the Lease, the
//     watch of Workspaces.
//   - wake: wake on request: what to do after a poll of the interceptors,
//     the poll, and the loop that carries it out.
//   - tombstone: the tombstone file, which keeps unacknowledged deletions
//     across a restart.
//
// Here: config.go, Config, its defaults and what New validates;
// reporter.go, the Reporter, New, and Observe, which hands each
// observation to the state; loops.go, Run and the loops, one per
// conversation with Cluster Control, and the wiring of the others;
// directives.go, the directive writes; lease.go, the election's effect on
// who writes; http.go, the localhost API for the hook server and the ops
// handler (metrics and health); metrics.go, the metrics; logs.go, the
// rate-limited failure logs.
package reporter
