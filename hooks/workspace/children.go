package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	json "github.com/goccy/go-json"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// labels are the labels on every child and pod of a workspace.
func labels(ws *v1alpha1.Workspace) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       "formspec-resource",
		"app.kubernetes.io/instance":   ws.Name,
		"app.kubernetes.io/component":  "workspace",
		"app.kubernetes.io/part-of":    "formspec",
		"app.kubernetes.io/managed-by": "formspec-hooks",
		LabelWorkspace:                 ws.Name,
		LabelClusterClass:              ws.Spec.ClusterClass,
	}
}

// selector selects a workspace's pods. It is immutable on a Deployment, so
// it holds only the label that can never change for a workspace.
func selector(ws *v1alpha1.Workspace) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{LabelWorkspace: ws.Name}}
}

func objectMeta(ws *v1alpha1.Workspace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ws.Namespace, Labels: labels(ws)}
}

// buildConfigMap renders spec.config as keys and spec.cache as one JSON
// value under FORMSPEC_CACHE; the Deployment takes both as environment.
func buildConfigMap(ws *v1alpha1.Workspace) (*corev1.ConfigMap, error) {
	data := maps.Clone(ws.Spec.Config)
	if data == nil {
		data = map[string]string{}
	}
	if len(ws.Spec.Cache) > 0 {
		cache, err := json.Marshal(ws.Spec.Cache)
		if err != nil {
			return nil, fmt.Errorf("cannot encode spec.cache: %w", err)
		}
		data["FORMSPEC_CACHE"] = string(cache)
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: objectMeta(ws, configMapName(ws.Name)),
		Data:       data,
	}, nil
}

// hashData digests a string map in key order.
func hashData(data map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fmt.Fprintf(h, "%d:%s=%d:%s\n", len(k), k, len(data[k]), data[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

func buildService(ws *v1alpha1.Workspace) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: objectMeta(ws, ws.Name),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector(ws).MatchLabels,
			Ports: []corev1.ServicePort{{
				Name:       "http",
				Port:       servicePort,
				TargetPort: intstr.FromString("http"),
				Protocol:   corev1.ProtocolTCP,
			}},
		},
	}
}

func buildHPA(ws *v1alpha1.Workspace, s scaling) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: objectMeta(ws, ws.Name),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: ws.Name},
			MinReplicas:    ptr.To(s.min),
			MaxReplicas:    s.max,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(s.targetCPU)},
				},
			}},
		},
	}
}

// buildPDB follows spec.disruptionBudget, or allows one pod down at a time
// when the class runs two or more. An idle workspace has no pods to protect.
func buildPDB(ws *v1alpha1.Workspace, s scaling) *policyv1.PodDisruptionBudget {
	if s.idle {
		return nil
	}
	spec := policyv1.PodDisruptionBudgetSpec{Selector: selector(ws)}
	switch db := ws.Spec.DisruptionBudget; {
	case db != nil && db.MinAvailable != nil:
		spec.MinAvailable = ptr.To(*db.MinAvailable)
	case db != nil && db.MaxUnavailable != nil:
		spec.MaxUnavailable = ptr.To(*db.MaxUnavailable)
	case s.min >= 2:
		spec.MaxUnavailable = ptr.To(intstr.FromInt32(1))
	default:
		return nil
	}
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: objectMeta(ws, ws.Name),
		Spec:       spec,
	}
}
