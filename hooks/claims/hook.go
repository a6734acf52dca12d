package claims

import (
	"log/slog"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
)

// Decisions counts decisions, typically into a metrics counter labelled by
// hook, decision and reason. Implementations must be safe for concurrent
// use.
type Decisions interface {
	Record(hook, decision, reason string)
}

// Decision labels passed to Decisions.Record. DecisionExposed is not a
// verdict on the object but a finding about it, counted on every sync that
// makes it: a granted claim whose credentials Secret carries a copy of its
// data in an annotation (resourceclaim.LastAppliedAnnotation).
const (
	DecisionGranted   = "granted"
	DecisionDenied    = "denied"
	DecisionValidated = "validated"
	DecisionExposed   = "exposed"
)

// Count calls d.Record unless d is nil, so hooks can take an optional
// counter. The server's metrics (server.Metrics) are one Decisions.
func Count(d Decisions, hook, decision, reason string) {
	if d != nil {
		d.Record(hook, decision, reason)
	}
}

// HookOptions configures the datastore and resourceclaim hooks. Every field
// is optional.
type HookOptions struct {
	// Clock is "now" for expiry, skew, resyncAfterSeconds and the condition
	// transitions a request cannot date (see conditions.Stamp); time.Now
	// when nil.
	Clock func() time.Time
	// Logger gets one debug line per decision (never a value of a Secret);
	// discarded when nil.
	Logger *slog.Logger
	// Decisions counts decisions by reason.
	Decisions Decisions
	// Reports, when set, receives each claim decision for the reporter
	// sidecar, which turns it into an Event on the claim.
	Reports observation.Sink
}

// WithDefaults fills in the clock and a discarding logger.
func (o HookOptions) WithDefaults() HookOptions {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Reports = observation.OrDiscard(o.Reports)
	return o
}
