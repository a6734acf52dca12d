// Package clustercontrol holds the wire types of the reporter ↔ Cluster Control
// contract described in docs/cluster-control-api.yaml. Both the reporter
// (client) and the reference Cluster Control (server) use them, so the two
// cannot drift apart silently; a test checks the OpenAPI document against
// the reference server's routes.
//
// Who imports it: the reporter and the reference Cluster Control in this
// repository, and a Cluster Control written in Go by a third party, which
// serves the same API; it is public for that last reader.
package clustercontrol

import (
	"fmt"
	"regexp"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Paths of the Cluster Control API.
const (
	PathNodeHealth      = "/v1/node-health"
	PathWorkspaceStatus = "/v1/workspace-status"
	PathDeployStatus    = "/v1/deploy-status"
)

// HeaderIdempotencyKey names the header that makes a report safe to retry:
// Cluster Control applies a given key at most once.
const HeaderIdempotencyKey = "Idempotency-Key"

// Node health values.
const (
	HealthHealthy  = "healthy"
	HealthDegraded = "degraded"
)

// Deploy-status actions. A reporter writes each onto its Workspace as an
// annotation and ignores actions it does not know.
const (
	// ActionRestartRequired asks that a workspace roll its pods onto a new
	// artifact: formspec.dev/artifact-binary-hash is set to ArtifactHash.
	ActionRestartRequired = "restart_required"
	// ActionIdle asks that a workspace scale to zero: formspec.dev/idle is
	// set to "true" (it takes effect when the workspace's class allows
	// scale-to-zero).
	ActionIdle = "idle"
	// ActionWake asks that an idle workspace run again: formspec.dev/idle
	// is removed.
	ActionWake = "wake"
)

// NodeHealthReport is the body of POST /v1/node-health: the latest state of
// every node one reporter has seen recently. Several reporters (one per hook
// server replica) each send their own view; Cluster Control merges them per
// node by ObservedAt and expires nodes no report has mentioned for a while.
type NodeHealthReport struct {
	// Reporter identifies the sending reporter (its pod name), so Cluster
	// Control can tell the replicas' views apart.
	Reporter string `json:"reporter"`
	// SentAt is when this report was assembled.
	SentAt time.Time `json:"sentAt"`
	// Nodes are sorted by name.
	Nodes []NodeHealth `json:"nodes"`
	// ClusterClasses are the classes this reporter has seen workspaces
	// use, sorted by name.
	ClusterClasses []ClassUsage `json:"clusterClasses,omitempty"`
}

// ClassUsage is one ClusterClass's placement limit and how many workspaces
// use it, as far as one reporter has seen. The limit is reported, not
// enforced: placing within it is Cluster Control's decision.
type ClassUsage struct {
	Name string `json:"name"`
	// MaxWorkspaces is the class's spec.maxWorkspaces; 0 means no limit.
	MaxWorkspaces int32 `json:"maxWorkspaces"`
	// WorkspaceCount is the number of live workspaces using the class that
	// this reporter knows.
	WorkspaceCount int `json:"workspaceCount"`
}

// NodeHealth is one node's state as last observed.
type NodeHealth struct {
	Name string `json:"name"`
	// Health is "healthy" when the node is Ready and reports no memory, disk
	// or PID pressure, "degraded" otherwise.
	Health        string          `json:"health"`
	Unschedulable bool            `json:"unschedulable"`
	Conditions    []NodeCondition `json:"conditions,omitempty"`
	Capacity      Resources       `json:"capacity"`
	Allocatable   Resources       `json:"allocatable"`
	// Labels are the node's formspec.dev/* labels only.
	Labels map[string]string `json:"labels,omitempty"`
	// WorkspaceCount is the number of distinct workspaces with a live pod on
	// the node, as far as this reporter has seen.
	WorkspaceCount int `json:"workspaceCount"`
	// Workspaces lists those workspaces as "namespace/name", sorted, so that
	// Cluster Control can union the views of several reporters.
	Workspaces []string `json:"workspaces,omitempty"`
	// ObservedAt is when this reporter last saw the node.
	ObservedAt time.Time `json:"observedAt"`
}

// NodeCondition is a node condition without its heartbeat time, which
// changes on every kubelet update and would make every report look new.
type NodeCondition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// Resources carries CPU and memory as Kubernetes quantity strings.
type Resources struct {
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// WorkspaceStatusReport is the body of POST /v1/workspace-status: one
// workspace's latest status, its deletion, and optionally the consumption of
// a directive.
type WorkspaceStatusReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// ObservedAt is when the reporter received this state. Reports about the
	// same workspace may arrive from several reporters and, after an outage,
	// late: Cluster Control keeps the one with the newest ObservedAt.
	ObservedAt time.Time `json:"observedAt"`
	// ReportedAt is when the reporter queued this report. A periodic
	// re-report of an unchanged workspace keeps ObservedAt and carries a new
	// ReportedAt, so it gets a new Idempotency-Key and is applied again by a
	// Cluster Control that lost its state, without overriding a newer
	// observation from another reporter.
	ReportedAt time.Time `json:"reportedAt,omitzero"`
	// Deleted is true when the workspace is gone; Status is then absent.
	Deleted bool             `json:"deleted,omitempty"`
	Status  *WorkspaceStatus `json:"status,omitempty"`
	// DirectiveConsumed, when set, says the workspace now does what a
	// directive asked for.
	DirectiveConsumed *DirectiveConsumed `json:"directiveConsumed,omitempty"`
	// AutoScale, when set, says the reporter itself woke or idled the
	// workspace, and why. Older reporters never send it.
	AutoScale *AutoScale `json:"autoScale,omitempty"`
}

// AutoScale actions and reasons: the reporter wakes a wake-on-request
// workspace when a request for it is held, and idles one the interceptor
// has seen no request for during its class's idleAfterSeconds.
const (
	AutoScaleWake    = "wake"
	AutoScaleIdle    = "idle"
	ReasonRequest    = "request"
	ReasonInactivity = "inactivity"
)

// AutoScale is a wake or an idle the reporter decided on its own, without
// a directive. Cluster Control's directives still win: the reporter neither
// wakes a workspace Cluster Control has told to idle nor idles one it has
// a directive for.
type AutoScale struct {
	// Action is "wake" or "idle".
	Action string `json:"action"`
	// Reason is "request" (a request was held for the idle workspace) or
	// "inactivity" (no request during idleAfterSeconds).
	Reason string `json:"reason"`
	// At is when the reporter decided.
	At time.Time `json:"at"`
}

// WorkspaceStatus is the part of a Workspace's status Cluster Control uses,
// copied field for field by the reporter from what the workspace hook
// computed.
type WorkspaceStatus struct {
	ClusterClass       string                              `json:"clusterClass,omitempty"`
	ObservedGeneration int64                               `json:"observedGeneration,omitempty"`
	Phase              string                              `json:"phase"`
	Conditions         []metav1.Condition                  `json:"conditions,omitempty"`
	Replicas           int32                               `json:"replicas"`
	ReadyReplicas      int32                               `json:"readyReplicas"`
	UpdatedReplicas    int32                               `json:"updatedReplicas"`
	ArtifactHash       string                              `json:"artifactHash,omitempty"`
	Datastores         []v1alpha1.WorkspaceDatastoreStatus `json:"datastores,omitempty"`
}

// DirectiveConsumed acknowledges a directive: restart_required once the
// workspace's pods run ArtifactHash, idle and wake once the workspace
// carries (or no longer carries) formspec.dev/idle.
type DirectiveConsumed struct {
	Action       string `json:"action"`
	ArtifactHash string `json:"artifactHash,omitempty"`
}

// DeployStatus is the body of GET /v1/deploy-status: the directives Cluster
// Control currently holds for this cluster. It is the complete set; a
// directive missing from it is withdrawn.
type DeployStatus struct {
	Directives []Directive `json:"directives"`
}

// Directive asks something of one workspace: restart_required (with
// ArtifactHash), idle or wake. A reporter ignores actions it does not know.
type Directive struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	Action       string `json:"action"`
	ArtifactHash string `json:"artifactHash,omitempty"`
}

