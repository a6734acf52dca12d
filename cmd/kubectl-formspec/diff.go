package main

import (
	"context"
	"fmt"
	"io"

	"github.com/formspec/formspec-hooks/cmd/kubectl-formspec/internal/diff"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/weburl"
)

const diffUsage = `Usage: kubectl formspec diff [flags]

Preview what this version of the workspace hooks would change in the live
Workspaces of the namespace (-n, or the context's), or of every namespace
(-A): run it, from the release you are about to install, before an upgrade.

For each Workspace it builds the request Metacontroller would send from the
live objects (the children it owns, its ClusterClass and the namespace's
ResourceClaims), runs this version's sync hook on it in process, and has the
API server dry-run Metacontroller's server-side apply of every child the hook
answers (nothing is written). It then lists the workspace as unchanged,
changed (each child, and each field with its live and desired values), or
"pods would roll" when the Deployment's pod template would change: that
replaces every pod of the workspace. A Workspace being deleted is not
compared. A Workspace held for its takeover from the original operator
(formspec.dev/takeover: hold, docs/migrating.md) is compared as if
released: what kubectl formspec takeover roll would do to it. When the hook
would make a Workspace Degraded, the reason and message are shown under it.
Where a child would be created and an object of its kind and name already
exists that is not the workspace's, it says whose that object is and
whether Metacontroller's apply would fail (the Workspace then turns
Degraded, ChildNotCreated) or overwrite it; the hooks themselves cannot
see such an object.

--resource-image, --default-version and --cluster-control-url are the hook
server's flags (formspec-hooks serve): give the values of the install you
are upgrading, or every workspace shows its image or environment changing.
--field-manager must be Metacontroller's --apply-strategy-ssa-field-manager.
The dry run needs the rights Metacontroller has on the children: get and patch on
Deployments, Services, ConfigMaps, HorizontalPodAutoscalers and
PodDisruptionBudgets.
`

// defaultFieldManager is Metacontroller's default server-side apply field
// manager.
const defaultFieldManager = "metacontroller"

// diffWorkers is how many workspaces are compared at once.
const diffWorkers = 8

// runDiff is "kubectl formspec diff".
func runDiff(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags(command+" diff", diffUsage, true)
	image := f.own.String("resource-image", workspace.Defaults.ResourceImage, "the hook server's --resource-image: workspace image repository; may carry a tag, which then becomes the default version")
	version := f.own.String("default-version", "", "the hook server's --default-version: image tag for Workspaces without spec.version; required unless --resource-image carries a tag, as for serve")
	controlURL := f.own.String("cluster-control-url", "", "the hook server's --cluster-control-url, given to workspaces as CONTROL_CLUSTER_URL; no user, query or fragment")
	claimsFrom := f.own.String("workspace-claims", string(workspace.Defaults.Claims), "the hook server's --workspace-claims: summary (the claims summary on each Workspace) or related (the claims of its namespace)")
	fieldManager := f.own.String("field-manager", defaultFieldManager, "Metacontroller's server-side apply field manager (its --apply-strategy-ssa-field-manager)")
	all := f.own.BoolP("all-namespaces", "A", false, "compare the Workspaces of every namespace")
	exitCode := f.own.Bool("exit-code", false, "exit 1 when a workspace would change, as kubectl diff does (0: no change; above 1: an error)")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	if err := f.noArgs(); err != nil {
		return err
	}
	repo, tag, err := workspace.ParseImage(*image, *version)
	if err != nil {
		return f.usagef("%w", err)
	}
	if *controlURL != "" {
		if _, err := weburl.Parse("--cluster-control-url", *controlURL); err != nil {
			return f.usagef("%w", err)
		}
	}
	claims, err := workspace.ParseClaimsSource(*claimsFrom)
	if err != nil {
		return f.usagef("--workspace-claims: %w", err)
	}
	if *fieldManager == "" {
		return f.usagef("--field-manager must not be empty")
	}
	logger := f.logger(stderr)
	if *controlURL == "" {
		logger.Warn("no --cluster-control-url: the hooks run as a server without one would, giving workspaces an empty CONTROL_CLUSTER_URL; if the install sets one, pass it, or its pods show as rolling")
	}
	if err := f.connect(logger); err != nil {
		return err
	}
	namespace := ""
	if !*all {
		if namespace, err = f.namespace(); err != nil {
			return err
		}
	}
	c, err := f.clients()
	if err != nil {
		return err
	}
	results, err := diff.Run(ctx, diff.Options{
		Hooks:        workspace.Config{ResourceImage: repo, DefaultVersion: tag, ControlClusterURL: *controlURL, Claims: claims},
		FieldManager: *fieldManager,
		Dynamic:      c.dynamic,
		Metadata:     c.metadata,
		Mapper:       c.mapper,
		Workers:      diffWorkers,
	}, namespace)
	if err != nil {
		return err
	}
	if err := diff.Print(stdout, results); err != nil {
		return err
	}
	failed, changed := 0, 0
	for _, r := range results {
		switch r.Outcome {
		case diff.Failed:
			failed++
		case diff.Changed, diff.PodsWouldRoll:
			changed++
		}
	}
	switch {
	case failed > 0:
		return fmt.Errorf("%d of %d workspaces could not be compared", failed, len(results))
	case *exitCode && changed > 0:
		return errFinding
	}
	return nil
}
