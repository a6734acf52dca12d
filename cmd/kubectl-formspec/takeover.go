package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/formspec/formspec-hooks/cmd/kubectl-formspec/internal/takeover"
)

const takeoverUsage = `Usage: kubectl formspec takeover prepare|roll [flags]

Take over the Workspaces of a cluster that the original FormSpec operator
ran, without a moment in which a workspace has no ready pod
(docs/migrating.md has the steps).

prepare: run once the original operator is stopped, before Metacontroller
and the workspace controller are installed. For each Workspace of the
namespace (-n, or the context's) or of every namespace (-A), it finds the
children the original operator made by their controller owner reference to
the Workspace, whatever their names and labels, and

  - labels each with controller-uid: <the Workspace's UID>, the label of
    Metacontroller's generated selector: without it Metacontroller releases
    the child (removes its owner reference) before the hooks can act;
  - moves the fields the original operator set on it (the field managers
    that wrote its owner reference, and any --manager) to Metacontroller's
    field manager, so that the hooks' first server-side apply leaves only
    what they render (the old container, its environment, go);
  - holds the Workspace (formspec.dev/takeover: hold): the hooks keep its
    children as they are until roll releases it.

It also lists every object at the name of a Workspace's Deployment, Service
or ConfigMap that is not the Workspace's (nobody's, or another
controller's): the hooks never take those over, and the Workspace will be
Degraded until it is gone. Running it again changes nothing already done.
--dry-run has the API server check every write without making it.

roll: once Metacontroller runs the hooks, and kubectl formspec diff has
shown what each held workspace will become, releases the held Workspaces a
few at a time (--max-in-flight), in order of namespace and name: each
release rolls that workspace's pods once. A workspace counts until the
hooks report it taken over (Ready or Idle, the original children gone); one
that turns Degraded, or takes longer than --timeout, stops the roll, and
the rest stay held and running until roll is run again.

The commands need the rights of the workspace's owner on Workspaces (get,
list, patch) and, for prepare, on the children's kinds (get, list, patch).
`

// selfFieldManager is the field manager of the plugin's own writes.
const selfFieldManager = "kubectl-formspec"

// takeoverWorkers is how many Workspaces prepare works on at once.
const takeoverWorkers = 8

// runTakeover is "kubectl formspec takeover".
func runTakeover(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags(command+" takeover", takeoverUsage, true)
	all := f.own.BoolP("all-namespaces", "A", false, "take over the Workspaces of every namespace")
	fieldManager := f.own.String("field-manager", defaultFieldManager, "prepare: Metacontroller's server-side apply field manager (its --apply-strategy-ssa-field-manager), which takes over the original operator's fields")
	managers := f.own.StringSlice("manager", nil, "prepare: a field manager whose fields also move to --field-manager (repeatable), besides those that wrote each child's owner reference")
	hold := f.own.Bool("hold", true, "prepare: hold each Workspace whose children it prepared, until roll releases it")
	dryRun := f.own.Bool("dry-run", false, "prepare: have the API server check every write without making it")
	maxInFlight := f.own.Int("max-in-flight", 5, "roll: how many workspaces are taken over at once")
	interval := f.own.Duration("interval", 2*time.Second, "roll: how often the workspaces being taken over are read")
	timeout := f.own.Duration("timeout", 10*time.Minute, "roll: how long one workspace may take before the roll stops")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	rest := f.args()
	if len(rest) != 1 || (rest[0] != "prepare" && rest[0] != "roll") {
		return f.usagef("want one of prepare or roll, got %q", rest)
	}
	switch {
	case *fieldManager == "":
		return f.usagef("--field-manager must not be empty")
	case *maxInFlight < 1:
		return f.usagef("--max-in-flight must be at least 1, not %d", *maxInFlight)
	case *interval <= 0 || *timeout <= 0:
		return f.usagef("--interval and --timeout must be positive")
	}
	logger := f.logger(stderr)
	if err := f.connect(logger); err != nil {
		return err
	}
	namespace := ""
	if !*all {
		var err error
		if namespace, err = f.namespace(); err != nil {
			return err
		}
	}
	c, err := f.clients()
	if err != nil {
		return err
	}
	if rest[0] == "roll" {
		res, err := takeover.Roll(ctx, takeover.RollOptions{Dynamic: c.dynamic, Self: selfFieldManager, MaxInFlight: *maxInFlight, Interval: *interval, Timeout: *timeout, Out: stdout}, namespace)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%d taken over, %d failed, %d still held\n", len(res.Done), len(res.Failed), len(res.Left))
		if len(res.Failed) > 0 {
			return fmt.Errorf("the roll stopped: %s", strings.Join(res.Failed, "; "))
		}
		return nil
	}
	prepared, err := takeover.Prepare(ctx, takeover.PrepareOptions{
		Dynamic: c.dynamic, FieldManager: *fieldManager, Self: selfFieldManager, Managers: *managers,
		Hold: *hold, DryRun: *dryRun, Workers: takeoverWorkers,
	}, namespace)
	if err != nil {
		return err
	}
	failed, conflicted := takeover.PrintPrepared(stdout, prepared, *dryRun)
	switch {
	case failed > 0:
		return fmt.Errorf("%d of %d workspaces could not be prepared", failed, len(prepared))
	case conflicted > 0:
		return errFinding
	}
	return nil
}
