package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
)

// This file is the first step of a Workspace hook: what the request says,
// decoded once into typed objects.

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
// straight into the types the hooks use: no object is held as raw bytes and
// decoded a second time, except the two parts whose failure is a decision
// rather than a broken request (Parent.Spec and the related claims).
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
}

// Parent is a Workspace as observed, with its spec kept as written. The
// spec's passthrough fields reach the hook with whatever the API server
// let through; a spec that does not fit the Go types is a decision about
// the user's object (phase Degraded, reason InvalidSpec), so it is decoded
// on its own, after the rest of the request.
type Parent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the Workspace's spec, undecoded.
	Spec json.RawMessage `json:"spec"`
	// Status is the status as last written, for condition transition times.
	Status v1alpha1.WorkspaceStatus `json:"status,omitempty"`
}

// Children are the observed children of a Workspace, the five kinds the
// workspace CompositeController declares (compositecontrollers/workspace.yaml),
// each by "namespace/name". A kind Metacontroller sends but the controller
// does not declare cannot occur.
type Children struct {
	Deployments map[string]*appsv1.Deployment                     `json:"Deployment.apps/v1"`
	Services    map[string]*corev1.Service                        `json:"Service.v1"`
	ConfigMaps  map[string]*corev1.ConfigMap                      `json:"ConfigMap.v1"`
	HPAs        map[string]*autoscalingv2.HorizontalPodAutoscaler `json:"HorizontalPodAutoscaler.autoscaling/v2"`
	PDBs        map[string]*policyv1.PodDisruptionBudget          `json:"PodDisruptionBudget.policy/v1"`
}

// Related are the related objects of a Workspace: its ClusterClass and the
// ResourceClaims of its namespace.
type Related struct {
	ClusterClasses map[string]*v1alpha1.ClusterClass `json:"ClusterClass.formspec.dev/v1alpha1"`
	// ResourceClaims stay raw so that one claim that does not decode is
	// skipped instead of failing every workspace of the namespace.
	ResourceClaims map[string]json.RawMessage `json:"ResourceClaim.formspec.dev/v1alpha1"`
}

// Validate reports a request that cannot be served: no parent object.
func (r *Request) Validate() error {
	if r.Parent == nil {
		return errors.New("request has no parent object")
	}
	return nil
}

// observed is everything a sync or finalize request tells about one
// workspace. A nil pointer means "not observed".
type observed struct {
	ws *v1alpha1.Workspace
	// invalidSpec says why the spec does not decode; ws.Spec is then zero
	// and nothing may be built from it.
	invalidSpec *problem
	class       *v1alpha1.ClusterClass
	claims      []*v1alpha1.ResourceClaim

	// The workspace's own children, by the names the hooks give them.
	deployment *appsv1.Deployment
	service    *corev1.Service
	configMap  *corev1.ConfigMap
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	pdb        *policyv1.PodDisruptionBudget

	// children are every observed child, for teardown and freezing.
	children *Children
}

// observe reads a decoded request into the observed state. It fails only
// when the request is not a Workspace request at all; a spec that does not
// decode is recorded in invalidSpec.
func observe(req *Request) *observed {
	p := req.Parent
	ws := &v1alpha1.Workspace{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta, Status: p.Status}
	o := &observed{ws: ws, children: &req.Children}
	if err := decodeSpec(p.Spec, &ws.Spec); err != nil {
		ws.Spec = v1alpha1.WorkspaceSpec{}
		o.invalidSpec = &problem{reason: "InvalidSpec", message: err.Error() + "; existing children are kept unchanged until the spec is fixed"}
	}
	if ws.Spec.ClusterClass != "" {
		o.class = req.Related.ClusterClasses[ws.Spec.ClusterClass]
	}
	o.claims = claimsIn(req.Related.ResourceClaims)
	name := metacontroller.Name(ws.Namespace, ws.Name)
	o.deployment = req.Children.Deployments[name]
	o.service = req.Children.Services[name]
	o.configMap = req.Children.ConfigMaps[metacontroller.Name(ws.Namespace, configMapName(ws.Name))]
	o.hpa = req.Children.HPAs[name]
	o.pdb = req.Children.PDBs[name]
	return o
}

// decodeSpec decodes a Workspace spec, describing a failure in terms of the
// spec's own fields so that a person can fix it: the message ends up in
// the Degraded condition.
func decodeSpec(raw json.RawMessage, spec *v1alpha1.WorkspaceSpec) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	err := json.Unmarshal(raw, spec)
	var typeErr *json.UnmarshalTypeError
	switch {
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
func claimsIn(related map[string]json.RawMessage) []*v1alpha1.ResourceClaim {
	var out []*v1alpha1.ResourceClaim
	for _, name := range slices.Sorted(maps.Keys(related)) {
		c := &v1alpha1.ResourceClaim{}
		if raw := related[name]; len(raw) > 0 && string(raw) != "null" && json.Unmarshal(raw, c) == nil {
			out = append(out, c)
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
