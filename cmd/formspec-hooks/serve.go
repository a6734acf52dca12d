package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/formspec/formspec-hooks/internal/buildinfo"
	"github.com/formspec/formspec-hooks/internal/cliflag"
	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/formspec/formspec-hooks/internal/handoff"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/decision"
	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/formspec/formspec-hooks/internal/server"
	"github.com/formspec/formspec-hooks/internal/weburl"
)

// hookConfig is what the hooks need from the command line and the process.
// hookRoutes turns it into the route table.
type hookConfig struct {
	// resourceImage is the workspace image repository, without a tag.
	resourceImage string
	// defaultVersion is the tag used when a Workspace sets no spec.version.
	defaultVersion string
	// controlClusterURL is handed to workspaces as CONTROL_CLUSTER_URL.
	controlClusterURL string
	// reporterURL is the reporter sidecar on localhost.
	reporterURL string
	// reports hands observations to the sidecar; nil means no sidecar
	// (tests, render).
	reports   *handoff.Client
	logger    *slog.Logger
	decisions decision.Recorder
	// claims are the install's choices about grants.
	claims claims.Options
	// childCreateGrace is --child-create-grace.
	childCreateGrace time.Duration
}

// serveFlags are the serve command's flags, parsed.
type serveFlags struct {
	listen, metricsListen, healthListen      string
	resourceImage, defaultVersion            string
	clusterControlURL, reporterURL           string
	maxBodyBytes, maxInFlightBytes           int64
	maxInFlight, maxObjects                  int
	maxConns, maxConnsPerClient, maxIdle     int
	bodyTimeout, maxConnAge                  time.Duration
	tlsCertFile, tlsKeyFile, tlsClientCAFile string
	authTokenFile                            string
	acceptV1Grants                           bool
	childCreateGrace                         time.Duration
	shutdownDelay, shutdownTimeout           time.Duration
	pprof                                    bool
	logging                                  *cliflag.Logging
}

