package workspace

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/formspec/formspec-hooks/internal/codec"
	"github.com/formspec/formspec-hooks/internal/objects"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// This file is the first step of a Workspace hook: what the request says,
// decoded once, each part only as far as the hooks read it.

// Child and related keys in Metacontroller's v2 object maps. The JSON tags
// of Children and Related spell the same keys; TestRequestKeys keeps them
// in step.
var (
	keyDeployment    = metacontroller.Key("apps/v1", "Deployment")
	keyService       = metacontroller.Key("v1", "Service")
	keyConfigMap     = metacontroller.Key("v1", "ConfigMap")
	keyHPA           = metacontroller.Key("autoscaling/v2", "HorizontalPodAutoscaler")
	keyPDB           = metacontroller.Key("policy/v1", "PodDisruptionBudget")
	keyClusterClass  = metacontroller.Key(v1alpha1.APIVersion, "ClusterClass")
	keyResourceClaim = metacontroller.Key(v1alpha1.APIVersion, "ResourceClaim")
)

// Request is the body Metacontroller sends to the Workspace sync and
// finalize hooks (metacontroller.CompositeRequest), decoded in one pass
// straight into the types the hooks use, each part only as far as a hook
// reads it on every call. Two parts stay as the bytes received until a
// hook reads them: the spec and each related claim, whose failure to
// decode is a decision rather than a broken request. The observed children
// are decoded as views (childViews); the rare decisions that need them
// whole (frozen.go) decode them again from the body, which Decode keeps.
//
// The controller object is not decoded: the hooks do not use it.
type Request struct {
	// Parent is the Workspace as observed; nil when the request has none.
	Parent *Parent `json:"parent"`
	// Children are the observed children, by kind.
	Children Children `json:"children"`
	// Related are the objects Customize asked for.
	Related Related `json:"related"`
	// Finalizing is true when the request comes to the finalize hook.
	Finalizing bool `json:"finalizing"`

	// body is what the request was decoded from. It is the transport's
	// buffer, valid until the hook has answered: nothing may keep it, or
	// anything decoded from it without a copy, past that.
	body []byte
}

// Decode decodes a request from its body and keeps the body for the hook
// (the hook server's transport calls it instead of codec.Unmarshal; see Request.body).
func (r *Request) Decode(body []byte) error {
	type plain Request
	if err := codec.Unmarshal(body, (*plain)(r)); err != nil {
		return err
	}
	r.body = body
	return nil
}

// Parent is a Workspace as observed, with its spec kept as written. The
// spec's passthrough fields reach the hook with whatever the API server
// let through; a spec that does not fit the Go types is a decision about
// the user's object (phase Degraded, reason InvalidSpec), so it is decoded
// on its own, after the rest of the request.
type Parent struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        ParentMeta `json:"metadata"`
	// Spec is the Workspace's spec, undecoded.
	Spec codec.RawMessage `json:"spec"`
	// Status is the status as last written, for condition transition times.
	Status statusView `json:"status,omitempty"`
}

// statusView is a WorkspaceStatus with its conditions' transition times as
// time.Time (see ParentMeta): the outer Conditions field takes the JSON
// name from the embedded one.
type statusView struct {
	v1alpha1.WorkspaceStatus
	Conditions []objects.Condition `json:"conditions,omitempty"`
}

// status is the WorkspaceStatus the view holds.
func (v *statusView) status() v1alpha1.WorkspaceStatus {
	st := v.WorkspaceStatus
	st.Conditions = objects.Conditions(v.Conditions)
	return st
}

// ParentMeta is the part of a Workspace's metadata the hooks read. The
// rest is skipped rather than decoded: above all managedFields, which
// Metacontroller sends with every object and which can outweigh the spec.
// Its times are time.Time, which the codec parses itself, where
// metav1.Time's UnmarshalJSON goes through encoding/json on every call.
type ParentMeta struct {
	Name              string            `json:"name"`
	Namespace         string            `json:"namespace"`
	UID               types.UID         `json:"uid"`
	Generation        int64             `json:"generation"`
	CreationTimestamp time.Time         `json:"creationTimestamp"`
	DeletionTimestamp *time.Time        `json:"deletionTimestamp"`
	Annotations       map[string]string `json:"annotations"`
}

