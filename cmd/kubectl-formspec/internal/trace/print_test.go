package trace

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPrintText pins the table: the tree drawn in the NAME column, the
// columns aligned across every row, Events under their node with the
// tree's lines running through them, and which Events each output shows.
func TestPrintText(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	event := func(typ, reason, msg string, count int32, ago time.Duration) Event {
		return Event{Type: typ, Reason: reason, Message: msg, Count: count, LastSeen: *at(ago), Source: "kubelet"}
	}
	tree := func() *Node {
		return &Node{Kind: "Workspace", Namespace: "team-a", Name: "shop", Ready: ReadyFalse, Status: "Degraded", Reason: "DatastoreNotInjected", Message: "credentials not\ninjected", Created: at(time.Hour), Children: []*Node{
			{Kind: "Deployment", Namespace: "team-a", Name: "shop", Ready: ReadyTrue, Status: "1/1", Created: at(time.Hour),
				Events: []Event{event("Normal", "ScalingReplicaSet", "Scaled up", 1, time.Minute)},
				Children: []*Node{{Kind: "Pod", Namespace: "team-a", Name: "shop-x", Ready: ReadyFalse, Reason: "CrashLoopBackOff", Created: at(2 * time.Minute),
					Events: []Event{event("Warning", "BackOff", "Back-off restarting", 14, 30*time.Second)}}}},
			{Kind: "ResourceClaim", Namespace: "team-a", Datastore: "orders-db", Ready: ReadyFalse, Reason: "NotFound", Message: "no claim"},
		}}
	}
	cases := map[string]struct {
		reason string
		wide   bool
		want   string
	}{
		"Table": {
			reason: "The Events of nodes that are not Ready (and Warnings) only.",
			want: `NAME                     READY   STATUS     REASON                 AGE   MESSAGE
Workspace/shop           False   Degraded   DatastoreNotInjected   60m   credentials not injected
├─Deployment/shop        True    1/1                               60m
│ └─Pod/shop-x           False   -          CrashLoopBackOff       2m
│       Warning BackOff 30s ago (x14) from kubelet: Back-off restarting
└─ResourceClaim/<none>   False   -          NotFound               -     no claim
`,
		},
		"Wide": {
			reason: "A NAMESPACE column, and every node's Events.",
			wide:   true,
			want: `NAMESPACE   NAME                     READY   STATUS     REASON                 AGE   MESSAGE
team-a      Workspace/shop           False   Degraded   DatastoreNotInjected   60m   credentials not injected
team-a      ├─Deployment/shop        True    1/1                               60m
            │ │   Normal ScalingReplicaSet 60s ago from kubelet: Scaled up
team-a      │ └─Pod/shop-x           False   -          CrashLoopBackOff       2m
            │       Warning BackOff 30s ago (x14) from kubelet: Back-off restarting
team-a      └─ResourceClaim/<none>   False   -          NotFound               -     no claim
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := PrintText(&b, tree(), tc.wide, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, b.String()); diff != "" {
				t.Errorf("%s\nPrintText: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
