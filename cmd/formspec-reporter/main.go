// Command formspec-reporter is the sidecar beside the hook server that
// reports node health and workspace status to Cluster Control and serves
// its restart directives to the hook server on localhost.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/formspec/formspec-hooks/hooks/buildinfo"
	"github.com/formspec/formspec-hooks/hooks/cliflag"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
	"github.com/formspec/formspec-hooks/hooks/reporter"
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

Report node health and workspace status to Cluster Control, and serve its
restart directives to the hook server on localhost, until SIGTERM.

Flags:
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cliflag.New(program, usage)
	var (
		cfg          reporter.Config
		listen       = fs.String("listen", "127.0.0.1:8181", "address of the localhost API the hook server posts observations to; it has no authentication, so keep it on loopback")
		metricsAddr  = fs.String("metrics-listen", ":9091", "address serving /metrics, /healthz and /readyz")
		shutdownWait = fs.Duration("shutdown-grace", 10*time.Second, "how long in-flight requests may take on shutdown")
		logging      = cliflag.AddLogging(fs)
	)
	cliflag.AddVersion(fs)
	fs.StringVar(&cfg.ClusterControlURL, "cluster-control-url", "", "base URL of Cluster Control (required), e.g. http://formspec-ctl.formspec-system:7070")
	fs.StringVar(&cfg.Reporter, "reporter-name", "", "name this reporter gives itself in node-health reports (default $POD_NAME, else the hostname)")
	fs.StringVar(&cfg.TokenFile, "token-file", "", "file holding the bearer token for Cluster Control; re-read when it changes; while it is missing or empty, calls carry no token")
	fs.StringVar(&cfg.CAFile, "ca-file", "", "PEM CA bundle to verify Cluster Control's certificate (default: system roots)")
	fs.StringVar(&cfg.ClientCertFile, "client-cert-file", "", "PEM client certificate for mTLS; reloaded when it changes")
	fs.StringVar(&cfg.ClientKeyFile, "client-key-file", "", "PEM client key for mTLS")
	fs.DurationVar(&cfg.NodeHealthInterval, "node-health-interval", 15*time.Second, "period of POST /v1/node-health (jittered by ±10%)")
	fs.DurationVar(&cfg.DeployStatusInterval, "deploy-status-interval", 30*time.Second, "period of GET /v1/deploy-status (jittered by ±10%)")
	fs.IntVar(&cfg.NodeStaleIntervals, "node-stale-intervals", 4, "node-health intervals a node may go unobserved before it is forgotten")
	fs.DurationVar(&cfg.PodStaleAfter, "pod-stale-after", 5*time.Minute, "how long a workspace pod may go unobserved before it stops counting towards its node")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", 10*time.Second, "timeout of one call to Cluster Control")
	fs.DurationVar(&cfg.BackoffBase, "backoff-base", 500*time.Millisecond, "first retry delay; doubles per failure, with full jitter")
	fs.DurationVar(&cfg.BackoffMax, "backoff-max", 60*time.Second, "longest retry delay (a Retry-After may ask for more, up to 10m)")
	fs.DurationVar(&cfg.LogInterval, "failure-log-interval", 30*time.Second, "least time between two failure logs for one endpoint")
	fs.IntVar(&cfg.MaxWorkspaces, "max-workspaces", 20000, "most workspaces tracked; observations beyond are dropped and counted")
	fs.IntVar(&cfg.MaxNodes, "max-nodes", 5000, "most nodes tracked; observations beyond are dropped and counted")
	fs.IntVar(&cfg.MaxPods, "max-pods", 200000, "most workspace pods tracked; observations beyond are dropped and counted")
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	if err := cliflag.NoArgs(fs); err != nil {
		return err
	}
	if cfg.Reporter == "" {
		cfg.Reporter = os.Getenv("POD_NAME")
	}
	if cfg.Reporter == "" {
		cfg.Reporter, _ = os.Hostname()
	}
	log := logging.Logger(stderr)
	cfg.Logger = log
	if !isLoopback(*listen) {
		log.Warn("--listen is not a loopback address: anyone who can reach it can post observations and read directives, without authentication", "listen", *listen)
	}

	rep, err := reporter.New(cfg)
	if err != nil {
		return err
	}
	localLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot listen on --listen: %w", err)
	}
	opsLn, err := net.Listen("tcp", *metricsAddr)
	if err != nil {
		_ = localLn.Close()
		return fmt.Errorf("cannot listen on --metrics-listen: %w", err)
	}
	build := buildinfo.Get()
	log.Info("reporter starting", "version", build.Version, "revision", build.Revision, "clusterControl", cfg.ClusterControlURL, "listen", localLn.Addr().String(), "metrics", opsLn.Addr().String())

	// One part stopping stops the others: a sidecar without its localhost
	// API or its reporting loops is not worth keeping up.
	err = cliflag.RunAll(ctx,
		rep.Run,
		func(ctx context.Context) error { return httpserve.Run(ctx, localLn, rep.LocalHandler(), *shutdownWait) },
		func(ctx context.Context) error { return httpserve.Run(ctx, opsLn, rep.OpsHandler(), *shutdownWait) },
	)
	log.Info("reporter stopped")
	return err
}

// isLoopback reports whether a listen address only accepts connections
// from this host (the pod, in a cluster).
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