func newServeFlagSet(f *serveFlags) *flag.FlagSet {
	fs := cliflag.New(program+" serve", serveUsage)
	fs.StringVar(&f.listen, "listen", server.Defaults.Addr, "address of the hook listener")
	fs.StringVar(&f.metricsListen, "metrics-listen", server.Defaults.MetricsAddr, "address of the listener for /metrics, /healthz and /readyz")
	fs.StringVar(&f.healthListen, "health-listen", "", "address of a listener for /healthz and /readyz alone, with connection caps of its own, for the kubelet's probes (the install sets :8081); empty: none")
	fs.StringVar(&f.resourceImage, "resource-image", workspace.Defaults.ResourceImage, "workspace image repository; may carry a tag, which then becomes the default version")
	fs.StringVar(&f.defaultVersion, "default-version", "", "image tag for Workspaces without spec.version; required unless --resource-image has a tag")
	clusterControlURLFlags(fs, &f.clusterControlURL)
	fs.StringVar(&f.reporterURL, "reporter-url", handoff.DefaultURL, "URL of the reporter sidecar; empty: no sidecar, and nothing is handed off")
	fs.Int64Var(&f.maxBodyBytes, "max-body-bytes", server.Defaults.MaxBodyBytes, "largest request body accepted; larger ones get 413")
	fs.IntVar(&f.maxInFlight, "max-inflight", server.Defaults.MaxInFlight, "hook requests worked on at once, counted once their body is read; more get 429 (0: no limit)")
	fs.Int64Var(&f.maxInFlightBytes, "max-inflight-bytes", 0, "bytes all requests hold at once, counted as they cost decoded (each body's buffer, then 8 bytes per body byte); more get 429 (default: three quarters of the memory limit, the tighter of GOMEMLIMIT and the memory cgroup's, 192 MiB without a limit, at least one request of --max-body-bytes)")
	fs.IntVar(&f.maxObjects, "max-objects", server.Defaults.MaxObjects, "most children, attachments and related objects in one request; more get 413 (each hook also caps its objects per kind: docs/security.md)")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", httpserve.Defaults.BodyTimeout, "time to receive one request body; slower clients get 408")
	fs.IntVar(&f.maxConns, "max-connections", httpserve.Defaults.Conns.Max, "open connections on each listener (hooks, metrics); beyond it new ones wait")
	fs.IntVar(&f.maxConnsPerClient, "max-connections-per-client", httpserve.Defaults.Conns.PerClient, "open connections from one client address; beyond it new ones are closed")
	fs.IntVar(&f.maxIdle, "max-idle-connections", httpserve.Defaults.Conns.Idle, "kept-alive connections waiting for a request; beyond it idle ones are closed")
	fs.DurationVar(&f.maxConnAge, "max-connection-age", httpserve.Defaults.MaxConnAge, "how long a connection carries requests; the first answer after that closes it (HTTP/2: GOAWAY), so that clients reconnect and spread over the replicas")
	fs.StringVar(&f.tlsCertFile, "tls-cert-file", "", "serve hooks over TLS with this certificate (reloaded when it changes)")
	fs.StringVar(&f.tlsKeyFile, "tls-key-file", "", "private key for --tls-cert-file")
	fs.StringVar(&f.tlsClientCAFile, "tls-client-ca-file", "", "require client certificates signed by these CAs (mTLS; reloaded when it changes)")
	fs.StringVar(&f.authTokenFile, "auth-token-file", "", "require a bearer token from this file, one per line (re-read when it changes)")
	fs.DurationVar(&f.childCreateGrace, "child-create-grace", workspace.Defaults.ChildCreateGrace, "how long a workspace's Deployment, Service or ConfigMap may stay missing after a sync asked for it before the Workspace is Degraded with reason ChildNotCreated (its create failed: an object of that name the workspace does not own, a quota or an admission rejection)")
	fs.BoolVar(&f.acceptV1Grants, "accept-v1-grants", false, "accept ResourceClaims signed in the original operator's v1 format for every Datastore, as a Datastore's spec.grantPolicy.acceptV1Signatures does for its own; v1 binds no namespace, so only while moving from that operator (docs/claims.md)")
	fs.DurationVar(&f.shutdownDelay, "shutdown-delay", server.Defaults.ShutdownDelay, "how long /readyz fails before the listener closes")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", httpserve.Defaults.ShutdownTimeout, "how long in-flight requests may take to finish on shutdown")
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go's profiler under /debug/pprof/ on the --metrics-listen listener (off by default: profiles reveal internals and cost CPU)")
	f.logging = cliflag.AddLogging(fs)
	cliflag.AddVersion(fs)
	return fs
}

// clusterControlURLFlags registers --cluster-control-url, the reporter's
// name for the same service, and its deprecated alias
// --control-cluster-url, which older manifests pass.
func clusterControlURLFlags(fs *flag.FlagSet, v *string) {
	const help = "Cluster Control URL given to workspaces as CONTROL_CLUSTER_URL, e.g. " + exampleClusterControlURL + "; no user, query or fragment"
	fs.StringVar(v, "cluster-control-url", "", help)
	cliflag.Deprecate(fs, "control-cluster-url", "cluster-control-url")
}

// exampleClusterControlURL is the in-cluster address the install uses for
// Cluster Control; the docs and every --help give this one.
const exampleClusterControlURL = "http://formspec-ctl.formspec-system:7070"

