// Command formspec-reporter is the sidecar beside the hook server that
// reports node health and workspace status to Cluster Control, writes
// Cluster Control's directives onto Workspaces and records the hooks'
// decisions as Events. It is the only part of the install with Kubernetes
// credentials.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/formspec/formspec-hooks/internal/buildinfo"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/internal/cliflag"
	"github.com/formspec/formspec-hooks/internal/fleetlimits"
	"github.com/formspec/formspec-hooks/internal/handoff"
	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/formspec/formspec-hooks/internal/memlimit"
	"github.com/formspec/formspec-hooks/internal/reporter"
	"github.com/formspec/formspec-hooks/internal/reporter/claimsync"
	"github.com/formspec/formspec-hooks/internal/weburl"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	eventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cliflag.Exit(os.Stderr, program, run(ctx, os.Args[1:], os.Stdout, os.Stderr)))
}

const program = "formspec-reporter"

// usage heads --help.
const usage = `Usage: formspec-reporter [flags]
       formspec-reporter version

Report node health and workspace status to Cluster Control, write its
directives onto Workspaces and record Events, until SIGTERM.

Flags:
`

// run runs the reporter; the error it exits with is a log line under
// --log-format json.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := cliflag.New(program, usage)
	var (
		cfg          reporter.Config
		def          = reporter.Defaults
		listen       = fs.String("listen", handoff.DefaultAddr, "address of the localhost API the hook server posts observations to; it has no authentication, so keep it on loopback")
		metricsAddr  = fs.String("metrics-listen", ":9091", "address serving /metrics, /healthz and /readyz")
		healthAddr   = fs.String("health-listen", "", "address of a listener for /healthz and /readyz alone, with connection caps of its own, for the kubelet's probes (the install sets :8182); empty: none")
		shutdownWait = fs.Duration("shutdown-timeout", httpserve.Defaults.ShutdownTimeout, "how long in-flight requests may take to finish on shutdown")
		logging      = cliflag.AddLogging(fs)
		kubeconfig   = fs.String("kubeconfig", "", "kubeconfig for writing directives and Events (default: the pod's service-account token; without either, nothing is written to the cluster)")
	)
	defer func() { err = logging.Report(stderr, program, args, err) }()
	cliflag.Deprecate(fs, "shutdown-grace", "shutdown-timeout")
	cliflag.AddVersion(fs)
	fs.StringVar(&cfg.ClusterControlURL, "cluster-control-url", "", "base URL of Cluster Control (required), e.g. https://formspec-ctl.formspec-system:7070; no user, query or fragment; plain http:// off the loopback takes --insecure-http when --token-file is set")
	fs.StringVar(&cfg.Reporter, "reporter-name", "", "name this reporter gives itself in node-health reports (default $POD_NAME, else the hostname)")
	fs.StringVar(&cfg.TokenFile, "token-file", "", "file holding the bearer token for Cluster Control; re-read when it changes; while it is missing or empty, calls carry no token")
	fs.StringVar(&cfg.CAFile, "ca-file", "", "PEM CA bundle to verify Cluster Control's certificate (default: system roots)")
	fs.StringVar(&cfg.ClientCertFile, "client-cert-file", "", "PEM client certificate for mTLS; reloaded when it changes")
	fs.StringVar(&cfg.ClientKeyFile, "client-key-file", "", "PEM client key for mTLS")
	fs.BoolVar(&cfg.InsecureHTTP, "insecure-http", false, "send the --token-file token to a plain http:// --cluster-control-url off the loopback, readable by anyone on the path (refused without it; logged at start and shown by formspec_reporter_insecure_http)")
	fs.DurationVar(&cfg.NodeHealthInterval, "node-health-interval", def.NodeHealthInterval, "period of POST /v1/node-health (jittered by ±10%)")
	fs.DurationVar(&cfg.DeployStatusInterval, "deploy-status-interval", def.DeployStatusInterval, "period of GET /v1/deploy-status (jittered by ±10%)")
	fs.DurationVar(&cfg.ResyncInterval, "resync-interval", def.ResyncInterval, "period at which every known workspace is reported again, changed or not (jittered by ±10%)")
	fs.IntVar(&cfg.NodeStaleIntervals, "node-stale-intervals", def.NodeStaleIntervals, "node-health intervals a node may go unobserved before it is forgotten")
	fs.DurationVar(&cfg.PodStaleAfter, "pod-stale-after", def.PodStaleAfter, "how long a workspace pod may go unobserved before it stops counting towards its node")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", def.RequestTimeout, "timeout of one call to Cluster Control")
	fs.DurationVar(&cfg.BackoffBase, "backoff-base", def.BackoffBase, "first retry delay; doubles per failure, with full jitter")
	fs.DurationVar(&cfg.BackoffMax, "backoff-max", def.BackoffMax, "longest retry delay (a Retry-After may ask for more, up to 10m)")
	fs.DurationVar(&cfg.LogInterval, "failure-log-interval", def.LogInterval, "least time between two failure logs for one endpoint")
	fs.IntVar(&cfg.MaxWorkspaces, "max-workspaces", 0, fmt.Sprintf("most workspaces tracked; observations beyond are dropped and counted (default: derived from the memory limit, the tighter of GOMEMLIMIT and the memory cgroup's: %d at 128 MiB, %d at 1 GiB; %d without one)", fleetlimits.ForMemory(128<<20).Workspaces, fleetlimits.ForMemory(1<<30).Workspaces, def.MaxWorkspaces))
	fs.IntVar(&cfg.MaxTombstones, "max-tombstones", 0, fmt.Sprintf("most workspace deletions kept until Cluster Control acknowledges them; the oldest beyond is dropped and counted (default: half the workspaces derived from the memory limit; %d without one)", def.MaxTombstones))
	fs.StringVar(&cfg.TombstoneFile, "tombstone-file", "", "file keeping unacknowledged workspace deletions across a restart of the sidecar (put it on an emptyDir); empty keeps them in memory only")
	fs.IntVar(&cfg.MaxNodes, "max-nodes", 0, fmt.Sprintf("most nodes tracked; observations beyond are dropped and counted (default %d: nodes come with the cluster, not with its workspaces)", def.MaxNodes))
	fs.IntVar(&cfg.MaxPods, "max-pods", 0, fmt.Sprintf("most workspace pods tracked; observations beyond are dropped and counted (default: ten per workspace derived from the memory limit; %d without one)", def.MaxPods))
	fs.IntVar(&cfg.MaxClaims, "max-claims", 0, fmt.Sprintf("most ResourceClaim decisions remembered to announce their changes as Events (default: two per workspace derived from the memory limit; %d without one)", def.MaxClaims))
	fs.IntVar(&cfg.EventBurst, "event-burst", def.EventBurst, "Events about one object written in a burst before the per-object limit applies")
	fs.DurationVar(&cfg.EventInterval, "event-interval", def.EventInterval, "after the burst, at most one Event about an object per interval")
	fs.StringVar(&cfg.InterceptorAdminURL, "interceptor-admin-url", "", "the KEDA HTTP add-on interceptors' admin port, http://host:port, best a headless Service naming every interceptor pod: wake wake-on-request workspaces the interceptors hold requests for, and idle those they see none for (docs/workspaces.md); empty: off")
	fs.DurationVar(&cfg.InterceptorPollInterval, "interceptor-poll-interval", def.InterceptorPollInterval, "period of the poll of the interceptors' queues: a wake starts within it of the first held request")
	fs.Float64Var(&cfg.EventQPS, "event-qps", def.EventQPS, fmt.Sprintf("Events per second over all objects (after a burst of %d)", def.EventTotalBurst))
	fs.Float64Var(&cfg.RestartBudget.Share, "restart-budget-share", def.RestartBudget.Share, "most of the Workspaces (all the reporter lists) that may be restarting at once, from 0 to 1, at least one workspace; restart directives past it wait")
	fs.DurationVar(&cfg.RestartBudget.MinInterval, "restart-min-interval", def.RestartBudget.MinInterval, "least time between the starts of two restarts of one workspace; a restart directive sooner waits")
	fs.Float64Var(&cfg.IdleBudget.Share, "idle-budget-share", def.IdleBudget.Share, "most of the workspaces that may be scaling to zero at once, from 0 to 1, at least one workspace; idle directives past it wait")
	fs.DurationVar(&cfg.IdleBudget.MinInterval, "idle-min-interval", def.IdleBudget.MinInterval, "least time between two idles of one workspace; an idle directive sooner waits")
	electLeader := fs.Bool("leader-elect", true, "elect, through a Lease, the one reporter among the replicas that writes directives, so that the budget holds for the install; false: this reporter writes as if alone")
	writeClaims := fs.Bool("write-claims-summary", true, "on the elected reporter, write onto each Workspace with datastores the summary of its ResourceClaims (annotation "+claimsummary.Annotation+"), which the workspace hook reads under its default --workspace-claims=summary; false for hooks run with --workspace-claims=related")
	claimsQPS := fs.Float64("claims-summary-qps", 50, "Kubernetes API calls per second (after a burst of twice as many) for writing claims summaries; the rest of the reporter's calls keep client-go's default rate")
	fs.StringVar(&cfg.LeaseNamespace, "lease-namespace", "", "namespace of the Lease "+reporter.LeaseName+" (default: the pod's namespace, or the kubeconfig's)")
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	if err := cliflag.NoArgs(fs); err != nil {
		return err
	}
	// The one flag without a default: a bare formspec-reporter is a
	// usage mistake (exit 2), not a sidecar that reports nowhere.
	if cfg.ClusterControlURL == "" {
		return cliflag.Usagef(fs, "--cluster-control-url is required: the base URL of Cluster Control, e.g. https://formspec-ctl.formspec-system:7070")
	}
	ccURL, err := cfg.ParseClusterControlURL("--cluster-control-url")
	if err != nil {
		return cliflag.Usagef(fs, "%w", err)
	}
	if cfg.InterceptorAdminURL != "" {
		if _, err := reporter.ParseInterceptorAdminURL("--interceptor-admin-url", cfg.InterceptorAdminURL); err != nil {
			return cliflag.Usagef(fs, "%w", err)
		}
	}
	// Zero would mean "the default" to reporter.New: refuse it here.
	for _, b := range []struct {
		flag     string
		share    float64
		interval time.Duration
	}{{"restart", cfg.RestartBudget.Share, cfg.RestartBudget.MinInterval}, {"idle", cfg.IdleBudget.Share, cfg.IdleBudget.MinInterval}} {
		if !(b.share > 0 && b.share <= 1) {
			return cliflag.Usagef(fs, "--%s-budget-share=%v: want a share of the workspaces more than 0 and at most 1", b.flag, b.share)
		}
		if b.interval <= 0 {
			return cliflag.Usagef(fs, "--%s-min-interval=%v: want more than 0", b.flag, b.interval)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"max-workspaces", cfg.MaxWorkspaces}, {"max-tombstones", cfg.MaxTombstones}, {"max-pods", cfg.MaxPods}, {"max-claims", cfg.MaxClaims}, {"max-nodes", cfg.MaxNodes}} {
		if f.v < 0 {
			return cliflag.Usagef(fs, "--%s=%d: want 0 (the default) or more", f.name, f.v)
		}
	}
	mem := memlimit.Read(os.DirFS("/"))
	bounds := setLimits(&cfg, mem)
	if cfg.Reporter == "" {
		cfg.Reporter = os.Getenv("POD_NAME")
	}
	if cfg.Reporter == "" {
		cfg.Reporter, _ = os.Hostname()
	}
	log := logging.Logger(stderr)
	cliflag.WarnDeprecated(fs, func(msg string) { log.Warn(msg) })
	// client-go's events recorder logs through klog: into the same lines.
	klog.SetSlogLogger(log)
	cfg.Logger = log
	if !httpserve.LoopbackAddr(*listen) {
		log.Warn("--listen is not a loopback address: anyone who can reach it can post observations and read directives, without authentication", "listen", *listen)
	}

	if !(*claimsQPS > 0) {
		return cliflag.Usagef(fs, "--claims-summary-qps=%v: want more than 0", *claimsQPS)
	}
	kube, restCfg, namespace, err := kubeClients(*kubeconfig, cfg.Reporter)
	switch {
	case errors.Is(err, rest.ErrNotInCluster):
		log.Warn("no kubeconfig and not in a pod: directives and Events are not written to the cluster")
	case err != nil && *kubeconfig != "":
		return fmt.Errorf("cannot use --kubeconfig %s: %w", *kubeconfig, err)
	case err != nil:
		return err
	default:
		cfg.Kube = kube
		cfg.LeaseNamespace = cmp.Or(cfg.LeaseNamespace, namespace)
		if !*electLeader {
			cfg.LeaseNamespace = ""
			log.Warn("--leader-elect=false: this reporter writes directives whatever the other replicas' do, and keeps the budget for what it sees only")
		}
	}
	rep, err := reporter.New(cfg)
	if err != nil {
		if cfg.TokenFile != "" && errors.Is(err, reporter.ErrTokenFile) {
			return fmt.Errorf("cannot use --token-file %s: %w", cfg.TokenFile, err)
		}
		return cliflag.FileError(fs, err)
	}
	rep.Registry().MustRegister(limitGauge(bounds))
	log.Info("reporter limits", limitAttrs(mem, bounds)...)
	localLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot listen on --listen: %w", err)
	}
	opsLn, err := net.Listen("tcp", *metricsAddr)
	if err != nil {
		_ = localLn.Close()
		return fmt.Errorf("cannot listen on --metrics-listen: %w", err)
	}
	serving := httpserve.Config{ShutdownTimeout: *shutdownWait, Logger: log}
	parts := []func(context.Context) error{
		rep.Run,
		func(ctx context.Context) error { return httpserve.Serve(ctx, localLn, rep.LocalHandler(), serving) },
		func(ctx context.Context) error { return httpserve.Serve(ctx, opsLn, rep.OpsHandler(), serving) },
	}
	if *writeClaims && cfg.Kube != nil {
		cw, err := claimsWriter(restCfg, *claimsQPS, rep, log)
		if err != nil {
			_ = localLn.Close()
			_ = opsLn.Close()
			return err
		}
		parts = append(parts, func(ctx context.Context) error { cw.Run(ctx); return nil })
	}
	attrs := []any{"listen", localLn.Addr().String(), "metrics", opsLn.Addr().String()}
	if *healthAddr != "" {
		probeLn, err := net.Listen("tcp", *healthAddr)
		if err != nil {
			_ = localLn.Close()
			_ = opsLn.Close()
			return fmt.Errorf("cannot listen on --health-listen: %w", err)
		}
		probing := serving
		probing.Conns = httpserve.ProbeConns
		parts = append(parts, func(ctx context.Context) error { return httpserve.Serve(ctx, probeLn, rep.ProbeHandler(), probing) })
		attrs = append(attrs, "probes", probeLn.Addr().String())
	}
	build := buildinfo.Get()
	log.Info("reporter starting", append([]any{"version", build.Version, "revision", build.Revision, "clusterControl", weburl.Origin(ccURL)}, attrs...)...)

	// One part stopping stops the others: a sidecar without its localhost
	// API or its reporting loops is not worth keeping up.
	err = cliflag.RunAll(ctx, parts...)
	log.Info("reporter stopped")
	return err
}

