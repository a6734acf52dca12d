package codec

import (
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// fullRequest is a Workspace sync request decoded in full into k8s.io/api
// types, so that every custom unmarshaler (Time, Quantity, IntOrString,
// RawExtension through the pod spec) runs and can be compared.
// workspace.Request, what the server decodes, reads less of each child.
type fullRequest struct {
	Parent   *v1alpha1.Workspace `json:"parent"`
	Children struct {
		Deployments map[string]*appsv1.Deployment                     `json:"Deployment.apps/v1"`
		Services    map[string]*corev1.Service                        `json:"Service.v1"`
		ConfigMaps  map[string]*corev1.ConfigMap                      `json:"ConfigMap.v1"`
		HPAs        map[string]*autoscalingv2.HorizontalPodAutoscaler `json:"HorizontalPodAutoscaler.autoscaling/v2"`
		PDBs        map[string]*policyv1.PodDisruptionBudget          `json:"PodDisruptionBudget.policy/v1"`
	} `json:"children"`
	Related struct {
		ClusterClasses map[string]*v1alpha1.ClusterClass  `json:"ClusterClass.formspec.dev/v1alpha1"`
		ResourceClaims map[string]*v1alpha1.ResourceClaim `json:"ResourceClaim.formspec.dev/v1alpha1"`
	} `json:"related"`
	Finalizing bool `json:"finalizing"`
}
