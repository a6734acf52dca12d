package trace

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// This file turns one object into its node: whether it is Ready and, when
// it is not, the reason and message that say why. Each rule reads only
// the object's own status, as written by its controller.

// workspaceNode reads the status the workspace hooks wrote. Ready means
// phase Ready: every other phase asks something of a person or is on its
// way, and an Idle workspace runs no pods.
func workspaceNode(ws *v1alpha1.Workspace) *Node {
	n := newNode("Workspace", v1alpha1.APIVersion, &ws.ObjectMeta)
	st := &ws.Status
	n.Status = st.Phase
	ready := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	progressing := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
	degraded := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded)
	switch {
	case ws.DeletionTimestamp != nil:
		n.terminating(&ws.ObjectMeta)
		n.Status = cmp.Or(st.Phase, "Terminating")
		if ready != nil && ready.Reason == v1alpha1.ReasonTerminating && progressing != nil {
			n.Message = progressing.Message
		}
	case ready == nil:
		n.set(ReadyUnknown, "NoStatus", "no hook has written a status yet: see the Workspace's Events and Metacontroller's logs")
	case n.outdated(&ws.ObjectMeta, st.ObservedGeneration, "Metacontroller (the workspace hooks)"):
		n.Message += fmt.Sprintf(" (last phase %s)", st.Phase)
	case degraded != nil && degraded.Status == metav1.ConditionTrue:
		n.fromCondition(degraded).Ready = ReadyFalse
	case st.Phase == v1alpha1.PhaseReady:
		n.fromCondition(ready)
	case progressing != nil && progressing.Status == metav1.ConditionTrue:
		n.fromCondition(progressing).Ready = ReadyFalse
	default:
		n.fromCondition(ready).Ready = ReadyFalse
	}
	return n
}

// classNode is the workspace's ClusterClass, which has no status; its
// message sums up the scaling policy.
func classNode(c *v1alpha1.ClusterClass) *Node {
	n := newNode("ClusterClass", v1alpha1.APIVersion, &c.ObjectMeta)
	s := c.Spec.Scaling
	var parts []string
	if s.MinReplicas != nil {
		parts = append(parts, fmt.Sprintf("minReplicas %d", *s.MinReplicas))
	}
	if s.MaxReplicas != nil {
		parts = append(parts, fmt.Sprintf("maxReplicas %d", *s.MaxReplicas))
	}
	if s.ScaleToZero {
		parts = append(parts, "scaleToZero")
	}
	if len(c.Spec.Features) > 0 {
		parts = append(parts, "features "+strings.Join(c.Spec.Features, ", "))
	}
	n.Message = strings.Join(parts, "; ")
	return n
}

// deploymentNode follows kubectl rollout status: Ready once the
// Deployment controller has seen the latest spec and every replica is
// updated and available; a stalled rollout or a replica the controller
// cannot create says so first.
func deploymentNode(d *appsv1.Deployment) *Node {
	n := newNode("Deployment", "apps/v1", &d.ObjectMeta)
	want := replicasOf(d.Spec.Replicas)
	s := d.Status
	n.Status = fmt.Sprintf("%d/%d", s.ReadyReplicas, want)
	progressing := deploymentCondition(d, appsv1.DeploymentProgressing)
	failure := deploymentCondition(d, appsv1.DeploymentReplicaFailure)
	available := deploymentCondition(d, appsv1.DeploymentAvailable)
	switch {
	case n.terminating(&d.ObjectMeta):
	case progressing != nil && progressing.Status == corev1.ConditionFalse:
		n.set(ReadyFalse, progressing.Reason, progressing.Message)
	case failure != nil && failure.Status == corev1.ConditionTrue:
		n.set(ReadyFalse, failure.Reason, failure.Message)
	case n.outdated(&d.ObjectMeta, s.ObservedGeneration, "the Deployment controller"):
	case s.UpdatedReplicas < want || s.Replicas > s.UpdatedReplicas:
		n.set(ReadyFalse, "RollingOut", fmt.Sprintf("%d of %d replicas updated, %d replicas in all", s.UpdatedReplicas, want, s.Replicas))
	case s.AvailableReplicas < want:
		n.set(ReadyFalse, cmp.Or(reasonOf(available), "ReplicasUnavailable"), fmt.Sprintf("%d of %d replicas available", s.AvailableReplicas, want))
	default:
		n.set(ReadyTrue, cmp.Or(reasonOf(available), "ReplicasAvailable"), fmt.Sprintf("%d of %d replicas available", s.AvailableReplicas, want))
	}
	return n
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func reasonOf(c *appsv1.DeploymentCondition) string {
	if c == nil {
		return ""
	}
	return c.Reason
}

func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// replicaSetNode is Ready when every replica it wants is ready; a replica
// it cannot create (quota, admission) is its ReplicaFailure condition.
func replicaSetNode(rs *appsv1.ReplicaSet) *Node {
	n := newNode("ReplicaSet", "apps/v1", &rs.ObjectMeta)
	want := replicasOf(rs.Spec.Replicas)
	s := rs.Status
	n.Status = fmt.Sprintf("%d/%d", s.ReadyReplicas, want)
	for _, c := range s.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			return n.set(ReadyFalse, c.Reason, c.Message)
		}
	}
	switch {
	case n.terminating(&rs.ObjectMeta):
	case s.ReadyReplicas < want || s.AvailableReplicas < want:
		n.set(ReadyFalse, "ReplicasNotReady", fmt.Sprintf("%d of %d replicas ready, %d available", s.ReadyReplicas, want, s.AvailableReplicas))
	default:
		n.set(ReadyTrue, "", fmt.Sprintf("%d of %d replicas ready", s.ReadyReplicas, want))
	}
	return n
}

