// Package trace builds and prints the tree of a Workspace, a ResourceClaim
// or a Datastore for `kubectl formspec trace`: every object the operator
// made or reads for it, with its ready state, what blocks it and its
// latest Events. Secrets are read as metadata only: their data never
// leaves the API server.
package trace

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Ready states of a node. A node without a notion of readiness (a
// Service, a ConfigMap, a ClusterClass, a Secret that exists) has none.
const (
	ReadyTrue    = "True"
	ReadyFalse   = "False"
	ReadyUnknown = "Unknown"
)

// Node is one object of a trace.
type Node struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Namespace  string `json:"namespace,omitempty"`
	// Name is empty for an object that should exist and does not (a
	// datastore of the workspace no claim serves).
	Name string `json:"name"`
	// Datastore is the spec.datastores entry a claim of a Workspace's
	// tree serves.
	Datastore string `json:"datastore,omitempty"`
	// Ready is ReadyTrue, ReadyFalse, ReadyUnknown, or empty for an
	// object that has no ready state: it is fine as long as it exists.
	Ready string `json:"ready,omitempty"`
	// Status is a short summary: a phase, ready replicas, a Service type.
	Status string `json:"status,omitempty"`
	// Reason and Message say why the object is not Ready, or what it is
	// when it is.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Created is the object's creationTimestamp; nil when it does not
	// exist.
	Created *metav1.Time `json:"creationTimestamp,omitempty"`
	// Labels holds only the labels the trace is about: the consent label
	// of a Datastore's endpoint Secret.
	Labels map[string]string `json:"labels,omitempty"`
	// Events are the object's latest Events, newest first.
	Events   []Event `json:"events,omitempty"`
	Children []*Node `json:"children,omitempty"`

	// uid finds the node's Events.
	uid types.UID
}

// Event is one Kubernetes Event about a node, as kubectl events shows it.
type Event struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Count is how often it happened (1 for a single occurrence).
	Count int32 `json:"count"`
	// LastSeen is when it last happened.
	LastSeen metav1.Time `json:"lastSeen"`
	// Source is the component that reported it.
	Source string `json:"source,omitempty"`
}

// Ref is "Kind/name", or "Kind/<none>" for an object that does not exist.
func (n *Node) Ref() string {
	name := n.Name
	if name == "" {
		name = "<none>"
	}
	return n.Kind + "/" + name
}

// AllReady reports whether every node of the tree is Ready or has no
// ready state.
func (n *Node) AllReady() bool {
	return len(n.NotReady()) == 0
}

// NotReady lists the nodes of the tree that are not Ready, in tree order.
func (n *Node) NotReady() []*Node {
	var out []*Node
	n.walk(func(m *Node) {
		if m.Ready != "" && m.Ready != ReadyTrue {
			out = append(out, m)
		}
	})
	return out
}

// walk calls fn on n and every node below it, depth first.
func (n *Node) walk(fn func(*Node)) {
	fn(n)
	for _, c := range n.Children {
		c.walk(fn)
	}
}

// newNode starts the node of an object that exists.
func newNode(kind, apiVersion string, m *metav1.ObjectMeta) *Node {
	n := &Node{Kind: kind, APIVersion: apiVersion, Namespace: m.Namespace, Name: m.Name, uid: m.UID}
	if !m.CreationTimestamp.IsZero() {
		n.Created = m.CreationTimestamp.DeepCopy()
	}
	return n
}

// missing is the node of an object that should exist and does not.
func missing(kind, apiVersion, namespace, name, reason, message string) *Node {
	return &Node{Kind: kind, APIVersion: apiVersion, Namespace: namespace, Name: name, Ready: ReadyFalse, Reason: reason, Message: message}
}

// set fills the ready state and its explanation.
func (n *Node) set(ready, reason, message string) *Node {
	n.Ready, n.Reason, n.Message = ready, reason, message
	return n
}

// fromCondition fills the ready state from a condition.
func (n *Node) fromCondition(c *metav1.Condition) *Node {
	return n.set(string(c.Status), c.Reason, c.Message)
}

// terminating marks an object that is being deleted.
func (n *Node) terminating(m *metav1.ObjectMeta) bool {
	if m.DeletionTimestamp == nil {
		return false
	}
	n.set(ReadyFalse, "Terminating", fmt.Sprintf("being deleted since %s", m.DeletionTimestamp.UTC().Format("2006-01-02T15:04:05Z")))
	n.Status = "Terminating"
	return true
}

// outdated marks a status older than the spec: it describes a previous
// generation, and whoever writes it has not caught up.
func (n *Node) outdated(m *metav1.ObjectMeta, observed int64, writer string) bool {
	if observed >= m.Generation {
		return false
	}
	n.set(ReadyFalse, "StatusOutdated", fmt.Sprintf("the status is of generation %d and the spec is at generation %d: %s has not caught up yet", observed, m.Generation, writer))
	return true
}

// sortEvents orders events newest first.
func sortEvents(events []Event) {
	slices.SortStableFunc(events, func(a, b Event) int { return b.LastSeen.Compare(a.LastSeen.Time) })
}
