// Command formspec-clustercontrol runs the reference Cluster Control: an
// in-memory implementation of docs/cluster-control-api.yaml for tests and
// local demos of the reporter. It is not the production Cluster Control.
package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/formspec/formspec-hooks/internal/buildinfo"
	"github.com/formspec/formspec-hooks/internal/cliflag"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/formspec/formspec-hooks/internal/httpserve"
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

The admin API sets the directives a reporter writes onto Workspaces, so it
always needs a token (--admin-token-file). The API may go without one
only on a loopback --listen. What the server keeps is bounded by
--max-stored-bytes; past it the oldest goes.

Flags:
`

// run runs the reference Cluster Control; the error it exits with is a
// log line under --log-format json.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := cliflag.New(program, usage)
	listen := fs.String("listen", "127.0.0.1:8480", "address of the Cluster Control API; off the loopback it needs --auth-token-file")
	adminListen := fs.String("admin-listen", "127.0.0.1:8481", "address of the admin API (faults, directives, state); keep it on localhost; empty: none")
	tokenFile := fs.String("auth-token-file", "", "file with the API's accepted bearer tokens, one per line; empty accepts any request, on a loopback --listen only")
	cliflag.Deprecate(fs, "token-file", "auth-token-file")
	adminTokenFile := fs.String("admin-token-file", "", "file with the admin API's accepted bearer tokens, one per line; required with --admin-listen")
	maxStored := fs.Int64("max-stored-bytes", clustercontrol.Defaults.MaxBytes, "bytes of reports, workspace states and request records kept; past it the oldest go, and a body over a quarter of it gets 413")
	logging := cliflag.AddLogging(fs)
	defer func() { err = logging.Report(stderr, program, args, err) }()
	cliflag.AddVersion(fs)
	if err := cliflag.Parse(fs, args, stdout); err != nil {
		return err
	}
	if err := cliflag.NoArgs(fs); err != nil {
		return err
	}
	// Anyone who reaches an API without a token can post reports and read
	// the directives; on loopback that is this machine's users, which a
	// demo accepts.
	if *tokenFile == "" && !httpserve.LoopbackAddr(*listen) {
		return cliflag.Usagef(fs, "--listen %s is not a loopback address: it needs %s", *listen, cliflag.Given(fs, "auth-token-file"))
	}
	if *adminListen != "" && *adminTokenFile == "" {
		return cliflag.Usagef(fs, "--admin-listen needs --admin-token-file: the admin API decides what the reporter writes onto Workspaces")
	}
	if *maxStored <= 0 {
		return cliflag.Usagef(fs, "--max-stored-bytes must be positive")
	}
	log := logging.Logger(stderr)
	cliflag.WarnDeprecated(fs, func(msg string) { log.Warn(msg) })
	tokens, err := readTokens(cliflag.Given(fs, "auth-token-file"), *tokenFile)
	if err != nil {
		return err
	}
	adminTokens, err := readTokens("--admin-token-file", *adminTokenFile)
	if err != nil {
		return err
	}
	srv := clustercontrol.New(clustercontrol.Options{Tokens: tokens, AdminTokens: adminTokens, MaxBytes: *maxStored, Logger: log, HTTP: httpserve.Config{Logger: log}})
	// GOMEMLIMIT, when set, wins.
	if debug.SetMemoryLimit(-1) == math.MaxInt64 {
		debug.SetMemoryLimit(srv.MemoryLimit())
	}
	apiLn, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("cannot listen on --listen: %w", err)
	}
	parts := []func(context.Context) error{func(ctx context.Context) error { return srv.Serve(ctx, apiLn) }}
	attrs := []any{"version", buildinfo.Get().Version, "listen", apiLn.Addr().String(), "auth", len(tokens) > 0,
		"maxStoredBytes", *maxStored, "memoryLimit", debug.SetMemoryLimit(-1)}
	if *adminListen != "" {
		adminLn, err := net.Listen("tcp", *adminListen)
		if err != nil {
			_ = apiLn.Close()
			return fmt.Errorf("cannot listen on --admin-listen: %w", err)
		}
		parts = append(parts, func(ctx context.Context) error {
			return httpserve.Serve(ctx, adminLn, srv.AdminHandler(), httpserve.Config{Logger: log})
		})
		attrs = append(attrs, "admin", adminLn.Addr().String())
	}
	log.Info("reference cluster control starting", attrs...)
	return cliflag.RunAll(ctx, parts...)
}

// readTokens reads the token file a flag names, if any: the project's one
// token-file format, read once, as befits a reference server for tests and
// demos.
func readTokens(flag, path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", flag, err)
	}
	tokens, err := filereload.ParseTokens(raw)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s %s: %w", flag, path, err)
	}
	return tokens, nil
}
