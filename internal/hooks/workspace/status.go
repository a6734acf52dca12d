package workspace

import (
	"cmp"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/internal/conditions"
)

// problem is a reason for the Degraded condition.
type problem struct {
	reason  string
	message string
}

// status computes the workspace status from what was observed: the
// children as they are, the related claims, and the class lookup. It never
// looks at what this sync is about to ask for, so it cannot claim progress
// that has not happened. a, for a sync that asks for the workspace's
// children, judges those not observed (missing.go); nil otherwise.
func (h *Hooks) status(o *observed, bindings []binding, classProblem *problem, t *takeover, a *absence) *v1alpha1.WorkspaceStatus {
	ws := o.ws
	st := &v1alpha1.WorkspaceStatus{ObservedGeneration: ws.Generation}
	dep := o.deployment
	if dep != nil {
		st.Replicas = dep.Status.Replicas
		st.ReadyReplicas = dep.Status.ReadyReplicas
		st.UpdatedReplicas = dep.Status.UpdatedReplicas
	}
	st.ArtifactHash = runningArtifactHash(ws, dep)
	if o.hasService {
		st.ServiceName = o.ws.Name
	}
	for _, b := range bindings {
		st.Datastores = append(st.Datastores, b.status)
	}
	if o.claimsKept() {
		st.Datastores = ws.Status.Datastores
	}

	kept := o.summary == summaryAbsent && dep != nil
	if kept {
		// The children are kept as they are until the first summary, and
		// the credentials their pods mount are the ones last reported: the
		// status goes on saying so, so that an upgrade (new hooks, the
		// reporter's first pass a moment later) moves no phase.
		bindings = lastReported(ws)
	}
	ready := readyCondition(dep)
	var missing []childRef
	var missingProblem *problem
	if a != nil {
		missing, missingProblem = a.missing, a.problem
	}
	progressing := progressingCondition(dep, bindings, missing)
	if t != nil {
		progressing = t.progressing(progressing, ws)
	}
	if kept && ws.Generation != ws.Status.ObservedGeneration {
		// A spec change is held back until the summary comes: not yet
		// observed, and said so.
		st.ObservedGeneration = ws.Status.ObservedGeneration
		progressing.Status, progressing.Reason, progressing.Message = metav1.ConditionTrue, v1alpha1.ReasonWaitingForClaimsSummary, waitingForSummaryMessage
	}
	degraded := metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonAsExpected, Message: "no problems observed"}
	if ws.DeletionTimestamp != nil {
		// During teardown only the teardown matters: a missing credential
		// or a stuck rollout no longer makes anything worse.
		ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonTerminating, Message: "the workspace is being deleted"}
		progressing = metav1.Condition{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonTerminating, Message: "scaling down, then removing the workspace's children"}
		bindings, dep = nil, nil
	}
	if p := firstProblem(cmp.Or(classProblem, missingProblem), dep, bindings); p != nil {
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, p.reason, p.message
	}
	st.Conditions = h.conditions(ws, ready, progressing, degraded)

	st.Phase = phase(ws.DeletionTimestamp != nil, degraded.Status == metav1.ConditionTrue, dep,
		ready.Status == metav1.ConditionTrue && progressing.Status == metav1.ConditionFalse)
	return st
}

// phase summarises the conditions. When several phases apply, the one that
// asks most of a person wins: Terminating > Degraded > Pending > Idle >
// Progressing > Ready (docs/workspaces.md). An idle workspace that also
// waits for a claim is Idle: nothing runs that could use the credentials.
// A ready workspace that waits for a claim is Progressing, not Ready: its
// pods will roll once the credentials arrive.
func phase(terminating, degraded bool, dep *appsv1.Deployment, settled bool) string {
	switch {
	case terminating:
		return v1alpha1.PhaseTerminating
	case degraded:
		return v1alpha1.PhaseDegraded
	case dep == nil:
		// Nothing observed yet: no other phase can be told.
		return v1alpha1.PhasePending
	case desiredReplicas(dep) == 0 && dep.Status.Replicas == 0:
		return v1alpha1.PhaseIdle
	case settled:
		return v1alpha1.PhaseReady
	}
	return v1alpha1.PhaseProgressing
}

