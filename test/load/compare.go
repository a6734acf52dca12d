package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// The comparison (make bench) runs the same load against four servers, one
// after the other, each in its own process so that its peak RSS is its
// own, and prints them side by side. On a shared machine absolute figures
// wander from run to run; the ratios within one run are what to compare.
//
//   - hooks: formspec-hooks serve, as deployed but on plain HTTP;
//   - roundtrip: a Go server that decodes each body into any with
//     encoding/json and encodes the golden answer back, no logic: the cost
//     of a JSON round trip through the standard library;
//   - python: the same round trip written the way Metacontroller's Python
//     examples are (http.server + json), when python3 is on the PATH;
//   - floor: a Go server that reads the body and writes fixed bytes: the
//     cost of HTTP itself on this machine.

// compareOptions are the -compare flags.
type compareOptions struct {
	hooksBin, fixtures, match string
	// also are more hook server builds to measure beside hooksBin.
	also alsoFlag
	// cpus is "split" (the driver on one CPU, the servers on the others)
	// or "shared" (everything wherever the operating system puts it).
	cpus             string
	workers, rounds  int
	duration, warmup time.Duration
}

type server struct {
	name  string
	start func(addr string) (*exec.Cmd, error)
}

func compare(opts compareOptions, stdout io.Writer) error {
	reqs, err := load(opts.fixtures, opts.match)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var cpus cpuSet
	placement := "driver and servers share every CPU"
	switch opts.cpus {
	case "split":
		driver, servers, desc, err := splitCPUs()
		if err != nil {
			return err
		}
		if err := pinSelf(driver); err != nil {
			return err
		}
		cpus, placement = servers, desc
	case "shared":
	default:
		return fmt.Errorf("-cpus must be split or shared, not %q", opts.cpus)
	}
	startCmd := func(cmd *exec.Cmd) (*exec.Cmd, error) {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd, startOn(cmd, cpus)
	}
	goServer := func(mode string) func(string) (*exec.Cmd, error) {
		return func(addr string) (*exec.Cmd, error) {
			return startCmd(exec.Command(self, "-serve", mode, "-url", "http://"+addr, "-fixtures", opts.fixtures, "-match", opts.match))
		}
	}
	// The hook server hands every status to its reporter sidecar; a sink
	// that takes the batches stands in for it, as in a pod.
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer sink.Close()
	go func() {
		_ = http.Serve(sink, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}))
	}()
	hookServer := func(bin string) func(string) (*exec.Cmd, error) {
		return func(addr string) (*exec.Cmd, error) {
			// The values the golden fixtures were made with (Makefile RUN_FLAGS).
			return startCmd(exec.Command(bin, "serve", "--listen", addr, "--metrics-listen", "127.0.0.1:0",
				"--resource-image", "formahub/formspec-resource", "--default-version", "latest",
				"--cluster-control-url", "http://formspec-ctl.formspec-system:7070",
				"--reporter-url", "http://"+sink.Addr().String(), "--log-level", "warn", "--shutdown-delay", "0s"))
		}
	}
	servers := []server{{"hooks", hookServer(opts.hooksBin)}}
	for _, a := range opts.also {
		servers = append(servers, server{a.name, hookServer(a.path)})
	}
	servers = append(servers, server{"roundtrip", goServer("roundtrip")})
	if py, err := exec.LookPath("python3"); err == nil {
		script := filepath.Join(filepath.Dir(opts.fixtures), "test", "load", "pyhook.py")
		servers = append(servers, server{"python", func(addr string) (*exec.Cmd, error) {
			_, port, _ := net.SplitHostPort(addr)
			return startCmd(exec.Command(py, script, port, opts.fixtures, opts.match))
		}})
	}
	servers = append(servers, server{"floor", goServer("floor")})

	fmt.Fprintf(stdout, "%d fixtures (%s), %d connections, %s per server in %d interleaved rounds, after %s warm-up; %s\n",
		len(reqs), opts.match, opts.workers, opts.duration, opts.rounds, opts.warmup, placement)
	results, rss, err := measure(servers, reqs, opts)
	if err != nil {
		return err
	}
	base := results["roundtrip"].rate()
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\treq/s\t× roundtrip\tp50\tp99\tpeak RSS\terrors\t")
	for _, s := range servers {
		r := results[s.name]
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%s\t%s\t%.1f MiB\t%d\t\n", s.name, r.rate(), r.rate()/base,
			pct(r.latencies, 50), pct(r.latencies, 99), float64(rss[s.name])/(1<<20), r.failures+nonOK(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if py := results["python"]; py != nil {
		fmt.Fprintf(stdout, "hooks / python: %.2f\n", results["hooks"].rate()/py.rate())
	}
	fmt.Fprintf(stdout, "hooks / floor: %.2f\n", results["hooks"].rate()/results["floor"].rate())
	for _, a := range opts.also {
		fmt.Fprintf(stdout, "%s / hooks: %.2f\n", a.name, results[a.name].rate()/results["hooks"].rate())
	}
	return nil
}

// alsoFlag is -also: NAME=PATH pairs, in the order given.
type alsoFlag []struct{ name, path string }

func (a *alsoFlag) String() string {
	var parts []string
	for _, x := range *a {
		parts = append(parts, x.name+"="+x.path)
	}
	return strings.Join(parts, ",")
}

func (a *alsoFlag) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	reserved := map[string]bool{"hooks": true, "roundtrip": true, "python": true, "floor": true}
	if !ok || name == "" || path == "" || reserved[name] {
		return fmt.Errorf("want NAME=PATH with a NAME other than hooks, roundtrip, python and floor, got %q", v)
	}
	for _, x := range *a {
		if x.name == name {
			return fmt.Errorf("name %q given twice", name)
		}
	}
	*a = append(*a, struct{ name, path string }{name, path})
	return nil
}

