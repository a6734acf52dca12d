// Package handoff is the client the hook server uses to hand observations to
// the reporter sidecar on localhost, without ever blocking a hook. It only
// sends: no hook waits for an answer from the sidecar. The wire types are in
// hooks/reporter/observation, so that the hooks can build observations
// without importing this HTTP client.
package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/formspec/formspec-hooks/hooks/reporter/observation"
	"github.com/prometheus/client_golang/prometheus"
)

// Options tunes a Client. Zero values take the defaults noted per field.
type Options struct {
	// QueueSize bounds the observations waiting to be posted (default 1024).
	// When it is full the oldest observation is dropped: a newer observation
	// of the same object supersedes it anyway.
	QueueSize int
	// BatchSize caps the observations per POST (default 128).
	BatchSize int
	// PostTimeout bounds one POST to the sidecar (default 2s).
	PostTimeout time.Duration
	// RetryDelay is the pause after a failed POST (default 1s), so a sidecar
	// that is down is not hammered while the queue sheds old entries.
	RetryDelay time.Duration
	// HTTPClient talks to the sidecar (default: a client with its own
	// transport, so a slow sidecar cannot exhaust a shared pool).
	HTTPClient *http.Client
	// Logger receives failures, at most one line per RetryDelay.
	Logger *slog.Logger
}

// Client hands observations to the reporter sidecar. It is safe for concurrent use; Send never blocks.
type Client struct {
	base  *url.URL
	opts  Options
	queue chan observation.Observation

	// dropMu serialises the drop-oldest dance in Send so two senders cannot
	// both evict and then both fail to enqueue.
	dropMu sync.Mutex

	dropped atomic.Uint64
	posted  *prometheus.CounterVec
}

// New returns a Client for the sidecar at baseURL, e.g.
// "http://127.0.0.1:8181". Call Run to start posting.
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("cannot parse reporter URL %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("reporter URL %q must be http or https", baseURL)
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = 1024
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 128
	}
	if opts.PostTimeout <= 0 {
		opts.PostTimeout = 2 * time.Second
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = time.Second
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{
		base:  u,
		opts:  opts,
		queue: make(chan observation.Observation, opts.QueueSize),
		posted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_hooks_reporter_handoff_batches_total",
			Help: "Observation batches posted to the reporter sidecar, by result.",
		}, []string{"result"}),
	}, nil
}

// Collectors returns the client's metrics for the hook server's registry.
func (c *Client) Collectors() []prometheus.Collector {
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "formspec_hooks_reporter_handoff_dropped_total",
		Help: "Observations dropped because the hand-off queue to the reporter sidecar was full.",
	}, func() float64 { return float64(c.dropped.Load()) })
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "formspec_hooks_reporter_handoff_pending",
		Help: "Observations waiting to be posted to the reporter sidecar.",
	}, func() float64 { return float64(len(c.queue)) })
	return []prometheus.Collector{dropped, pending, c.posted}
}

// Send queues obs for the sidecar and returns at once. When the queue is
// full it drops the oldest queued observation and counts it.
func (c *Client) Send(obs observation.Observation) {
	select {
	case c.queue <- obs:
		return
	default:
	}
	c.dropMu.Lock()
	defer c.dropMu.Unlock()
	for {
		select {
		case c.queue <- obs:
			return
		default:
		}
		select {
		case <-c.queue:
			c.dropped.Add(1)
		default:
			// Run drained the queue between the two selects; try again.
		}
	}
}

// Dropped returns how many observations Send has dropped so far.
func (c *Client) Dropped() uint64 {
	return c.dropped.Load()
}

// Pending returns how many observations wait to be posted.
func (c *Client) Pending() int {
	return len(c.queue)
}

// Run posts queued observations to the sidecar in batches until ctx ends,
// then makes one last attempt, bounded by PostTimeout, to post what is
// still queued, so that what the hooks observed while the server drained
// is not lost. A failed batch is not retried: by the time the sidecar is
// back, newer observations of the same objects have superseded it.
func (c *Client) Run(ctx context.Context) error {
	batch := make([]observation.Observation, 0, c.opts.BatchSize)
	var lastLog time.Time
	for {
		if ctx.Err() != nil {
			c.flush()
			return nil
		}
		select {
		case <-ctx.Done():
			c.flush()
			return nil
		case obs := <-c.queue:
			batch = append(batch[:0], obs)
		}
	fill:
		for len(batch) < c.opts.BatchSize {
			select {
			case obs := <-c.queue:
				batch = append(batch, obs)
			default:
				break fill
			}
		}
		if err := c.post(ctx, batch); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.posted.WithLabelValues("error").Inc()
			if time.Since(lastLog) >= c.opts.RetryDelay {
				c.opts.Logger.Warn("cannot hand observations to the reporter", "count", len(batch), "err", err)
				lastLog = time.Now()
			}
			t := time.NewTimer(c.opts.RetryDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		c.posted.WithLabelValues("ok").Inc()
	}
}

// flush posts whatever is queued, in batches, within one PostTimeout, and
// gives up at the first failure.
func (c *Client) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.PostTimeout)
	defer cancel()
	for len(c.queue) > 0 {
		batch := make([]observation.Observation, 0, c.opts.BatchSize)
	fill:
		for len(batch) < c.opts.BatchSize {
			select {
			case obs := <-c.queue:
				batch = append(batch, obs)
			default:
				break fill
			}
		}
		if err := c.post(ctx, batch); err != nil {
			c.posted.WithLabelValues("error").Inc()
			return
		}
		c.posted.WithLabelValues("ok").Inc()
	}
}

func (c *Client) post(ctx context.Context, batch []observation.Observation) error {
	body, err := json.Marshal(observation.Batch{Observations: batch})
	if err != nil {
		return fmt.Errorf("cannot encode observations: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.PostTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(observation.PathObservations).String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("cannot build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot post observations: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("reporter answered %s", resp.Status)
	}
	return nil
}
