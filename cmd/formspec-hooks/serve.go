package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/formspec/formspec-hooks/hooks/cliflag"
	"github.com/formspec/formspec-hooks/hooks/filereload"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
	"github.com/formspec/formspec-hooks/hooks/reporter/handoff"
	"github.com/formspec/formspec-hooks/hooks/server"
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
	decisions server.Decisions
	// handlerOptions carry the body limit and logger into every
	// server.Handler, so that --max-body-bytes applies to all hooks.
	handlerOptions []server.HandlerOption
}

// serveFlags are the serve command's flags, parsed.
type serveFlags struct {
	listen, metricsListen                    string
	resourceImage, defaultVersion            string
	controlClusterURL, reporterURL           string
	maxBodyBytes, maxInFlightBytes           int64
	maxInFlight, maxObjects                  int
	maxConns, maxConnsPerClient, maxIdle     int
	bodyTimeout                              time.Duration
	tlsCertFile, tlsKeyFile, tlsClientCAFile string
	authTokenFile                            string
	shutdownDelay, shutdownTimeout           time.Duration
	logLevel, logFormat                      string
}

func newServeFlagSet(f *serveFlags) *flag.FlagSet {
	fs := cliflag.New("serve")
	fs.StringVar(&f.listen, "listen", ":8080", "address of the hook listener")
	fs.StringVar(&f.metricsListen, "metrics-listen", ":9090", "address of the listener for /metrics, /healthz and /readyz")
	fs.StringVar(&f.resourceImage, "resource-image", "formahub/formspec-resource", "workspace image repository; may carry a tag, which then becomes the default version")
	fs.StringVar(&f.defaultVersion, "default-version", "", "image tag for Workspaces without spec.version (default: the tag in --resource-image, else \"latest\")")
	fs.StringVar(&f.controlClusterURL, "control-cluster-url", "", "Cluster Control URL given to workspaces as CONTROL_CLUSTER_URL")
	fs.StringVar(&f.reporterURL, "reporter-url", "http://127.0.0.1:8181", "URL of the reporter sidecar")
	fs.Int64Var(&f.maxBodyBytes, "max-body-bytes", server.DefaultMaxBodyBytes, "largest request body accepted; larger ones get 413")
	fs.IntVar(&f.maxInFlight, "max-inflight", 64, "hook requests worked on at once, counted once their body is read; more get 429 (0: no limit)")
	fs.Int64Var(&f.maxInFlightBytes, "max-inflight-bytes", 0, "request-body bytes held at once; more get 429 (default: an eighth of the memory limit from GOMEMLIMIT or the cgroup, at least --max-body-bytes; 64 MiB without a limit)")
	fs.IntVar(&f.maxObjects, "max-objects", server.DefaultMaxObjects, "most children, attachments and related objects in one request; more get 413")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", server.DefaultBodyTimeout, "time to receive one request body; slower clients get 408")
	fs.IntVar(&f.maxConns, "max-connections", httpserve.DefaultMaxConns, "open connections on each listener (hooks, metrics); beyond it new ones wait")
	fs.IntVar(&f.maxConnsPerClient, "max-connections-per-client", httpserve.DefaultMaxConnsPerClient, "open connections from one client address; beyond it new ones are closed")
	fs.IntVar(&f.maxIdle, "max-idle-connections", httpserve.DefaultMaxIdleConns, "kept-alive connections waiting for a request; beyond it idle ones are closed")
	fs.StringVar(&f.tlsCertFile, "tls-cert-file", "", "serve hooks over TLS with this certificate (reloaded when it changes)")
	fs.StringVar(&f.tlsKeyFile, "tls-key-file", "", "private key for --tls-cert-file")
	fs.StringVar(&f.tlsClientCAFile, "tls-client-ca-file", "", "require client certificates signed by these CAs (mTLS; reloaded when it changes)")
	fs.StringVar(&f.authTokenFile, "auth-token-file", "", "require a bearer token from this file, one per line (re-read when it changes)")
	fs.DurationVar(&f.shutdownDelay, "shutdown-delay", server.DefaultShutdownDelay, "how long /readyz fails before the listener closes")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "how long in-flight requests may take to finish on shutdown")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error (request lines are debug)")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	return fs
}

