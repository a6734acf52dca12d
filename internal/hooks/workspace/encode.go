package workspace

import (
	"cmp"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
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
type wireDeploymentSpec[P any] struct {
	appsv1.DeploymentSpec
	Template wirePodTemplate[P] `json:"template"`
}

// wirePodTemplate is a pod template: its spec is a wirePodSpec for a
// Deployment buildDeployment made, a corev1.PodSpec for an observed one.
type wirePodTemplate[P any] struct {
	Metadata *wireMeta `json:"metadata,omitempty"`
	Spec     P         `json:"spec"`
}

// wirePodSpec is the part of corev1.PodSpec that buildDeployment sets,
// with the same names, tags and order, so that it encodes to the same
// bytes. corev1.PodSpec has over forty fields and its container over
// twenty; the codec looks at each of them on every answer, which costs
// where calls find the processor's caches cold. TestWireSpecs fails when
// buildDeployment sets a field these types leave out.
type wirePodSpec struct {
	Volumes                      []corev1.Volume                   `json:"volumes,omitempty"`
	Containers                   []wireContainer                   `json:"containers"`
	NodeSelector                 map[string]string                 `json:"nodeSelector,omitempty"`
	ServiceAccountName           string                            `json:"serviceAccountName,omitempty"`
	AutomountServiceAccountToken *bool                             `json:"automountServiceAccountToken,omitempty"`
	SecurityContext              *corev1.PodSecurityContext        `json:"securityContext,omitempty"`
	ImagePullSecrets             []corev1.LocalObjectReference     `json:"imagePullSecrets,omitempty"`
	Affinity                     *corev1.Affinity                  `json:"affinity,omitempty"`
	Tolerations                  []corev1.Toleration               `json:"tolerations,omitempty"`
	PriorityClassName            string                            `json:"priorityClassName,omitempty"`
	TopologySpreadConstraints    []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
}

// wireContainer is the part of corev1.Container that buildDeployment sets
// (see wirePodSpec).
type wireContainer struct {
	Name            string                      `json:"name"`
	Image           string                      `json:"image,omitempty"`
	Ports           []corev1.ContainerPort      `json:"ports,omitempty"`
	EnvFrom         []corev1.EnvFromSource      `json:"envFrom,omitempty"`
	Env             []corev1.EnvVar             `json:"env,omitempty"`
	Resources       corev1.ResourceRequirements `json:"resources,omitempty"`
	VolumeMounts    []corev1.VolumeMount        `json:"volumeMounts,omitempty"`
	SecurityContext *corev1.SecurityContext     `json:"securityContext,omitempty"`
}

func shortPod(s *corev1.PodSpec) wirePodSpec {
	containers := make([]wireContainer, len(s.Containers))
	for i, c := range s.Containers {
		containers[i] = wireContainer{Name: c.Name, Image: c.Image, Ports: c.Ports, EnvFrom: c.EnvFrom, Env: c.Env,
			Resources: c.Resources, VolumeMounts: c.VolumeMounts, SecurityContext: c.SecurityContext}
	}
	return wirePodSpec{
		Volumes:                      s.Volumes,
		Containers:                   containers,
		NodeSelector:                 s.NodeSelector,
		ServiceAccountName:           s.ServiceAccountName,
		AutomountServiceAccountToken: s.AutomountServiceAccountToken,
		SecurityContext:              s.SecurityContext,
		ImagePullSecrets:             s.ImagePullSecrets,
		Affinity:                     s.Affinity,
		Tolerations:                  s.Tolerations,
		PriorityClassName:            s.PriorityClassName,
		TopologySpreadConstraints:    s.TopologySpreadConstraints,
	}
}

// wireServiceSpec is the part of corev1.ServiceSpec that buildService
// sets (see wirePodSpec; TestWireSpecs).
type wireServiceSpec struct {
	Ports    []wireServicePort  `json:"ports,omitempty"`
	Selector map[string]string  `json:"selector,omitempty"`
	Type     corev1.ServiceType `json:"type,omitempty"`
}

// wireServicePort is the part of corev1.ServicePort that buildService
// sets. Its targetPort is the int32 or string the IntOrString holds, which
// the codec writes itself: IntOrString's MarshalJSON goes through
// encoding/json.
type wireServicePort struct {
	Name       string          `json:"name,omitempty"`
	Protocol   corev1.Protocol `json:"protocol,omitempty"`
	Port       int32           `json:"port"`
	TargetPort any             `json:"targetPort,omitempty"`
}

func shortService(s *corev1.ServiceSpec) wireServiceSpec {
	ports := make([]wireServicePort, len(s.Ports))
	for i, p := range s.Ports {
		var target any = p.TargetPort.IntVal
		if p.TargetPort.Type == intstr.String {
			target = p.TargetPort.StrVal
		}
		ports[i] = wireServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: target}
	}
	return wireServiceSpec{Ports: ports, Selector: s.Selector, Type: s.Type}
}

