package wake

import (
	"context"
	"fmt"
	"sync"
	"time"

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

// Metrics are the wake loop's metrics, on the reporter's registry.
type Metrics struct {
	// ColdStart observes cold starts by result (answered, timeout).
	ColdStart *prometheus.HistogramVec
	// Wakes counts wakes by result (woken, already_awake, error).
	Wakes     *prometheus.CounterVec
	Idles     prometheus.Counter
	Overflows prometheus.Counter
	// Polls counts polls by result (complete, partial, failed).
	Polls *prometheus.CounterVec
}

// Loop polls the interceptors and carries out what each poll calls for:
// the writes onto Workspaces, the Events, the reports to Cluster Control
// and the metrics. What it touches outside the wake's own state it is
// given as functions, so that it runs alone in a test.
type Loop struct {
	Waker    *Waker
	Poller   *Poller
	Metrics  Metrics
	Interval time.Duration
	Now      func() time.Time
	Sleep    func(ctx context.Context, d time.Duration) error
	// Directive says which directive Cluster Control holds for a
	// workspace.
	Directive DirectiveOf
	// Patch writes one patch onto a Workspace.
	Patch func(ctx context.Context, k types.NamespacedName, pt types.PatchType, patch []byte) error
	// AutoScaled reports a wake or an idle to Cluster Control.
	AutoScaled func(k types.NamespacedName, as ccapi.AutoScale, now time.Time)
	// Events records Events about the workspaces.
	Events func([]state.Event)
	// Warn logs a failure, at most once an interval per key.
	Warn func(key, msg string, err error, args ...any)
}

// maxWakeWrites bounds the writes to Workspaces the wake loop has in
// flight: enough for a burst of wakes, few enough for the API server.
const maxWakeWrites = 16

// Run polls the interceptors every Interval until ctx ends, and carries
// out what each poll calls for. Writes go on beside the polls, so that a
// slow API server neither delays the next poll nor stretches the cold
// starts it measures.
func (l *Loop) Run(ctx context.Context) {
	writes := make(chan struct{}, maxWakeWrites)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		if l.Sleep(ctx, l.Interval) != nil {
			return
		}
		snap, err := l.Poller.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case snap.Complete():
			l.Metrics.Polls.WithLabelValues("complete").Inc()
		case snap.Answered > 0:
			l.Metrics.Polls.WithLabelValues("partial").Inc()
		default:
			l.Metrics.Polls.WithLabelValues("failed").Inc()
		}
		if err != nil {
			l.Warn(logKeyInterceptors, "cannot read every interceptor's queue; wakes go on from those that answer, nothing is idled meanwhile", err,
				"answered", snap.Answered, "interceptors", snap.Interceptors)
		}
		for _, s := range l.Waker.Decide(snap, l.Now(), l.Directive) {
			if s.Action == ColdStart || s.Action == WakeTimeout {
				l.carryOut(ctx, s)
				continue
			}
			select {
			case writes <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-writes }()
				l.carryOut(ctx, s)
			})
		}
	}
}

// carryOut does one step: a write to the workspace, an Event, a report to
// Cluster Control, a metric.
func (l *Loop) carryOut(ctx context.Context, s Step) {
	now := l.Now()
	ref := corev1.ObjectReference{APIVersion: v1alpha1.APIVersion, Kind: "Workspace", Namespace: s.Name.Namespace, Name: s.Name.Name, UID: s.UID}
	var evs []state.Event
	switch s.Action {
	case Wake:
		err := l.Patch(ctx, s.Name, types.JSONPatchType, kube.WakePatch)
		switch {
		case err == nil:
			l.Metrics.Wakes.WithLabelValues("woken").Inc()
			l.Waker.Woken(s.Name)
			evs = append(evs, state.Event{Ref: ref, Type: corev1.EventTypeNormal, Reason: "Woken", Action: "Request",
				Note: fmt.Sprintf("a request for the idle workspace is held by the interceptor (%d held); waking it", s.Held)})
			l.AutoScaled(s.Name, ccapi.AutoScale{Action: ccapi.AutoScaleWake, Reason: ccapi.ReasonRequest, At: ccapi.Stamp(now)}, now)
		case apierrors.IsInvalid(err) || apierrors.IsNotFound(err):
			// The JSON patch's test failed: formspec.dev/idle is no longer
			// "true", so someone woke it first, or it is gone.
			l.Metrics.Wakes.WithLabelValues("already_awake").Inc()
			l.Waker.WokenElsewhere(s.Name)
		default:
			l.Metrics.Wakes.WithLabelValues("error").Inc()
			l.Waker.WakeFailed(s.Name, now)
			l.warnWrite(s, err)
		}
	case Idle:
		if err := l.Patch(ctx, s.Name, types.MergePatchType, kube.AnnotationPatch(v1alpha1.AnnotationIdle, "true")); err != nil {
			l.Waker.IdleFailed(s.Name, now)
			l.warnWrite(s, err)
			break
		}
		l.Metrics.Idles.Inc()
		l.Waker.Idled(s.Name)
		l.AutoScaled(s.Name, ccapi.AutoScale{Action: ccapi.AutoScaleIdle, Reason: ccapi.ReasonInactivity, At: ccapi.Stamp(now)}, now)
	case OverflowOn, OverflowOff:
		value := any(nil)
		if s.Action == OverflowOn {
			value = "true"
			l.Metrics.Overflows.Inc()
		}
		if err := l.Patch(ctx, s.Name, types.MergePatchType, kube.AnnotationPatch(v1alpha1.AnnotationWakeOverflow, value)); err != nil {
			l.warnWrite(s, err)
		}
	case ColdStart:
		l.Metrics.ColdStart.WithLabelValues("answered").Observe(s.Took.Seconds())
	case WakeTimeout:
		l.Metrics.ColdStart.WithLabelValues("timeout").Observe(s.Took.Seconds())
		evs = append(evs, state.Event{Ref: ref, Type: corev1.EventTypeWarning, Reason: "WakeTimedOut", Action: "Request",
			Note: fmt.Sprintf("the workspace had no ready pod within its class's wake timeout; the interceptor answered the held requests 504 (after %.0fs)", s.Took.Seconds())})
	}
	if len(evs) > 0 {
		l.Events(evs)
	}
}

func (l *Loop) warnWrite(s Step, err error) {
	l.Warn(logKeyWakeWrites, "cannot write a wake-on-request decision onto the workspace", err,
		"namespace", s.Name.Namespace, "name", s.Name.Name, "step", s.Action.String())
}

func (a Action) String() string {
	return [...]string{"wake", "idle", "overflow_on", "overflow_off", "cold_start", "wake_timeout"}[a]
}
