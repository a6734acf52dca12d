// Package workspace implements the Workspace CompositeController hooks:
// customize (which related objects sync sees), sync (the desired children and
// the status) and finalize (ordered teardown). Every hook is a pure function
// of its request, the configuration and the clock, and reads nothing but its
// request: a restart arrives as an annotation on the Workspace, which the
// reporter writes for Cluster Control.
//
// A sync or finalize goes one way through three files: observed.go decodes
// the request (once, and each child only as far as it is read), decide.go
// turns what was observed into what is desired (one value), and encode.go
// turns that into the response the transport encodes. Two files serve
// decide.go: missing.go tells a child whose create failed from one not
// created yet, and takeover.go takes over the children of the original
// FormSpec operator.
package workspace

import (
	"cmp"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
)

// Object names and ports. The labels and annotations are in
// hooks/api/v1alpha1.
const (
	// containerName is the resource container's name in the pod.
	containerName = "resource"
	// containerPort is where the formspec-resource image listens.
	containerPort = 8080
	// servicePort is the ClusterIP Service's port.
	servicePort = 80
	// bindingRoot is where injected credentials are mounted, per the
	// Service Binding specification.
	bindingRoot = "/bindings"
)

// Config is what the Workspace hooks need from the server's flags.
type Config struct {
	// ResourceImage is the image repository, without a tag.
	ResourceImage string
	// DefaultVersion is the image tag used when a workspace sets none. It
	// has no default: there is no implicit latest (ParseImage), so a
	// caller that serves Workspaces without spec.version sets one.
	DefaultVersion string
	// ControlClusterURL is handed to the workspace's pods.
	ControlClusterURL string
	// Reports, when set, receives every computed status and every finished
	// teardown, for Cluster Control.
	Reports observation.Sink
	// Now is the clock for condition transitions (default time.Now).
	Now func() time.Time
	// ChildCreateGrace is how long a child the hook asks for may go
	// unobserved before the workspace is Degraded, ChildNotCreated
	// (missing.go; default Defaults.ChildCreateGrace).
	ChildCreateGrace time.Duration
}

// Hooks serves the Workspace hooks for one configuration.
type Hooks struct {
	cfg Config
}

// Defaults are the Config values New gives a zero field, and the defaults
// of the commands' flags (--resource-image of serve, render and the kubectl
// plugin's diff): one table, so that the library and the command lines
// mean the same by an empty value.
var Defaults = Config{
	// The project's published resource image; a tag comes from the
	// Workspace's spec.version or DefaultVersion.
	ResourceImage: "formahub/formspec-resource",
	Now:           time.Now,
	// How long a child the hook asks for may go unobserved before the
	// workspace is Degraded: long enough for any informer to catch up
	// (they lag by milliseconds), short enough that a person still waits
	// for the workspace to come up.
	ChildCreateGrace: time.Minute,
}

// New returns the Workspace hooks for cfg, its zero fields taken from
// Defaults; Reports may stay nil (nothing is reported).
func New(cfg Config) *Hooks {
	cfg.ResourceImage = cmp.Or(cfg.ResourceImage, Defaults.ResourceImage)
	if cfg.Now == nil {
		cfg.Now = Defaults.Now
	}
	if cfg.ChildCreateGrace <= 0 {
		cfg.ChildCreateGrace = Defaults.ChildCreateGrace
	}
	cfg.Reports = observation.OrDiscard(cfg.Reports)
	return &Hooks{cfg: cfg}
}
