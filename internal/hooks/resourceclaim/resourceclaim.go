// Package resourceclaim implements the hooks of the resourceclaim
// DecoratorController: it verifies a ResourceClaim against its Datastore
// (package claims) and, when the grant holds, projects the Datastore's
// credentials into a Secret next to the claim, "<claim>-credentials", in
// the Service Binding layout. When it does not hold, the hook answers with
// no attachment, so Metacontroller deletes any Secret granted before.
package resourceclaim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/codec"
	"github.com/formspec/formspec-hooks/internal/conditions"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/hooks/decision"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/objects"
)

// HookName labels this hook's decisions and log lines.
const HookName = "resourceclaim"

// LastAppliedAnnotation is the annotation Metacontroller's default
// --apply-strategy=dynamic-apply writes on every object it manages: the
// whole object as last applied, so for the credentials Secret its data,
// in an annotation that "kubectl describe" and many tools show freely.
// With --apply-strategy=server-side-apply it writes none. The hook only
// ever looks at whether the annotation is there, never at its value.
const LastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// The managed-by label of the credentials Secret, beside
// v1alpha1.LabelResourceClaim.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "formspec-hooks"
)

// SecretSuffix makes the credentials Secret's name from the claim's.
const SecretSuffix = "-credentials"

// MaxResync bounds resyncAfterSeconds. A grant expiring in a year still
// gets its Secret removed on time: each resync asks again for the rest.
const MaxResync = 24 * time.Hour

// Options configures a Hook. Every field is optional.
type Options struct {
	// Clock is "now" for expiry, skew, resyncAfterSeconds and the
	// condition transitions a request cannot date (see conditions.Stamp);
	// time.Now when nil.
	Clock func() time.Time
	// Logger gets one debug line per decision (never a value of a
	// Secret); discarded when nil.
	Logger *slog.Logger
	// Decisions counts decisions by reason; nothing when nil.
	Decisions decision.Recorder
	// Reports receives each claim decision for the reporter sidecar,
	// which turns it into an Event on the claim; nothing when nil.
	Reports observation.Sink
	// Claims are the install's choices about grants (claims.Options):
	// whether v1 grants are accepted for every Datastore.
	Claims claims.Options
}

// Hook serves the resourceclaim DecoratorController. It is safe for concurrent
// use and keeps no state between requests.
type Hook struct {
	now       func() time.Time
	log       *slog.Logger
	decisions decision.Recorder
	reports   observation.Sink
	claims    claims.Options
}

// New returns a Hook.
func New(o Options) *Hook {
	h := &Hook{now: o.Clock, log: o.Logger, decisions: decision.OrDiscard(o.Decisions), reports: observation.OrDiscard(o.Reports), claims: o.Claims}
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Customize asks for the claimed Datastore and for the Secrets in its
// namespace that carry the consent label for it. Selecting by label means
// Metacontroller never hands this hook a Secret whose owner did not
// consent; the namespace is always explicit because a v2 rule without one
// matches every namespace.
func (h *Hook) Customize(ctx context.Context, req *metacontroller.CustomizeRequest) (*metacontroller.CustomizeResponse, error) {
	claim, err := decode(req.Parent)
	if err != nil {
		return nil, err
	}
	g := grant.Of(claim)
	resp := &metacontroller.CustomizeResponse{}
	if g.DatastoreName == "" || g.DatastoreNamespace == "" {
		return resp, nil
	}
	resp.RelatedResources = append(resp.RelatedResources, metacontroller.RelatedResourceRule{
		APIVersion: v1alpha1.APIVersion,
		Resource:   "datastores",
		Namespace:  g.DatastoreNamespace,
		Names:      []string{g.DatastoreName},
	})
	// A name that is no label value cannot be selected (and cannot have a
	// labelled Secret); asking would make Metacontroller fail the sync.
	if len(validation.IsValidLabelValue(g.DatastoreName)) == 0 {
		resp.RelatedResources = append(resp.RelatedResources, metacontroller.RelatedResourceRule{
			APIVersion:    "v1",
			Resource:      "secrets",
			Namespace:     g.DatastoreNamespace,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelDatastore: g.DatastoreName}},
		})
	}
	return resp, nil
}

