package observation

import (
	"encoding/json"
	"testing"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/clustercontrol/ccapi"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWorkspaceObservationWireShape pins the JSON the hook server posts for
// a workspace: the embedded ccapi.WorkspaceStatus must sit flat beside
// namespace and name, as it did before the two types were unified.
func TestWorkspaceObservationWireShape(t *testing.T) {
	ws := &v1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop"},
		Spec:       v1alpha1.WorkspaceSpec{ClusterClass: "standard"},
	}
	status := &v1alpha1.WorkspaceStatus{
		ObservedGeneration: 7,
		Phase:              "Ready",
		Replicas:           2,
		ReadyReplicas:      2,
		UpdatedReplicas:    2,
		// Not part of what Cluster Control gets.
		ServiceName:  "shop",
		ArtifactHash: "sha256:9b2c",
		Datastores:   []v1alpha1.WorkspaceDatastoreStatus{{Name: "orders", Claim: "shop-orders", State: "Injected"}},
	}
	want := `{"observations":[{"workspace":{
		"namespace":"team-a","name":"shop",
		"clusterClass":"standard","observedGeneration":7,"phase":"Ready",
		"replicas":2,"readyReplicas":2,"updatedReplicas":2,
		"artifactHash":"sha256:9b2c",
		"datastores":[{"name":"orders","claim":"shop-orders","state":"Injected"}]}}]}`

	built := Batch{Observations: []Observation{WorkspaceObservation(ws, status)}}
	got, err := json.Marshal(built)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(normalize(t, []byte(want)), normalize(t, got)); diff != "" {
		t.Errorf("encoded batch (-want, +got):\n%s", diff)
	}
	var decoded Batch
	if err := json.Unmarshal([]byte(want), &decoded); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(built, decoded); diff != "" {
		t.Errorf("decoded batch (-want, +got):\n%s", diff)
	}
}

func normalize(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("cannot decode %s: %v", b, err)
	}
	return v
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		reason string
		obs    Observation
		want   error
	}{
		"Workspace": {
			reason: "A named workspace status is usable.",
			obs:    Observation{Workspace: &WorkspaceStatus{Namespace: "ns", Name: "ws", WorkspaceStatus: ccapi.WorkspaceStatus{Phase: "Ready"}}},
		},
		"Pod": {
			reason: "A pod with its workspace label is usable.",
			obs:    Observation{Pod: &PodPlacement{Namespace: "ns", Name: "p", Workspace: "ws"}},
		},
		"Empty": {
			reason: "An observation must say what it observed.",
			want:   cmpopts.AnyError,
		},
		"TwoKinds": {
			reason: "An observation carries exactly one kind.",
			obs:    Observation{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, WorkspaceDeleted: &WorkspaceRef{Namespace: "ns", Name: "ws"}},
			want:   cmpopts.AnyError,
		},
		"UnnamedWorkspace": {
			reason: "The reporter keys workspaces by namespace and name.",
			obs:    Observation{Workspace: &WorkspaceStatus{Namespace: "ns"}},
			want:   cmpopts.AnyError,
		},
		"PodWithoutWorkspace": {
			reason: "A pod is only counted towards its workspace.",
			obs:    Observation{Pod: &PodPlacement{Namespace: "ns", Name: "p"}},
			want:   cmpopts.AnyError,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.obs.Validate(), cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nValidate(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
