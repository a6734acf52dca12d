package v1alpha1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotations a Workspace may carry.
const (
	// AnnotationIdle set to "true" scales the workspace to zero when its
	// class allows it.
	AnnotationIdle = "formspec.dev/idle"
	// AnnotationArtifactBinaryHash changes to trigger a rolling restart.
	AnnotationArtifactBinaryHash = "formspec.dev/artifact-binary-hash"
	// AnnotationWakeOverflow set to "true" by the reporter says that a
	// waking workspace holds as many requests as its class allows: the
	// wake controller then has the interceptor refuse further ones with
	// 503 until the workspace is ready. The reporter removes it.
	AnnotationWakeOverflow = "formspec.dev/wake-overflow"
	// AnnotationTakeover set to TakeoverHold keeps the children of the
	// original FormSpec operator as they are (docs/migrating.md): the
	// hooks take them over, rolling the workspace's pods once, when it is
	// removed. `kubectl formspec takeover prepare` sets it, `takeover
	// roll` removes it a few workspaces at a time.
	AnnotationTakeover = "formspec.dev/takeover"
	// TakeoverHold is the value of AnnotationTakeover that holds.
	TakeoverHold = "hold"
)

// ArtifactHashPattern is the one spelling of an artifact hash the reporter
// writes onto a Workspace and its admission policy lets it write
// (deploy/reporter/admission-policy.yaml): "sha256:" and 64 lowercase hex
// digits. One spelling per digest, so that the same binary written in
// capitals never rolls a workspace as a new one, and nothing but a digest
// reaches a pod template from Cluster Control.
const ArtifactHashPattern = `^sha256:[0-9a-f]{64}$`

// ValidArtifactHash reports whether h matches ArtifactHashPattern.
func ValidArtifactHash(h string) bool {
	digest, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(digest) != 64 {
		return false
	}
	for _, c := range []byte(digest) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Labels and annotations the workspace hook puts on a workspace's children.
const (
	// LabelWorkspace names the workspace on every child and pod; the
	// workspace-pods DecoratorController selects pods by it, and the
	// reporter counts a node's workspaces by it.
	LabelWorkspace = "formspec.dev/workspace"
	// LabelClusterClass names the workspace's class on every child (not on
	// its pods, so that a class change alone does not roll them).
	LabelClusterClass = "formspec.dev/cluster-class"
	// LabelManagedBy set to ManagedBy marks every child the hooks render
	// (and their pods): a child without it was made by someone else, the
	// original operator's being taken over (docs/migrating.md).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy on the hooks' children.
	ManagedBy = "formspec-hooks"
	// LabelNodeType is the node label a class's nodeType selects.
	LabelNodeType = "formspec.dev/node-type"
	// NodeLabelPrefix starts every node label the reporter passes on to
	// Cluster Control.
	NodeLabelPrefix = Group + "/"

	// AnnotationConfigHash on the pod template rolls pods when the
	// ConfigMap changes.
	AnnotationConfigHash = "formspec.dev/config-hash"
	// AnnotationCredentialsHash on the pod template rolls pods when an
	// injected credential changes.
	AnnotationCredentialsHash = "formspec.dev/credentials-hash"
)

// Workspace is one customer workspace: a Deployment, Service and ConfigMap,
// and optionally an HPA and a PodDisruptionBudget.
type Workspace struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WorkspaceSpec   `json:"spec"`
	Status            WorkspaceStatus `json:"status,omitempty"`
}

// WorkspaceSpec is the desired state of a Workspace.
type WorkspaceSpec struct {
	// Owner is the customer the workspace belongs to; carried.
	Owner string `json:"owner,omitempty"`
	// Region is handed to the pods as WORKSPACE_REGION.
	Region string `json:"region,omitempty"`
	// ClusterClass names the class whose policy applies.
	ClusterClass string `json:"clusterClass"`
	// Environment is development, staging or production; handed to the pods.
	Environment string `json:"environment,omitempty"`
	// Version is the resource image tag; the server's default when empty.
	Version string `json:"version,omitempty"`
	// Resources are the resource container's requests and limits.
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// Cache is rendered into the ConfigMap as JSON under FORMSPEC_CACHE.
	Cache map[string]any `json:"cache,omitempty"`
	// Config entries become ConfigMap keys, and so environment variables.
	Config map[string]string `json:"config,omitempty"`
	// Datastores lists the datastores the workspace expects credentials for;
	// at most MaxWorkspaceDatastores.
	Datastores []DatastoreRef `json:"datastores,omitempty"`
	// Pod passes plain core fields through to the pod template.
	Pod PodOverrides `json:"pod,omitempty"`
	// DisruptionBudget, when set, shapes the workspace's PodDisruptionBudget.
	DisruptionBudget *DisruptionBudget `json:"disruptionBudget,omitempty"`
}

// DatastoreRef names a datastore the workspace expects credentials for.
type DatastoreRef struct {
	Name string `json:"name"`
	// Namespace of the Datastore; defaults to the workspace's namespace.
	Namespace string `json:"namespace,omitempty"`
	// EnvPrefix is prepended to every injected environment variable.
	EnvPrefix string `json:"envPrefix,omitempty"`
}