// Children are the observed children of a Workspace, the five kinds the
// workspace CompositeController declares (compositecontrollers/workspace.yaml),
// each by "namespace/name". A kind Metacontroller sends but the controller
// does not declare cannot occur. A sync reads little of them: the
// Deployment's replicas, selector and status (deploymentView), and of the
// others that they exist and whether the hooks made them; the rest of each
// child is skipped, not decoded. A child that is not a JSON object makes
// the request a broken one.
type Children struct {
	Deployments map[string]*deploymentView `json:"Deployment.apps/v1"`
	Services    map[string]*serviceView    `json:"Service.v1"`
	ConfigMaps  map[string]*childView      `json:"ConfigMap.v1"`
	HPAs        map[string]*childView      `json:"HorizontalPodAutoscaler.autoscaling/v2"`
	PDBs        map[string]*childView      `json:"PodDisruptionBudget.policy/v1"`
}

// childView is an observed child of which a sync reads that it exists
// and whether the hooks made it.
type childView struct {
	Metadata struct {
		Labels managedLabel `json:"labels"`
	} `json:"metadata"`
}

// serviceView is an observed Service as far as a sync reads it: whether
// the hooks made it, and what it selects (takeover.go).
type serviceView struct {
	Metadata struct {
		Labels managedLabel `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector map[string]string `json:"selector"`
		Ports    []portView        `json:"ports"`
	} `json:"spec"`
}

// portView is a port of an observed Service as far as a sync reads it.
type portView struct {
	Name     string          `json:"name"`
	Port     int32           `json:"port"`
	Protocol corev1.Protocol `json:"protocol"`
}

// managedLabel is the one label of a child's labels that a sync reads:
// LabelManagedBy, ManagedBy on every child the hooks render. A child
// without it is the original operator's, labelled for Metacontroller by
// kubectl formspec takeover prepare (takeover.go).
type managedLabel struct {
	ManagedBy string `json:"app.kubernetes.io/managed-by"`
}

func (l managedLabel) ours() bool { return l.ManagedBy == v1alpha1.ManagedBy }

// wholeChildren are the observed children decoded in full, for freezing
// them. The keys are those of Children (TestRequestKeys).
type wholeChildren struct {
	Deployments map[string]*appsv1.Deployment                     `json:"Deployment.apps/v1"`
	Services    map[string]*corev1.Service                        `json:"Service.v1"`
	ConfigMaps  map[string]*corev1.ConfigMap                      `json:"ConfigMap.v1"`
	HPAs        map[string]*autoscalingv2.HorizontalPodAutoscaler `json:"HorizontalPodAutoscaler.autoscaling/v2"`
	PDBs        map[string]*policyv1.PodDisruptionBudget          `json:"PodDisruptionBudget.policy/v1"`
}

// whole decodes the request's observed children in full from its body.
func (r *Request) whole() (*wholeChildren, error) {
	if r.Children.count() == 0 {
		// Nothing observed, nothing to decode (and a request built in Go
		// rather than decoded has no body to decode it from).
		return &wholeChildren{}, nil
	}
	if r.body == nil {
		return nil, errors.New("the request was not decoded with Request.Decode: its children cannot be decoded whole")
	}
	var req struct {
		Children wholeChildren `json:"children"`
	}
	if err := codec.Unmarshal(r.body, &req); err != nil {
		return nil, &metacontroller.InvalidObjectError{What: "observed children", Err: err}
	}
	return &req.Children, nil
}

// deploymentView is the part of an observed Deployment that a sync reads:
// its replicas, the hashes on its pod template, and its status.
type deploymentView struct {
	Metadata struct {
		Name       string       `json:"name"`
		Namespace  string       `json:"namespace"`
		Generation int64        `json:"generation"`
		Labels     managedLabel `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Replicas *int32 `json:"replicas"`
		// Selector is immutable, so a sync sends it back as it is
		// (takeover.go).
		Selector *metav1.LabelSelector `json:"selector"`
		Template struct {
			Metadata struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		} `json:"template"`
	} `json:"spec"`
	// Status leaves out the conditions' times, which nothing reads.
	Status struct {
		ObservedGeneration int64 `json:"observedGeneration"`
		Replicas           int32 `json:"replicas"`
		UpdatedReplicas    int32 `json:"updatedReplicas"`
		ReadyReplicas      int32 `json:"readyReplicas"`
		AvailableReplicas  int32 `json:"availableReplicas"`
		// TerminatingReplicas is nil where the API server's
		// DeploymentReplicaSetTerminatingReplicas gate is off.
		TerminatingReplicas *int32 `json:"terminatingReplicas"`
		Conditions          []struct {
			Type    appsv1.DeploymentConditionType `json:"type"`
			Status  corev1.ConditionStatus         `json:"status"`
			Reason  string                         `json:"reason"`
			Message string                         `json:"message"`
		} `json:"conditions"`
	} `json:"status"`
}