// Sync verifies the claim and answers with its status and, when granted,
// the credentials Secret.
func (h *Hook) Sync(ctx context.Context, req *metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error) {
	if err := checkCounts(req); err != nil {
		return nil, err
	}
	claim, err := decode(req.Object)
	if err != nil {
		return nil, err
	}
	g := grant.Of(claim)
	var ds *v1alpha1.Datastore
	var secret *corev1.Secret
	if g.DatastoreName != "" {
		ds, err = metacontroller.GetAs(req.Related,
			metacontroller.Key(v1alpha1.APIVersion, "Datastore"), metacontroller.Name(g.DatastoreNamespace, g.DatastoreName), objects.Datastore)
		if err != nil {
			return nil, err
		}
	}
	if ds != nil && ds.Spec.EndpointSecretRef.Name != "" {
		secret, err = metacontroller.GetAs(req.Related,
			metacontroller.Key("v1", "Secret"), metacontroller.Name(ds.Namespace, ds.Spec.EndpointSecretRef.Name), objects.Secret)
		if err != nil {
			return nil, err
		}
	}
	if ds != nil {
		// Each owner key may cost a signature verification and each
		// tenant a check: count them before any is tried. The CRD caps
		// both, so only a request no API server sent gets here.
		if err := errors.Join(
			metacontroller.Limit("owner keys in the related Datastore", len(ds.Spec.OwnerPublicKeys), v1alpha1.MaxOwnerPublicKeys),
			metacontroller.Limit("allowed tenants in the related Datastore", len(ds.Spec.AllowedTenants), v1alpha1.MaxAllowedTenants),
		); err != nil {
			return nil, err
		}
	}
	now := h.now()
	d := claims.Verify(claim, ds, secret, now, h.claims)

	status := &v1alpha1.ResourceClaimStatus{ObservedGeneration: claim.Generation}
	resp := &metacontroller.DecoratorResponse{Status: status, Attachments: []metacontroller.Object{}}
	verdict := decision.Denied
	// attached is the credentials Secret as Metacontroller observes it; a
	// denied claim's is being deleted, and nothing is read of it.
	var attached *corev1.Secret
	if d.Allowed {
		verdict = decision.Granted
		attached, err = metacontroller.GetAs(req.Attachments,
			metacontroller.Key("v1", "Secret"), metacontroller.Name(claim.Namespace, claim.Name+SecretSuffix), objects.Secret)
		if err != nil {
			return nil, err
		}
		data := claims.Project(secret.Data, ds.Spec.Driver, g.Permission)
		revision := claims.CredentialsRevision(attached, data)
		obj, err := metacontroller.ToObject(credentials(claim, ds.Spec.Driver, data, revision))
		if err != nil {
			return nil, err
		}
		resp.Attachments = append(resp.Attachments, obj)
		status.Binding = &v1alpha1.Binding{Name: claim.Name + SecretSuffix}
		status.CredentialsHash = claims.CredentialsHash(claim.UID, revision)
	}
	conds := []metav1.Condition{
		{
			Type: v1alpha1.ConditionReady, Status: conditions.Status(d.Allowed),
			ObservedGeneration: claim.Generation, Reason: d.Reason, Message: d.Message,
		},
		{
			Type: v1alpha1.ConditionDenied, Status: conditions.Status(!d.Allowed),
			ObservedGeneration: claim.Generation, Reason: d.Reason, Message: d.Message,
		},
	}
	exposed := false
	if attached != nil {
		// A denied claim's Secret is being deleted: nothing to fix.
		_, exposed = attached.Annotations[LastAppliedAnnotation]
		if exposed {
			c := credentialsExposed(attached)
			c.ObservedGeneration = claim.Generation
			conds = append(conds, c)
		}
	}
	if d.LegacySignature {
		c := legacySignature(ds)
		c.ObservedGeneration = claim.Generation
		conds = append(conds, c)
	}
	status.Conditions = conditions.Stamp(claim.Status.Conditions, claim.CreationTimestamp, now, conds...)
	if !d.RecheckAt.IsZero() {
		resp.ResyncAfterSeconds = resyncAfter(d.RecheckAt.Sub(now))
	}
	h.decisions.Record(HookName, verdict, d.Reason)
	h.reports.Send(observation.ClaimObservation(claim, status))
	h.log.DebugContext(ctx, "claim verified", "hook", HookName,
		"namespace", claim.Namespace, "name", claim.Name, "decision", verdict, "reason", d.Reason, "message", d.Message)
	if d.LegacySignature {
		h.decisions.Record(HookName, decision.Legacy, v1alpha1.ReasonSignatureV1)
	}
	if exposed {
		h.decisions.Record(HookName, decision.Exposed, v1alpha1.ReasonLastAppliedAnnotation)
		h.log.WarnContext(ctx, "credentials Secret carries a copy of its data in an annotation; run Metacontroller with --apply-strategy=server-side-apply",
			"hook", HookName, "namespace", claim.Namespace, "name", claim.Name+SecretSuffix, "annotation", LastAppliedAnnotation)
	}
	return resp, nil
}

