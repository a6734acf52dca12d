// Package handoff is the client the hook server uses to hand observations to
// the reporter sidecar on localhost, without ever blocking a hook. The wire
// types are in hooks/api/observation, so that the hooks can build
// observations without importing this HTTP client.
package handoff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/weburl"
)

// DefaultAddr is where the reporter sidecar listens for observations, on
// the pod's loopback, and DefaultURL the hook server's URL for it: the
// defaults of the reporter's --listen and the hook server's --reporter-url.
const (
	DefaultAddr = "127.0.0.1:8181"
	DefaultURL  = "http://" + DefaultAddr
)

// Defaults are the values New gives the zero fields of Options, each with
// the reason for it.
var Defaults = Options{
	// A Node with its image list is tens of KiB, so a count alone would
	// not bound the queue's memory: it has a size in bytes too.
	QueueSize:  1024,
	QueueBytes: 8 << 20,
	// 128 observations or 1 MiB a POST, an eighth of what the sidecar
	// accepts.
	BatchSize:  128,
	BatchBytes: 1 << 20,
	// Every sync hands over the state it observed, and a short linger
	// posts about once per burst of syncs: under Metacontroller with 300
	// Workspaces a linger of 50ms made 215 POSTs to the reporter while the
	// fleet converged and 56 a minute in the steady state, a second 111
	// and 16 (make scale). A second delays nothing anyone waits for: the
	// reporter reports node health every 15 s, and what is deleted, or
	// decided anew, is posted at once.
	Linger: time.Second,
	// The sidecar is on localhost: a POST that takes 2 s is a sidecar in
	// trouble, and a second between retries does not hammer one that is
	// down.
	PostTimeout: 2 * time.Second,
	RetryDelay:  time.Second,
	// The first failure and the recovery are logged at once; a sidecar
	// that stays down is logged again every 30 s, not once per retry.
	LogInterval: 30 * time.Second,
}

// Options tunes a Client. A zero or negative value takes its Defaults
// entry, but for Linger, where negative means no wait.
type Options struct {
	// QueueSize bounds the observations waiting to be posted.
	QueueSize int
	// QueueBytes bounds their encoded size.
	QueueBytes int
	// BatchSize caps the observations per POST.
	BatchSize int
	// BatchBytes caps the encoded observations per POST.
	BatchBytes int
	// Linger is how long Run waits, once a state (a workspace status, a
	// node, a pod placement) is queued, for more to gather before it
	// posts, unless a whole batch is already queued; a server then posts
	// about one batch per Linger rather than one per round trip or per
	// sync, and the states of one object synced many times meanwhile
	// are merged into one. A deletion, which no later sync repeats, and a
	// claim decision that changed, which the reporter announces, are
	// posted without waiting; a claim decision its status already
	// recorded (a resync's) waits like a state. Negative: no wait.
	Linger time.Duration
	// PostTimeout bounds one POST to the sidecar.
	PostTimeout time.Duration
	// RetryDelay is the pause after a failed POST, so a sidecar that is
	// down is not hammered while the queue holds what it missed.
	RetryDelay time.Duration
	// HTTPClient talks to the sidecar (default: a client with its own
	// transport, so a slow sidecar cannot exhaust a shared pool).
	HTTPClient *http.Client
	// LogInterval is the least time between two failure lines: the first
	// failure is logged at once, and so is the recovery, but a sidecar that
	// stays down does not fill the log once per retry.
	LogInterval time.Duration
	// Logger receives failures and recoveries.
	Logger *slog.Logger
}

