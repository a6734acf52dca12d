package reporter

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/ccclient"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/formspec/formspec-hooks/internal/reporter/tombstone"
	"github.com/formspec/formspec-hooks/internal/reporter/wake"
	"k8s.io/apimachinery/pkg/types"
)

// Run reports until ctx ends. The loops are independent, so a slow
// workspace-status call cannot delay node health or the directive poll.
func (r *Reporter) Run(ctx context.Context) error {
	if r.broadcaster != nil {
		if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
			return fmt.Errorf("cannot start recording events: %w", err)
		}
		defer r.broadcaster.Shutdown()
	}
	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){r.runWorkspaceSender, r.runNodeHealth, r.runDeployStatus, r.runResync, r.runTombstoneSaver, r.runWake, r.runElection, r.runWatch} {
		wg.Go(func() { loop(ctx) })
	}
	r.ready.Store(true)
	<-ctx.Done()
	// Fail readiness first so the pod leaves its Service while the loops
	// and listeners wind down.
	r.ready.Store(false)
	wg.Wait()
	return nil
}

// call is one request to Cluster Control and what to do with its result.
type call struct {
	method, path string
	body         []byte
	key          string
	out          any
	done         func(ccclient.Result)
}

// endpointLoop is one of the reporter's conversations with Cluster Control.
type endpointLoop struct {
	endpoint string
	// first is the wait before the first call.
	first time.Duration
	// every is the wait after a call that is finished, sent or rejected;
	// nil for none.
	every func() time.Duration
	// next returns the next call, waiting for one if need be; false once
	// ctx has ended.
	next func(ctx context.Context) (call, bool)
}

// run is the one send loop: call, record the outcome, then wait the
// interval after a finished call or the backoff after a failed one. One
// failure backs off the whole endpoint: when Cluster Control fails one
// report it is almost always failing all of them.
func (r *Reporter) run(ctx context.Context, l endpointLoop) {
	if l.first > 0 && r.cfg.sleep(ctx, l.first) != nil {
		return
	}
	attempt := 0
	for {
		c, ok := l.next(ctx)
		if !ok {
			return
		}
		res := r.cc.Do(ctx, c.method, c.path, c.body, c.key, c.out)
		if ctx.Err() != nil {
			return
		}
		r.record(l.endpoint, res)
		if c.done != nil {
			c.done(res)
		}
		var wait time.Duration
		switch res.Outcome {
		case ccclient.Sent, ccclient.Rejected:
			attempt = 0
			if res.Outcome == ccclient.Rejected && c.body != nil {
				r.m.drop(state.DropRejected)
			}
			if l.every != nil {
				wait = l.every()
			}
		case ccclient.Retry:
			wait = r.backoff.Delay(attempt, res.RetryAfter)
			attempt++
		}
		if wait > 0 && r.cfg.sleep(ctx, wait) != nil {
			return
		}
	}
}

// runWorkspaceSender sends pending workspace reports one at a time, oldest
// first, as soon as there are any.
func (r *Reporter) runWorkspaceSender(ctx context.Context) {
	r.run(ctx, endpointLoop{
		endpoint: endpointWorkspaceStatus,
		next: func(ctx context.Context) (call, bool) {
			for {
				if p, ok := r.st.Next(); ok {
					return call{method: http.MethodPost, path: ccapi.PathWorkspaceStatus, body: p.Body, key: ccclient.IdempotencyKey(p.Body),
						done: func(res ccclient.Result) { r.finished(p, res) }}, true
				}
				select {
				case <-ctx.Done():
					return call{}, false
				case <-r.nudges:
				}
			}
		},
	})
}

// finished tells the state how sending p went: a report to retry goes to
// the back of the queue, one sent or rejected for good is done.
func (r *Reporter) finished(p state.PendingReport, res ccclient.Result) {
	if res.Outcome == ccclient.Retry {
		r.st.Requeue(p)
		return
	}
	r.st.Done(p, res.Outcome == ccclient.Sent, r.cfg.now())
}

// runNodeHealth sends a fresh node report every interval. A failed report is
// not resent: the next one, built from newer state, replaces it, sooner than
// the interval when the backoff allows.
func (r *Reporter) runNodeHealth(ctx context.Context) {
	every := func() time.Duration { return ccclient.Jitter(r.cfg.NodeHealthInterval, r.cfg.rand) }
	r.run(ctx, endpointLoop{
		endpoint: endpointNodeHealth,
		first:    every(),
		every:    every,
		next: func(ctx context.Context) (call, bool) {
			body, err := json.Marshal(r.st.NodeReport(r.cfg.Reporter, r.cfg.now()))
			if err != nil {
				// Only a type the encoder cannot handle gets here.
				r.log.Error("cannot encode node health", "err", err)
				return call{}, false
			}
			return call{method: http.MethodPost, path: ccapi.PathNodeHealth, body: body, key: ccclient.IdempotencyKey(body)}, ctx.Err() == nil
		},
	})
}