// podNode is Ready by the pod's Ready condition. When it is not, the most
// specific cause wins: a container waiting or crashed (ImagePullBackOff,
// CrashLoopBackOff), then scheduling, then the condition itself.
func podNode(p *corev1.Pod) *Node {
	n := newNode("Pod", "v1", &p.ObjectMeta)
	n.Status = string(p.Status.Phase)
	if n.terminating(&p.ObjectMeta) {
		return n
	}
	var ready, scheduled *corev1.PodCondition
	for i := range p.Status.Conditions {
		switch c := &p.Status.Conditions[i]; c.Type {
		case corev1.PodReady:
			ready = c
		case corev1.PodScheduled:
			scheduled = c
		}
	}
	if ready != nil && ready.Status == corev1.ConditionTrue {
		return n.set(ReadyTrue, "", "")
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			n.Status = cs.State.Waiting.Reason
			return n.set(ReadyFalse, cs.State.Waiting.Reason, containerMessage(cs.Name, cs.State.Waiting.Message))
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
			n.Status = cmp.Or(cs.State.Terminated.Reason, "Error")
			return n.set(ReadyFalse, n.Status, containerMessage(cs.Name, fmt.Sprintf("exited with code %d %s", cs.State.Terminated.ExitCode, cs.State.Terminated.Message)))
		}
	}
	switch {
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		return n.set(ReadyFalse, cmp.Or(p.Status.Reason, string(p.Status.Phase)), p.Status.Message)
	case scheduled != nil && scheduled.Status != corev1.ConditionTrue:
		return n.set(ReadyFalse, scheduled.Reason, scheduled.Message)
	case ready != nil:
		return n.set(ReadyFalse, ready.Reason, ready.Message)
	}
	return n.set(ReadyUnknown, "NotObserved", "the kubelet has not reported on the pod yet")
}

func containerMessage(container, msg string) string {
	return strings.TrimSpace("container " + container + ": " + msg)
}