// PodOverrides are plain core fields passed through to the pod template.
type PodOverrides struct {
	Annotations               map[string]string                 `json:"annotations,omitempty"`
	Labels                    map[string]string                 `json:"labels,omitempty"`
	NodeSelector              map[string]string                 `json:"nodeSelector,omitempty"`
	Tolerations               []corev1.Toleration               `json:"tolerations,omitempty"`
	Affinity                  *corev1.Affinity                  `json:"affinity,omitempty"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	SecurityContext           *corev1.PodSecurityContext        `json:"securityContext,omitempty"`
	ContainerSecurityContext  *corev1.SecurityContext           `json:"containerSecurityContext,omitempty"`
	ServiceAccountName        string                            `json:"serviceAccountName,omitempty"`
	ImagePullSecrets          []corev1.LocalObjectReference     `json:"imagePullSecrets,omitempty"`
	PriorityClassName         string                            `json:"priorityClassName,omitempty"`
	ExtraEnv                  []corev1.EnvVar                   `json:"extraEnv,omitempty"`
	ExtraEnvFrom              []corev1.EnvFromSource            `json:"extraEnvFrom,omitempty"`
	ExtraVolumes              []corev1.Volume                   `json:"extraVolumes,omitempty"`
	ExtraVolumeMounts         []corev1.VolumeMount              `json:"extraVolumeMounts,omitempty"`
}

// DisruptionBudget sets exactly one of MinAvailable or MaxUnavailable.
type DisruptionBudget struct {
	// MinAvailable pods during a voluntary disruption.
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
	// MaxUnavailable pods during a voluntary disruption.
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// Workspace phases.
const (
	PhasePending     = "Pending"
	PhaseProgressing = "Progressing"
	PhaseReady       = "Ready"
	PhaseIdle        = "Idle"
	PhaseDegraded    = "Degraded"
	PhaseTerminating = "Terminating"
)

// Condition types. Ready is also a ResourceClaim's condition (see
// resourceclaim.go).
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
)

// Reasons of a Workspace's conditions. The Degraded reasons are shown in
// kubectl's Reason column, become Events and label alerts, so they are
// API: add, never rename.
const (
	// ReasonAsExpected: Degraded is False.
	ReasonAsExpected = "AsExpected"
	// ReasonTerminating: Ready is False and Progressing True while the
	// workspace is torn down.
	ReasonTerminating = "Terminating"
	// ReasonReplicasAvailable and ReasonReplicasUnavailable explain Ready.
	ReasonReplicasAvailable   = "ReplicasAvailable"
	ReasonReplicasUnavailable = "ReplicasUnavailable"
	// Reasons of Progressing.
	ReasonRollingOut            = "RollingOut"
	ReasonWaitingForCredentials = "WaitingForCredentials"
	ReasonRolloutComplete       = "RolloutComplete"
	// ReasonTakeoverHeld: the original operator's children are kept as
	// they are while the Workspace carries formspec.dev/takeover: hold.
	ReasonTakeoverHeld = "TakeoverHeld"
	// ReasonTakingOver: the original operator's children are being taken
	// over (their pods roll once; the rest goes once the new pods run).
	ReasonTakingOver = "TakingOver"
	// ReasonCreating: a child the hook asks for is not observed yet.
	ReasonCreating = "Creating"
	// ReasonWaitingForClaimsSummary: the workspace has spec.datastores,
	// its spec changed, and the reporter has not written its claims
	// summary (the formspec.dev/claims annotation) yet; its children are
	// kept as they are until it does.
	ReasonWaitingForClaimsSummary = "WaitingForClaimsSummary"

	// Reasons of Degraded: True.
	ReasonClusterClassNotFound     = "ClusterClassNotFound"
	ReasonInvalidSpec              = "InvalidSpec"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonReplicaFailure           = "ReplicaFailure"
	ReasonDatastoreNotInjected     = "DatastoreNotInjected"
	// ReasonInvalidClaimsSummary: the workspace's formspec.dev/claims
	// annotation does not parse; its children are kept as they are.
	ReasonInvalidClaimsSummary = "InvalidClaimsSummary"
	// ReasonChildNotCreated: a child the hook asks for (the workspace's
	// Deployment, Service or ConfigMap) is still not there a grace period
	// after a sync first asked for it: its create failed. The message
	// names it and the likely causes: an object of that name the
	// workspace does not own, a quota, an admission rejection.
	ReasonChildNotCreated = "ChildNotCreated"
)

// Datastore injection states in WorkspaceStatus.Datastores.
const (
	DatastoreInjected = "Injected"
	DatastorePending  = "Pending"
	DatastoreDenied   = "Denied"
	DatastoreMissing  = "Missing"
)

// WorkspaceStatus is computed by the sync hook from observed objects only.
type WorkspaceStatus struct {
	// ObservedGeneration is the generation this status describes.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the conditions: Pending, Progressing, Ready, Idle, Degraded or Terminating.
	Phase string `json:"phase,omitempty"`
	// Conditions are Ready, Progressing and Degraded.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Replicas, ReadyReplicas and UpdatedReplicas are the Deployment's, as observed.
	Replicas        int32 `json:"replicas"`
	ReadyReplicas   int32 `json:"readyReplicas"`
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// ServiceName is the workspace's Service, once observed.
	ServiceName string `json:"serviceName,omitempty"`
	// ArtifactHash is the artifact binary hash every pod of the workspace
	// runs: the pod template's, once the rollout of that template has
	// completed, and until then the value it had. A restart_required
	// directive is consumed when it equals the directive's hash.
	ArtifactHash string `json:"artifactHash,omitempty"`
	// Datastores lists the datastores the workspace expects credentials for.
	Datastores []WorkspaceDatastoreStatus `json:"datastores,omitempty"`
}

// WorkspaceDatastoreStatus reports one spec.datastores entry.
type WorkspaceDatastoreStatus struct {
	Name string `json:"name"`
	// Claim is the ResourceClaim serving the entry, when there is one.
	Claim string `json:"claim,omitempty"`
	// State is Injected, Pending, Denied or Missing.
	State string `json:"state"`
	// SecretName is the injected credentials Secret.
	SecretName string `json:"secretName,omitempty"`
}
