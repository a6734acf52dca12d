package reporter

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"k8s.io/client-go/dynamic"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
)

// Config configures a Reporter. Zero durations and limits take the defaults
// of the formspec-reporter flags.
type Config struct {
	// ClusterControlURL is the base URL of Cluster Control.
	ClusterControlURL string
	// Reporter identifies this reporter in node-health reports and Events,
	// usually the pod name.
	Reporter string
	// TokenFile holds the bearer token; empty sends no Authorization. The
	// file may be missing or empty at start: calls then go out without
	// Authorization, with a rate-limited warning, until it appears.
	TokenFile string
	// CAFile, ClientCertFile and ClientKeyFile configure TLS and mTLS
	// towards Cluster Control.
	CAFile, ClientCertFile, ClientKeyFile string
	// HTTPClient replaces the client built from the TLS settings.
	HTTPClient *http.Client

	// Kube writes to the cluster: directives as Workspace annotations and
	// Events. Nil leaves the cluster alone (directives are still fetched,
	// and consumed when something else writes the annotations).
	Kube *KubeClients

	NodeHealthInterval   time.Duration // default 15s
	DeployStatusInterval time.Duration // default 30s
	// ResyncInterval is how often every known workspace is reported again,
	// changed or not, so that Cluster Control recovers lost state
	// (default 10m).
	ResyncInterval time.Duration
	// NodeStaleIntervals is how many node-health intervals a node may go
	// unobserved before it is forgotten (default 4).
	NodeStaleIntervals int
	// PodStaleAfter is how long a pod may go unobserved before it no
	// longer counts towards its node (default 5m, five resyncs of the
	// workspace-pods controller).
	PodStaleAfter  time.Duration
	RequestTimeout time.Duration // default 10s
	BackoffBase    time.Duration // default 500ms
	BackoffMax     time.Duration // default 60s
	// LogInterval is the least time between two failure logs for one
	// endpoint (default 30s).
	LogInterval time.Duration

	MaxWorkspaces int // default 10000
	// MaxTombstones bounds the deletions kept until Cluster Control
	// acknowledges them (default 5000); beyond it the oldest is dropped
	// and counted.
	MaxTombstones int
	// TombstoneFile, when set, keeps those deletions across a restart of
	// the sidecar (an emptyDir survives a container restart): it is read
	// at start and rewritten within a second of a change.
	TombstoneFile string
	MaxNodes      int // default 5000
	MaxPods       int // default 100000
	MaxClaims     int // default 20000

	// EventBurst and EventInterval limit the Events about one object: a
	// burst, then one per interval (defaults 5 and 1m). EventQPS and
	// EventTotalBurst limit all Events (defaults 5/s and 50).
	EventBurst      int
	EventInterval   time.Duration
	EventQPS        float64
	EventTotalBurst int

	Logger *slog.Logger

	// now, sleep and rand replace the clock and the jitter source in tests.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	rand  func() float64
}

// KubeClients are the reporter's only ways into the Kubernetes API; its
// RBAC allows nothing else (deploy/reporter).
type KubeClients struct {
	// Dynamic patches formspec.dev/v1alpha1 Workspaces.
	Dynamic dynamic.Interface
	// Events creates and patches events.k8s.io/v1 Events.
	Events typedeventsv1.EventsV1Interface
}

// validate checks what has no default: where Cluster Control is and what
// this reporter calls itself. It returns Cluster Control's parsed URL.
func (cfg Config) validate() (*url.URL, error) {
	u, err := url.Parse(cfg.ClusterControlURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("cluster control URL %q must be an absolute http(s) URL", cfg.ClusterControlURL)
	}
	if cfg.Reporter == "" {
		return nil, fmt.Errorf("reporter name is required")
	}
	return u, nil
}

// withDefaults returns cfg with its zero fields set to their defaults.
func (cfg Config) withDefaults() Config {
	setDefault(&cfg.NodeHealthInterval, 15*time.Second)
	setDefault(&cfg.DeployStatusInterval, 30*time.Second)
	setDefault(&cfg.ResyncInterval, 10*time.Minute)
	setDefault(&cfg.NodeStaleIntervals, 4)
	setDefault(&cfg.PodStaleAfter, 5*time.Minute)
	setDefault(&cfg.RequestTimeout, 10*time.Second)
	setDefault(&cfg.BackoffBase, 500*time.Millisecond)
	setDefault(&cfg.BackoffMax, 60*time.Second)
	setDefault(&cfg.LogInterval, 30*time.Second)
	setDefault(&cfg.MaxWorkspaces, 10000)
	setDefault(&cfg.MaxTombstones, 5000)
	setDefault(&cfg.MaxNodes, 5000)
	setDefault(&cfg.MaxPods, 100000)
	setDefault(&cfg.MaxClaims, 20000)
	setDefault(&cfg.EventBurst, 5)
	setDefault(&cfg.EventInterval, time.Minute)
	setDefault(&cfg.EventQPS, 5)
	setDefault(&cfg.EventTotalBurst, 50)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.sleep == nil {
		cfg.sleep = sleep
	}
	if cfg.rand == nil {
		cfg.rand = defaultRand
	}
	return cfg
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
