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
// turns that into the response the transport encodes.
package workspace

import (
	"time"

	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
)

// Object names and well-known keys.
const (
	// LabelWorkspace names the workspace on every child and pod; the
	// workspace-pods DecoratorController selects pods by it.
	LabelWorkspace = "formspec.dev/workspace"
	// LabelClusterClass names the workspace's class on every child (not on
	// its pods, so that a class change alone does not roll them).
	LabelClusterClass = "formspec.dev/cluster-class"
	// LabelNodeType is the node label a class's nodeType selects.
	LabelNodeType = "formspec.dev/node-type"

	// AnnotationConfigHash on the pod template rolls pods when the ConfigMap
	// changes.
	AnnotationConfigHash = "formspec.dev/config-hash"
	// AnnotationCredentialsHash on the pod template rolls pods when an
	// injected credential changes.
	AnnotationCredentialsHash = "formspec.dev/credentials-hash"

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

// Sink takes observations for the reporter sidecar without blocking;
// *handoff.Client is one.
type Sink interface {
	Send(obs observation.Observation)
}

// Config is what the Workspace hooks need from the server's flags.
type Config struct {
	// ResourceImage is the image repository, without a tag.
	ResourceImage string
	// DefaultVersion is the image tag used when a workspace sets none.
	DefaultVersion string
	// ControlClusterURL is handed to the workspace's pods.
	ControlClusterURL string
	// Reports, when set, receives every computed status and every finished
	// teardown, for Cluster Control.
	Reports Sink
	// Now is the clock for condition transitions (default time.Now).
	Now func() time.Time
}

// Hooks serves the Workspace hooks for one configuration.
type Hooks struct {
	cfg Config
}

// New returns the Workspace hooks for cfg, filling in defaults.
func New(cfg Config) *Hooks {
	if cfg.ResourceImage == "" {
		cfg.ResourceImage = "formahub/formspec-resource"
	}
	if cfg.DefaultVersion == "" {
		cfg.DefaultVersion = "latest"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Hooks{cfg: cfg}
}
