// Command formspec-clustercontrol runs the reference Cluster Control: an
// in-memory implementation of docs/cluster-control-api.yaml for tests and
// local demos of the reporter. It is not the production Cluster Control.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/formspec/formspec-hooks/hooks/cliflag"
	"github.com/formspec/formspec-hooks/hooks/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/filereload"
	"github.com/formspec/formspec-hooks/hooks/httpserve"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "formspec-clustercontrol: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cliflag.New("formspec-clustercontrol")
	listen := fs.String("listen", "127.0.0.1:8480", "address of the Cluster Control API")
	adminListen := fs.String("admin-listen", "127.0.0.1:8481", "address of the admin API (faults, directives, state); keep it on localhost")
	tokenFile := fs.String("token-file", "", "file with accepted bearer tokens, one per line; empty accepts any request")
	if err := cliflag.Parse(fs, args, stdout, stderr, "Usage of "+fs.Name()+":\n"); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(stderr, nil))
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
	srv := clustercontrol.New(clustercontrol.Options{Tokens: tokens, Logger: log})
	apiLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot listen on --listen: %w", err)
	}
	adminLn, err := net.Listen("tcp", *adminListen)
	if err != nil {
		_ = apiLn.Close()
		return fmt.Errorf("cannot listen on --admin-listen: %w", err)
	}
	log.Info("reference cluster control starting", "listen", apiLn.Addr().String(), "admin", adminLn.Addr().String(), "auth", len(tokens) > 0)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ctx, apiLn) }()
	go func() { errc <- httpserve.Run(ctx, adminLn, srv.AdminHandler(), 5*time.Second) }()
	var first error
	for range 2 {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
		cancel()
	}
	return first
}
