// Package original makes a Workspace's children as the original FormSpec
// operator made them (the controller-runtime operator this project
// replaces; ../shared/seeds), for the tests of the takeover
// (docs/migrating.md): a Deployment, a Service and a ConfigMap named after
// the Workspace, and an HPA for an auto-scaling class, each with a
// controller owner reference to the Workspace, the operator's own labels
// and selector (app: <workspace>), its own container name, and the
// datastore's endpoint Secret as environment, the way it injected
// credentials. Each is created with the operator's field manager, as a
// controller-runtime client's Create records it.
package original

import (
	"encoding/json"
	"fmt"
	"net/http"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// FieldManager is the field manager of the original operator's writes.
const FieldManager = "formspec-operator"

// Container is the name of the original operator's container.
const Container = "workspace"

// Workspace is what the original operator's children are made from.
type Workspace struct {
	Namespace, Name string
	UID             types.UID
	// Image is the workspace image with its tag.
	Image string
	// Replicas is the Deployment's count.
	Replicas int32
	// MaxReplicas, when above zero, gives the workspace an HPA from
	// Replicas to MaxReplicas.
	MaxReplicas int32
	// EndpointSecret and EnvPrefix: the datastore's endpoint Secret, given
	// to the pods as environment under the prefix, as the original
	// operator injected credentials.
	EndpointSecret, EnvPrefix string
	// ControlClusterURL is handed to the pods.
	ControlClusterURL string
	// Config is the ConfigMap's data.
	Config map[string]string
}

// Labels are the original operator's labels on every child and pod, and
// its selector.
func (w Workspace) Labels() map[string]string { return map[string]string{"app": w.Name} }

func (w Workspace) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: w.Namespace, Labels: w.Labels(), OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1alpha1.APIVersion, Kind: "Workspace", Name: w.Name, UID: w.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}}
}

// Children are the original operator's children of the workspace.
func (w Workspace) Children() []any {
	envFrom := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.Name}}}}
	if w.EndpointSecret != "" {
		envFrom = append(envFrom, corev1.EnvFromSource{Prefix: w.EnvPrefix, SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: w.EndpointSecret}}})
	}
	out := []any{
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: w.meta(w.Name), Data: w.Config},
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: w.meta(w.Name),
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(w.Replicas),
				Selector: &metav1.LabelSelector{MatchLabels: w.Labels()},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: w.Labels()},
					Spec: corev1.PodSpec{
						AutomountServiceAccountToken: ptr.To(false),
						SecurityContext:              &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
						Containers: []corev1.Container{{
							Name:  Container,
							Image: w.Image,
							Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
							Env: []corev1.EnvVar{
								{Name: "CONTROL_CLUSTER_URL", Value: w.ControlClusterURL},
								{Name: "WORKSPACE_ID", Value: w.Name},
								{Name: "OPERATOR", Value: "original"},
							},
							EnvFrom: envFrom,
							SecurityContext: &corev1.SecurityContext{
								AllowPrivilegeEscalation: ptr.To(false),
								Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
						}},
					},
				},
			},
		},
		&corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: w.meta(w.Name),
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: w.Labels(),
				Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
			},
		},
	}
	if w.MaxReplicas > 0 {
		out = append(out, &autoscalingv2.HorizontalPodAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
			ObjectMeta: w.meta(w.Name),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: w.Name},
				MinReplicas:    ptr.To(w.Replicas),
				MaxReplicas:    w.MaxReplicas,
				Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
				}}},
			},
		})
	}
	return out
}

// Create creates obj as the original operator did: a POST under its field
// manager. It returns the stored object.
func Create(c *controlplane.Client, obj any) (controlplane.Object, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var o controlplane.Object
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	meta := o["metadata"].(map[string]any)
	delete(meta, "creationTimestamp")
	delete(o, "status")
	ns, _ := meta["namespace"].(string)
	path, err := c.ResourcePath(o["apiVersion"].(string), o["kind"].(string), ns, "")
	if err != nil {
		return nil, err
	}
	out, err := c.Do(http.MethodPost, path+"?fieldManager="+FieldManager, o)
	if err != nil {
		return nil, fmt.Errorf("create %s %s/%s as the original operator: %w", o["kind"], ns, meta["name"], err)
	}
	var created controlplane.Object
	return created, json.Unmarshal(out, &created)
}

// Status is a Workspace status as the original operator wrote it.
func Status(ready bool) map[string]any {
	phase, status := "Progressing", "False"
	if ready {
		phase, status = "Ready", "True"
	}
	return map[string]any{"phase": phase, "conditions": []any{map[string]any{
		"type": "Ready", "status": status, "reason": "DeploymentAvailable", "message": "reconciled by formspec-operator",
		"lastTransitionTime": "2025-11-02T10:01:00Z",
	}}}
}
