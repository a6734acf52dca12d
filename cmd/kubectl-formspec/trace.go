package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/formspec/formspec-hooks/cmd/kubectl-formspec/internal/live"
	"github.com/formspec/formspec-hooks/cmd/kubectl-formspec/internal/trace"
)

const traceUsage = `Usage: kubectl formspec trace KIND/NAME [flags]
       kubectl formspec trace KIND NAME [flags]

Show an object of the FormSpec operator as the tree of everything it is made
of, each part with its ready state, the reason and message that keep it from
being Ready, and its latest Events:

  workspace/NAME (ws)   the Workspace, its ClusterClass, its Deployment with
                        the ReplicaSets and pods, Service, ConfigMap, HPA and
                        PodDisruptionBudget, and for each spec.datastores
                        entry the ResourceClaim serving it
  rclaim/NAME           a ResourceClaim, its credentials Secret, its Datastore
                        and the Datastore's endpoint Secret
  datastore/NAME        a Datastore (dstore) and its endpoint Secret

KIND resolves as kubectl resolves it. A bare "resourceclaim" is Kubernetes'
own Dynamic Resource Allocation API: say rclaim. Secrets are read as metadata
only; their data is never fetched, let alone printed.

The table shows the Events of the parts that are not Ready and the Warnings
of the others; -o wide shows every part's Events and its namespace, and -o
json and -o yaml print the whole tree, with "ready" true only when every part
is Ready (what exit status 0 says). A part without a ready state of its own
(a Service, a ConfigMap, a ClusterClass, a credentials Secret) shows READY -
and counts as Ready while it exists. An Idle workspace is not Ready: it runs
no pods. A part you may not read (a namespace's view rights cover neither
ClusterClasses nor Secrets) shows the reason Forbidden and no ready state, and
a warning names it: what it would show, its parent's status reports.
`

// tracedResources are the resources trace reads, by what it calls them.
var tracedResources = map[schema.GroupResource]string{
	live.Workspaces.GroupResource():     "workspace",
	live.ResourceClaims.GroupResource(): "rclaim",
	live.Datastores.GroupResource():     "datastore",
}

// draResourceClaims is Kubernetes' own ResourceClaim, which a bare
// "resourceclaim" names.
var draResourceClaims = schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}

// runTrace is "kubectl formspec trace".
func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags(command+" trace", traceUsage, true)
	output := f.own.StringP("output", "o", "", "output format: wide, json or yaml (default: a table)")
	maxEvents := f.own.Int("events", 3, "how many of each part's latest Events to show (0: none)")
	if err := f.parse(args, stdout); err != nil {
		return err
	}
	switch *output {
	case "", "wide", "json", "yaml":
	default:
		return f.usagef("--output must be wide, json or yaml, not %q", *output)
	}
	if *maxEvents < 0 {
		return f.usagef("--events must not be negative")
	}
	target := f.args()
	switch {
	case len(target) == 1 && strings.Count(target[0], "/") == 1:
	case len(target) == 2 && !strings.Contains(target[0], "/"):
	default:
		return f.usagef("want one object, as KIND/NAME or KIND NAME, e.g. workspace/shop; got %q", target)
	}
	logger := f.logger(stderr)
	if err := f.connect(logger); err != nil {
		return err
	}
	ns, err := f.namespace()
	if err != nil {
		return err
	}

	// The builder resolves KIND through discovery and kubectl's short
	// names and categories, exactly as kubectl get does.
	r := resource.NewBuilder(f.kube).Unstructured().NamespaceParam(ns).DefaultNamespace().
		ResourceTypeOrNameArgs(false, target...).SingleResourceType().Flatten().Do()
	mapping, err := r.ResourceMapping()
	if err != nil {
		return err
	}
	gr := mapping.Resource.GroupResource()
	kind, ok := tracedResources[gr]
	switch {
	case gr == draResourceClaims:
		return f.usagef("%q is Kubernetes' own ResourceClaim (%s, Dynamic Resource Allocation); a FormSpec ResourceClaim is rclaim/NAME", target[0], gr)
	case !ok:
		return f.usagef("%q is a %s; trace reads workspace (ws), rclaim and datastore (dstore)", target[0], gr)
	}
	infos, err := r.Infos()
	if err != nil {
		return err
	}
	if len(infos) != 1 {
		return fmt.Errorf("want one object, found %d", len(infos))
	}
	obj, ok := infos[0].Object.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected object type %T", infos[0].Object)
	}

	c, err := f.clients()
	if err != nil {
		return err
	}
	t := &trace.Tracer{Dynamic: c.dynamic, Metadata: c.metadata, MaxEvents: *maxEvents, Warn: func(msg string) { logger.Warn(msg) }}
	var root *trace.Node
	switch kind {
	case "workspace":
		root, err = t.Workspace(ctx, obj)
	case "rclaim":
		root, err = t.ResourceClaim(ctx, obj)
	case "datastore":
		root, err = t.Datastore(ctx, obj)
	}
	if err != nil {
		return err
	}

	switch *output {
	case "json":
		err = trace.PrintJSON(stdout, root)
	case "yaml":
		err = trace.PrintYAML(stdout, root)
	default:
		err = trace.PrintText(stdout, root, *output == "wide", time.Now())
	}
	if err != nil {
		return err
	}
	if !root.AllReady() {
		return errFinding
	}
	return nil
}
