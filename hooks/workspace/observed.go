package workspace

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"maps"
	"slices"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
)

// Child keys in Metacontroller's v2 object maps.
var (
	keyDeployment    = metacontroller.Key("apps/v1", "Deployment")
	keyService       = metacontroller.Key("v1", "Service")
	keyConfigMap     = metacontroller.Key("v1", "ConfigMap")
	keyHPA           = metacontroller.Key("autoscaling/v2", "HorizontalPodAutoscaler")
	keyPDB           = metacontroller.Key("policy/v1", "PodDisruptionBudget")
	keyClusterClass  = metacontroller.Key(v1alpha1.APIVersion, "ClusterClass")
	keyResourceClaim = metacontroller.Key(v1alpha1.APIVersion, "ResourceClaim")
)

// observed is everything a sync or finalize request tells about one
// workspace, decoded into typed objects. A nil pointer means "not observed".
type observed struct {
	ws     *v1alpha1.Workspace
	class  *v1alpha1.ClusterClass
	claims []*v1alpha1.ResourceClaim

	deployment *appsv1.Deployment
	service    *corev1.Service
	configMap  *corev1.ConfigMap
	hpa        *autoscalingv2.HorizontalPodAutoscaler
	pdb        *policyv1.PodDisruptionBudget

	// raw children by key and name, for teardown and freezing.
	children metacontroller.ObjectMap
}

// decode reads a CompositeRequest into typed objects. An error means the
// request itself is broken (an object that does not decode), which is the
// caller's bug, not a decision about the user's workspace.
func decode(req *metacontroller.CompositeRequest) (*observed, error) {
	ws, err := decodeWorkspace(req.Parent)
	if err != nil {
		return nil, err
	}
	o := &observed{ws: ws, children: req.Children}
	ns, name := ws.Namespace, ws.Name
	if ws.Spec.ClusterClass != "" {
		if o.class, err = metacontroller.Get[v1alpha1.ClusterClass](req.Related, keyClusterClass, ws.Spec.ClusterClass); err != nil {
			return nil, err
		}
	}
	o.claims = claimsIn(req.Related)
	if o.deployment, err = metacontroller.Get[appsv1.Deployment](req.Children, keyDeployment, metacontroller.Name(ns, name)); err != nil {
		return nil, err
	}
	if o.service, err = metacontroller.Get[corev1.Service](req.Children, keyService, metacontroller.Name(ns, name)); err != nil {
		return nil, err
	}
	if o.configMap, err = metacontroller.Get[corev1.ConfigMap](req.Children, keyConfigMap, metacontroller.Name(ns, configMapName(name))); err != nil {
		return nil, err
	}
	if o.hpa, err = metacontroller.Get[autoscalingv2.HorizontalPodAutoscaler](req.Children, keyHPA, metacontroller.Name(ns, name)); err != nil {
		return nil, err
	}
	if o.pdb, err = metacontroller.Get[policyv1.PodDisruptionBudget](req.Children, keyPDB, metacontroller.Name(ns, name)); err != nil {
		return nil, err
	}
	return o, nil
}

// configMapName is the name of a workspace's ConfigMap.
func configMapName(ws string) string { return ws + "-config" }

// claimsIn decodes the related ResourceClaims, ordered by name. A claim
// that does not decode is left out rather than failing the request: the
// workspace asks for every claim in its namespace, and one broken claim
// must not stop every workspace there (the one that needed it reports its
// datastore Missing).
func claimsIn(related metacontroller.ObjectMap) []*v1alpha1.ResourceClaim {
	var out []*v1alpha1.ResourceClaim
	for _, name := range slices.Sorted(maps.Keys(related[keyResourceClaim])) {
		if c, err := metacontroller.Get[v1alpha1.ResourceClaim](related, keyResourceClaim, name); err == nil && c != nil {
			out = append(out, c)
		}
	}
	return out
}
