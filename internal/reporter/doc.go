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
// Where each concern lives:
//   - config.go: Config, its defaults and what New validates.
//   - reporter.go: the Reporter, New, and Observe, which hands each
//     observation to the state.
//   - state.go: the state, its limits and the reasons an observation is
//     dropped; it does no I/O. Its parts:
//     workspaces.go (workspace statuses, deletions, resync, ClusterClass
//     usage), queue.go (the workspace report queue: what is sent next and
//     what a send acknowledges), directives.go (Cluster Control's
//     directives: which to write and which to refuse, when one is
//     consumed), nodes.go (nodes,
//     pod placement and the node-health report) and claims.go (claim
//     decisions).
//   - loops.go: Run and the endpoint loops, one per conversation with
//     Cluster Control, and their failure logs; backoff.go: retry delays,
//     jitter and log rate limits.
//   - transport.go: one call to Cluster Control and what its answer means;
//     token.go and tls.go: the credentials it is made with.
//   - budget.go: the directive budget, which paces restarts and idles
//     (no I/O); watch.go: the watch of Workspaces it counts from;
//     lease.go: the election of the one reporter that writes directives
//     and keeps the budget.
//   - kube.go: the writes to Kubernetes, directives patched onto
//     Workspaces; events.go: the Events about users' objects.
//   - wake.go: wake on request, what to do about each wake-on-request
//     workspace after a poll of the interceptors (no I/O); wakeloop.go:
//     the poll loop, its writes, Events and metrics; interceptor.go: one
//     poll of every interceptor's admin queue.
//   - tombstones.go: the tombstone file, which keeps unacknowledged
//     deletions across a restart.
//   - http.go: the localhost API for the hook server and the ops handler
//     (metrics and health); metrics.go: the metrics.
package reporter
