// Command load posts hook fixtures to a running formspec-hooks server from
// several workers for a bounded time and prints throughput and latency
// percentiles. It is the load tool behind the performance figures in
// docs/performance.md; it asserts nothing.
//
//	make run &                     # or any formspec-hooks serve on loopback
//	go run ./test/load -duration 20s -workers 8
//
// With -compare it starts the server itself, and the comparison servers of
// compare.go, and prints them side by side (make bench).
//
// It speaks HTTP/1.1 itself (client.go), so that the driver takes little of
// the CPU it measures, and only to loopback addresses: a load test never
// leaves the machine.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type request struct {
	path string // /v1/<controller>/<hook>
	name string // the case directory
	body []byte
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	base := fs.String("url", "http://127.0.0.1:8080", "hook server base URL (loopback only)")
	fixtures := fs.String("fixtures", "fixtures", "fixtures directory")
	match := fs.String("match", "workspace/sync", "post only fixtures whose <controller>/<hook>/<case> path contains this")
	workers := fs.Int("workers", 4, "concurrent clients")
	duration := fs.Duration("duration", 10*time.Second, "how long to send (at most 5m)")
	maxRequests := fs.Int("max-requests", 1_000_000, "stop after this many requests")
	compareWith := fs.String("compare", "", "instead of loading -url, start this formspec-hooks binary and the comparison servers one after the other and print them side by side (make bench)")
	warmup := fs.Duration("warmup", 2*time.Second, "with -compare: load each server this long before measuring")
	rounds := fs.Int("rounds", 10, "with -compare: split -duration into this many rounds, each server in turn")
	cpus := fs.String("cpus", "split", "with -compare: split puts the driver on one CPU and every server on the others, so that no server is measured while the load takes its CPU; shared lets them all run anywhere")
	serve := fs.String("serve", "", "run a comparison server (roundtrip, floor, or spin) on -url; used by -compare")
	spin := fs.Duration("spin", 60*time.Microsecond, "with -serve spin: CPU time to burn per request")
	var also alsoFlag
	fs.Var(&also, "also", "with -compare: measure another formspec-hooks binary in the same run, as NAME=PATH (e.g. a build of another change); repeatable")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *serve != "" {
		return serveComparison(*serve, *base, *fixtures, *match, *spin)
	}
	if *compareWith != "" {
		return compare(compareOptions{hooksBin: *compareWith, also: also, fixtures: *fixtures, match: *match, cpus: *cpus, workers: *workers, rounds: max(1, *rounds), duration: *duration, warmup: *warmup}, stdout)
	}
	if *workers < 1 || *duration <= 0 || *duration > 5*time.Minute || *maxRequests < 1 {
		return errors.New("want -workers ≥ 1, 0 < -duration ≤ 5m, -max-requests ≥ 1")
	}
	reqs, err := load(*fixtures, *match)
	if err != nil {
		return err
	}

	t, err := newTarget(*base, reqs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	r := drive(ctx, t, *workers, *maxRequests)
	fmt.Fprintf(stdout, "fixtures: %d (%s), workers: %d, elapsed: %s\n", len(reqs), *match, *workers, r.elapsed.Round(time.Millisecond))
	fmt.Fprintf(stdout, "requests: %d answered, %d failed, %.0f/s\n", len(r.latencies), r.failures, r.rate())
	fmt.Fprintf(stdout, "latency: p50 %s  p90 %s  p99 %s  max %s\n", pct(r.latencies, 50), pct(r.latencies, 90), pct(r.latencies, 99), pct(r.latencies, 100))
	fmt.Fprintf(stdout, "status codes: %s\n", r.codeSummary())
	if len(r.latencies) == 0 {
		// Figures of nothing are not a measurement: make load must fail.
		return fmt.Errorf("no request was answered by %s (%d failed, first: %v); is the server running (make run)?", *base, r.failures, r.firstErr)
	}
	return nil
}

// result is what one load run measured.
type result struct {
	elapsed   time.Duration
	latencies []time.Duration // sorted
	codes     map[int]int
	failures  int
	firstErr  error // the first failure, to say why
}

