package reporter

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/formspec/formspec-hooks/internal/reporter/ccclient"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/formspec/formspec-hooks/internal/reporter/wake"
)

// Config configures a Reporter. Zero durations and limits take their value
// from Defaults.
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
	// InsecureHTTP lets the bearer token of TokenFile go to a plain
	// http:// ClusterControlURL off the loopback (see
	// ParseClusterControlURL); without it New refuses that URL.
	InsecureHTTP bool
	// HTTPClient replaces the client built from the TLS settings.
	HTTPClient *http.Client

	// Kube writes to the cluster: directives as Workspace annotations and
	// Events. Nil leaves the cluster alone (directives are still fetched,
	// and consumed when something else writes the annotations).
	Kube *KubeClients

	// NodeHealthInterval and DeployStatusInterval are the periods of the
	// node-health report and the directive poll.
	NodeHealthInterval   time.Duration
	DeployStatusInterval time.Duration
	// ResyncInterval is how often every known workspace is reported again,
	// changed or not, so that Cluster Control recovers lost state.
	ResyncInterval time.Duration
	// NodeStaleIntervals is how many node-health intervals a node may go
	// unobserved before it is forgotten.
	NodeStaleIntervals int
	// PodStaleAfter is how long a pod may go unobserved before it no
	// longer counts towards its node.
	PodStaleAfter time.Duration
	// RequestTimeout bounds one call to Cluster Control.
	RequestTimeout time.Duration
	// BackoffBase is the first retry delay, doubled per failure up to
	// BackoffMax.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// LogInterval is the least time between two failure logs for one
	// endpoint.
	LogInterval time.Duration

	// InterceptorAdminURL, when set, is the KEDA HTTP add-on interceptors'
	// admin port, http://host:port: the reporter wakes wake-on-request
	// workspaces it holds requests for, and idles those it has seen none
	// for (package wake). The host should be a headless Service, resolving to
	// every interceptor pod.
	InterceptorAdminURL string
	// InterceptorPollInterval is the period of the interceptor queue poll:
	// a wake starts within it of the first held request.
	InterceptorPollInterval time.Duration

	// MaxWorkspaces bounds the workspaces tracked.
	MaxWorkspaces int
	// MaxTombstones bounds the deletions kept until Cluster Control
	// acknowledges them; beyond it the oldest is dropped and counted.
	MaxTombstones int
	// TombstoneFile, when set, keeps those deletions across a restart of
	// the sidecar (an emptyDir survives a container restart): it is read
	// at start and rewritten within a second of a change.
	TombstoneFile string
	// MaxNodes, MaxPods and MaxClaims bound the nodes, workspace pods and
	// ResourceClaim decisions tracked.
	MaxNodes  int
	MaxPods   int
	MaxClaims int

	// RestartBudget and IdleBudget pace the directives that take a
	// workspace's pods down (state/budget.go): at most a share of the
	// workspaces in the middle of one at once, and a least interval
	// between two on one workspace. Past either, a directive waits.
	RestartBudget, IdleBudget state.Budget

	// LeaseNamespace is where the Lease is (LeaseName) by which the
	// reporters of several replicas elect the one that writes directives
	// and keeps their budget (lease.go); it needs Kube.Leases. Empty: no
	// election, this reporter writes directives as if it were alone.
	LeaseNamespace string
	// LeaseDuration, LeaseRenewDeadline and LeaseRetryPeriod time the
	// election as client-go's leaderelection does: how long a Lease not
	// renewed holds, how long its holder tries to renew it before it
	// stops writing, and how often a candidate tries.
	LeaseDuration, LeaseRenewDeadline, LeaseRetryPeriod time.Duration

	// EventBurst and EventInterval limit the Events about one object: a
	// burst, then one per interval. EventQPS and EventTotalBurst limit all
	// Events.
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
// RBAC allows nothing else (deploy/reporter). See kube.Clients.
type KubeClients = kube.Clients

// Budget paces one kind of directive that takes a workspace's pods down
// (state.Budget).
type Budget = state.Budget

// validate checks what has no default: where Cluster Control is and what
// this reporter calls itself. It returns Cluster Control's parsed URL.
func (cfg Config) validate() (*url.URL, error) {
	u, err := cfg.ParseClusterControlURL("cluster control URL")
	if err != nil {
		return nil, err
	}
	if cfg.Reporter == "" {
		return nil, fmt.Errorf("reporter name is required")
	}
	return u, nil
}

// validateDefaulted checks the values that may be set wrong, once
// withDefaults has filled in the rest.
func (cfg Config) validateDefaulted() error {
	if err := cfg.RestartBudget.Validate("restart budget"); err != nil {
		return err
	}
	if err := cfg.IdleBudget.Validate("idle budget"); err != nil {
		return err
	}
	return cfg.election(nil).Validate()
}