// credentialsExposed is the CredentialsExposed condition of a credentials
// Secret that carries the last-applied annotation. Only such a Secret gets
// the condition: a False one could appear only once Metacontroller had
// created the Secret, and that second status write would make
// Metacontroller match the changed claim against every Workspace of the
// cluster once more. Only the Secret's metadata is decoded, never its
// data, and of the annotation only its presence is read: its value goes
// nowhere.
func credentialsExposed(secret *corev1.Secret) metav1.Condition {
	return metav1.Condition{
		Type: v1alpha1.ConditionCredentialsExposed, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonLastAppliedAnnotation,
		Message: fmt.Sprintf("the credentials Secret %s/%s carries the annotation %s, a copy of the whole Secret, data included, "+
			"visible to anyone who can read its metadata (kubectl describe prints it); Metacontroller writes it with its default --apply-strategy=dynamic-apply. "+
			"Run Metacontroller with --apply-strategy=server-side-apply, then delete the Secret so that it is recreated without the copy",
			secret.Namespace, secret.Name, LastAppliedAnnotation),
	}
}

// legacySignature is the LegacySignature condition of a claim granted on
// a v1 signature: only such a claim gets it, True, for the reason
// credentialsExposed gives. The reporter announces it with an Event, and
// the decision counter counts it, so that a platform moving from the
// original operator sees which grants are left to sign again.
func legacySignature(ds *v1alpha1.Datastore) metav1.Condition {
	return metav1.Condition{
		Type: v1alpha1.ConditionLegacySignature, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSignatureV1,
		Message: fmt.Sprintf("granted on a v1 signature, the original FormSpec operator's format, which binds neither namespace nor expiry: "+
			"the same signed claim is valid in every namespace Datastore %s/%s allows. Ask its owner to sign the claim again as v2 (formspec-hooks claim sign), "+
			"then turn v1 off (docs/claims.md)", ds.Namespace, ds.Name),
	}
}

// credentials is the attachment Secret. Its type tells Service Binding
// libraries which client to build; the label ties it to its claim for
// people and selectors (Metacontroller tracks it by owner reference); the
// annotation counts the versions of its data (claims.CredentialsRevision).
func credentials(claim *v1alpha1.ResourceClaim, driver string, data map[string][]byte, revision int64) *corev1.Secret {
	labels := map[string]string{LabelManagedBy: ManagedBy}
	// Object names may be longer than label values; such a claim's Secret
	// simply goes without the label rather than failing to apply.
	if len(validation.IsValidLabelValue(claim.Name)) == 0 {
		labels[v1alpha1.LabelResourceClaim] = claim.Name
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        claim.Name + SecretSuffix,
			Namespace:   claim.Namespace,
			Labels:      labels,
			Annotations: map[string]string{v1alpha1.AnnotationCredentialsRevision: strconv.FormatInt(revision, 10)},
		},
		Type: corev1.SecretType("servicebinding.io/" + driver),
		Data: maps.Clone(data),
	}
}

// resyncAfter turns the time until a decision changes into whole seconds,
// rounded up so the resync never comes a moment early (an expiry checked a
// second early is still valid, and would wait for the next periodic
// resync), and capped by MaxResync.
func resyncAfter(d time.Duration) float64 {
	d = min(max(d, time.Second), MaxResync)
	return math.Ceil(d.Seconds())
}

// Limits of one request, by kind, checked before anything is decoded from
// the objects they count. The claim's customize asks for one Datastore by
// name and for the Secrets of its namespace labelled for that Datastore,
// which its owner labels; it owns one credentials Secret.
const (
	MaxRelatedDatastores = 1
	MaxRelatedSecrets    = 64
	MaxAttachedSecrets   = 8
)

func checkCounts(req *metacontroller.DecoratorRequest) error {
	return errors.Join(
		metacontroller.Limit("related Datastores", len(req.Related[metacontroller.Key(v1alpha1.APIVersion, "Datastore")]), MaxRelatedDatastores),
		metacontroller.Limit("related Secrets", len(req.Related[metacontroller.Key("v1", "Secret")]), MaxRelatedSecrets),
		metacontroller.Limit("attached Secrets", len(req.Attachments[metacontroller.Key("v1", "Secret")]), MaxAttachedSecrets),
	)
}

func decode(raw codec.RawMessage) (*v1alpha1.ResourceClaim, error) {
	c, err := objects.ResourceClaim(raw)
	if err != nil {
		return nil, &metacontroller.InvalidObjectError{What: "ResourceClaim", Err: err}
	}
	return c, nil
}