// runServe runs the hook server until ctx is cancelled (SIGTERM). The
// error it exits with is a log line under --log-format json.
func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) (err error) {
	var f serveFlags
	fs := newServeFlagSet(&f)
	defer func() { err = f.logging.Report(stderr, fs.Name(), args, err) }()
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	if err := cliflag.NoArgs(fs); err != nil {
		return err
	}
	image, version, err := workspace.ParseImage(f.resourceImage, f.defaultVersion)
	if err != nil {
		return cliflag.Usagef(fs, "%w", err)
	}
	if err := checkURL("--reporter-url", f.reporterURL, true); err != nil {
		return cliflag.Usagef(fs, "%w", err)
	}
	if err := checkURL(cliflag.Given(fs, "cluster-control-url"), f.clusterControlURL, true); err != nil {
		return cliflag.Usagef(fs, "%w", err)
	}
	for _, c := range []struct {
		flag string
		bad  bool
		want string
	}{
		{"--max-body-bytes", f.maxBodyBytes <= 0, "positive"},
		{"--max-inflight", f.maxInFlight < 0, "zero (no limit) or positive"},
		{"--max-inflight-bytes", f.maxInFlightBytes < 0, "zero (the default budget) or positive"},
		{"--max-objects", f.maxObjects <= 0, "positive"},
		{"--body-timeout", f.bodyTimeout <= 0, "positive"},
		{"--max-connections", f.maxConns <= 0, "positive"},
		{"--max-connections-per-client", f.maxConnsPerClient <= 0, "positive"},
		{"--max-idle-connections", f.maxIdle <= 0, "positive"},
		{"--max-connection-age", f.maxConnAge <= 0, "positive"},
		{"--shutdown-delay", f.shutdownDelay < 0, "zero or positive"},
		{"--shutdown-timeout", f.shutdownTimeout <= 0, "positive"},
	} {
		if c.bad {
			return cliflag.Usagef(fs, "%s must be %s", c.flag, c.want)
		}
	}
	server.TuneGC(os.Getenv)
	memLimit, goLimit := server.TuneMemory()
	if f.maxInFlightBytes == 0 {
		f.maxInFlightBytes = server.DefaultInFlightBytes(memLimit, f.maxBodyBytes)
	}

	logger := f.logging.Logger(stderr)
	build := buildinfo.Get()
	logger.Info("formspec-hooks starting", "version", build.Version, "revision", build.Revision, "go", build.GoVersion,
		"memoryLimit", memLimit, "inFlightBytes", f.maxInFlightBytes, "goMemoryLimit", goLimit)
	warn := func(msg string) { logger.Warn(msg) }
	cliflag.WarnDeprecated(fs, warn)

	cfg := server.Config{
		Addr:             f.listen,
		MetricsAddr:      f.metricsListen,
		HealthAddr:       f.healthListen,
		Logger:           logger,
		Metrics:          server.NewMetrics(),
		MaxInFlight:      f.maxInFlight,
		MaxInFlightBytes: f.maxInFlightBytes,
		MaxBodyBytes:     f.maxBodyBytes,
		MaxObjects:       f.maxObjects,
		Pprof:            f.pprof,
		ShutdownDelay:    f.shutdownDelay,
		HTTP: httpserve.Config{
			BodyTimeout:     f.bodyTimeout,
			MaxConnAge:      f.maxConnAge,
			Conns:           httpserve.ConnLimits{Max: f.maxConns, PerClient: f.maxConnsPerClient, Idle: f.maxIdle},
			ShutdownTimeout: f.shutdownTimeout,
		},
	}
	if err := cfg.Metrics.Register(buildinfo.Collector("formspec_hooks")); err != nil {
		return err
	}
	if f.tlsCertFile != "" || f.tlsKeyFile != "" {
		if f.tlsCertFile == "" || f.tlsKeyFile == "" {
			return cliflag.Usagef(fs, "--tls-cert-file and --tls-key-file go together")
		}
		cfg.TLS, cfg.Credentials, err = server.TLSConfig(f.tlsCertFile, f.tlsKeyFile, f.tlsClientCAFile, logger)
		if err != nil {
			return cliflag.FileError(fs, err)
		}
	} else if f.tlsClientCAFile != "" {
		return cliflag.Usagef(fs, "--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
	}
	if f.authTokenFile != "" {
		cfg.Tokens = filereload.NewTokens(f.authTokenFile, filereload.Options{Name: "auth-tokens", Logger: logger})
		// A file broken at start stops the server rather than refusing
		// every request; switching auth off is done by dropping the flag.
		if err := cfg.Tokens.Err(); err != nil {
			return cliflag.FileError(fs, err)
		}
	}
	warnNoClusterControl(warn, f.clusterControlURL)

	// The hand-off client posts observations to the reporter sidecar in the
	// background; hooks only ever enqueue. Without a sidecar it stays nil,
	// which discards.
	var reports *handoff.Client
	if f.reporterURL == "" {
		logger.Info("no --reporter-url: nothing is handed off for Cluster Control")
	} else if reports, err = handoff.New(f.reporterURL, handoff.Options{Logger: logger}); err != nil {
		return fmt.Errorf("cannot set up the reporter hand-off: %w", err)
	}
	if err := cfg.Metrics.Register(reports.Collectors()...); err != nil {
		return err
	}
	// The hand-off outlives the server's shutdown: hooks keep answering
	// through the drain delay and the in-flight drain, and what they observe
	// then should still reach the sidecar. It stops once Run has returned.
	handoffCtx, stopHandoff := context.WithCancel(context.WithoutCancel(ctx))
	var handoff errgroup.Group
	handoff.Go(func() error {
		if err := reports.Run(handoffCtx); err != nil && handoffCtx.Err() == nil {
			logger.Error("reporter hand-off stopped", "err", err)
		}
		return nil
	})
	defer func() {
		stopHandoff()
		_ = handoff.Wait()
	}()

	hooks := hookConfig{
		resourceImage:     image,
		defaultVersion:    version,
		controlClusterURL: f.clusterControlURL,
		reporterURL:       f.reporterURL,
		reports:           reports,
		logger:            logger,
		decisions:         cfg.Metrics,
		claims:            claims.Options{AcceptV1: f.acceptV1Grants},
		childCreateGrace:  f.childCreateGrace,
	}
	if f.acceptV1Grants {
		logger.Warn("--accept-v1-grants: ResourceClaims signed as v1, which binds no namespace, are granted for every Datastore; sign them again as v2 and drop the flag (docs/claims.md)")
	}
	cfg.Routes = hookRoutes(hooks)
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	warmUpBounded(logger, warmUpWait, func() (int, error) { return warmUp(hooks) })
	return srv.Run(ctx)
}

// warmUpBounded runs warm (warmUp) before the listeners open, so that
// /readyz passes only once the first calls of every hook are as quick as
// the rest, and says how it went. It waits at most wait: a warm-up that
// fails or hangs leaves the server slower on its first calls, never down.
func warmUpBounded(logger *slog.Logger, wait time.Duration, warm func() (int, error)) {
	start := time.Now()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := warm()
		done <- result{n, err}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-done:
		took := time.Since(start).Round(time.Millisecond)
		if r.err != nil {
			logger.Warn("warm-up incomplete; the first calls of some hooks may be slower", "calls", r.n, "took", took, "err", r.err)
			return
		}
		logger.Info("hooks warmed up", "calls", r.n, "took", took)
	case <-timer.C:
		logger.Warn("warm-up unfinished; serving without waiting for it", "waited", wait)
	}
}

// serveUsage heads serve's --help.
const serveUsage = "Usage: formspec-hooks serve [flags]\n\nServe the Metacontroller hooks until SIGTERM.\n\nFlags:\n"

func checkURL(flagName, raw string, optional bool) error {
	if raw == "" && optional {
		return nil
	}
	_, err := weburl.Parse(flagName, raw)
	return err
}

// warnNoClusterControl warns, as serve and render both do, that workspaces
// would be told no Cluster Control address.
func warnNoClusterControl(warn func(string), url string) {
	if url == "" {
		warn("no --cluster-control-url: workspaces get an empty CONTROL_CLUSTER_URL")
	}
}
