// Package conditions builds status conditions for hook responses without
// reading a clock: the caller passes "now", and a transition time is taken
// from the request whenever the request says when the state began, so
// that the same request always yields the same bytes (ETags, fixtures and
// Metacontroller's no-op updates depend on it).
package conditions

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Stamp returns next with each condition's LastTransitionTime set from
// what the object already had (observed, its status.conditions) and when
// it was created:
//
//   - a condition whose type and status are unchanged keeps its time,
//     whatever its reason or message;
//   - when the object has no conditions at all yet, its state began when
//     the object did, so every condition takes created (its
//     metadata.creationTimestamp);
//   - any other transition happens now, truncated to the second, the
//     precision the API stores.
//
// Only the last case depends on the clock, and it is the one case where
// the request cannot tell when the change happened. A zero created falls
// back to now.
func Stamp(observed []metav1.Condition, created metav1.Time, now time.Time, next ...metav1.Condition) []metav1.Condition {
	fresh := len(observed) == 0 && !created.IsZero()
	out := make([]metav1.Condition, 0, len(next))
	for _, c := range next {
		switch prev := meta.FindStatusCondition(observed, c.Type); {
		case prev != nil && prev.Status == c.Status && !prev.LastTransitionTime.IsZero():
			c.LastTransitionTime = prev.LastTransitionTime
		case fresh:
			c.LastTransitionTime = metav1.NewTime(created.UTC().Truncate(time.Second))
		default:
			c.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
		}
		out = append(out, c)
	}
	return out
}

// Status returns ConditionTrue or ConditionFalse.
func Status(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}
