// Package datastore implements the hooks of the datastore
// DecoratorController: a status-only controller that checks a Datastore
// and its endpoint Secret and reports Validated or Denied. It creates
// nothing; ResourceClaims re-run the same checks before projecting
// credentials (see package claims).
package datastore

import (
	"context"
	"log/slog"
	"time"

	"github.com/formspec/formspec-hooks/internal/codec"
	"github.com/formspec/formspec-hooks/internal/hooks/decision"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/conditions"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// HookName labels this hook's decisions and log lines.
const HookName = "datastore"

// MaxRelatedSecrets bounds the Secrets of one request, checked before any
// is decoded; the customize asks for one, by name.
const MaxRelatedSecrets = 1

// Options configures a Hook. Every field is optional.
type Options struct {
	// Clock is "now" for the condition transitions a request cannot date
	// (see conditions.Stamp); time.Now when nil.
	Clock func() time.Time
	// Logger gets one debug line per decision (never a value of a
	// Secret); discarded when nil.
	Logger *slog.Logger
	// Decisions counts decisions by reason; nothing when nil.
	Decisions decision.Recorder
}

// Hook serves the datastore DecoratorController. It is safe for concurrent
// use and keeps no state between requests.
type Hook struct {
	now       func() time.Time
	log       *slog.Logger
	decisions decision.Recorder
}

// New returns a Hook.
func New(o Options) *Hook {
	h := &Hook{now: o.Clock, log: o.Logger, decisions: decision.OrDiscard(o.Decisions)}
	if h.now == nil {
		h.now = time.Now
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h
}

// Customize asks for the Datastore's endpoint Secret, by name, in the
// Datastore's namespace. Selecting by name rather than by the consent
// label lets Sync tell "not found" from "not labelled".
func (h *Hook) Customize(ctx context.Context, req *metacontroller.CustomizeRequest) (*metacontroller.CustomizeResponse, error) {
	ds, err := decode(req.Parent)
	if err != nil {
		return nil, err
	}
	resp := &metacontroller.CustomizeResponse{RelatedResources: []metacontroller.RelatedResourceRule{}}
	if name := ds.Spec.EndpointSecretRef.Name; name != "" {
		resp.RelatedResources = append(resp.RelatedResources, metacontroller.RelatedResourceRule{
			APIVersion: "v1",
			Resource:   "secrets",
			// Always explicit: with hook v2 a rule without a namespace
			// matches objects of every namespace.
			Namespace: ds.Namespace,
			Names:     []string{name},
		})
	}
	return resp, nil
}

// Sync validates the Datastore against its endpoint Secret and answers
// with its status; there are no attachments.
func (h *Hook) Sync(ctx context.Context, req *metacontroller.DecoratorRequest) (*metacontroller.DecoratorResponse, error) {
	// The customize asks for the endpoint Secret by name: one at most.
	if err := metacontroller.Limit("related Secrets", len(req.Related[metacontroller.Key("v1", "Secret")]), MaxRelatedSecrets); err != nil {
		return nil, err
	}
	ds, err := decode(req.Object)
	if err != nil {
		return nil, err
	}
	var secret *corev1.Secret
	if name := ds.Spec.EndpointSecretRef.Name; name != "" {
		secret, err = metacontroller.Get[corev1.Secret](req.Related, metacontroller.Key("v1", "Secret"), metacontroller.Name(ds.Namespace, name))
		if err != nil {
			return nil, err
		}
	}
	d := claims.CheckDatastore(ds, secret)
	status := &v1alpha1.DatastoreStatus{
		ObservedGeneration: ds.Generation,
		Conditions: conditions.Stamp(ds.Status.Conditions, ds.CreationTimestamp, h.now(),
			metav1.Condition{
				Type: v1alpha1.ConditionValidated, Status: conditions.Status(d.Allowed),
				ObservedGeneration: ds.Generation, Reason: d.Reason, Message: d.Message,
			},
			metav1.Condition{
				Type: v1alpha1.ConditionDenied, Status: conditions.Status(!d.Allowed),
				ObservedGeneration: ds.Generation, Reason: d.Reason, Message: d.Message,
			}),
	}
	verdict := decision.Denied
	if d.Allowed {
		verdict = decision.Validated
		// Read only from a Secret whose owner consented by labelling it.
		status.Endpoint = claims.Endpoint(secret)
	}
	h.decisions.Record(HookName, verdict, d.Reason)
	h.log.DebugContext(ctx, "datastore checked", "hook", HookName,
		"namespace", ds.Namespace, "name", ds.Name, "decision", verdict, "reason", d.Reason, "message", d.Message)
	return &metacontroller.DecoratorResponse{Status: status, Attachments: []metacontroller.Object{}}, nil
}

func decode(raw codec.RawMessage) (*v1alpha1.Datastore, error) {
	ds := &v1alpha1.Datastore{}
	if err := metacontroller.Decode(raw, ds, "Datastore"); err != nil {
		return nil, err
	}
	return ds, nil
}
