package workspace

import (
	"cmp"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/metacontroller"
)

// This file is the last step of a Workspace hook: the decision as the
// response Metacontroller reads. The transport encodes that response once;
// each child goes straight into the body through a wire type below.
//
// The wire types exist because encoding a k8s.io/api object as it is adds
// what a desired object must not carry: "creationTimestamp": null in every
// ObjectMeta (metav1.Time is a struct, so omitempty cannot drop it), the
// zero status ({"loadBalancer":{}} for a Service), and metadata the API
// server owns when a child is frozen as observed. Metacontroller would copy
// all of it into every apply. Each wire type keeps the object's own spec
// (or data) type and replaces only the envelope.

// response is the hook's answer for d.
func (d *desired) response() *metacontroller.CompositeResponse {
	children := make([]any, len(d.children))
	for i, c := range d.children {
		children[i] = wire(c)
	}
	return &metacontroller.CompositeResponse{
		Status:             d.status,
		Children:           children,
		ResyncAfterSeconds: d.resync,
		Finalized:          d.finalized,
	}
}

// wireMeta is the metadata of a desired object.
type wireMeta struct {
	Name        string            `json:"name,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// metaOf keeps the fields of m a desired object may set. The last-applied
// annotation is Metacontroller's own and never sent back.
func metaOf(m *metav1.ObjectMeta) *wireMeta {
	annotations := m.Annotations
	if _, ok := annotations[lastAppliedAnnotation]; ok {
		annotations = make(map[string]string, len(m.Annotations))
		for k, v := range m.Annotations {
			if k != lastAppliedAnnotation {
				annotations[k] = v
			}
		}
	}
	if m.Name == "" && m.Namespace == "" && len(m.Labels) == 0 && len(annotations) == 0 {
		return nil
	}
	return &wireMeta{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels, Annotations: annotations}
}

type wireConfigMap struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   *wireMeta         `json:"metadata,omitempty"`
	Immutable  *bool             `json:"immutable,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
}

// wireObject is a desired child whose spec is its k8s.io/api type as it
// is, or wireDeploymentSpec.
type wireObject[S any] struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Metadata   *wireMeta `json:"metadata,omitempty"`
	Spec       S         `json:"spec"`
}

// wireDeploymentSpec is appsv1.DeploymentSpec with its pod template's
// metadata as a desired object's: the outer Template field wins over the
// embedded one of the same JSON name.
type wireDeploymentSpec struct {
	appsv1.DeploymentSpec
	Template wirePodTemplate `json:"template"`
}

type wirePodTemplate struct {
	Metadata *wireMeta      `json:"metadata,omitempty"`
	Spec     corev1.PodSpec `json:"spec"`
}

// wire wraps one child for encoding. A child frozen from its last-applied
// annotation is already in wire form. An observed child's apiVersion and
// kind may be empty (the API server leaves them out of list items), and a
// desired object must name its kind, hence the cmp.Or defaults.
func wire(child any) any {
	switch c := child.(type) {
	case metacontroller.Object:
		return c
	case *corev1.ConfigMap:
		return &wireConfigMap{APIVersion: cmp.Or(c.APIVersion, "v1"), Kind: cmp.Or(c.Kind, "ConfigMap"), Metadata: metaOf(&c.ObjectMeta), Immutable: c.Immutable, Data: c.Data, BinaryData: c.BinaryData}
	case *appsv1.Deployment:
		return &wireObject[wireDeploymentSpec]{APIVersion: cmp.Or(c.APIVersion, "apps/v1"), Kind: cmp.Or(c.Kind, "Deployment"), Metadata: metaOf(&c.ObjectMeta), Spec: wireDeploymentSpec{
			DeploymentSpec: c.Spec,
			Template:       wirePodTemplate{Metadata: metaOf(&c.Spec.Template.ObjectMeta), Spec: c.Spec.Template.Spec},
		}}
	case *corev1.Service:
		return &wireObject[corev1.ServiceSpec]{APIVersion: cmp.Or(c.APIVersion, "v1"), Kind: cmp.Or(c.Kind, "Service"), Metadata: metaOf(&c.ObjectMeta), Spec: c.Spec}
	case *autoscalingv2.HorizontalPodAutoscaler:
		return &wireObject[autoscalingv2.HorizontalPodAutoscalerSpec]{APIVersion: cmp.Or(c.APIVersion, "autoscaling/v2"), Kind: cmp.Or(c.Kind, "HorizontalPodAutoscaler"), Metadata: metaOf(&c.ObjectMeta), Spec: c.Spec}
	case *policyv1.PodDisruptionBudget:
		return &wireObject[policyv1.PodDisruptionBudgetSpec]{APIVersion: cmp.Or(c.APIVersion, "policy/v1"), Kind: cmp.Or(c.Kind, "PodDisruptionBudget"), Metadata: metaOf(&c.ObjectMeta), Spec: c.Spec}
	}
	// decide.go and frozen.go produce only the kinds above.
	panic(fmt.Sprintf("workspace: cannot encode a %T child", child))
}
