package workspace

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"

	"github.com/formspec/formspec-hooks/internal/codec"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// podInputs is what the Deployment is built from besides the workspace and
// its class, each computed before the Deployment.
type podInputs struct {
	scaling  scaling
	bindings []binding
	// configHash digests the ConfigMap's data.
	configHash string
	// artifactHash is the binary hash for the pod template, or empty.
	artifactHash string
	// meta is what the workspace's children share.
	meta childMeta
	// selector is the Deployment's selector, and carry the labels every
	// pod carries for it (deploymentSelector).
	selector *metav1.LabelSelector
	carry    map[string]string
}

// revisionHistoryLimit is how many old ReplicaSets, their pods gone, a
// workspace Deployment keeps (the API's default is 10). Each holds an old
// pod template whole: earlier images, environments and credentials hashes,
// which, while a claim's hash was an unkeyed digest of its credentials, let
// whoever can read ReplicaSets test password guesses offline. The history
// serves only kubectl rollout undo, and under Metacontroller the next sync
// applies the template the hook renders again: a workspace is rolled back
// by changing the Workspace.
//
// Not 0, which would keep no old template at all: the Deployment
// controller (cleanupDeployment, Kubernetes 1.37) deletes an old
// ReplicaSet once its status.replicas is 0, a count that leaves out pods
// still shutting down. With 0 the ReplicaSet a rollout just left would go
// while its pods drain, and their count with it from the Deployment's
// status.terminatingReplicas, which templateRolledOut reads so that
// status.artifactHash waits for the last old pod. With 1 that ReplicaSet
// stays until the next rollout. The limit never removes a ReplicaSet that
// still wants or runs pods, and it is outside the pod template, so setting
// or changing it rolls no pod.
const revisionHistoryLimit int32 = 1

// buildDeployment renders the workspace's Deployment: its image, environment,
// secure defaults, placement, credentials and rollout hashes.
func (h *Hooks) buildDeployment(ws *v1alpha1.Workspace, class *v1alpha1.ClusterClass, d podInputs) (*appsv1.Deployment, error) {
	pod := ws.Spec.Pod

	podLabels := maps.Clone(pod.Labels)
	if podLabels == nil {
		podLabels = map[string]string{}
	}
	// Our labels win: the selector and the pod hooks depend on them. The
	// class stays off the pods: a label change in the template rolls every
	// pod, and moving a workspace to another class must not restart it
	// unless something that reaches the pods changes.
	for k, v := range d.meta.labels {
		if k != v1alpha1.LabelClusterClass {
			podLabels[k] = v
		}
	}
	// The selector's labels win over everything: a pod without them would
	// not be the Deployment's (the original operator's own selector, kept
	// through its takeover, may use any label).
	maps.Copy(podLabels, d.carry)

	annotations := maps.Clone(pod.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[v1alpha1.AnnotationConfigHash] = d.configHash
	if hash := credentialsHash(d.bindings); hash != "" {
		annotations[v1alpha1.AnnotationCredentialsHash] = hash
	}
	if d.artifactHash != "" {
		annotations[v1alpha1.AnnotationArtifactBinaryHash] = d.artifactHash
	}

	container := corev1.Container{
		Name:         containerName,
		Image:        h.image(ws),
		Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: containerPort, Protocol: corev1.ProtocolTCP}},
		Env:          h.env(ws, d.bindings),
		EnvFrom:      envFrom(ws, d.bindings),
		Resources:    ws.Spec.Resources,
		VolumeMounts: volumeMounts(ws, d.bindings),
	}
	csc, err := overlay(defaultContainerSecurityContext(), pod.ContainerSecurityContext)
	if err != nil {
		return nil, fmt.Errorf("cannot apply spec.pod.containerSecurityContext: %w", err)
	}
	container.SecurityContext = csc
	psc, err := overlay(defaultPodSecurityContext(), pod.SecurityContext)
	if err != nil {
		return nil, fmt.Errorf("cannot apply spec.pod.securityContext: %w", err)
	}

	spec := corev1.PodSpec{
		Containers:                []corev1.Container{container},
		Volumes:                   volumes(ws, d.bindings),
		SecurityContext:           psc,
		NodeSelector:              nodeSelector(ws, class),
		Affinity:                  affinity(ws, d.scaling, d.meta.selector),
		Tolerations:               pod.Tolerations,
		TopologySpreadConstraints: pod.TopologySpreadConstraints,
		ServiceAccountName:        pod.ServiceAccountName,
		ImagePullSecrets:          pod.ImagePullSecrets,
		PriorityClassName:         pod.PriorityClassName,
	}
	if pod.ServiceAccountName == "" {
		// The resource image does not call the Kubernetes API; a token it
		// does not need is a token that can leak. A workspace that names a
		// service account decides for itself.
		spec.AutomountServiceAccountToken = ptr.To(false)
	}

	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: d.meta.object(ws, ws.Name),
		Spec: appsv1.DeploymentSpec{
			Replicas:             ptr.To(d.scaling.replicas),
			Selector:             cmp.Or(d.selector, d.meta.selector),
			RevisionHistoryLimit: ptr.To(revisionHistoryLimit),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec:       spec,
			},
		},
	}, nil
}

