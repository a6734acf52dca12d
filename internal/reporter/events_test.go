package reporter

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestEventsDeduplicatedLimitedAndClean records Events through the real
// client-go recorder into a fake API: a repeated reason on one object is
// one Event with a series, a flapping object is cut off by the per-object
// limit, and nothing from the credentials reaches an Event.
func TestEventsDeduplicatedLimitedAndClean(t *testing.T) {
	fc := newFakeCluster(t)
	cfg := fastConfig("http://127.0.0.1:1")
	cfg.Kube = fc.clients()
	cfg.EventBurst, cfg.EventInterval = 4, time.Hour
	now := t0
	cfg.now = func() time.Time { return now }
	r := newReporter(t, cfg)
	runLoops(t, func(ctx context.Context) { _ = r.Run(ctx) })
	testsync.WaitFor(t, "the reporter to run", r.ready.Load)

	// A claim granted with credentials whose hash must never show.
	claim := &v1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "shop-orders", UID: "c-1"},
		Spec: v1alpha1.ResourceClaimSpec{Workspace: "shop"}}
	status := func(granted bool, hash, reason string) *v1alpha1.ResourceClaimStatus {
		s := metav1.ConditionFalse
		if granted {
			s = metav1.ConditionTrue
		}
		return &v1alpha1.ResourceClaimStatus{CredentialsHash: hash, Conditions: []metav1.Condition{{
			Type: "Ready", Status: s, Reason: reason, Message: "decided", LastTransitionTime: metav1.NewTime(now)}}}
	}
	const secretHash = "sha256:5ec7e75ec7e75ec7e7"
	mustObserve(t, r, observation.ClaimObservation(claim, status(true, secretHash, "Verified")))
	// Flapping: denied and granted again, twice each. A repeated reason is
	// one Event with a series.
	mustObserve(t, r, observation.ClaimObservation(claim, status(false, "", "Expired")))
	mustObserve(t, r, observation.ClaimObservation(claim, status(true, secretHash, "Verified")))
	mustObserve(t, r, observation.ClaimObservation(claim, status(false, "", "Expired")))
	// Over the burst of 4 for this claim: the next announcement is cut.
	mustObserve(t, r, observation.ClaimObservation(claim, status(true, "sha256:other", "Verified")))

	testsync.WaitFor(t, "the Events to be written", func() bool {
		series := 0
		for _, e := range fc.eventList(t) {
			if e.Series != nil {
				series++
			}
		}
		return series == 2
	})
	got := map[string]int32{}
	for _, e := range fc.eventList(t) {
		n := int32(1)
		if e.Series != nil {
			n = e.Series.Count
		}
		got[e.Type+" "+e.Reason] = n
		if e.Regarding.Kind != "ResourceClaim" || e.Regarding.Name != "shop-orders" || e.Regarding.UID != "c-1" {
			t.Errorf("event %s regards %+v, want the claim", e.Name, e.Regarding)
		}
		raw, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{secretHash, "5ec7e7", observation.ClaimObservation(claim, status(true, secretHash, "Verified")).Claim.CredentialsVersion} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("event %s carries credential material %q: %s", e.Name, secret, raw)
			}
		}
	}
	want := map[string]int32{"Normal ClaimGranted": 2, "Warning ClaimDenied": 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events by reason with their counts (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff(1.0, testutil.ToFloat64(r.m.events.WithLabelValues("rate_limited"))); diff != "" {
		t.Errorf("rate-limited events (-want, +got):\n%s", diff)
	}
}