// deployment is the view as an appsv1.Deployment, with the fields it
// covers.
func (v *deploymentView) deployment() *appsv1.Deployment {
	var conditions []appsv1.DeploymentCondition
	for _, c := range v.Status.Conditions {
		conditions = append(conditions, appsv1.DeploymentCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
	}
	var labels map[string]string
	if m := v.Metadata.Labels.ManagedBy; m != "" {
		labels = map[string]string{v1alpha1.LabelManagedBy: m}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: v.Metadata.Name, Namespace: v.Metadata.Namespace, Generation: v.Metadata.Generation, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: v.Spec.Replicas,
			Selector: v.Spec.Selector,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: v.Spec.Template.Metadata.Labels, Annotations: v.Spec.Template.Metadata.Annotations}},
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration:  v.Status.ObservedGeneration,
			Replicas:            v.Status.Replicas,
			UpdatedReplicas:     v.Status.UpdatedReplicas,
			ReadyReplicas:       v.Status.ReadyReplicas,
			AvailableReplicas:   v.Status.AvailableReplicas,
			TerminatingReplicas: v.Status.TerminatingReplicas,
			Conditions:          conditions,
		},
	}
}

// Related are the related objects of a Workspace: its ClusterClass and,
// in related mode (ClaimsRelated), the ResourceClaims of its namespace.
type Related struct {
	ClusterClasses map[string]*classView `json:"ClusterClass.formspec.dev/v1alpha1"`
	// ResourceClaims stay raw so that one claim that does not decode is
	// skipped instead of failing every workspace of the namespace.
	ResourceClaims map[string]codec.RawMessage `json:"ResourceClaim.formspec.dev/v1alpha1"`
}

// classView is a related ClusterClass as a sync reads it: its name and
// its spec. The rest of its metadata is skipped, managedFields above all,
// whose times would each go through encoding/json (metav1.Time).
type classView struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec v1alpha1.ClusterClassSpec `json:"spec"`
}

// Limits of one Workspace request, by kind, checked before anything is
// decoded from the objects they count. A workspace has one child of each
// kind; more are left-overs Metacontroller is deleting. It needs one
// ClusterClass and at most v1alpha1.MaxWorkspaceDatastores claims, but in
// related mode every ResourceClaim of its namespace comes along (claims
// are matched by what they say, not by name), so the claims' cap is what a
// namespace may hold: a namespace with more stops its Workspaces from syncing, with a
// 413 in Metacontroller's SyncError events.
const (
	MaxChildrenPerKind = 8
	MaxRelatedClasses  = 4
	MaxRelatedClaims   = 1024
)

// Validate reports a request that cannot be served: no parent object, or
// more objects of a kind than the limits above (a *metacontroller.LimitError).
func (r *Request) Validate() error {
	if r.Parent == nil {
		return errors.New("request has no parent object")
	}
	return errors.Join(
		metacontroller.Limit("Deployments", countOf(r.Children.Deployments), MaxChildrenPerKind),
		metacontroller.Limit("Services", countOf(r.Children.Services), MaxChildrenPerKind),
		metacontroller.Limit("ConfigMaps", countOf(r.Children.ConfigMaps), MaxChildrenPerKind),
		metacontroller.Limit("HorizontalPodAutoscalers", countOf(r.Children.HPAs), MaxChildrenPerKind),
		metacontroller.Limit("PodDisruptionBudgets", countOf(r.Children.PDBs), MaxChildrenPerKind),
		metacontroller.Limit("related ClusterClasses", countOf(r.Related.ClusterClasses), MaxRelatedClasses),
		metacontroller.Limit("related ResourceClaims", len(r.Related.ResourceClaims), MaxRelatedClaims),
	)
}

// ObjectCount is how many objects the request carries besides its parent;
// the transport caps it (server.Config.MaxObjects, serve --max-objects) so that a hook's work stays
// bounded whatever the request holds.
func (r *Request) ObjectCount() int {
	n := r.Children.count()
	for _, c := range r.Related.ClusterClasses {
		if c != nil {
			n++
		}
	}
	for _, c := range r.Related.ResourceClaims {
		if len(c) > 0 && string(c) != "null" {
			n++
		}
	}
	return n
}

