package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/formspec/formspec-hooks/hooks/cliflag"
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
	maxBodyBytes                             int64
	maxInFlight                              int
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
	fs.IntVar(&f.maxInFlight, "max-inflight", 64, "hook requests served at once; more get 429 (0: no limit)")
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
	if f.maxInFlight < 0 {
		return errors.New("--max-inflight must not be negative")
	}
	if f.shutdownDelay < 0 || f.shutdownTimeout <= 0 {
		return errors.New("--shutdown-delay must not be negative and --shutdown-timeout must be positive")
	}

	cfg := server.Config{
		Addr:            f.listen,
		MetricsAddr:     f.metricsListen,
		Logger:          logger,
		Metrics:         server.NewMetrics(),
		MaxInFlight:     f.maxInFlight,
		ShutdownDelay:   f.shutdownDelay,
		ShutdownTimeout: f.shutdownTimeout,
	}
	if f.tlsCertFile != "" || f.tlsKeyFile != "" {
		cfg.TLS, err = server.TLSConfig(f.tlsCertFile, f.tlsKeyFile, f.tlsClientCAFile)
		if err != nil {
			return fmt.Errorf("cannot set up TLS: %w", err)
		}
	} else if f.tlsClientCAFile != "" {
		return errors.New("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
	}
	if f.authTokenFile != "" {
		cfg.Tokens, err = server.NewTokenFile(f.authTokenFile)
		if err != nil {
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