// Client hands observations to the reporter sidecar. It is safe for
// concurrent use; Send never blocks.
//
// Observations are encoded when sent and queued as bytes, so the queue
// keeps no reference to the hooks' objects and its size in bytes is known.
// A batch the sidecar does not take stays at the head of the queue and is
// posted again once the sidecar is back; when the queue is full, the
// oldest observation that is not a deletion is dropped, because a later
// status of the same object supersedes it, while a lost deletion is never
// repaired. For the same reason a newer state of an object replaces the
// one still queued (see Send).
type Client struct {
	base *url.URL
	opts Options

	mu    sync.Mutex
	queue []queued // in seq order
	bytes int
	seq   uint64
	// latest maps an object to the seq of its queued state, the one a
	// newer state may replace.
	latest map[objKey]uint64
	// deleted maps a workspace to the seq of its latest queued deletion:
	// no status is merged across it.
	deleted map[types.NamespacedName]uint64
	// posting is the last seq of the batch being posted (0: none); what is
	// up to it is never replaced.
	posting uint64
	// urgent counts the queued observations posted without lingering.
	urgent  int
	waiting chan struct{} // nudges Run when the queue gains an observation

	dropped   atomic.Uint64
	coalesced atomic.Uint64
	posted    *prometheus.CounterVec
}

// New returns a Client for the sidecar at baseURL, e.g.
// "http://127.0.0.1:8181". Call Run to start posting.
func New(baseURL string, opts Options) (*Client, error) {
	u, err := weburl.Parse("reporter URL", baseURL)
	if err != nil {
		return nil, err
	}
	d := Defaults
	setDefault(&opts.QueueSize, d.QueueSize)
	setDefault(&opts.QueueBytes, d.QueueBytes)
	setDefault(&opts.BatchSize, d.BatchSize)
	setDefault(&opts.BatchBytes, d.BatchBytes)
	if opts.Linger == 0 {
		opts.Linger = d.Linger
	}
	setDefault(&opts.PostTimeout, d.PostTimeout)
	setDefault(&opts.RetryDelay, d.RetryDelay)
	setDefault(&opts.LogInterval, d.LogInterval)
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
		base:    u,
		opts:    opts,
		latest:  map[objKey]uint64{},
		deleted: map[types.NamespacedName]uint64{},
		waiting: make(chan struct{}, 1),
		posted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_hooks_reporter_handoff_batches_total",
			Help: "Observation batches posted to the reporter sidecar, by result.",
		}, []string{"result"}),
	}, nil
}

func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Collectors returns the client's metrics for the hook server's registry;
// a nil *Client (no sidecar) has none, so no hand-off alert can fire.
func (c *Client) Collectors() []prometheus.Collector {
	if c == nil {
		return nil
	}
	dropped := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "formspec_hooks_reporter_handoff_dropped_total",
		Help: "Observations dropped because the hand-off queue to the reporter sidecar was full, or one was too large for the sidecar.",
	}, func() float64 { return float64(c.dropped.Load()) })
	pending := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "formspec_hooks_reporter_handoff_pending",
		Help: "Observations waiting to be posted to the reporter sidecar.",
	}, func() float64 { return float64(c.Pending()) })
	pendingBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "formspec_hooks_reporter_handoff_pending_bytes",
		Help: "Encoded size of the observations waiting to be posted to the reporter sidecar.",
	}, func() float64 { return float64(c.PendingBytes()) })
	coalesced := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "formspec_hooks_reporter_handoff_coalesced_total",
		Help: "Observations that replaced a queued, not yet posted observation of the same object on its way to the reporter sidecar.",
	}, func() float64 { return float64(c.coalesced.Load()) })
	return []prometheus.Collector{dropped, coalesced, pending, pendingBytes, c.posted}
}

// errRefused is the sidecar's 413 or another 4xx that is about the batch
// (not 408 or 429): the batch, not the sidecar, is the problem, and posting
// the same bytes again cannot help.
var errRefused = errors.New("reporter refused the batch")

