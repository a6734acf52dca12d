package kube

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// ReportingController names the reporter in the Events it records.
const ReportingController = "formspec.dev/reporter"

// maxNote is the API server's limit on an Event's note.
const maxNote = 1024

// truncateNote cuts a note to the API's limit on a rune boundary.
func truncateNote(s string) string {
	if len(s) <= maxNote {
		return s
	}
	s = s[:maxNote-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// EventLimits bound how many Events the reporter writes: per object, a
// burst then a trickle, so a flapping workspace cannot flood its namespace;
// overall, so a restart that sees thousands of fresh decisions at once
// does not flood the API server.
type EventLimits struct {
	PerObjectBurst int
	PerObjectEvery time.Duration
	Burst          int
	PerSecond      float64
}

// maxLimitedObjects bounds the per-object limiters kept; beyond it they are
// all forgotten, which at worst lets a few objects burst again.
const maxLimitedObjects = 10000

// EventWriter rate-limits Events and hands them to client-go's events
// recorder, which deduplicates repeats of one reason on one object into a
// series (one Event with a count) and writes them in the background.
type EventWriter struct {
	rec    events.EventRecorder
	lim    EventLimits
	now    func() time.Time
	count  func(result string)
	mu     sync.Mutex
	all    *rate.Limiter
	perObj map[objectKey]*rate.Limiter
}

// objectKey names the object an Event is about.
type objectKey struct {
	kind string
	name types.NamespacedName
}

// NewEventWriter returns an EventWriter recording to rec within lim;
// count is told each Event's result (recorded, rate_limited).
func NewEventWriter(rec events.EventRecorder, lim EventLimits, now func() time.Time, count func(string)) *EventWriter {
	return &EventWriter{
		rec:    rec,
		lim:    lim,
		now:    now,
		count:  count,
		all:    rate.NewLimiter(rate.Limit(lim.PerSecond), lim.Burst),
		perObj: map[objectKey]*rate.Limiter{},
	}
}

// allow takes a token for an Event about ref, from the object's bucket and
// the overall one.
func (w *EventWriter) allow(ref corev1.ObjectReference) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	k := objectKey{kind: ref.Kind, name: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}
	l, ok := w.perObj[k]
	if !ok {
		if len(w.perObj) >= maxLimitedObjects {
			clear(w.perObj)
		}
		l = rate.NewLimiter(rate.Every(w.lim.PerObjectEvery), w.lim.PerObjectBurst)
		w.perObj[k] = l
	}
	if !l.AllowN(now, 1) {
		return false
	}
	return w.all.AllowN(now, 1)
}

// Write records evs, dropping (and counting) those over the limits.
func (w *EventWriter) Write(evs []state.Event) {
	for _, ev := range evs {
		if !w.allow(ev.Ref) {
			w.count("rate_limited")
			continue
		}
		w.count("recorded")
		ref := ev.Ref
		w.rec.Eventf(&ref, nil, ev.Type, ev.Reason, ev.Action, "%s", truncateNote(ev.Note))
	}
}
