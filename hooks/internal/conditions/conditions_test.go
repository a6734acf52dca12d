package conditions

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCarry(t *testing.T) {
	then := metav1.NewTime(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
	now := time.Date(2026, 1, 1, 0, 0, 0, 500, time.UTC)
	observed := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, LastTransitionTime: then}}
	cases := map[string]struct {
		reason string
		in     metav1.Condition
		want   metav1.Time
	}{
		"Unchanged": {
			reason: "Same type and status keep the old time, whatever the reason or message.",
			in:     metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Other"},
			want:   then,
		},
		"Flipped": {
			reason: "A new status is a transition, at now to the second.",
			in:     metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse},
			want:   metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		"New": {
			reason: "A condition seen for the first time starts now.",
			in:     metav1.Condition{Type: "Denied", Status: metav1.ConditionFalse},
			want:   metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Carry(observed, tc.in, now).LastTransitionTime
			if diff := cmp.Diff(tc.want.UTC(), got.UTC()); diff != "" {
				t.Errorf("%s\nCarry(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