// Validate reports a directive a reporter cannot carry out.
func (d Directive) Validate() error {
	if !dnsLabel.MatchString(d.Namespace) || !dnsLabel.MatchString(d.Name) {
		return fmt.Errorf("directive names no valid workspace")
	}
	switch d.Action {
	case ActionRestartRequired:
		if d.ArtifactHash == "" {
			return fmt.Errorf("restart_required needs an artifactHash")
		}
	case ActionIdle, ActionWake:
		if d.ArtifactHash != "" {
			return fmt.Errorf("%s takes no artifactHash", d.Action)
		}
	default:
		return fmt.Errorf("unknown action %q", d.Action)
	}
	return nil
}

// Error is the body of every non-2xx answer.
type Error struct {
	Error string `json:"error"`
}

// phases are the Workspace phases of formspec.dev/v1alpha1.
var phases = map[string]bool{
	v1alpha1.PhasePending: true, v1alpha1.PhaseProgressing: true, v1alpha1.PhaseReady: true,
	v1alpha1.PhaseIdle: true, v1alpha1.PhaseDegraded: true, v1alpha1.PhaseTerminating: true,
}

// dnsLabel matches a Kubernetes namespace or object name closely enough to
// reject garbage; the API server has already enforced the exact rules.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// Validate reports a report Cluster Control must reject with 400.
func (r *WorkspaceStatusReport) Validate() error {
	if !dnsLabel.MatchString(r.Namespace) {
		return fmt.Errorf("namespace %q is not a valid name", r.Namespace)
	}
	if !dnsLabel.MatchString(r.Name) {
		return fmt.Errorf("name %q is not a valid name", r.Name)
	}
	if r.ObservedAt.IsZero() {
		return fmt.Errorf("observedAt is required")
	}
	switch {
	case r.Deleted && r.Status != nil:
		return fmt.Errorf("a deleted workspace has no status")
	case !r.Deleted && r.Status == nil:
		return fmt.Errorf("status is required unless deleted is true")
	case r.Status != nil && !phases[r.Status.Phase]:
		return fmt.Errorf("phase %q is not a workspace phase", r.Status.Phase)
	case r.Status != nil && (r.Status.Replicas < 0 || r.Status.ReadyReplicas < 0 || r.Status.UpdatedReplicas < 0):
		return fmt.Errorf("replica counts cannot be negative")
	case r.DirectiveConsumed != nil:
		c := r.DirectiveConsumed
		if err := (Directive{Namespace: r.Namespace, Name: r.Name, Action: c.Action, ArtifactHash: c.ArtifactHash}).Validate(); err != nil {
			return fmt.Errorf("directiveConsumed: %w", err)
		}
	}
	return nil
}

