package workspace

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	"github.com/formspec/formspec-hooks/internal/codec"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// childMeta is what every child of one workspace shares, built once per
// sync: the children refer to the same maps, which nothing changes once
// they are built (encode.go only reads them).
type childMeta struct {
	// labels are the labels on every child of the workspace.
	labels map[string]string
	// selector selects the workspace's pods. It is immutable on a
	// Deployment, so it holds only the label that can never change for a
	// workspace.
	selector *metav1.LabelSelector
}

func childMetaFor(ws *v1alpha1.Workspace) childMeta {
	return childMeta{
		labels:   labels(ws),
		selector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelWorkspace: ws.Name}},
	}
}

// object is the metadata of the workspace's child called name.
func (m childMeta) object(ws *v1alpha1.Workspace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ws.Namespace, Labels: m.labels}
}

// labels are the labels on every child and pod of a workspace.
func labels(ws *v1alpha1.Workspace) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "formspec-resource",
		"app.kubernetes.io/instance":  ws.Name,
		"app.kubernetes.io/component": "workspace",
		"app.kubernetes.io/part-of":   "formspec",
		v1alpha1.LabelManagedBy:       v1alpha1.ManagedBy,
		v1alpha1.LabelWorkspace:       ws.Name,
		v1alpha1.LabelClusterClass:    ws.Spec.ClusterClass,
	}
}

// buildConfigMap renders spec.config as keys and spec.cache as one JSON
// value under FORMSPEC_CACHE; the Deployment takes both as environment.
func buildConfigMap(ws *v1alpha1.Workspace, m childMeta) (*corev1.ConfigMap, error) {
	data := maps.Clone(ws.Spec.Config)
	if data == nil {
		data = map[string]string{}
	}
	if len(ws.Spec.Cache) > 0 {
		cache, err := codec.Marshal(ws.Spec.Cache)
		if err != nil {
			return nil, fmt.Errorf("cannot encode spec.cache: %w", err)
		}
		data["FORMSPEC_CACHE"] = string(cache)
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: m.object(ws, configMapName(ws.Name)),
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

// buildService renders the workspace's Service. kept, when set, is the
// port the observed Service has (observedPort).
func buildService(ws *v1alpha1.Workspace, m childMeta, kept *portView) *corev1.Service {
	port := corev1.ServicePort{Name: "http", Port: servicePort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}
	if kept != nil {
		port.Name, port.Port = kept.Name, kept.Port
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: m.object(ws, ws.Name),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: m.selector.MatchLabels,
			Ports:    []corev1.ServicePort{port},
		},
	}
}

// observedPort is the one TCP port of the observed Service, when it has
// exactly one: its name and number stay. Clients dial the number, and
// kube-proxy knows a port's endpoints by its name: a Service whose port is
// renamed has no endpoints under the new name until the EndpointSlice
// follows, a second or so in which every new connection is refused. The
// hooks' own Service keeps what it has; one of the original operator's
// keeps the port its clients use (takeover.go). The target is always the
// pods' http port, which every pod the hooks render names.
func observedPort(svc *serviceView) *portView {
	if svc == nil || len(svc.Spec.Ports) != 1 || cmp.Or(svc.Spec.Ports[0].Protocol, corev1.ProtocolTCP) != corev1.ProtocolTCP {
		return nil
	}
	return &svc.Spec.Ports[0]
}

func buildHPA(ws *v1alpha1.Workspace, s scaling, m childMeta) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: m.object(ws, ws.Name),
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
func buildPDB(ws *v1alpha1.Workspace, s scaling, m childMeta) *policyv1.PodDisruptionBudget {
	if s.idle {
		return nil
	}
	spec := policyv1.PodDisruptionBudgetSpec{Selector: m.selector}
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
		ObjectMeta: m.object(ws, ws.Name),
		Spec:       spec,
	}
}
