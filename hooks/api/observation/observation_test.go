package observation

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/codec"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWorkspaceObservationWireShape pins the JSON the hook server posts for
// a workspace: the status fields sit flat beside namespace and name, and
// the annotations the reporter acts on are read from the Workspace.
func TestWorkspaceObservationWireShape(t *testing.T) {
	ws := &v1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop", UID: "u-1",
			Annotations: map[string]string{v1alpha1.AnnotationArtifactBinaryHash: "sha256:aa11", v1alpha1.AnnotationIdle: "true"}},
		Spec: v1alpha1.WorkspaceSpec{ClusterClass: "standard"},
	}
	class := &v1alpha1.ClusterClass{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Spec: v1alpha1.ClusterClassSpec{MaxWorkspaces: 40}}
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
		"namespace":"team-a","name":"shop","uid":"u-1",
		"clusterClass":"standard","observedGeneration":7,"phase":"Ready",
		"replicas":2,"readyReplicas":2,"updatedReplicas":2,
		"artifactHash":"sha256:9b2c",
		"datastores":[{"name":"orders","claim":"shop-orders","state":"Injected"}],
		"wantedArtifactHash":"sha256:aa11","idle":true,
		"class":{"name":"standard","maxWorkspaces":40},
		"observedAt":"2026-12-02T07:00:00.123456789Z","statusChanged":true}}]}`

	at := time.Date(2026, 12, 2, 7, 0, 0, 123456789, time.UTC)
	built := Batch{Observations: []Observation{WorkspaceObservation(ws, status, at).WithClass(class)}}
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

// TestWorkspaceObservationStatusChanged shows when an observation says the
// sync changes the Workspace's status: whenever any field of the computed
// status differs from the one the Workspace carried, a condition's
// transition time included, and never when they are the same.
func TestWorkspaceObservationStatusChanged(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	status := func() v1alpha1.WorkspaceStatus {
		return v1alpha1.WorkspaceStatus{
			ObservedGeneration: 3, Phase: "Ready", Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1,
			ServiceName: "shop", ArtifactHash: "sha256:9b2c",
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready",
				ObservedGeneration: 3, LastTransitionTime: since}},
			Datastores: []v1alpha1.WorkspaceDatastoreStatus{{Name: "orders", Claim: "shop-orders", State: "Injected"}},
		}
	}
	// Each case is named after the field it changes (a suffix tells two
	// cases of one field apart), and every field has one: sameStatus
	// compares field by field, which is cheaper on the sync path than a
	// reflective comparison, so a new field must be added there too.
	cases := map[string]struct {
		change func(*v1alpha1.WorkspaceStatus)
		want   bool
	}{
		"Same":               {change: func(*v1alpha1.WorkspaceStatus) {}},
		"ObservedGeneration": {change: func(s *v1alpha1.WorkspaceStatus) { s.ObservedGeneration = 4 }, want: true},
		"Phase":              {change: func(s *v1alpha1.WorkspaceStatus) { s.Phase = "Progressing" }, want: true},
		"Replicas":           {change: func(s *v1alpha1.WorkspaceStatus) { s.Replicas = 2 }, want: true},
		"ReadyReplicas":      {change: func(s *v1alpha1.WorkspaceStatus) { s.ReadyReplicas = 0 }, want: true},
		"UpdatedReplicas":    {change: func(s *v1alpha1.WorkspaceStatus) { s.UpdatedReplicas = 0 }, want: true},
		"ServiceName":        {change: func(s *v1alpha1.WorkspaceStatus) { s.ServiceName = "" }, want: true},
		"ArtifactHash":       {change: func(s *v1alpha1.WorkspaceStatus) { s.ArtifactHash = "sha256:aa11" }, want: true},
		"Datastores":         {change: func(s *v1alpha1.WorkspaceStatus) { s.Datastores[0].State = "Pending" }, want: true},
		"DatastoresNone":     {change: func(s *v1alpha1.WorkspaceStatus) { s.Datastores = nil }, want: true},
		"Conditions":         {change: func(s *v1alpha1.WorkspaceStatus) { s.Conditions[0].Reason = "Other" }, want: true},
		"ConditionsTransition": {change: func(s *v1alpha1.WorkspaceStatus) {
			s.Conditions[0].LastTransitionTime = metav1.NewTime(since.Add(time.Second))
		}, want: true},
		"ConditionsAdded": {change: func(s *v1alpha1.WorkspaceStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse})
		}, want: true},
	}
	for f := range reflect.TypeFor[v1alpha1.WorkspaceStatus]().Fields() {
		if _, ok := cases[f.Name]; !ok {
			t.Errorf("no case changes WorkspaceStatus.%s: add one, and compare the field in sameStatus", f.Name)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop"}, Status: status()}
			computed := status()
			tc.change(&computed)
			got := WorkspaceObservation(ws, &computed, time.Time{}).Workspace.StatusChanged
			if got != tc.want {
				t.Errorf("StatusChanged = %v, want %v", got, tc.want)
			}
		})
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
			obs:    Observation{Workspace: &WorkspaceStatus{Namespace: "ns", Name: "ws", Phase: "Ready"}},
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
		"Claim": {
			reason: "A named claim decision is usable.",
			obs:    Observation{Claim: &ClaimDecision{Namespace: "ns", Name: "c"}},
		},
		"UnnamedClaim": {
			reason: "Events need the claim's name.",
			obs:    Observation{Claim: &ClaimDecision{Namespace: "ns"}},
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

// TestClaimObservation checks what a claim decision hands over: the Ready
// condition's verdict and words, and a credentials version that changes
// with the credentials hash but does not contain it.
func TestClaimObservation(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	claim := &v1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop-orders", UID: "c-1"},
		Spec:       v1alpha1.ResourceClaimSpec{Workspace: "shop"},
	}
	granted := func(hash string) *v1alpha1.ResourceClaimStatus {
		return &v1alpha1.ResourceClaimStatus{CredentialsHash: hash, Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Verified", Message: "ok", LastTransitionTime: since},
			{Type: "Denied", Status: metav1.ConditionFalse, Reason: "Verified", Message: "ok", LastTransitionTime: since},
		}}
	}
	denied := &v1alpha1.ResourceClaimStatus{Conditions: []metav1.Condition{
		{Type: "Ready", Status: metav1.ConditionFalse, Reason: "SignatureInvalid", Message: "signature does not verify", LastTransitionTime: since},
	}}
	g1 := ClaimObservation(claim, granted("sha256:1111")).Claim
	g2 := ClaimObservation(claim, granted("sha256:2222")).Claim
	d := ClaimObservation(claim, denied).Claim

	want := &ClaimDecision{Namespace: "team-a", Name: "shop-orders", UID: "c-1", Workspace: "shop",
		Reason: "SignatureInvalid", Message: "signature does not verify", Since: since}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("denied claim: -want, +got:\n%s", diff)
	}
	if !g1.Granted || g1.CredentialsVersion == "" || g1.CredentialsVersion == g2.CredentialsVersion {
		t.Errorf("granted claims: want distinct credentials versions per hash, got %+v and %+v", g1, g2)
	}
	raw, err := json.Marshal(g1)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "sha256:1111") {
		t.Errorf("claim observation carries the credentials hash: %s", raw)
	}
	if g1.Exposed != nil {
		t.Errorf("granted claim without a CredentialsExposed condition: Exposed %+v, want nil", g1.Exposed)
	}

	// The findings are handed over while True, and only then; a claim
	// that gains or loses one is no repeat of its observed status.
	findings := map[string]struct {
		reason, message string
		get             func(*ClaimDecision) *Finding
	}{
		"CredentialsExposed": {"LastAppliedAnnotation", "the Secret carries a copy of its data", func(d *ClaimDecision) *Finding { return d.Exposed }},
		"LegacySignature":    {"SignatureV1", "granted on a v1 signature", func(d *ClaimDecision) *Finding { return d.LegacySignature }},
	}
	for typ, f := range findings {
		for status, want := range map[metav1.ConditionStatus]*Finding{
			metav1.ConditionTrue:  {Reason: f.reason, Message: f.message},
			metav1.ConditionFalse: nil,
		} {
			st := granted("sha256:1111")
			st.Conditions = append(st.Conditions, metav1.Condition{Type: typ, Status: status,
				Reason: f.reason, Message: f.message, LastTransitionTime: since})
			observed := *claim
			observed.Status = *granted("sha256:1111")
			o := ClaimObservation(&observed, st).Claim
			if diff := cmp.Diff(want, f.get(o)); diff != "" {
				t.Errorf("%s=%s: -want, +got:\n%s", typ, status, diff)
			}
			if o.Repeat != (want == nil) {
				t.Errorf("%s=%s on a claim observed without it: Repeat = %v, want %v", typ, status, o.Repeat, want == nil)
			}
		}
	}
}

// TestClaimObservationRepeat checks which decisions count as repeats of the
// status the claim was observed with: only one with the same verdict,
// reason, credentials and exposure. A repeat is not put on the wire.
func TestClaimObservationRepeat(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(since.Add(time.Hour))
	st := func(ready metav1.ConditionStatus, reason, hash string, exposed bool, at metav1.Time) v1alpha1.ResourceClaimStatus {
		s := v1alpha1.ResourceClaimStatus{ObservedGeneration: 1, CredentialsHash: hash, Conditions: []metav1.Condition{
			{Type: "Ready", Status: ready, Reason: reason, Message: "words for " + reason, LastTransitionTime: at},
		}}
		if exposed {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: "CredentialsExposed", Status: metav1.ConditionTrue,
				Reason: "LastAppliedAnnotation", LastTransitionTime: at})
		}
		return s
	}
	granted := st(metav1.ConditionTrue, "Verified", "sha256:1111", false, since)
	cases := map[string]struct {
		observed v1alpha1.ResourceClaimStatus
		decided  v1alpha1.ResourceClaimStatus
		want     bool
	}{
		"FirstDecision":   {observed: v1alpha1.ResourceClaimStatus{}, decided: granted, want: false},
		"Resync":          {observed: granted, decided: granted, want: true},
		"NewGeneration":   {observed: granted, decided: func() v1alpha1.ResourceClaimStatus { s := granted; s.ObservedGeneration = 2; return s }(), want: true},
		"Denied":          {observed: granted, decided: st(metav1.ConditionFalse, "Expired", "", false, later), want: false},
		"OtherDenial":     {observed: st(metav1.ConditionFalse, "Expired", "", false, since), decided: st(metav1.ConditionFalse, "SignatureInvalid", "", false, since), want: false},
		"SameDenial":      {observed: st(metav1.ConditionFalse, "Expired", "", false, since), decided: st(metav1.ConditionFalse, "Expired", "", false, since), want: true},
		"Rotated":         {observed: granted, decided: st(metav1.ConditionTrue, "Verified", "sha256:2222", false, since), want: false},
		"ExposureBegins":  {observed: granted, decided: st(metav1.ConditionTrue, "Verified", "sha256:1111", true, since), want: false},
		"ExposureGoes":    {observed: st(metav1.ConditionTrue, "Verified", "sha256:1111", true, since), decided: granted, want: false},
		"StillExposed":    {observed: st(metav1.ConditionTrue, "Verified", "sha256:1111", true, since), decided: st(metav1.ConditionTrue, "Verified", "sha256:1111", true, since), want: true},
		"GrantedAfterAll": {observed: st(metav1.ConditionFalse, "NoGrant", "", false, since), decided: st(metav1.ConditionTrue, "Verified", "sha256:1111", false, later), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			claim := &v1alpha1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop-orders", UID: "c-1"},
				Spec:       v1alpha1.ResourceClaimSpec{Workspace: "shop"},
				Status:     tc.observed,
			}
			d := ClaimObservation(claim, &tc.decided).Claim
			if d.Repeat != tc.want {
				t.Errorf("Repeat = %v, want %v", d.Repeat, tc.want)
			}
			// The hand-off encodes with the hooks' codec.
			raw, err := codec.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(strings.ToLower(string(raw)), "repeat") {
				t.Errorf("the wire carries Repeat: %s", raw)
			}
		})
	}
}