// runDeployStatus polls Cluster Control for directives, first at once so a
// restarted sidecar carries them out again quickly, and writes each onto
// its Workspace.
func (r *Reporter) runDeployStatus(ctx context.Context) {
	r.run(ctx, endpointLoop{
		endpoint: endpointDeployStatus,
		every:    func() time.Duration { return ccclient.Jitter(r.cfg.DeployStatusInterval, r.cfg.rand) },
		next: func(ctx context.Context) (call, bool) {
			ds := new(ccapi.DeployStatus)
			return call{method: http.MethodGet, path: ccapi.PathDeployStatus, out: ds, done: func(res ccclient.Result) {
				if res.Outcome != ccclient.Sent {
					return
				}
				if r.st.SetDirectives(ds.Directives, r.cfg.now()) {
					r.nudge()
				}
				r.writeDirectives(ctx)
			}}, ctx.Err() == nil
		},
	})
}

// runResync queues every known workspace for a fresh report each
// ResyncInterval (jittered).
func (r *Reporter) runResync(ctx context.Context) {
	for {
		if r.cfg.sleep(ctx, ccclient.Jitter(r.cfg.ResyncInterval, r.cfg.rand)) != nil {
			return
		}
		if n := r.st.Resync(r.cfg.now()); n > 0 {
			r.m.resyncs.Add(float64(n))
			r.nudge()
		}
	}
}

// record counts a call and logs a failure, rate-limited per endpoint.
func (r *Reporter) record(endpoint string, res ccclient.Result) {
	r.m.sends.WithLabelValues(endpoint, res.Label()).Inc()
	if res.Outcome == ccclient.Sent {
		r.m.lastSuccess.WithLabelValues(endpoint).Set(float64(r.cfg.now().UnixNano()) / 1e9)
		return
	}
	ok, held := r.limiter.allow(endpoint, r.cfg.now())
	if !ok {
		return
	}
	action := "will retry"
	if res.Outcome == ccclient.Rejected {
		action = "dropped"
	}
	r.log.Warn("cluster control call failed", "endpoint", endpoint, "status", res.Status,
		"action", action, "retryAfter", res.RetryAfter, "suppressed", held, "err", res.Err)
}

// warnNoToken logs that calls go out without a bearer token, at most once
// per LogInterval: it is expected on an install without the optional
// Secret, but Cluster Control may refuse such calls, and the operator
// should know why.
func (r *Reporter) warnNoToken(err error) {
	r.warn(logKeyNoToken, "calling cluster control without a bearer token until the token file appears", err)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// saveTombstones writes the tombstone file if the tombstones changed since
// it was last written.
func (r *Reporter) saveTombstones() error {
	if r.tombs == nil {
		return nil
	}
	return r.tombs.Save(r.st)
}

// runTombstoneSaver keeps the tombstone file in step with the state, and
// writes it a last time when ctx ends. A deletion handed over by the hook
// server is written before it is acknowledged (serveObservations); this
// catches what changes otherwise: an acknowledgement by Cluster Control,
// a tombstone evicted or restored.
func (r *Reporter) runTombstoneSaver(ctx context.Context) {
	if r.tombs == nil {
		return
	}
	save := func() {
		if err := r.saveTombstones(); err != nil {
			r.warn(logKeyTombstones, "cannot save tombstones; deletions not yet reported may be lost in a restart", err)
		}
	}
	for r.cfg.sleep(ctx, tombstone.SaveInterval) == nil {
		save()
	}
	save()
}

// runWatch runs the watch of Workspaces until ctx ends, for the budget and
// the claims summary writer. Without a cluster there is nothing to watch,
// nor to write.
func (r *Reporter) runWatch(ctx context.Context) {
	if r.workspaces == nil {
		return
	}
	kube.Watch(ctx, r.workspaces, r.st, r.cfg.now, r.log)
}

// runWake runs the wake loop, when there are interceptors to poll.
func (r *Reporter) runWake(ctx context.Context) {
	if r.waking != nil {
		r.waking.Run(ctx)
	}
}

// wakeLoop wires the wake loop to the reporter: its writes go to the
// cluster as the directives' do, its Events through the same writer, its
// wakes and idles to Cluster Control in the workspace reports.
func (r *Reporter) wakeLoop(p *wake.Poller, m wake.Metrics) *wake.Loop {
	return &wake.Loop{
		Waker: r.waker, Poller: p, Metrics: m,
		Interval: r.cfg.InterceptorPollInterval, Now: r.cfg.now, Sleep: r.cfg.sleep,
		Directive: r.st.Directive,
		Patch:     r.patch,
		AutoScaled: func(k types.NamespacedName, as ccapi.AutoScale, now time.Time) {
			if r.st.AutoScaled(k, as, now) {
				r.nudge()
			}
		},
		Events: func(evs []state.Event) {
			if r.events != nil {
				r.events.Write(evs)
			}
		},
		Warn: r.warn,
	}
}
