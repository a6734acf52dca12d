// Command formspec-clustercontrol runs the reference Cluster Control: an
// in-memory implementation of docs/cluster-control-api.yaml for tests and
// local demos of the reporter. It is not the production Cluster Control.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/formspec/formspec-hooks/hooks/buildinfo"
	"github.com/formspec/formspec-hooks/hooks/cliflag"
	"github.com/formspec/formspec-hooks/hooks/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/filereload"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(cliflag.Exit(os.Stderr, program, run(ctx, os.Args[1:], os.Stdout, os.Stderr)))
}

const program = "formspec-clustercontrol"

// usage heads --help.
const usage = `Usage: formspec-clustercontrol [flags]
       formspec-clustercontrol version

Serve the reference Cluster Control (docs/cluster-control-api.yaml), in
memory, for tests and demos, until SIGTERM. Not for production.

Flags:
`

// run runs the reference Cluster Control; the error it exits with is a
// log line under --log-format json.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := cliflag.New(program, usage)
	listen := fs.String("listen", "127.0.0.1:8480", "address of the Cluster Control API")
	adminListen := fs.String("admin-listen", "127.0.0.1:8481", "address of the admin API (faults, directives, state); keep it on localhost")
	tokenFile := fs.String("token-file", "", "file with accepted bearer tokens, one per line; empty accepts any request")
	logging := cliflag.AddLogging(fs)
	defer func() { err = logging.Report(stderr, program, args, err) }()
	cliflag.AddVersion(fs)
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	if err := cliflag.NoArgs(fs); err != nil {
		return err
	}
	log := logging.Logger(stderr)
	var tokens []string
	if *tokenFile != "" {
		raw, err := os.ReadFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("cannot read --token-file: %w", err)
		}
		// The project's one token-file format; read once, as befits a
		// reference server for tests and demos.
		if tokens, err = filereload.ParseTokens(raw); err != nil {
			return fmt.Errorf("cannot read --token-file %s: %w", *tokenFile, err)
		}
	}
	srv := clustercontrol.New(clustercontrol.Options{Tokens: tokens, Logger: log, HTTP: httpserve.Config{Logger: log}})
	apiLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot listen on --listen: %w", err)
	}
	adminLn, err := net.Listen("tcp", *adminListen)
	if err != nil {
		_ = apiLn.Close()
		return fmt.Errorf("cannot listen on --admin-listen: %w", err)
	}
	log.Info("reference cluster control starting", "version", buildinfo.Get().Version, "listen", apiLn.Addr().String(), "admin", adminLn.Addr().String(), "auth", len(tokens) > 0)
	return cliflag.RunAll(ctx,
		func(ctx context.Context) error { return srv.Serve(ctx, apiLn) },
		func(ctx context.Context) error {
			return httpserve.Serve(ctx, adminLn, srv.AdminHandler(), httpserve.Config{Logger: log})
		},
	)
}
