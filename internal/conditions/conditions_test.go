package conditions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStamp(t *testing.T) {
	created := metav1.NewTime(time.Date(2025, 5, 1, 8, 0, 0, 0, time.UTC))
	then := metav1.NewTime(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 1, 1, 0, 0, 0, 500, time.UTC)
	clock := metav1.NewTime(now.Truncate(time.Second))
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: then}}
	cases := map[string]struct {
		reason   string
		observed []metav1.Condition
		created  metav1.Time
		next     []metav1.Condition
		want     []metav1.Time
	}{
		"Unchanged": {
			reason:   "Same type and status keep the old time, whatever the reason or message.",
			observed: ready,
			created:  created,
			next:     []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Other"}},
			want:     []metav1.Time{then},
		},
		"Flipped": {
			reason:   "A new status on an object that had conditions is a transition now, to the second.",
			observed: ready,
			created:  created,
			next:     []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse}},
			want:     []metav1.Time{clock},
		},
		"NewTypeAmongOthers": {
			reason:   "A condition that appears on an object that already has others is a change now.",
			observed: ready,
			created:  created,
			next:     []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}, {Type: "Denied", Status: metav1.ConditionFalse}},
			want:     []metav1.Time{then, clock},
		},
		"FreshTakesCreation": {
			reason:  "An object without conditions got its state when it was created, so every condition starts then.",
			created: created,
			next:    []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse}, {Type: "Denied", Status: metav1.ConditionTrue}},
			want:    []metav1.Time{created, created},
		},
		"FreshWithoutCreation": {
			reason: "Without a creation time the request cannot say when the state began: the clock decides.",
			next:   []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}},
			want:   []metav1.Time{clock},
		},
		"ZeroTimeIsNoTime": {
			reason:   "An observed condition without a time does not pass a zero time on.",
			observed: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}},
			created:  created,
			next:     []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}},
			want:     []metav1.Time{clock},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []metav1.Time
			for _, c := range Stamp(tc.observed, tc.created, now, tc.next...) {
				got = append(got, c.LastTransitionTime)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nStamp(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