// image is the resource image at the workspace's version.
func (h *Hooks) image(ws *v1alpha1.Workspace) string {
	version := ws.Spec.Version
	if version == "" {
		version = h.cfg.DefaultVersion
	}
	return h.cfg.ResourceImage + ":" + version
}

func (h *Hooks) env(ws *v1alpha1.Workspace, bindings []binding) []corev1.EnvVar {
	env := []corev1.EnvVar{
		{Name: "CONTROL_CLUSTER_URL", Value: h.cfg.ControlClusterURL},
		{Name: "WORKSPACE_ID", Value: ws.Name},
		{Name: "WORKSPACE_NAMESPACE", Value: ws.Namespace},
		{Name: "WORKSPACE_REGION", Value: ws.Spec.Region},
		{Name: "WORKSPACE_ENVIRONMENT", Value: ws.Spec.Environment},
	}
	for _, b := range bindings {
		if b.injected() {
			env = append(env, corev1.EnvVar{Name: "SERVICE_BINDING_ROOT", Value: bindingRoot})
			break
		}
	}
	return append(env, ws.Spec.Pod.ExtraEnv...)
}

func envFrom(ws *v1alpha1.Workspace, bindings []binding) []corev1.EnvFromSource {
	out := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMapName(ws.Name)}}}}
	for _, b := range bindings {
		if b.injected() {
			out = append(out, corev1.EnvFromSource{
				Prefix:    b.ref.EnvPrefix,
				SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: b.status.SecretName}},
			})
		}
	}
	return append(out, ws.Spec.Pod.ExtraEnvFrom...)
}

// The root filesystem is read-only, so the pod gets a writable /tmp.
const tmpVolume = "tmp"

func volumes(ws *v1alpha1.Workspace, bindings []binding) []corev1.Volume {
	out := []corev1.Volume{{Name: tmpVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	for _, b := range bindings {
		if b.injected() {
			out = append(out, corev1.Volume{
				Name:         bindingVolumeName(b.status.Claim),
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: b.status.SecretName}},
			})
		}
	}
	return append(out, ws.Spec.Pod.ExtraVolumes...)
}

func volumeMounts(ws *v1alpha1.Workspace, bindings []binding) []corev1.VolumeMount {
	out := []corev1.VolumeMount{{Name: tmpVolume, MountPath: "/tmp"}}
	for _, b := range bindings {
		if b.injected() {
			out = append(out, corev1.VolumeMount{
				Name:      bindingVolumeName(b.status.Claim),
				MountPath: bindingRoot + "/" + b.status.Claim,
				ReadOnly:  true,
			})
		}
	}
	return append(out, ws.Spec.Pod.ExtraVolumeMounts...)
}

// bindingVolumeName is a DNS label for a claim's volume: claim names may be
// up to 253 characters, volume names only 63.
func bindingVolumeName(claim string) string {
	name := "binding-" + claim
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(claim))
	return name[:52] + "-" + hex.EncodeToString(sum[:])[:10]
}

func defaultContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func defaultPodSecurityContext() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// overlay lays the fields the user set over the secure defaults, one
// top-level field at a time: a workspace that only sets runAsUser keeps the
// rest of the hardening, and one that sets capabilities owns capabilities.
func overlay[T any](defaults, user *T) (*T, error) {
	if user == nil {
		return defaults, nil
	}
	base, err := toMap(defaults)
	if err != nil {
		return nil, err
	}
	over, err := toMap(user)
	if err != nil {
		return nil, err
	}
	maps.Copy(base, over)
	raw, err := codec.Marshal(base)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := codec.Unmarshal(raw, out); err != nil {
		return nil, err
	}
	return out, nil
}

func toMap(v any) (map[string]codec.RawMessage, error) {
	raw, err := codec.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]codec.RawMessage{}
	return out, codec.Unmarshal(raw, &out)
}

// nodeSelector places pods on the class's node type. The class's key wins
// over the workspace's: the class is the tier the workspace is placed and
// billed by, and a workspace cannot move itself to other nodes with it.
func nodeSelector(ws *v1alpha1.Workspace, class *v1alpha1.ClusterClass) map[string]string {
	out := maps.Clone(ws.Spec.Pod.NodeSelector)
	if class.Spec.NodeType != "" {
		if out == nil {
			out = map[string]string{}
		}
		out[v1alpha1.LabelNodeType] = class.Spec.NodeType
	}
	return out
}

// affinity spreads a multi-replica workspace across nodes, preferred rather
// than required so that a small cluster can still schedule it. A workspace
// that brings its own affinity replaces this wholesale: merging two
// affinities silently is how pods end up unschedulable for no visible reason.
func affinity(ws *v1alpha1.Workspace, s scaling, sel *metav1.LabelSelector) *corev1.Affinity {
	if ws.Spec.Pod.Affinity != nil {
		return ws.Spec.Pod.Affinity
	}
	if s.min < 2 {
		return nil
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: sel,
				TopologyKey:   "kubernetes.io/hostname",
			},
		}},
	}}
}
