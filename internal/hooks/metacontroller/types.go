// Package metacontroller holds the wire types of Metacontroller's hook API
// version v2 for the hooks this project serves: CompositeController and
// DecoratorController sync/finalize, and customize.
//
// The types mirror metacontroller's pkg/controller/{composite,decorator}/api/v2
// and pkg/controller/common/customize/api/v2 field for field. Metacontroller
// decodes v2 responses strictly, so a response type here must never carry a
// field that Metacontroller's own type lacks: a single unknown key fails the
// whole sync.
package metacontroller

import (
	"fmt"

	"github.com/formspec/formspec-hooks/internal/codec"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectMap is the v2 shape of children, attachments and related objects:
// the outer key is "Kind.group/version" ("Kind.version" for the core group),
// the inner key is "namespace/name" ("name" for cluster-scoped objects).
// Objects stay raw until a hook decodes the ones it cares about into typed
// k8s.io/api structs.
type ObjectMap map[string]map[string]codec.RawMessage

// CompositeRequest is the body Metacontroller sends to a CompositeController's
// sync and finalize hooks.
type CompositeRequest struct {
	// Controller is the CompositeController object; hooks only carry it.
	Controller codec.RawMessage `json:"controller,omitempty"`
	// Parent is the parent object as observed.
	Parent codec.RawMessage `json:"parent"`
	// Children are the observed children, owned by the parent.
	Children ObjectMap `json:"children"`
	// Related are the objects the customize hook asked for.
	Related ObjectMap `json:"related"`
	// Finalizing is true when the request comes to the finalize hook.
	Finalizing bool `json:"finalizing"`
}

// CompositeResponse is the body a CompositeController's sync and finalize
// hooks answer with. Exactly the fields of metacontroller's
// CompositeHookResponse.
type CompositeResponse struct {
	// Status replaces the parent's .status.
	Status any `json:"status"`
	// Children is the complete desired set: an observed child missing here
	// is deleted. Each element encodes as one Kubernetes object: an Object,
	// or a typed value whose JSON is one (the workspace hooks encode typed
	// children straight into the response).
	Children []any `json:"children"`
	// ResyncAfterSeconds asks for another sync after this many seconds.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds,omitempty"`
	// Finalized tells the finalize hook's caller that teardown is complete.
	Finalized bool `json:"finalized,omitempty"`
}

// DecoratorRequest is the body Metacontroller sends to a DecoratorController's
// sync and finalize hooks.
type DecoratorRequest struct {
	// Controller is the DecoratorController object; hooks only carry it,
	// and Decode skips it.
	Controller codec.RawMessage `json:"controller,omitempty"`
	// Object is the decorated object as observed.
	Object codec.RawMessage `json:"object"`
	// Attachments are the observed attachments.
	Attachments ObjectMap `json:"attachments"`
	// Related are the objects the customize hook asked for.
	Related ObjectMap `json:"related"`
	// Finalizing is true when the request comes to the finalize hook.
	Finalizing bool `json:"finalizing"`
}

// DecoratorResponse is the body a DecoratorController's sync and finalize
// hooks answer with. Exactly the fields of metacontroller's
// DecoratorHookResponse.
type DecoratorResponse struct {
	// Labels to set on the object (a nil value removes the label).
	Labels map[string]*string `json:"labels,omitempty"`
	// Annotations to set on the object (a nil value removes it).
	Annotations map[string]*string `json:"annotations,omitempty"`
	// Status replaces the object's .status; nil leaves it as it is.
	Status any `json:"status,omitempty"`
	// Attachments is the complete desired set of attachments.
	Attachments []Object `json:"attachments"`
	// ResyncAfterSeconds asks for another sync after this many seconds.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds,omitempty"`
	// Finalized tells the finalize hook's caller that teardown is complete.
	Finalized bool `json:"finalized,omitempty"`
}

// CustomizeRequest is the body of a customize hook request, for both
// controller kinds.
type CustomizeRequest struct {
	// Controller is the controller object; hooks only carry it, and
	// Decode skips it.
	Controller codec.RawMessage `json:"controller,omitempty"`
	// Parent is the parent (or decorated) object.
	Parent codec.RawMessage `json:"parent"`
}

// CustomizeResponse is the body a customize hook answers with.
type CustomizeResponse struct {
	// RelatedResources says which other objects the sync hook should see.
	RelatedResources []RelatedResourceRule `json:"relatedResources,omitempty"`
}

// RelatedResourceRule selects related objects, by label selector or by names.
// Exactly the fields of metacontroller's v1alpha1.RelatedResourceRule.
type RelatedResourceRule struct {
	// APIVersion of the related resource, e.g. "formspec.dev/v1alpha1".
	APIVersion string `json:"apiVersion"`
	// Resource is the plural resource name, e.g. "clusterclasses".
	Resource string `json:"resource"`
	// LabelSelector selects by labels.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// Namespace restricts the search to one namespace.
	Namespace string `json:"namespace,omitempty"`
	// Names restricts the search to these names.
	Names []string `json:"names,omitempty"`
}

// Object is a Kubernetes object in its wire form, as produced by ToObject.
type Object = map[string]any

// The controller object Metacontroller sends with every request (a few
// KiB: the whole CompositeController or DecoratorController) is carried
// by the request types, so that tests can build requests as Metacontroller
// does, but no hook reads it. The Decode methods of the types the hook
// server serves skip it (the Workspace hooks have a request type of their
// own, workspace.Request, which does the same), and the transport decodes
// with them.

// Decode decodes the request from body, all but its controller object.
func (r *DecoratorRequest) Decode(body []byte) error {
	var in struct {
		Object      codec.RawMessage `json:"object"`
		Attachments ObjectMap        `json:"attachments"`
		Related     ObjectMap        `json:"related"`
		Finalizing  bool             `json:"finalizing"`
	}
	if err := codec.Unmarshal(body, &in); err != nil {
		return err
	}
	*r = DecoratorRequest{Object: in.Object, Attachments: in.Attachments, Related: in.Related, Finalizing: in.Finalizing}
	return nil
}

// Decode decodes the request from body, all but its controller object.
func (r *CustomizeRequest) Decode(body []byte) error {
	var in struct {
		Parent codec.RawMessage `json:"parent"`
	}
	if err := codec.Unmarshal(body, &in); err != nil {
		return err
	}
	*r = CustomizeRequest{Parent: in.Parent}
	return nil
}

// Validate reports a request that cannot be served: no parent object.
func (r *CompositeRequest) Validate() error {
	if isNull(r.Parent) {
		return errMissing("parent")
	}
	return nil
}

// Validate reports a request that cannot be served: no decorated object.
func (r *DecoratorRequest) Validate() error {
	if isNull(r.Object) {
		return errMissing("object")
	}
	return nil
}

// Validate reports a request that cannot be served: no parent object.
func (r *CustomizeRequest) Validate() error {
	if isNull(r.Parent) {
		return errMissing("parent")
	}
	return nil
}

func errMissing(field string) error {
	return MissingObjectError{Field: field}
}

// MissingObjectError is a request without the object a hook is called
// for: Field is "parent" or "object". It is a value, so errors.Is matches
// it field for field.
type MissingObjectError struct{ Field string }

func (e MissingObjectError) Error() string {
	return fmt.Sprintf("request has no %s object", e.Field)
}

// ObjectCount is how many objects the request carries besides its parent;
// the transport caps it (server.Config.MaxObjects, serve --max-objects) so that a hook's work stays
// bounded whatever the request holds.
func (r *CompositeRequest) ObjectCount() int { return r.Children.Count() + r.Related.Count() }

// ObjectCount is how many objects the request carries besides its object;
// see CompositeRequest.ObjectCount.
func (r *DecoratorRequest) ObjectCount() int { return r.Attachments.Count() + r.Related.Count() }
