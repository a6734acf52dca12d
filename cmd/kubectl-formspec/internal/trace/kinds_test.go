package trace

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// state is what a node says about its object.
type state struct{ Ready, Reason, Message string }

func stateOf(n *Node) state { return state{n.Ready, n.Reason, n.Message} }

var deleted = ptr.To(metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))

func TestWorkspaceNode(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	ready := cond(v1alpha1.ConditionReady, metav1.ConditionTrue, "ReplicasAvailable", "2 of 2 replicas available")
	settled := cond(v1alpha1.ConditionProgressing, metav1.ConditionFalse, "RolloutComplete", "done")
	fine := cond(v1alpha1.ConditionDegraded, metav1.ConditionFalse, "AsExpected", "no problems observed")
	cases := map[string]struct {
		reason string
		meta   metav1.ObjectMeta
		status v1alpha1.WorkspaceStatus
		want   state
	}{
		"Ready": {
			reason: "Phase Ready is Ready, with the Ready condition's words.",
			meta:   metav1.ObjectMeta{Generation: 2},
			status: v1alpha1.WorkspaceStatus{ObservedGeneration: 2, Phase: "Ready", Conditions: []metav1.Condition{ready, settled, fine}},
			want:   state{ReadyTrue, "ReplicasAvailable", "2 of 2 replicas available"},
		},
		"Degraded": {
			reason: "Degraded's reason and message are what blocks it, even with Ready True.",
			meta:   metav1.ObjectMeta{Generation: 2},
			status: v1alpha1.WorkspaceStatus{ObservedGeneration: 2, Phase: "Degraded", Conditions: []metav1.Condition{ready, settled,
				cond(v1alpha1.ConditionDegraded, metav1.ConditionTrue, "InvalidSpec", "spec.pod.tolerations.0.tolerationSeconds must be int64")}},
			want: state{ReadyFalse, "InvalidSpec", "spec.pod.tolerations.0.tolerationSeconds must be int64"},
		},
		"Progressing": {
			reason: "A workspace on its way says what it waits for.",
			meta:   metav1.ObjectMeta{Generation: 2},
			status: v1alpha1.WorkspaceStatus{ObservedGeneration: 2, Phase: "Progressing", Conditions: []metav1.Condition{ready,
				cond(v1alpha1.ConditionProgressing, metav1.ConditionTrue, "WaitingForCredentials", "waiting for credentials"), fine}},
			want: state{ReadyFalse, "WaitingForCredentials", "waiting for credentials"},
		},
		"Idle": {
			reason: "Idle is not Ready: the Ready condition says why.",
			meta:   metav1.ObjectMeta{Generation: 2},
			status: v1alpha1.WorkspaceStatus{ObservedGeneration: 2, Phase: "Idle", Conditions: []metav1.Condition{
				cond(v1alpha1.ConditionReady, metav1.ConditionFalse, "ScaledToZero", "runs no pods"), settled, fine}},
			want: state{ReadyFalse, "ScaledToZero", "runs no pods"},
		},
		"NoStatus": {
			reason: "No hook has written a status: unknown, and where to look.",
			want:   state{ReadyUnknown, "NoStatus", "no hook has written a status yet: see the Workspace's Events and Metacontroller's logs"},
		},
		"Outdated": {
			reason: "A status of an older generation is not believed.",
			meta:   metav1.ObjectMeta{Generation: 3},
			status: v1alpha1.WorkspaceStatus{ObservedGeneration: 2, Phase: "Ready", Conditions: []metav1.Condition{ready, settled, fine}},
			want: state{ReadyFalse, "StatusOutdated",
				"the status is of generation 2 and the spec is at generation 3: Metacontroller (the workspace hooks) has not caught up yet (last phase Ready)"},
		},
		"Terminating": {
			reason: "A workspace being deleted says how far teardown got.",
			meta:   metav1.ObjectMeta{Generation: 2, DeletionTimestamp: deleted},
			status: v1alpha1.WorkspaceStatus{ObservedGeneration: 2, Phase: "Terminating", Conditions: []metav1.Condition{
				cond(v1alpha1.ConditionReady, metav1.ConditionFalse, "Terminating", "being deleted"),
				cond(v1alpha1.ConditionProgressing, metav1.ConditionTrue, "Terminating", "scaling down"), fine}},
			want: state{ReadyFalse, "Terminating", "scaling down"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := stateOf(workspaceNode(&v1alpha1.Workspace{ObjectMeta: tc.meta, Status: tc.status}))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nworkspaceNode: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestDeploymentNode(t *testing.T) {
	cond := func(typ appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string) appsv1.DeploymentCondition {
		return appsv1.DeploymentCondition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	available := cond(appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "ok")
	cases := map[string]struct {
		reason string
		gen    int64
		status appsv1.DeploymentStatus
		want   state
	}{
		"Ready": {
			reason: "Every replica updated and available.",
			gen:    1,
			status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, Conditions: []appsv1.DeploymentCondition{available}},
			want:   state{ReadyTrue, "MinimumReplicasAvailable", "2 of 2 replicas available"},
		},
		"Deadline": {
			reason: "A stalled rollout says so first.",
			gen:    1,
			status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 1, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
				cond(appsv1.DeploymentProgressing, corev1.ConditionFalse, "ProgressDeadlineExceeded", `ReplicaSet "x" has timed out progressing.`)}},
			want: state{ReadyFalse, "ProgressDeadlineExceeded", `ReplicaSet "x" has timed out progressing.`},
		},
		"ReplicaFailure": {
			reason: "Pods the controller cannot create.",
			gen:    1,
			status: appsv1.DeploymentStatus{ObservedGeneration: 1, Conditions: []appsv1.DeploymentCondition{
				cond(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate", "exceeded quota")}},
			want: state{ReadyFalse, "FailedCreate", "exceeded quota"},
		},
		"NotObserved": {
			reason: "A spec the controller has not seen.",
			gen:    3,
			status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2},
			want:   state{ReadyFalse, "StatusOutdated", "the status is of generation 2 and the spec is at generation 3: the Deployment controller has not caught up yet"},
		},
		"RollingOut": {
			reason: "Old replicas still running.",
			gen:    1,
			status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2},
			want:   state{ReadyFalse, "RollingOut", "2 of 2 replicas updated, 3 replicas in all"},
		},
		"Unavailable": {
			reason: "Updated but not yet available.",
			gen:    1,
			status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1, Conditions: []appsv1.DeploymentCondition{
				cond(appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "no")}},
			want: state{ReadyFalse, "MinimumReplicasUnavailable", "1 of 2 replicas available"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: tc.gen}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2)}, Status: tc.status}
			if diff := cmp.Diff(tc.want, stateOf(deploymentNode(d))); diff != "" {
				t.Errorf("%s\ndeploymentNode: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPodNode(t *testing.T) {
	cond := func(typ corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	cases := map[string]struct {
		reason string
		meta   metav1.ObjectMeta
		status corev1.PodStatus
		want   state
	}{
		"Ready": {
			reason: "The Ready condition.",
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue, "", "")}},
			want:   state{Ready: ReadyTrue},
		},
		"Waiting": {
			reason: "A waiting container is the most specific cause.",
			status: corev1.PodStatus{Phase: corev1.PodPending,
				Conditions:        []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady", "unready")},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "resource", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s"}}}}},
			want: state{ReadyFalse, "CrashLoopBackOff", "container resource: back-off 5m0s"},
		},
		"Crashed": {
			reason: "A container that exited with an error.",
			status: corev1.PodStatus{Phase: corev1.PodRunning,
				ContainerStatuses: []corev1.ContainerStatus{{Name: "resource", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}},
			want: state{ReadyFalse, "OOMKilled", "container resource: exited with code 137"},
		},
		"Unschedulable": {
			reason: "A pod no node takes.",
			status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
				cond(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable", "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.")}},
			want: state{ReadyFalse, "Unschedulable", "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."},
		},
		"Terminating": {
			reason: "A pod being deleted.",
			meta:   metav1.ObjectMeta{DeletionTimestamp: deleted},
			status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{cond(corev1.PodReady, corev1.ConditionTrue, "", "")}},
			want:   state{ReadyFalse, "Terminating", "being deleted since 2026-03-01T12:00:00Z"},
		},
		"NoStatus": {
			reason: "A pod no kubelet reported on.",
			want:   state{ReadyUnknown, "NotObserved", "the kubelet has not reported on the pod yet"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, stateOf(podNode(&corev1.Pod{ObjectMeta: tc.meta, Status: tc.status}))); diff != "" {
				t.Errorf("%s\npodNode: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAutoscalingNodes(t *testing.T) {
	hpa := func(conds ...autoscalingv2.HorizontalPodAutoscalerCondition) *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{
			Spec:   autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](2), MaxReplicas: 4},
			Status: autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 3, Conditions: conds},
		}
	}
	able := autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, Reason: "ReadyForNewScale"}
	cases := map[string]struct {
		reason string
		node   *Node
		want   state
	}{
		"HPAActive": {
			reason: "An HPA that can scale and has its metrics.",
			node:   hpaNode(hpa(able, autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionTrue, Reason: "ValidMetricFound"})),
			want:   state{ReadyTrue, "ValidMetricFound", "2 current, 3 desired, bounds 2 to 4"},
		},
		"HPANoMetrics": {
			reason: "An HPA without the metrics it scales on (no metrics-server).",
			node: hpaNode(hpa(able, autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse,
				Reason: "FailedGetResourceMetric", Message: "unable to get metrics for resource cpu"})),
			want: state{ReadyFalse, "FailedGetResourceMetric", "unable to get metrics for resource cpu"},
		},
		"HPANew": {
			reason: "An HPA its controller has not reported on.",
			node:   hpaNode(hpa()),
			want:   state{ReadyUnknown, "NotObserved", "the HorizontalPodAutoscaler controller has not reported on it yet"},
		},
		"PDBNoDisruptionAllowed": {
			reason: "A budget that allows no disruption now is doing its job: Ready.",
			node: pdbNode(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 1},
				Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: 1, DesiredHealthy: 1}}),
			want: state{ReadyTrue, "", "1 healthy, 1 wanted, 0 disruptions allowed"},
		},
		"PDBInsufficient": {
			reason: "Fewer healthy pods than the budget wants.",
			node: pdbNode(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 1},
				Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, CurrentHealthy: 1, DesiredHealthy: 2}}),
			want: state{ReadyFalse, "InsufficientPods", "1 healthy, 2 wanted, 0 disruptions allowed"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, stateOf(tc.node)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestClaimChainNodes(t *testing.T) {
	cond := func(typ string, s metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg}
	}
	claim := func(conds ...metav1.Condition) *v1alpha1.ResourceClaim {
		return &v1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Status: v1alpha1.ResourceClaimStatus{ObservedGeneration: 1, Conditions: conds}}
	}
	granted := cond(v1alpha1.ConditionReady, metav1.ConditionTrue, "Granted", "granted")
	cases := map[string]struct {
		reason string
		node   *Node
		want   state
	}{
		"Granted": {
			reason: "A verified grant.",
			node:   claimNode(claim(granted, cond(v1alpha1.ConditionDenied, metav1.ConditionFalse, "Granted", "granted"))),
			want:   state{ReadyTrue, "Granted", "granted"},
		},
		"Denied": {
			reason: "Denied's reason and message.",
			node: claimNode(claim(cond(v1alpha1.ConditionReady, metav1.ConditionFalse, "Expired", "expired at noon"),
				cond(v1alpha1.ConditionDenied, metav1.ConditionTrue, "Expired", "expired at noon"))),
			want: state{ReadyFalse, "Expired", "expired at noon"},
		},
		"Exposed": {
			reason: "A granted claim whose Secret carries a copy of its data is Ready and says so.",
			node:   claimNode(claim(granted, cond(v1alpha1.ConditionCredentialsExposed, metav1.ConditionTrue, "LastAppliedAnnotation", "run Metacontroller with server-side apply"))),
			want:   state{ReadyTrue, "CredentialsExposed", "run Metacontroller with server-side apply"},
		},
		"NotVerified": {
			reason: "A claim the hook has not seen.",
			node:   claimNode(claim()),
			want:   state{ReadyUnknown, "NotVerified", "the resourceclaim hook has not verified this claim yet"},
		},
		"EndpointLabeled": {
			reason: "The consent label naming the Datastore.",
			node:   endpointSecretNode(&metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelDatastore: "orders-db", "team": "data"}}, "orders-db"),
			want:   state{ReadyTrue, "Labeled", "consent label formspec.dev/datastore=orders-db"},
		},
		"EndpointOtherDatastore": {
			reason: "A consent label for another Datastore is no consent.",
			node:   endpointSecretNode(&metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelDatastore: "billing-db"}}, "orders-db"),
			want: state{ReadyFalse, "SecretNotLabeled",
				"its consent label is formspec.dev/datastore=billing-db, not formspec.dev/datastore=orders-db: nothing is copied out of it"},
		},
		"EndpointUnlabeled": {
			reason: "No consent label.",
			node:   endpointSecretNode(&metav1.ObjectMeta{}, "orders-db"),
			want:   state{ReadyFalse, "SecretNotLabeled", "no consent label formspec.dev/datastore=orders-db: nothing is copied out of it"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, stateOf(tc.node)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	// Of an endpoint Secret's labels, only the consent label is shown.
	n := endpointSecretNode(&metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelDatastore: "orders-db", "team": "data"}}, "orders-db")
	if diff := cmp.Diff(map[string]string{v1alpha1.LabelDatastore: "orders-db"}, n.Labels); diff != "" {
		t.Errorf("endpoint Secret labels: -want, +got:\n%s", diff)
	}
}
