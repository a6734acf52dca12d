package workspace

import (
	"fmt"
	"strings"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
)

// ClaimsSource is where the Workspace hooks learn about a workspace's
// ResourceClaims (serve --workspace-claims).
type ClaimsSource string

const (
	// ClaimsSummary reads the claims summary the elected reporter writes on
	// the Workspace (claimsummary.Annotation), and customize relates no
	// claims. Metacontroller maps a write of a related object back to its
	// parents by testing every parent, so relating each Workspace to the
	// claims of its namespace costs a pass over the whole fleet per claim
	// write; a write of the annotation wakes that one Workspace. The
	// annotation is trusted because an admission policy lets only the
	// reporter's service account write it.
	ClaimsSummary ClaimsSource = "summary"
	// ClaimsRelated relates every ResourceClaim of the workspace's
	// namespace and matches them in sync; the annotation is ignored. For
	// installs that run neither the reporter nor the admission policy.
	ClaimsRelated ClaimsSource = "related"
)

// ParseClaimsSource reads a --workspace-claims value.
func ParseClaimsSource(s string) (ClaimsSource, error) {
	switch c := ClaimsSource(s); c {
	case ClaimsSummary, ClaimsRelated:
		return c, nil
	}
	return "", fmt.Errorf("%q is not %s or %s", s, ClaimsSummary, ClaimsRelated)
}

// summaryState is what a sync knows of a workspace's claims in summary
// mode.
type summaryState int

const (
	// summaryUsed: the claims came from a valid summary, or from related
	// claims (related mode), or the workspace has no datastores.
	summaryUsed summaryState = iota
	// summaryAbsent: the workspace has datastores and no summary yet.
	summaryAbsent
	// summaryInvalid: the annotation does not parse.
	summaryInvalid
)

// maxSummaryMessage bounds how much of Parse's error goes into the
// Degraded message: the annotation may hold 64 KiB, and a condition's
// message must stay far below what the API server accepts.
const maxSummaryMessage = 512

// claimsOf sets o.claims from the request: the related claims in related
// mode; in summary mode those the parent's summary stands for, and
// o.summary says when there is none or it does not parse (o.summaryProblem
// then says why). Related claims a summary-mode request carries anyway are
// ignored.
func (h *Hooks) claimsOf(o *observed, req *Request) {
	if h.cfg.Claims == ClaimsRelated {
		o.claims = claimsIn(req.Related.ResourceClaims)
		return
	}
	if len(o.ws.Spec.Datastores) == 0 {
		// Nothing to match: a summary left from earlier entries is not read.
		return
	}
	value, ok := o.ws.Annotations[claimsummary.Annotation]
	if !ok {
		o.summary = summaryAbsent
		return
	}
	s, err := claimsummary.Parse(value)
	if err != nil {
		msg := err.Error()
		if len(msg) > maxSummaryMessage {
			msg = strings.ToValidUTF8(msg[:maxSummaryMessage], "") + "…"
		}
		o.summary = summaryInvalid
		o.summaryProblem = &problem{
			reason:  v1alpha1.ReasonInvalidClaimsSummary,
			message: fmt.Sprintf("annotation %s: %s; existing children are kept unchanged until the reporter writes a valid summary", claimsummary.Annotation, msg),
		}
		return
	}
	o.claims = s.ResourceClaims(o.ws)
}

// bindings are the workspace's datastore entries matched with its claims.
// Before the first summary every entry waits as if its claim were not
// verified yet: nothing is injected that the reporter has not summarised.
// (An invalid summary keeps the children and the datastores' status as
// they are, whatever the entries.)
func (o *observed) bindings() []binding {
	b := bindingsFor(o.ws, o.claims)
	if o.summary == summaryAbsent {
		for i := range b {
			b[i].status.State = v1alpha1.DatastorePending
		}
	}
	return b
}

// claimsKept says that the children are kept as they are for want of a
// usable summary: it does not parse, or it has not been written and a
// Deployment runs (rendering one without the credentials its pods mount
// would roll them, on every upgrade, before the reporter's first pass).
// The status then keeps the datastores it last reported, which the kept
// children still reflect.
func (o *observed) claimsKept() bool {
	return o.summary == summaryInvalid || (o.summary == summaryAbsent && o.deployment != nil)
}

// waitingForSummaryMessage is the Progressing condition's message of a
// workspace whose spec changed while its children are kept until its
// summary is written.
const waitingForSummaryMessage = "waiting for the reporter to write the claims summary (annotation " + claimsummary.Annotation +
	") before applying the new spec; the workspace's children are kept as they are until then"
