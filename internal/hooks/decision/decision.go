// Package decision is how the hooks count the decisions they make about
// users' objects (a claim granted, a claim denied because its signature
// expired) without knowing where the count goes: the hook server's
// metrics (server.Metrics) are one Recorder. It imports nothing, so hook
// logic stays free of net/http and Prometheus.
package decision

// Recorder counts decisions. reason must come from a small fixed set (the
// reasons in hooks/api/v1alpha1): it becomes a metric label, and an
// unbounded label would grow the metrics without limit. Implementations
// must be safe for concurrent use.
type Recorder interface {
	Record(hook, decision, reason string)
}

// Decision labels passed to Recorder.Record. Exposed and Legacy are not
// verdicts on the object but findings about it, counted on every sync that
// makes them: a granted claim whose credentials Secret carries a copy of
// its data in an annotation (v1alpha1.ReasonLastAppliedAnnotation), and a
// claim granted on a v1 signature (v1alpha1.ReasonSignatureV1).
const (
	Granted   = "granted"
	Denied    = "denied"
	Validated = "validated"
	Exposed   = "exposed"
	Legacy    = "legacy"
)

// Discard counts nothing: the Recorder of tests and the offline tools.
var Discard Recorder = discard{}

type discard struct{}

func (discard) Record(string, string, string) {}

// OrDiscard returns r, or Discard when r is nil, so that a hook can record
// without checking.
func OrDiscard(r Recorder) Recorder {
	if r == nil {
		return Discard
	}
	return r
}