// kubeClients builds the reporter's clients from a kubeconfig, or from the
// pod's service-account token when path is empty, and returns the
// namespace to hold the directive Lease in: the pod's, or the
// kubeconfig's.
func kubeClients(path, name string) (*reporter.KubeClients, *rest.Config, string, error) {
	var cfg *rest.Config
	var namespace string
	var err error
	if path != "" {
		loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, nil)
		if cfg, err = loader.ClientConfig(); err == nil {
			namespace, _, err = loader.Namespace()
		}
	} else if cfg, err = rest.InClusterConfig(); err == nil {
		var b []byte
		b, err = os.ReadFile(podNamespaceFile)
		namespace = strings.TrimSpace(string(b))
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("cannot configure the kubernetes client: %w", err)
	}
	cfg.UserAgent = "formspec-reporter/" + name
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("cannot build the kubernetes client: %w", err)
	}
	ev, err := eventsv1.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("cannot build the kubernetes client: %w", err)
	}
	co, err := coordinationv1.NewForConfig(cfg)
	if err != nil {
		return nil, nil, "", fmt.Errorf("cannot build the kubernetes client: %w", err)
	}
	return &reporter.KubeClients{Dynamic: dyn, Events: ev, Leases: co}, cfg, namespace, nil
}

// claimsWriter builds the claims summary writer, on the reporter's watch
// of Workspaces and a client of its own: a claim granted to each of a
// fleet's workspaces is a write per workspace, which client-go's default
// 5 calls a second would spread over many minutes, and which must not
// queue the directive writes behind it.
func claimsWriter(cfg *rest.Config, qps float64, rep *reporter.Reporter, log *slog.Logger) (*claimsync.Writer, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = float32(qps), int(2*qps)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot build the kubernetes client: %w", err)
	}
	return claimsync.New(claimsync.Config{Dynamic: dyn, Workspaces: rep.Workspaces(), Leader: rep.Writing,
		Registerer: rep.Registry(), Logger: log})
}

// podNamespaceFile is where a pod's service-account volume (the
// reporter's projected one, deploy/hooks/deployment.yaml) holds its
// namespace.
const podNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