// serviceNode has no ready state: the Service routes to whichever pods
// are ready, which the Pod nodes show.
func serviceNode(s *corev1.Service) *Node {
	n := newNode("Service", "v1", &s.ObjectMeta)
	n.Status = string(s.Spec.Type)
	var ports []string
	for _, p := range s.Spec.Ports {
		ports = append(ports, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
	}
	if len(ports) > 0 {
		n.Message = "ports " + strings.Join(ports, ", ")
	}
	return n
}

// configMapNode has no ready state.
func configMapNode(c *corev1.ConfigMap) *Node {
	n := newNode("ConfigMap", "v1", &c.ObjectMeta)
	n.Message = fmt.Sprintf("%d keys", len(c.Data)+len(c.BinaryData))
	return n
}

// hpaNode is Ready while the autoscaler can scale and has the metrics to
// decide (AbleToScale and ScalingActive); a metric it cannot read is the
// usual reason it is not.
func hpaNode(h *autoscalingv2.HorizontalPodAutoscaler) *Node {
	n := newNode("HorizontalPodAutoscaler", "autoscaling/v2", &h.ObjectMeta)
	s := h.Status
	n.Status = fmt.Sprintf("%d/%d", s.CurrentReplicas, s.DesiredReplicas)
	bounds := fmt.Sprintf("%d current, %d desired, bounds %d to %d", s.CurrentReplicas, s.DesiredReplicas, replicasOf(h.Spec.MinReplicas), h.Spec.MaxReplicas)
	if n.terminating(&h.ObjectMeta) {
		return n
	}
	var active *autoscalingv2.HorizontalPodAutoscalerCondition
	for i := range s.Conditions {
		c := &s.Conditions[i]
		switch c.Type {
		case autoscalingv2.AbleToScale, autoscalingv2.ScalingActive:
			if c.Status != corev1.ConditionTrue {
				return n.set(ReadyFalse, c.Reason, c.Message)
			}
			if c.Type == autoscalingv2.ScalingActive {
				active = c
			}
		}
	}
	if active == nil {
		return n.set(ReadyUnknown, "NotObserved", "the HorizontalPodAutoscaler controller has not reported on it yet")
	}
	return n.set(ReadyTrue, active.Reason, bounds)
}

// pdbNode is Ready while as many pods are healthy as the budget wants. A
// budget that allows no disruption now (one replica, minAvailable 1) is
// still Ready: it is doing its job.
func pdbNode(p *policyv1.PodDisruptionBudget) *Node {
	n := newNode("PodDisruptionBudget", "policy/v1", &p.ObjectMeta)
	s := p.Status
	n.Status = fmt.Sprintf("%d/%d", s.CurrentHealthy, s.DesiredHealthy)
	msg := fmt.Sprintf("%d healthy, %d wanted, %d disruptions allowed", s.CurrentHealthy, s.DesiredHealthy, s.DisruptionsAllowed)
	switch {
	case n.terminating(&p.ObjectMeta):
	case n.outdated(&p.ObjectMeta, s.ObservedGeneration, "the disruption controller"):
		n.Ready = ReadyUnknown
	case s.CurrentHealthy < s.DesiredHealthy:
		reason := "InsufficientPods"
		if c := meta.FindStatusCondition(s.Conditions, policyv1.DisruptionAllowedCondition); c != nil && c.Reason != "" {
			reason = c.Reason
		}
		n.set(ReadyFalse, reason, msg)
	default:
		n.set(ReadyTrue, "", msg)
	}
	return n
}

// claimNode reads the verdict of the resourceclaim hook: Ready when the
// grant verified, and Denied's reason and message when it did not. A
// granted claim whose Secret carries a copy of its data in an annotation
// is still Ready, and says so.
func claimNode(c *v1alpha1.ResourceClaim) *Node {
	n := newNode("ResourceClaim", v1alpha1.APIVersion, &c.ObjectMeta)
	conds := c.Status.Conditions
	ready := meta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	denied := meta.FindStatusCondition(conds, v1alpha1.ConditionDenied)
	exposed := meta.FindStatusCondition(conds, v1alpha1.ConditionCredentialsExposed)
	switch {
	case n.terminating(&c.ObjectMeta):
	case ready == nil && denied == nil:
		n.set(ReadyUnknown, "NotVerified", "the resourceclaim hook has not verified this claim yet")
	case n.outdated(&c.ObjectMeta, c.Status.ObservedGeneration, "Metacontroller (the resourceclaim hook)"):
	case denied != nil && denied.Status == metav1.ConditionTrue:
		n.Status = "Denied"
		n.fromCondition(denied).Ready = ReadyFalse
	case ready != nil && ready.Status == metav1.ConditionTrue && exposed != nil && exposed.Status == metav1.ConditionTrue:
		n.Status = "Granted"
		n.set(ReadyTrue, v1alpha1.ConditionCredentialsExposed, exposed.Message)
	case ready != nil:
		n.fromCondition(ready)
		if n.Ready == ReadyTrue {
			n.Status = "Granted"
		}
	default:
		n.set(ReadyFalse, "NotGranted", "the claim is neither Ready nor Denied")
	}
	return n
}

// datastoreNode reads the datastore hook's verdict: Validated, or Denied
// with its reason.
func datastoreNode(d *v1alpha1.Datastore) *Node {
	n := newNode("Datastore", v1alpha1.APIVersion, &d.ObjectMeta)
	n.Status = d.Spec.Driver
	validated := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionValidated)
	denied := meta.FindStatusCondition(d.Status.Conditions, v1alpha1.ConditionDenied)
	switch {
	case n.terminating(&d.ObjectMeta):
	case validated == nil && denied == nil:
		n.set(ReadyUnknown, "NotValidated", "the datastore hook has not validated this Datastore yet")
	case n.outdated(&d.ObjectMeta, d.Status.ObservedGeneration, "Metacontroller (the datastore hook)"):
	case denied != nil && denied.Status == metav1.ConditionTrue:
		n.fromCondition(denied).Ready = ReadyFalse
	case validated != nil:
		n.fromCondition(validated)
	}
	return n
}

// credentialsSecretNode is the Secret a granted claim's credentials are
// in, read as metadata only. It has no ready state of its own: it exists
// or it does not.
func credentialsSecretNode(m *metav1.ObjectMeta) *Node {
	n := newNode("Secret", "v1", m)
	n.terminating(m)
	return n
}

// endpointSecretNode is a Datastore's endpoint Secret, read as metadata
// only: Ready when it carries the consent label naming the Datastore,
// without which the hooks never copy anything out of it.
func endpointSecretNode(m *metav1.ObjectMeta, datastore string) *Node {
	n := newNode("Secret", "v1", m)
	value, labeled := m.Labels[v1alpha1.LabelDatastore]
	if labeled {
		n.Labels = map[string]string{v1alpha1.LabelDatastore: value}
	}
	consent := v1alpha1.LabelDatastore + "=" + datastore
	switch {
	case n.terminating(m):
	case value == datastore:
		n.set(ReadyTrue, "Labeled", "consent label "+consent)
	case labeled:
		n.set(ReadyFalse, v1alpha1.ReasonSecretNotLabeled, fmt.Sprintf("its consent label is %s=%s, not %s: nothing is copied out of it", v1alpha1.LabelDatastore, value, consent))
	default:
		n.set(ReadyFalse, v1alpha1.ReasonSecretNotLabeled, "no consent label "+consent+": nothing is copied out of it")
	}
	return n
}
