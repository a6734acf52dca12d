package wake

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/formspec/formspec-hooks/internal/weburl"
)

// The interceptor's admin API (KEDA HTTP add-on v0.15): GET /queue answers
// the requests in flight per route, {"<namespace>/<route>":
// {"Concurrency": n, "RequestCount": m}}. Concurrency counts the requests
// the interceptor holds or forwards right now; RequestCount only grows,
// per interceptor process.
const QueuePath = "/queue"

// maxQueueBody bounds one /queue answer: about 60 bytes per route, so room
// for some 70,000 routes.
const maxQueueBody = 4 << 20

// RouteCount is one route's entry in a /queue answer.
type RouteCount struct {
	Concurrency  int   `json:"Concurrency"`
	RequestCount int64 `json:"RequestCount"`
}

// Snapshot is what every interceptor answered in one poll, summed per
// route ("namespace/name", the workspace's key: its route is named after
// it).
type Snapshot struct {
	routes map[string]RouteCount
	// Interceptors is how many addresses the admin URL named; Answered how
	// many of them answered. A snapshot with Answered < Interceptors can
	// show a held request (and wake), but cannot show that there is none.
	Interceptors, Answered int
}

// Complete reports whether every interceptor answered.
func (q Snapshot) Complete() bool { return q.Interceptors > 0 && q.Answered == q.Interceptors }

// Poller asks every interceptor replica for its queue. The
// admin URL's host is resolved on each poll, so a headless Service names
// every replica as they come and go. Replicas are asked side by side: one
// that does not answer holds the poll up by at most the timeout, makes it
// partial (no idle, no wake ended) and stops no wake (the add-on's own
// scaler restarts its whole stream when one interceptor is unreachable;
// this poller has no stream to restart).
type Poller struct {
	base    *url.URL
	http    *http.Client
	timeout time.Duration
	lookup  func(ctx context.Context, host string) ([]string, error)
}

// ParseAdminURL checks an interceptor admin URL
// (Config.InterceptorAdminURL), naming it name in its errors: main checks
// the flag with it before starting, so that a mistake is a usage error.
func ParseAdminURL(name, raw string) (*url.URL, error) {
	u, err := weburl.Parse(name, raw)
	if err != nil {
		return nil, err
	}
	switch {
	case u.Scheme != "http":
		return nil, fmt.Errorf("%s must be http://host:port (the interceptor's admin port is plain HTTP), not %s", name, u.Scheme)
	case u.Hostname() == "" || u.Port() == "":
		return nil, fmt.Errorf("%s must be http://host:port, with both a host and the interceptor's admin port", name)
	}
	return u, nil
}

// NewPoller returns a Poller of the interceptors at the admin URL raw,
// each asked within timeout.
func NewPoller(raw string, timeout time.Duration) (*Poller, error) {
	u, err := ParseAdminURL("interceptor admin URL", raw)
	if err != nil {
		return nil, err
	}
	return &Poller{
		base: u,
		// The admin API is plain HTTP inside the cluster, never proxied.
		http:    &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}},
		timeout: timeout,
		lookup:  net.DefaultResolver.LookupHost,
	}, nil
}

// Poll asks every interceptor once.
func (p *Poller) Poll(ctx context.Context) (Snapshot, error) {
	host := p.base.Hostname()
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		lctx, cancel := context.WithTimeout(ctx, p.timeout)
		all, err := p.lookup(lctx, host)
		cancel()
		if err != nil {
			return Snapshot{}, fmt.Errorf("cannot resolve the interceptors' admin host %s: %w", host, err)
		}
		addrs = oneFamily(all)
	}
	snap := Snapshot{routes: map[string]RouteCount{}, Interceptors: len(addrs)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	for _, a := range addrs {
		wg.Go(func() {
			counts, err := p.get(ctx, net.JoinHostPort(a, p.base.Port()))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			snap.Answered++
			for k, c := range counts {
				sum := snap.routes[k]
				sum.Concurrency += c.Concurrency
				sum.RequestCount += c.RequestCount
				snap.routes[k] = sum
			}
		})
	}
	wg.Wait()
	return snap, firstErr
}

// oneFamily keeps the IPv4 addresses of a lookup when it has any, the
// others otherwise: in a dual-stack cluster a headless Service names each
// replica once per family, and asking one twice would count its held
// requests twice.
func oneFamily(addrs []string) []string {
	var v4 []string
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip != nil && ip.To4() != nil {
			v4 = append(v4, a)
		}
	}
	if len(v4) > 0 {
		return v4
	}
	return addrs
}

func (p *Poller) get(ctx context.Context, hostPort string) (map[string]RouteCount, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	u := url.URL{Scheme: "http", Host: hostPort, Path: QueuePath}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot read the queue of interceptor %s: %w", hostPort, weburl.RedactError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("interceptor %s answered %s to GET %s", hostPort, resp.Status, QueuePath)
	}
	var counts map[string]RouteCount
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxQueueBody)).Decode(&counts); err != nil {
		return nil, fmt.Errorf("cannot decode the queue of interceptor %s: %w", hostPort, err)
	}
	return counts, nil
}