func desiredReplicas(dep *appsv1.Deployment) int32 {
	if dep.Spec.Replicas == nil {
		return 1
	}
	return *dep.Spec.Replicas
}

func readyCondition(dep *appsv1.Deployment) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse}
	if dep == nil {
		c.Reason, c.Message = "DeploymentNotFound", "waiting for the Deployment to be created"
		return c
	}
	switch want := desiredReplicas(dep); {
	case want == 0:
		c.Reason, c.Message = "ScaledToZero", "the workspace is scaled to zero and runs no pods"
	case dep.Status.AvailableReplicas >= want:
		c.Status = metav1.ConditionTrue
		c.Reason = v1alpha1.ReasonReplicasAvailable
		c.Message = fmt.Sprintf("%d of %d replicas available", dep.Status.AvailableReplicas, want)
	default:
		c.Reason = v1alpha1.ReasonReplicasUnavailable
		c.Message = fmt.Sprintf("%d of %d replicas available", dep.Status.AvailableReplicas, want)
	}
	return c
}

// progressingCondition is True while the workspace's children are
// created (missing: those a sync asks for and does not observe) or its
// Deployment rolls out, and while a claim the workspace expects is still
// being verified: its credentials will roll the pods once more when they
// arrive.
func progressingCondition(dep *appsv1.Deployment, bindings []binding, missing []childRef) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue}
	waiting := waitingFor(bindings)
	switch {
	case dep == nil:
		c.Reason, c.Message = v1alpha1.ReasonCreating, "creating the workspace's Deployment"
	case len(missing) > 0:
		names := make([]string, len(missing))
		for i, r := range missing {
			names[i] = r.String()
		}
		c.Reason, c.Message = v1alpha1.ReasonCreating, "creating the workspace's "+strings.Join(names, ", ")
	case deadlineExceeded(dep):
		c.Status = metav1.ConditionFalse
		c.Reason = v1alpha1.ReasonProgressDeadlineExceeded
		c.Message = "the Deployment's rollout exceeded its progress deadline"
	case !rolloutComplete(dep):
		c.Reason = v1alpha1.ReasonRollingOut
		c.Message = fmt.Sprintf("%d of %d replicas updated, %d available", dep.Status.UpdatedReplicas, desiredReplicas(dep), dep.Status.AvailableReplicas)
	case len(waiting) > 0:
		c.Reason = v1alpha1.ReasonWaitingForCredentials
		c.Message = "waiting for credentials: " + strings.Join(waiting, "; ")
	default:
		c.Status = metav1.ConditionFalse
		c.Reason = v1alpha1.ReasonRolloutComplete
		c.Message = fmt.Sprintf("all %d replicas run the current pod template", desiredReplicas(dep))
	}
	return c
}

// waitingFor describes the datastores whose claim is not verified yet.
func waitingFor(bindings []binding) []string {
	var out []string
	for _, b := range bindings {
		switch {
		case b.status.State != v1alpha1.DatastorePending:
		case b.status.Claim == "":
			out = append(out, fmt.Sprintf("%s: no claims summary (annotation %s) yet", b.ref.Name, claimsummary.Annotation))
		default:
			out = append(out, fmt.Sprintf("%s: rclaim %q is not verified yet", b.ref.Name, b.status.Claim))
		}
	}
	return out
}

// rolloutComplete follows the check kubectl rollout status makes: the
// Deployment controller saw the latest spec, every replica is updated and
// available, and no old replica is left.
func rolloutComplete(dep *appsv1.Deployment) bool {
	want := desiredReplicas(dep)
	s := dep.Status
	return s.ObservedGeneration >= dep.Generation &&
		s.UpdatedReplicas >= want &&
		s.Replicas <= s.UpdatedReplicas &&
		s.AvailableReplicas >= want
}