// wire wraps one child for encoding. A child frozen from its last-applied
// annotation is already in wire form. A Deployment or Service that
// buildDeployment or buildService made goes in its short form; every
// other child, and every child kept as observed (observedChild), with the
// spec type of its kind as it is. An observed child's apiVersion and kind
// may be empty (the API server leaves them out of list items), and a
// desired object must name its kind, hence the cmp.Or defaults.
func wire(child any) any {
	switch c := child.(type) {
	case metacontroller.Object:
		return c
	case observedChild:
		return wireWhole(c.obj)
	case *appsv1.Deployment:
		return wireDeployment(c, shortPod(&c.Spec.Template.Spec))
	case *corev1.Service:
		return wireService(c, shortService(&c.Spec))
	}
	return wireWhole(child)
}

// wireDeployment is the wire form of a Deployment with pod spec p.
func wireDeployment[P any](c *appsv1.Deployment, p P) any {
	return &wireObject[wireDeploymentSpec[P]]{APIVersion: cmp.Or(c.APIVersion, "apps/v1"), Kind: cmp.Or(c.Kind, "Deployment"), Metadata: metaOf(&c.ObjectMeta), Spec: wireDeploymentSpec[P]{
		DeploymentSpec: c.Spec,
		Template:       wirePodTemplate[P]{Metadata: metaOf(&c.Spec.Template.ObjectMeta), Spec: p},
	}}
}

// wireService is the wire form of a Service with spec s.
func wireService[S any](c *corev1.Service, s S) any {
	return &wireObject[S]{APIVersion: cmp.Or(c.APIVersion, "v1"), Kind: cmp.Or(c.Kind, "Service"), Metadata: metaOf(&c.ObjectMeta), Spec: s}
}

// observedChild is a child kept as observed (frozen.go): it may hold any
// field of its type, so it is never sent in a short form.
type observedChild struct{ obj any }

// wireWhole wraps a child with its kind's spec type as it is.
func wireWhole(child any) any {
	switch c := child.(type) {
	case *corev1.ConfigMap:
		return &wireConfigMap{APIVersion: cmp.Or(c.APIVersion, "v1"), Kind: cmp.Or(c.Kind, "ConfigMap"), Metadata: metaOf(&c.ObjectMeta), Immutable: c.Immutable, Data: c.Data, BinaryData: c.BinaryData}
	case *appsv1.Deployment:
		return wireDeployment(c, c.Spec.Template.Spec)
	case *corev1.Service:
		return wireService(c, c.Spec)
	case *autoscalingv2.HorizontalPodAutoscaler:
		return &wireObject[autoscalingv2.HorizontalPodAutoscalerSpec]{APIVersion: cmp.Or(c.APIVersion, "autoscaling/v2"), Kind: cmp.Or(c.Kind, "HorizontalPodAutoscaler"), Metadata: metaOf(&c.ObjectMeta), Spec: c.Spec}
	case *policyv1.PodDisruptionBudget:
		return &wireObject[policyv1.PodDisruptionBudgetSpec]{APIVersion: cmp.Or(c.APIVersion, "policy/v1"), Kind: cmp.Or(c.Kind, "PodDisruptionBudget"), Metadata: metaOf(&c.ObjectMeta), Spec: c.Spec}
	}
	// decide.go and frozen.go produce only the kinds above.
	panic(fmt.Sprintf("workspace: cannot encode a %T child", child))
}