func (r *result) rate() float64 { return float64(len(r.latencies)) / r.elapsed.Seconds() }

// merge adds o to r (which may be nil) and returns the sum.
func (r *result) merge(o *result) *result {
	if r == nil {
		return o
	}
	r.elapsed += o.elapsed
	r.latencies = append(r.latencies, o.latencies...)
	slices.Sort(r.latencies)
	r.failures += o.failures
	r.firstErr = cmp.Or(r.firstErr, o.firstErr)
	for c, n := range o.codes {
		r.codes[c] += n
	}
	return r
}

func (r *result) codeSummary() string {
	keys := make([]int, 0, len(r.codes))
	for c := range r.codes {
		keys = append(keys, c)
	}
	sort.Ints(keys)
	parts := make([]string, 0, len(keys))
	for _, c := range keys {
		parts = append(parts, fmt.Sprintf("%d×%d", c, r.codes[c]))
	}
	return strings.Join(parts, " ")
}

// drive posts t's requests round-robin from workers, each on its own
// connection (client.go), until ctx ends or maxRequests were sent. Each
// request carries its fixture's index in X-Fixture, which the comparison
// servers use to pick their canned answer. The connections carry ctx's
// deadline, so a round ends on time; a request it cuts short counts as
// neither an answer nor a failure.
func drive(ctx context.Context, t *target, workers, maxRequests int) *result {
	deadline, _ := ctx.Deadline()
	// Room for every latency up front (at a rate well above what the
	// servers reach here), so that a worker's loop allocates nothing.
	room := maxRequests/workers + 1
	if !deadline.IsZero() {
		room = min(room, int(time.Until(deadline).Seconds()*50_000)/workers+1024)
	}
	var sent atomic.Int64
	parts := make([]*result, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		r := &result{codes: map[int]int{}, latencies: make([]time.Duration, 0, max(room, 0))}
		parts[w] = r
		wg.Go(func() {
			c := newConn(t)
			defer c.close()
			for i := w; sent.Add(1) <= int64(maxRequests); i += workers {
				select {
				case <-ctx.Done():
					return
				default:
				}
				code, d, err := c.do(i%len(t.wire), deadline)
				switch {
				case err == nil:
					r.codes[code]++
					r.latencies = append(r.latencies, d)
				case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
					return // the round is over (a read or a dial cut short)
				default:
					r.failures++
					if r.firstErr == nil {
						r.firstErr = err
					}
				}
			}
		})
	}
	wg.Wait()
	total := &result{elapsed: time.Since(start), codes: map[int]int{}}
	for _, p := range parts {
		total.latencies = append(total.latencies, p.latencies...)
		total.failures += p.failures
		total.firstErr = cmp.Or(total.firstErr, p.firstErr)
		for c, n := range p.codes {
			total.codes[c] += n
		}
	}
	slices.Sort(total.latencies)
	return total
}

// load reads fixtures/<controller>/<hook>/<case>/request.json whose path
// contains match; the URL path is /v1/<controller>/<hook>.
func load(dir, match string) ([]request, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*", "*", "*", "request.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	var out []request
	for _, f := range files {
		rel, err := filepath.Rel(dir, filepath.Dir(f))
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		if !strings.Contains(rel, match) {
			continue
		}
		pretty, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		// Sent compact, as Metacontroller sends requests (Go's
		// encoding/json); the files are indented for people.
		var body bytes.Buffer
		if err := json.Compact(&body, pretty); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		i := strings.LastIndex(rel, "/")
		out = append(out, request{path: "/v1/" + rel[:i], name: rel[i+1:], body: body.Bytes()})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no fixtures under %s match %q", dir, match)
	}
	return out, nil
}

// parseLoopback returns the host:port of a loopback URL.
func parseLoopback(base string) (string, error) {
	if err := checkLoopback(base); err != nil {
		return "", err
	}
	u, _ := url.Parse(base)
	return u.Host, nil
}

// checkLoopback refuses any target that is not a loopback address.
func checkLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return fmt.Errorf("-url %q is not a URL", base)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-url %q: the load tool only targets loopback addresses", base)
}

func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1].Round(time.Microsecond)
}