// runningArtifactHash is the artifact binary hash the workspace's pods
// run, the one a restart_required directive waits for: the reporter
// reports the directive consumed once status.artifactHash equals its hash,
// so this must never be merely the hash the template asks for. The
// observed template's hash counts once the rollout of that template has
// completed (templateRolledOut); until then the pods still run what they
// ran before, which is what the Workspace's status already says. On a
// first rollout that is nothing: the hash stays empty until the first
// pods are all up. No Deployment observed, no pods, no hash.
func runningArtifactHash(ws *v1alpha1.Workspace, dep *appsv1.Deployment) string {
	switch {
	case dep == nil:
		return ""
	case templateRolledOut(dep):
		return dep.Spec.Template.Annotations[v1alpha1.AnnotationArtifactBinaryHash]
	}
	return ws.Status.ArtifactHash
}

// templateRolledOut reports whether every pod of the Deployment runs its
// current template: the Deployment controller has seen that template
// (observedGeneration = generation), every desired replica is updated and
// ready, and no pod of an older template is left, running or shutting
// down. It is stricter than rolloutComplete, which judges availability
// for the Ready condition: a directive's consumption must wait for the
// last old pod. A workspace scaled to zero runs no pod, so its template is
// what any pod will run.
func templateRolledOut(dep *appsv1.Deployment) bool {
	want := desiredReplicas(dep)
	s := dep.Status
	return s.ObservedGeneration == dep.Generation &&
		s.UpdatedReplicas == want &&
		s.ReadyReplicas == want &&
		s.Replicas == s.UpdatedReplicas &&
		ptr.Deref(s.TerminatingReplicas, 0) == 0
}

func deadlineExceeded(dep *appsv1.Deployment) bool {
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded" {
			return true
		}
	}
	return false
}

func replicaFailure(dep *appsv1.Deployment) (string, bool) {
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			return c.Message, true
		}
	}
	return "", false
}

// firstProblem picks the most important reason the workspace is degraded.
func firstProblem(classProblem *problem, dep *appsv1.Deployment, bindings []binding) *problem {
	if classProblem != nil {
		return classProblem
	}
	if dep != nil && deadlineExceeded(dep) {
		return &problem{reason: v1alpha1.ReasonProgressDeadlineExceeded, message: "the Deployment's rollout exceeded its progress deadline; check the workspace's pods and events"}
	}
	if dep != nil {
		if msg, ok := replicaFailure(dep); ok {
			return &problem{reason: v1alpha1.ReasonReplicaFailure, message: "the Deployment cannot create pods: " + msg}
		}
	}
	// A claim still being verified is not a problem yet (see
	// progressingCondition); a missing or denied one is.
	var missing []string
	for _, b := range bindings {
		switch b.status.State {
		case v1alpha1.DatastoreMissing:
			missing = append(missing, fmt.Sprintf("%s: no ResourceClaim (kubectl: rclaim) for this workspace", b.ref.Name))
		case v1alpha1.DatastoreDenied:
			missing = append(missing, fmt.Sprintf("%s: rclaim %q is denied", b.ref.Name, b.status.Claim))
		}
	}
	if len(missing) > 0 {
		return &problem{reason: v1alpha1.ReasonDatastoreNotInjected, message: "credentials not injected for " + strings.Join(missing, "; ")}
	}
	return nil
}

// conditions stamps the three conditions with the workspace's generation
// and a transition time, by the rule of conditions.Stamp: an unchanged
// status keeps its time, a workspace without conditions yet takes its
// creation time, anything else the clock. While the workspace is being
// deleted every change began with the deletion, so the deletion time
// stands in for both. Only a change outside those cases reads the clock,
// which keeps a repeated request's answer identical byte for byte.
func (h *Hooks) conditions(ws *v1alpha1.Workspace, conds ...metav1.Condition) []metav1.Condition {
	for i := range conds {
		conds[i].ObservedGeneration = ws.Generation
	}
	created, now := ws.CreationTimestamp, h.cfg.Now()
	if ws.DeletionTimestamp != nil {
		created, now = *ws.DeletionTimestamp, ws.DeletionTimestamp.Time
	}
	return conditions.Stamp(ws.Status.Conditions, created, now, conds...)
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// lastReported are the workspace's datastore entries as its status last
// reported them.
func lastReported(ws *v1alpha1.Workspace) []binding {
	out := make([]binding, 0, len(ws.Status.Datastores))
	for _, d := range ws.Status.Datastores {
		out = append(out, binding{ref: v1alpha1.DatastoreRef{Name: d.Name}, status: d})
	}
	return out
}