// Run posts queued observations to the sidecar in batches until ctx ends,
// then makes one last attempt, bounded by PostTimeout, to post what is
// still queued, so that what the hooks observed while the server drained
// is not lost. Once something is queued it waits up to Linger for more,
// unless a whole batch is queued. A batch the sidecar does not take is kept
// and posted again after RetryDelay (without lingering); a batch it refuses
// (too large, or undecodable) is split in halves until the one observation
// at fault is found and dropped. A nil *Client has nothing to post and
// returns at once.
func (c *Client) Run(ctx context.Context) error {
	if c == nil {
		return nil
	}
	var (
		lastLog time.Time
		failing bool
	)
	for {
		if c.Pending() == 0 {
			select {
			case <-ctx.Done():
				c.flush()
				return nil
			case <-c.waiting:
				continue
			}
		}
		if !failing && !c.linger(ctx) {
			c.flush()
			return nil
		}
		n, err := c.postNext(ctx)
		if err == nil {
			if failing {
				c.opts.Logger.Info("handing observations to the reporter again")
				failing = false
			}
			continue
		}
		if ctx.Err() != nil {
			c.flush()
			return nil
		}
		if !failing || time.Since(lastLog) >= c.opts.LogInterval {
			c.opts.Logger.Warn("cannot hand observations to the reporter; keeping them for a retry", "count", n, "err", err)
			lastLog, failing = time.Now(), true
		}
		t := time.NewTimer(c.opts.RetryDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			c.flush()
			return nil
		case <-t.C:
		}
	}
}

// linger waits up to Linger for a whole batch to gather, or for an
// observation that does not wait, and reports false if ctx ends meanwhile.
func (c *Client) linger(ctx context.Context) bool {
	if c.opts.Linger < 0 || c.ready() {
		return true
	}
	t := time.NewTimer(c.opts.Linger)
	defer t.Stop()
	for !c.ready() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		case <-c.waiting:
		}
	}
	return true
}

// postNext delivers the batch at the head of the queue and says how many
// observations it held.
func (c *Client) postNext(ctx context.Context) (int, error) {
	batch := c.peek()
	if len(batch) == 0 {
		return 0, nil
	}
	defer c.done()
	return len(batch), c.deliver(ctx, batch)
}

// deliver posts batch and acknowledges what the sidecar took. A refused
// batch is split and each half delivered; a single refused observation is
// dropped and counted.
func (c *Client) deliver(ctx context.Context, batch []queued) error {
	err := c.post(ctx, batch)
	switch {
	case err == nil:
		c.posted.WithLabelValues("ok").Inc()
		c.ack(batch[len(batch)-1].seq)
		return nil
	case errors.Is(err, errRefused) && len(batch) == 1:
		c.posted.WithLabelValues("refused").Inc()
		c.dropped.Add(1)
		c.ack(batch[0].seq)
		return nil
	case errors.Is(err, errRefused):
		c.posted.WithLabelValues("refused").Inc()
		half := len(batch) / 2
		if err := c.deliver(ctx, batch[:half]); err != nil {
			return err
		}
		return c.deliver(ctx, batch[half:])
	default:
		c.posted.WithLabelValues("error").Inc()
		return err
	}
}

// flush posts whatever is queued, in batches, within one PostTimeout, and
// gives up at the first failure.
func (c *Client) flush() {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.PostTimeout)
	defer cancel()
	for {
		if n, err := c.postNext(ctx); n == 0 || err != nil {
			return
		}
	}
}

func (c *Client) post(ctx context.Context, batch []queued) error {
	var body bytes.Buffer
	body.WriteString(`{"observations":[`)
	for i, q := range batch {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(q.raw)
	}
	body.WriteString(`]}`)
	ctx, cancel := context.WithTimeout(ctx, c.opts.PostTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base.JoinPath(observation.PathObservations).String(), &body)
	if err != nil {
		return fmt.Errorf("cannot build request: %w", weburl.RedactError(err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.opts.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot post observations: %w", weburl.RedactError(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests:
		return fmt.Errorf("%w: %s", errRefused, resp.Status)
	default:
		return fmt.Errorf("reporter answered %s", resp.Status)
	}
}