// Validate reports a report Cluster Control must reject with 400.
func (r *NodeHealthReport) Validate() error {
	if r.Reporter == "" {
		return fmt.Errorf("reporter is required")
	}
	if r.SentAt.IsZero() {
		return fmt.Errorf("sentAt is required")
	}
	for i, n := range r.Nodes {
		if n.Name == "" {
			return fmt.Errorf("nodes[%d].name is required", i)
		}
		if n.Health != HealthHealthy && n.Health != HealthDegraded {
			return fmt.Errorf("nodes[%d].health %q is not healthy or degraded", i, n.Health)
		}
		if n.WorkspaceCount < 0 {
			return fmt.Errorf("nodes[%d].workspaceCount cannot be negative", i)
		}
	}
	for i, c := range r.ClusterClasses {
		if c.Name == "" {
			return fmt.Errorf("clusterClasses[%d].name is required", i)
		}
		if c.MaxWorkspaces < 0 || c.WorkspaceCount < 0 {
			return fmt.Errorf("clusterClasses[%d] counts cannot be negative", i)
		}
	}
	return nil
}

// Stamp returns t as the wire carries it: UTC, nanosecond precision, no
// monotonic reading. Two states observed a moment apart must give different
// bodies, or Cluster Control would dedupe a real A→B→A transition as a retry.
func Stamp(t time.Time) time.Time {
	return t.Round(0).UTC()
}