func nonOK(r *result) int {
	n := 0
	for c, k := range r.codes {
		if c != http.StatusOK {
			n += k
		}
	}
	return n
}

// measure starts every server, then loads them in turn, round after round,
// so that whatever else runs on the machine weighs on each of them alike.
// It returns each server's merged result and peak resident set size
// (VmHWM) in bytes.
func measure(servers []server, reqs []request, opts compareOptions) (map[string]*result, map[string]int64, error) {
	type running struct {
		cmd    *exec.Cmd
		target *target
	}
	procs := make([]running, len(servers))
	defer func() {
		for _, p := range procs {
			if p.cmd != nil {
				_ = p.cmd.Process.Signal(syscall.SIGTERM)
				_ = p.cmd.Wait()
			}
		}
	}()
	for i, s := range servers {
		addr, err := freeAddr()
		if err != nil {
			return nil, nil, err
		}
		cmd, err := s.start(addr)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.name, err)
		}
		procs[i].cmd = cmd
		if procs[i].target, err = newTarget("http://"+addr, reqs); err != nil {
			return nil, nil, err
		}
		if err := waitReady(procs[i].target); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", s.name, err)
		}
		warm, cancel := context.WithTimeout(context.Background(), opts.warmup)
		drive(warm, procs[i].target, opts.workers, 1<<30)
		cancel()
	}
	results := map[string]*result{}
	for range opts.rounds {
		for i, s := range servers {
			ctx, cancel := context.WithTimeout(context.Background(), opts.duration/time.Duration(opts.rounds))
			r := drive(ctx, procs[i].target, opts.workers, 1<<30)
			cancel()
			results[s.name] = results[s.name].merge(r)
		}
	}
	rss := map[string]int64{}
	for i, s := range servers {
		rss[s.name] = peakRSS(procs[i].cmd.Process.Pid)
	}
	return results, rss, nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls until the server answers its first request with 200; it
// is a bounded wait for start-up, not a measurement.
func waitReady(t *target) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r := drive(ctx, t, 1, 1)
		cancel()
		if r.codes[http.StatusOK] == 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no 200 from %s within 20s (last: %s, %v)", t.addr, r.codeSummary(), r.firstErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// peakRSS reads VmHWM from /proc; 0 where there is no /proc.
func peakRSS(pid int) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// serveComparison runs one of the Go comparison servers (-serve) until it
// is killed.
//
// A third mode, spin, answers like the floor after burning spin of CPU per
// request, with no JSON and no allocation: it tells what the machine does
// to the latency of any server that works that long per request (see
// docs/performance.md on -cpus).
func serveComparison(mode, base, fixtures, match string, spin time.Duration) error {
	reqs, err := load(fixtures, match)
	if err != nil {
		return err
	}
	answers := make([]any, len(reqs))
	for i, r := range reqs {
		raw, err := os.ReadFile(filepath.Join(fixtures, strings.TrimPrefix(r.path, "/v1/"), r.name, "response.json"))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, &answers[i]); err != nil {
			return err
		}
	}
	fixed := []byte(`{"status":{},"children":[]}` + "\n")
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "cannot read request body", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch mode {
		case "spin":
			for start := time.Now(); time.Since(start) < spin; {
			}
			_, _ = w.Write(fixed)
			return
		case "floor":
			_, _ = w.Write(fixed)
			return
		}
		var req any
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "invalid JSON request body", http.StatusBadRequest)
			return
		}
		n, _ := strconv.Atoi(r.Header.Get("X-Fixture"))
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(answers[n%len(answers)]); err != nil {
			http.Error(w, "cannot encode", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write(buf.Bytes())
	})
	u, err := parseLoopback(base)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: u, Handler: handler, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 1 << 20}
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
