package reporter

import (
	"context"
	"fmt"
	"sync"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// logKeyInterceptors and logKeyWakeWrites rate-limit the wake loop's
// failure logs.
const (
	logKeyInterceptors = "interceptor-queue"
	logKeyWakeWrites   = "wake-write"
)

// wakeMetrics are the wake loop's metrics.
type wakeMetrics struct {
	coldStart *prometheus.HistogramVec
	wakes     *prometheus.CounterVec
	idles     prometheus.Counter
	overflows prometheus.Counter
	polls     *prometheus.CounterVec
}

// coldStartBuckets reach from a pod that starts in a second to the longest
// wake timeout worth waiting for.
var coldStartBuckets = []float64{0.5, 1, 1.5, 2, 3, 4, 5, 7.5, 10, 15, 20, 30, 45, 60, 120}

func newWakeMetrics(reg *prometheus.Registry, w *waker) *wakeMetrics {
	m := &wakeMetrics{
		coldStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "formspec_reporter_wake_cold_start_seconds",
			Help:    "Cold starts of the wakes this reporter made: from the poll that first saw a request held for an idle wake-on-request workspace to the poll that saw the held requests let go, by result (answered; timeout when that was after the class's wake timeout, so the interceptor answered 504).",
			Buckets: coldStartBuckets,
		}, []string{"result"}),
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_wakes_total",
			Help: "Wakes of idle wake-on-request workspaces for a held request, by result (woken, already_awake, error).",
		}, []string{"result"}),
		idles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "formspec_reporter_inactivity_idles_total",
			Help: "Wake-on-request workspaces idled after their class's idleAfterSeconds without a request.",
		}),
		overflows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "formspec_reporter_wake_overflows_total",
			Help: "Times this reporter switched on the cap of a wake-on-request workspace without a ready pod that held its class's maxHeldRequests, so that further requests were refused with 503.",
		}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "formspec_reporter_interceptor_polls_total",
			Help: "Polls of the interceptors' queues, by result (complete; partial when some interceptor did not answer; failed when none did).",
		}, []string{"result"}),
	}
	reg.MustRegister(m.coldStart, m.wakes, m.idles, m.overflows, m.polls,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "formspec_reporter_wake_workspaces",
			Help: "Wake-on-request workspaces the reporter follows.",
		}, func() float64 { return float64(w.tracked()) }))
	for _, r := range []string{"answered", "timeout"} {
		m.coldStart.WithLabelValues(r)
	}
	for _, r := range []string{"woken", "already_awake", "error"} {
		m.wakes.WithLabelValues(r)
	}
	for _, r := range []string{"complete", "partial", "failed"} {
		m.polls.WithLabelValues(r)
	}
	return m
}

// maxWakeWrites bounds the writes to Workspaces the wake loop has in
// flight: enough for a burst of wakes, few enough for the API server.
const maxWakeWrites = 16

// runWake polls the interceptors every InterceptorPollInterval and carries
// out what each poll calls for. Writes go on beside the polls, so that a
// slow API server neither delays the next poll nor stretches the cold
// starts it measures.
func (r *Reporter) runWake(ctx context.Context) {
	if r.interceptors == nil {
		return
	}
	writes := make(chan struct{}, maxWakeWrites)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		if r.cfg.sleep(ctx, r.cfg.InterceptorPollInterval) != nil {
			return
		}
		snap, err := r.interceptors.poll(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case snap.complete():
			r.wm.polls.WithLabelValues("complete").Inc()
		case snap.answered > 0:
			r.wm.polls.WithLabelValues("partial").Inc()
		default:
			r.wm.polls.WithLabelValues("failed").Inc()
		}
		if err != nil {
			if ok, held := r.limiter.allow(logKeyInterceptors, r.cfg.now()); ok {
				r.log.Warn("cannot read every interceptor's queue; wakes go on from those that answer, nothing is idled meanwhile",
					"answered", snap.answered, "interceptors", snap.interceptors, "suppressed", held, "err", err)
			}
		}
		for _, s := range r.waker.decide(snap, r.cfg.now(), r.st.Directive) {
			if s.action == actColdStart || s.action == actWakeTimeout {
				r.carryOut(ctx, s)
				continue
			}
			select {
			case writes <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-writes }()
				r.carryOut(ctx, s)
			})
		}
	}
}