// runServe runs the hook server until ctx is cancelled (SIGTERM).
func runServe(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var f serveFlags
	fs := newServeFlagSet(&f)
	if err := cliflag.Parse(fs, args, stdout, stderr, serveUsage); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	logger, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	image, version, err := resolveImage(f.resourceImage, f.defaultVersion)
	if err != nil {
		return err
	}
	if err := checkURL("--reporter-url", f.reporterURL, false); err != nil {
		return err
	}
	if err := checkURL("--control-cluster-url", f.controlClusterURL, true); err != nil {
		return err
	}
	if f.maxBodyBytes <= 0 {
		return errors.New("--max-body-bytes must be positive")
	}
	if f.maxInFlight < 0 || f.maxInFlightBytes < 0 {
		return errors.New("--max-inflight and --max-inflight-bytes must not be negative")
	}
	if f.maxObjects <= 0 || f.bodyTimeout <= 0 || f.maxConns <= 0 || f.maxConnsPerClient <= 0 || f.maxIdle <= 0 {
		return errors.New("--max-objects, --body-timeout and the --max-*connections* flags must be positive")
	}
	if f.maxInFlightBytes == 0 {
		f.maxInFlightBytes = defaultInFlightBytes(memoryLimit(), f.maxBodyBytes)
	}
	if f.shutdownDelay < 0 || f.shutdownTimeout <= 0 {
		return errors.New("--shutdown-delay must not be negative and --shutdown-timeout must be positive")
	}

	cfg := server.Config{
		Addr:             f.listen,
		MetricsAddr:      f.metricsListen,
		Logger:           logger,
		Metrics:          server.NewMetrics(),
		MaxInFlight:      f.maxInFlight,
		MaxInFlightBytes: f.maxInFlightBytes,
		MaxBodyBytes:     f.maxBodyBytes,
		BodyTimeout:      f.bodyTimeout,
		Conns:            httpserve.ConnLimits{Max: f.maxConns, PerClient: f.maxConnsPerClient, Idle: f.maxIdle},
		ShutdownDelay:    f.shutdownDelay,
		ShutdownTimeout:  f.shutdownTimeout,
	}
	if f.tlsCertFile != "" || f.tlsKeyFile != "" {
		cfg.TLS, cfg.Credentials, err = server.TLSConfig(f.tlsCertFile, f.tlsKeyFile, f.tlsClientCAFile, logger)
		if err != nil {
			return fmt.Errorf("cannot set up TLS: %w", err)
		}
	} else if f.tlsClientCAFile != "" {
		return errors.New("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
	}
	if f.authTokenFile != "" {
		cfg.Tokens = filereload.NewTokens(f.authTokenFile, filereload.Options{Name: "auth-tokens", Logger: logger})
		// A file broken at start stops the server rather than refusing
		// every request; switching auth off is done by dropping the flag.
		if err := cfg.Tokens.Err(); err != nil {
			return fmt.Errorf("cannot set up bearer tokens: %w", err)
		}
	}
	if f.controlClusterURL == "" {
		logger.Warn("no --control-cluster-url: workspaces get an empty CONTROL_CLUSTER_URL")
	}

	// The hand-off client posts observations to the reporter sidecar in the
	// background; hooks only ever enqueue.
	reports, err := handoff.New(f.reporterURL, handoff.Options{Logger: logger})
	if err != nil {
		return fmt.Errorf("cannot set up the reporter hand-off: %w", err)
	}
	if err := cfg.Metrics.Register(reports.Collectors()...); err != nil {
		return err
	}
	// The hand-off outlives the server's shutdown: hooks keep answering
	// through the drain delay and the in-flight drain, and what they observe
	// then should still reach the sidecar. It stops once Run has returned.
	handoffCtx, stopHandoff := context.WithCancel(context.WithoutCancel(ctx))
	handoffDone := make(chan struct{})
	go func() {
		defer close(handoffDone)
		if err := reports.Run(handoffCtx); err != nil && handoffCtx.Err() == nil {
			logger.Error("reporter hand-off stopped", "err", err)
		}
	}()
	defer func() {
		stopHandoff()
		<-handoffDone
	}()

	cfg.Routes = hookRoutes(hookConfig{
		resourceImage:     image,
		defaultVersion:    version,
		controlClusterURL: f.controlClusterURL,
		reporterURL:       f.reporterURL,
		reports:           reports,
		logger:            logger,
		decisions:         cfg.Metrics,
		handlerOptions: []server.HandlerOption{
			server.WithMaxBodyBytes(f.maxBodyBytes),
			server.WithMaxObjects(f.maxObjects),
			server.WithLogger(logger),
		},
	})
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

// serveUsage heads serve's --help.
const serveUsage = "Usage: formspec-hooks serve [flags]\n\nServe the Metacontroller hooks until SIGTERM.\n\nFlags:\n"

// resolveImage splits a tag off the image repository. The hooks build
// "<repository>:<version>", so a digest cannot be honoured and is refused
// rather than silently producing an invalid reference. A colon after the
// last slash is a tag; one before it is a registry port.
func resolveImage(image, defaultVersion string) (repository, version string, err error) {
	if image == "" {
		return "", "", errors.New("--resource-image must not be empty")
	}
	if strings.Contains(image, "@") {
		return "", "", fmt.Errorf("--resource-image %q has a digest; give the repository and set the tag with --default-version", image)
	}
	repository, tag := image, ""
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repository, tag = image[:i], image[i+1:]
	}
	switch {
	case defaultVersion != "":
		version = defaultVersion
	case tag != "":
		version = tag
	default:
		// Matches what a bare image reference means to a container
		// runtime; pin a version in production.
		version = "latest"
	}
	return repository, version, nil
}

// memoryLimit is the process's memory limit: GOMEMLIMIT (which the
// deployment sets to the container's limit), else the cgroup v2 limit,
// else 0 for none.
func memoryLimit() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l
	}
	raw, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	l, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || l <= 0 {
		// "max": no limit.
		return 0
	}
	return l
}

// defaultInFlightBytes budgets an eighth of the memory limit for request
// bodies: a decoded request and its response take a few times the body's
// bytes, and the rest is the runtime, the hand-off queue and headroom
// below GOMEMLIMIT. At 256 MiB that is 32 MiB, four maximum-size bodies at
// once. The budget never falls below one maximum-size body, or such a
// body could never be served.
func defaultInFlightBytes(limit, maxBody int64) int64 {
	if limit <= 0 {
		return max(64<<20, maxBody)
	}
	return max(limit/8, maxBody)
}

func checkURL(flagName, raw string, optional bool) error {
	if raw == "" && optional {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s must be an http or https URL, got %q", flagName, raw)
	}
	return nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("invalid --log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("invalid --log-format %q: want text or json", format)
}