// observed is everything a sync or finalize request tells about one
// workspace. A nil pointer means "not observed".
type observed struct {
	ws *v1alpha1.Workspace
	// invalidSpec says why the spec does not decode; ws.Spec is then zero
	// and nothing may be built from it.
	invalidSpec *problem
	class       *v1alpha1.ClusterClass
	// claims are the workspace's claims as the configured ClaimsSource
	// tells them (claims.go); summary says whether there were any to tell.
	claims         []*v1alpha1.ResourceClaim
	summary        summaryState
	summaryProblem *problem

	// deployment is the workspace's Deployment as far as deploymentView
	// reads it.
	deployment *appsv1.Deployment
	// hasService and hasHPA say whether the workspace's own Service and
	// HPA are observed.
	hasService, hasHPA bool
	// legacy are the observed children the hooks did not make, the
	// original operator's being taken over (takeover.go), by kind and name.
	legacy []childRef
	// serviceOurs: the observed Service is the hooks' and selects as
	// theirs do, or there is none.
	serviceOurs bool
	// servicePort is the observed Service's one TCP port (observedPort).
	servicePort *portView

	// children are every observed child, as far as a sync reads them.
	children *Children
	// whole decodes the children in full, for freezing them.
	whole func() (*wholeChildren, error)
}

// observe reads a decoded request into the observed state. A spec that
// does not decode is a decision, recorded in invalidSpec.
func observe(req *Request) *observed {
	p := req.Parent
	ws := &v1alpha1.Workspace{TypeMeta: p.TypeMeta, Status: p.Status.status(), ObjectMeta: metav1.ObjectMeta{
		Name:              p.Metadata.Name,
		Namespace:         p.Metadata.Namespace,
		UID:               p.Metadata.UID,
		Generation:        p.Metadata.Generation,
		CreationTimestamp: metav1.Time{Time: p.Metadata.CreationTimestamp},
		Annotations:       p.Metadata.Annotations,
	}}
	if d := p.Metadata.DeletionTimestamp; d != nil {
		ws.DeletionTimestamp = &metav1.Time{Time: *d}
	}
	o := &observed{ws: ws, children: &req.Children, whole: req.whole}
	if err := decodeSpec(p.Spec, &ws.Spec); err != nil {
		ws.Spec = v1alpha1.WorkspaceSpec{}
		o.invalidSpec = &problem{reason: v1alpha1.ReasonInvalidSpec, message: err.Error() + "; existing children are kept unchanged until the spec is fixed"}
	}
	if ws.Spec.ClusterClass != "" {
		if c := req.Related.ClusterClasses[ws.Spec.ClusterClass]; c != nil {
			o.class = &v1alpha1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Name: c.Metadata.Name}, Spec: c.Spec}
		}
	}
	name := metacontroller.Name(ws.Namespace, ws.Name)
	if dep := req.Children.Deployments[name]; dep != nil {
		o.deployment = dep.deployment()
	}
	o.hasService = req.Children.Services[name] != nil
	o.hasHPA = req.Children.HPAs[name] != nil
	o.legacy = legacyChildren(&req.Children)
	o.serviceOurs = serviceOurs(ws, &req.Children)
	o.servicePort = observedPort(req.Children.Services[name])
	return o
}

// decodeSpec decodes a Workspace spec, describing a failure in terms of the
// spec's own fields so that a person can fix it: the message ends up in
// the Degraded condition.
func decodeSpec(raw codec.RawMessage, spec *v1alpha1.WorkspaceSpec) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	err := codec.Unmarshal(raw, spec)
	var typeErr *codec.UnmarshalTypeError
	switch {
	case err == nil && len(spec.Datastores) > v1alpha1.MaxWorkspaceDatastores:
		// The CRD refuses this; a request that carries it anyway would
		// make every sync match that many entries against every claim.
		return fmt.Errorf("spec.datastores has %d entries, more than the %d allowed", len(spec.Datastores), v1alpha1.MaxWorkspaceDatastores)
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("spec.%s must be %s, not %s", typeErr.Field, typeErr.Type, typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Errorf("spec must be an object, not %s", typeErr.Value)
	}
	return fmt.Errorf("spec does not decode: %v", err)
}

// configMapName is the name of a workspace's ConfigMap.
func configMapName(ws string) string { return ws + "-config" }

// claimsIn decodes the related ResourceClaims, ordered by name. A claim
// that does not decode is left out rather than failing the request: the
// workspace asks for every claim in its namespace, and one broken claim
// must not stop every workspace there (the one that needed it reports its
// datastore Missing).
func claimsIn(related map[string]codec.RawMessage) []*v1alpha1.ResourceClaim {
	var out []*v1alpha1.ResourceClaim
	for _, name := range slices.Sorted(maps.Keys(related)) {
		if raw := related[name]; len(raw) > 0 && string(raw) != "null" {
			if c, err := objects.ResourceClaim(raw); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// count returns how many children are observed.
func (c *Children) count() int {
	return countOf(c.Deployments) + countOf(c.Services) + countOf(c.ConfigMaps) + countOf(c.HPAs) + countOf(c.PDBs)
}

func countOf[T any](m map[string]*T) int {
	n := 0
	for _, v := range m {
		if v != nil {
			n++
		}
	}
	return n
}