// Defaults is the one table of defaults: New gives every zero duration and
// limit of a Config its value here, and formspec-reporter's flags default
// to it.
var Defaults = Config{
	NodeHealthInterval:   15 * time.Second,
	DeployStatusInterval: 30 * time.Second,
	ResyncInterval:       10 * time.Minute,
	NodeStaleIntervals:   4,
	// Five resyncs of the workspace-pods controller.
	PodStaleAfter:  5 * time.Minute,
	RequestTimeout: 10 * time.Second,
	BackoffBase:    500 * time.Millisecond,
	// Half the workspace controller's 60 s resync: the last wait of an
	// outage ends at most this long after Cluster Control is back, and the
	// states held through it must reach it within one resync.
	BackoffMax:  30 * time.Second,
	LogInterval: 30 * time.Second,

	InterceptorPollInterval: 200 * time.Millisecond,

	MaxWorkspaces: 10000,
	MaxTombstones: 5000,
	MaxNodes:      5000,
	MaxPods:       100000,
	MaxClaims:     20000,

	// A tenth of the workspaces at once: a rollout of a new binary reaches
	// a fleet in ten waves, and a binary that breaks workspaces stops at
	// the first, since a restart that does not complete keeps its place.
	// Ten minutes between two starts on one workspace is the progress
	// deadline of its Deployment (Kubernetes' default, 600 s, which the
	// workspace hook leaves): a workspace is not rolled again before its
	// last rollout could have been judged failed, and a Cluster Control
	// publishing a new hash every cycle rolls each workspace at most six
	// times an hour, a tenth of the fleet at a time. Idles take pods down
	// as restarts do, and get the same.
	RestartBudget: Budget{Share: 0.1, MinInterval: 10 * time.Minute},
	IdleBudget:    Budget{Share: 0.1, MinInterval: 10 * time.Minute},

	// client-go's and controller-runtime's defaults: a failover within
	// 15 s of a writer's death, and a renewal every 2 s.
	LeaseDuration:      15 * time.Second,
	LeaseRenewDeadline: 10 * time.Second,
	LeaseRetryPeriod:   2 * time.Second,

	EventBurst:      5,
	EventInterval:   time.Minute,
	EventQPS:        5,
	EventTotalBurst: 50,
}

// withDefaults returns cfg with its zero durations and limits set from
// Defaults, and the clock, the jitter and the logger set.
func (cfg Config) withDefaults() Config {
	d := Defaults
	cfg.NodeHealthInterval = cmp.Or(cfg.NodeHealthInterval, d.NodeHealthInterval)
	cfg.DeployStatusInterval = cmp.Or(cfg.DeployStatusInterval, d.DeployStatusInterval)
	cfg.ResyncInterval = cmp.Or(cfg.ResyncInterval, d.ResyncInterval)
	cfg.NodeStaleIntervals = cmp.Or(cfg.NodeStaleIntervals, d.NodeStaleIntervals)
	cfg.PodStaleAfter = cmp.Or(cfg.PodStaleAfter, d.PodStaleAfter)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, d.RequestTimeout)
	cfg.BackoffBase = cmp.Or(cfg.BackoffBase, d.BackoffBase)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, d.BackoffMax)
	cfg.LogInterval = cmp.Or(cfg.LogInterval, d.LogInterval)
	cfg.InterceptorPollInterval = cmp.Or(cfg.InterceptorPollInterval, d.InterceptorPollInterval)
	cfg.MaxWorkspaces = cmp.Or(cfg.MaxWorkspaces, d.MaxWorkspaces)
	cfg.MaxTombstones = cmp.Or(cfg.MaxTombstones, d.MaxTombstones)
	cfg.MaxNodes = cmp.Or(cfg.MaxNodes, d.MaxNodes)
	cfg.MaxPods = cmp.Or(cfg.MaxPods, d.MaxPods)
	cfg.MaxClaims = cmp.Or(cfg.MaxClaims, d.MaxClaims)
	cfg.RestartBudget.Share = cmp.Or(cfg.RestartBudget.Share, d.RestartBudget.Share)
	cfg.RestartBudget.MinInterval = cmp.Or(cfg.RestartBudget.MinInterval, d.RestartBudget.MinInterval)
	cfg.IdleBudget.Share = cmp.Or(cfg.IdleBudget.Share, d.IdleBudget.Share)
	cfg.IdleBudget.MinInterval = cmp.Or(cfg.IdleBudget.MinInterval, d.IdleBudget.MinInterval)
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, d.LeaseDuration)
	cfg.LeaseRenewDeadline = cmp.Or(cfg.LeaseRenewDeadline, d.LeaseRenewDeadline)
	cfg.LeaseRetryPeriod = cmp.Or(cfg.LeaseRetryPeriod, d.LeaseRetryPeriod)
	cfg.EventBurst = cmp.Or(cfg.EventBurst, d.EventBurst)
	cfg.EventInterval = cmp.Or(cfg.EventInterval, d.EventInterval)
	cfg.EventQPS = cmp.Or(cfg.EventQPS, d.EventQPS)
	cfg.EventTotalBurst = cmp.Or(cfg.EventTotalBurst, d.EventTotalBurst)
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
		cfg.rand = ccclient.DefaultRand
	}
	return cfg
}

// ParseClusterControlURL checks cfg.ClusterControlURL, naming it name in
// its errors, with ccclient.ParseURL: while a TokenFile is set, plain
// http:// to a host off the loopback is refused unless InsecureHTTP says
// so. formspec-reporter checks its flags with it before starting, so that
// a mistake is a usage error; New checks again.
func (cfg Config) ParseClusterControlURL(name string) (*url.URL, error) {
	return ccclient.ParseURL(name, cfg.ClusterControlURL, cfg.TokenFile != "", cfg.InsecureHTTP)
}

// ErrPlainHTTP is a Cluster Control URL that would carry the bearer token
// across a network in clear (ccclient.ErrPlainHTTP).
var ErrPlainHTTP = ccclient.ErrPlainHTTP

// ErrTokenFile is wrapped by New's error when Config.TokenFile exists but
// cannot be read (ccclient.ErrTokenFile).
var ErrTokenFile = ccclient.ErrTokenFile

// ParseInterceptorAdminURL checks an interceptor admin URL
// (Config.InterceptorAdminURL), naming it name in its errors
// (wake.ParseAdminURL): main checks the flag with it before starting, so
// that a mistake is a usage error.
func ParseInterceptorAdminURL(name, raw string) (*url.URL, error) {
	return wake.ParseAdminURL(name, raw)
}
