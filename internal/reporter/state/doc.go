// Package state is what the reporter knows, and the rules it decides by,
// without I/O: workspace statuses, deletions and resync (workspaces.go),
// the queue of workspace reports, what is sent next and what a send
// acknowledges (queue.go), Cluster Control's directives, which to write and
// which to refuse, when one is consumed (directives.go), the budget that
// paces restarts and idles (budget.go) and the watch it counts from
// (watch.go), nodes, pod placement and the node-health report (nodes.go),
// claim decisions (claims.go), the Events these call for (events.go), the
// deletions kept as tombstones (tombstones.go) and the wakes and idles
// reported (wake.go). Every bound is in Limits; what is dropped is told by
// reason.
package state
