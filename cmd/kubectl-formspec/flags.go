package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/formspec/formspec-hooks/internal/buildinfo"
	"github.com/formspec/formspec-hooks/internal/cliflag"
)

// flags are one command's flags: its own, and for the commands that talk
// to a cluster kubectl's connection flags and the project's logging
// flags. They are pflag flags, as kubectl's are (-n, --namespace=x), and
// follow the project's conventions through cliflag: --help exits 0, a
// usage mistake is reported first and exits 2, --version prints the
// version.
type flags struct {
	// own are the command's own flags; all holds them and kubectl's.
	own, all *pflag.FlagSet
	header   string
	version  *bool
	// kube and logging are nil for a command that talks to no cluster.
	kube    *genericclioptions.ConfigFlags
	kubeSet *pflag.FlagSet
	logging *cliflag.Logging
}

func newFlags(command, header string, cluster bool) *flags {
	f := &flags{
		own:    pflag.NewFlagSet(command, pflag.ContinueOnError),
		all:    pflag.NewFlagSet(command, pflag.ContinueOnError),
		header: header,
	}
	f.all.SetOutput(io.Discard)
	f.version = f.own.Bool("version", false, "print the version and exit")
	if cluster {
		// The logging flags are the standard library flags every command
		// of the project shares.
		std := flag.NewFlagSet(command, flag.ContinueOnError)
		f.logging = cliflag.AddLogging(std)
		f.own.AddGoFlagSet(std)
		f.kube = genericclioptions.NewConfigFlags(true)
		f.kubeSet = pflag.NewFlagSet(command, pflag.ContinueOnError)
		f.kube.AddFlags(f.kubeSet)
	}
	return f
}

// parse parses args. Help and version requests print their answer to
// stdout and return flag.ErrHelp, which cliflag.Exit turns into exit 0.
func (f *flags) parse(args []string, stdout io.Writer) error {
	f.all.AddFlagSet(f.own)
	if f.kubeSet != nil {
		f.all.AddFlagSet(f.kubeSet)
	}
	err := f.all.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		f.printUsage(stdout)
		return flag.ErrHelp
	case err != nil:
		return &cliflag.UsageError{Command: f.all.Name(), Err: err}
	case *f.version:
		cliflag.PrintVersion(stdout, program)
		return flag.ErrHelp
	}
	return nil
}

func (f *flags) printUsage(w io.Writer) {
	io.WriteString(w, f.header)
	io.WriteString(w, "\nFlags:\n"+f.own.FlagUsages())
	if f.kubeSet != nil {
		io.WriteString(w, "\nConnection flags, as in kubectl:\n"+f.kubeSet.FlagUsages())
	}
	io.WriteString(w, exitCodes)
}

func (f *flags) args() []string { return f.all.Args() }

// noArgs is a usage error when positional arguments were given.
func (f *flags) noArgs() error {
	if f.all.NArg() > 0 {
		return f.usagef("unexpected arguments %q", f.all.Args())
	}
	return nil
}

func (f *flags) usagef(format string, args ...any) error {
	return &cliflag.UsageError{Command: f.all.Name(), Err: fmt.Errorf(format, args...)}
}

// logger returns the logger the flags ask for, which client-go's own
// messages go through too.
func (f *flags) logger(stderr io.Writer) *slog.Logger {
	l := f.logging.Logger(stderr)
	klog.SetSlogLogger(l)
	return l
}

// Client rate limits: kubectl's own, so that a diff of many workspaces is
// not held to client-go's default of 5 requests a second.
const (
	clientQPS   = 50
	clientBurst = 300
)

// connect sets the client configuration every client of the command is
// made from (including kubectl's discovery, through ConfigFlags): the
// rate limits, a user agent naming the plugin, and a debug line for
// every request. Then it makes sure there is a configuration and an API
// server answers at it, so that either mistake is one line of the
// plugin's, before discovery's retries log their own.
func (f *flags) connect(logger *slog.Logger) error {
	f.kube.WrapConfigFn = func(c *rest.Config) *rest.Config {
		c.QPS, c.Burst = clientQPS, clientBurst
		c.UserAgent = program + "/" + buildinfo.Get().Version
		c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &requestLog{next: rt, logger: logger} })
		return c
	}
	if err := f.checkConfig(); err != nil {
		return err
	}
	cfg, err := f.kube.ToRESTConfig()
	if err != nil {
		return err
	}
	return reachable(cfg)
}

// requestLog logs each API request at debug level: method, path, the
// representation asked for (a Secret is only ever asked for as metadata)
// and the answer's status. Bodies are never logged.
type requestLog struct {
	next   http.RoundTripper
	logger *slog.Logger
}

func (l *requestLog) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := l.next.RoundTrip(req)
	attrs := []any{"method", req.Method, "path", req.URL.Path, "query", req.URL.RawQuery, "accept", req.Header.Get("Accept"), "duration", time.Since(start)}
	if err != nil {
		l.logger.Debug("api request failed", append(attrs, "err", err)...)
		return resp, err
	}
	l.logger.Debug("api request", append(attrs, "status", resp.StatusCode)...)
	return resp, err
}

// clients are what a command reads the cluster with, all made from the
// configuration connect set up.
type clients struct {
	dynamic dynamic.Interface
	// metadata reads objects as metadata only: Secrets are read with it.
	metadata metadata.Interface
	// mapper resolves resources as kubectl does, from discovery.
	mapper meta.RESTMapper
}

func (f *flags) clients() (*clients, error) {
	cfg, err := f.kube.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	c := &clients{}
	if c.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.metadata, err = metadata.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.mapper, err = f.kube.ToRESTMapper(); err != nil {
		return nil, err
	}
	return c, nil
}

// namespace is the namespace kubectl would use: -n, else the context's,
// else "default".
func (f *flags) namespace() (string, error) {
	ns, _, err := f.kube.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// errNoConfig is the error of a plugin run with no Kubernetes
// configuration at all: client-go would fall back to http://localhost:8080,
// where nothing or something else (make run's hook server) answers.
var errNoConfig = errors.New("no Kubernetes configuration: set KUBECONFIG or --kubeconfig, write ~/.kube/config, or give --server")

// checkConfig refuses to run without a configuration: no kubeconfig with a
// cluster, no --server, and not inside a pod.
func (f *flags) checkConfig() error {
	if f.kube.APIServer != nil && *f.kube.APIServer != "" {
		return nil
	}
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return nil
	}
	raw, err := f.kube.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return err
	}
	if len(raw.Clusters) == 0 {
		return errNoConfig
	}
	return nil
}

// reachable asks the API server for its version, once, so that a server
// that is down or is no API server is one line of the plugin's own,
// before discovery's retries log theirs.
func reachable(cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := dc.ServerVersion(); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%s is not a Kubernetes API server: it answers GET /version with 404 Not Found; check --server, --context or the kubeconfig", cfg.Host)
		}
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %w", cfg.Host, err)
	}
	return nil
}