// carryOut does one step: a write to the workspace, an Event, a report to
// Cluster Control, a metric.
func (r *Reporter) carryOut(ctx context.Context, s wakeStep) {
	now := r.cfg.now()
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: "Workspace", Namespace: s.name.Namespace, Name: s.name.Name, UID: s.uid}
	var evs []state.Event
	switch s.action {
	case actWake:
		err := r.patch(ctx, s.name, types.JSONPatchType, kube.WakePatch)
		switch {
		case err == nil:
			r.wm.wakes.WithLabelValues("woken").Inc()
			r.waker.woken(s.name)
			evs = append(evs, state.Event{Ref: ref, Type: corev1.EventTypeNormal, Reason: "Woken", Action: "Request",
				Note: fmt.Sprintf("a request for the idle workspace is held by the interceptor (%d held); waking it", s.held)})
			if r.st.AutoScaled(s.name, ccapi.AutoScale{Action: ccapi.AutoScaleWake, Reason: ccapi.ReasonRequest, At: ccapi.Stamp(now)}, now) {
				r.nudge()
			}
		case apierrors.IsInvalid(err) || apierrors.IsNotFound(err):
			// The JSON patch's test failed: formspec.dev/idle is no longer
			// "true", so someone woke it first, or it is gone.
			r.wm.wakes.WithLabelValues("already_awake").Inc()
			r.waker.wokenElsewhere(s.name)
		default:
			r.wm.wakes.WithLabelValues("error").Inc()
			r.waker.wakeFailed(s.name, now)
			r.warnWakeWrite(s, err)
		}
	case actIdle:
		if err := r.patch(ctx, s.name, types.MergePatchType, kube.AnnotationPatch(v1alpha1.AnnotationIdle, "true")); err != nil {
			r.waker.idleFailed(s.name, now)
			r.warnWakeWrite(s, err)
			break
		}
		r.wm.idles.Inc()
		r.waker.idled(s.name)
		if r.st.AutoScaled(s.name, ccapi.AutoScale{Action: ccapi.AutoScaleIdle, Reason: ccapi.ReasonInactivity, At: ccapi.Stamp(now)}, now) {
			r.nudge()
		}
	case actOverflowOn, actOverflowOff:
		value := any(nil)
		if s.action == actOverflowOn {
			value = "true"
			r.wm.overflows.Inc()
		}
		if err := r.patch(ctx, s.name, types.MergePatchType, kube.AnnotationPatch(v1alpha1.AnnotationWakeOverflow, value)); err != nil {
			r.warnWakeWrite(s, err)
		}
	case actColdStart:
		r.wm.coldStart.WithLabelValues("answered").Observe(s.took.Seconds())
	case actWakeTimeout:
		r.wm.coldStart.WithLabelValues("timeout").Observe(s.took.Seconds())
		evs = append(evs, state.Event{Ref: ref, Type: corev1.EventTypeWarning, Reason: "WakeTimedOut", Action: "Request",
			Note: fmt.Sprintf("the workspace had no ready pod within its class's wake timeout; the interceptor answered the held requests 504 (after %.0fs)", s.took.Seconds())})
	}
	if r.events != nil && len(evs) > 0 {
		r.events.Write(evs)
	}
}

func (r *Reporter) warnWakeWrite(s wakeStep, err error) {
	if ok, held := r.limiter.allow(logKeyWakeWrites, r.cfg.now()); ok {
		r.log.Warn("cannot write a wake-on-request decision onto the workspace", "namespace", s.name.Namespace, "name", s.name.Name,
			"step", s.action.String(), "suppressed", held, "err", err)
	}
}

func (a wakeAction) String() string {
	return [...]string{"wake", "idle", "overflow_on", "overflow_off", "cold_start", "wake_timeout"}[a]
}
