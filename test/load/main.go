// Command load posts hook fixtures to a running formspec-hooks server from
// several workers for a bounded time and prints throughput and latency
// percentiles. It is the load tool behind the performance figures in
// docs/testing.md; it asserts nothing.
//
//	make run &                     # or any formspec-hooks serve on loopback
//	go run ./test/load -duration 20s -workers 8
//
// It only talks to loopback addresses: a load test never leaves the machine.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

type request struct {
	path string
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *workers < 1 || *duration <= 0 || *duration > 5*time.Minute || *maxRequests < 1 {
		return errors.New("want -workers ≥ 1, 0 < -duration ≤ 5m, -max-requests ≥ 1")
	}
	if err := checkLoopback(*base); err != nil {
		return err
	}
	reqs, err := load(*fixtures, *match)
	if err != nil {
		return err
	}

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *workers}}
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		codes     = map[int]int{}
		failures  int
		sent      int
	)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Go(func() {
			for i := w; ; i += *workers {
				mu.Lock()
				if sent >= *maxRequests {
					mu.Unlock()
					return
				}
				sent++
				mu.Unlock()
				if ctx.Err() != nil {
					return
				}
				r := reqs[i%len(reqs)]
				t0 := time.Now()
				code, err := post(ctx, client, *base+r.path, r.body)
				d := time.Since(t0)
				mu.Lock()
				switch {
				case err != nil && ctx.Err() != nil:
				case err != nil:
					failures++
				default:
					codes[code]++
					latencies = append(latencies, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	slices.Sort(latencies)
	fmt.Fprintf(stdout, "fixtures: %d (%s), workers: %d, elapsed: %s\n", len(reqs), *match, *workers, elapsed.Round(time.Millisecond))
	fmt.Fprintf(stdout, "requests: %d answered, %d failed, %.0f/s\n", len(latencies), failures, float64(len(latencies))/elapsed.Seconds())
	fmt.Fprintf(stdout, "latency: p50 %s  p90 %s  p99 %s  max %s\n", pct(latencies, 50), pct(latencies, 90), pct(latencies, 99), pct(latencies, 100))
	keys := make([]int, 0, len(codes))
	for c := range codes {
		keys = append(keys, c)
	}
	sort.Ints(keys)
	parts := make([]string, 0, len(keys))
	for _, c := range keys {
		parts = append(parts, fmt.Sprintf("%d×%d", c, codes[c]))
	}
	fmt.Fprintf(stdout, "status codes: %s\n", strings.Join(parts, " "))
	if len(latencies) == 0 {
		// Figures of nothing are not a measurement: make load must fail.
		return fmt.Errorf("no request was answered by %s (%d failed); is the server running (make run)?", *base, failures)
	}
	return nil
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
		body, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, request{path: "/v1/" + rel[:strings.LastIndex(rel, "/")], body: body})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no fixtures under %s match %q", dir, match)
	}
	return out, nil
}

func post(ctx context.Context, c *http.Client, u string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
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
