// Package conditions builds status conditions for hook responses without
// reading a clock: the caller passes "now", and a condition whose status
// did not change keeps the lastTransitionTime it already had, so that the
// same request always yields the same bytes.
package conditions

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Carry returns c with its LastTransitionTime taken from the condition of
// the same type in observed when that one has the same status, and set to
// now (truncated to the second, the precision the API stores) otherwise.
func Carry(observed []metav1.Condition, c metav1.Condition, now time.Time) metav1.Condition {
	for _, o := range observed {
		if o.Type == c.Type && o.Status == c.Status && !o.LastTransitionTime.IsZero() {
			c.LastTransitionTime = o.LastTransitionTime
			return c
		}
	}
	c.LastTransitionTime = metav1.NewTime(now.UTC().Truncate(time.Second))
	return c
}

// Status returns ConditionTrue or ConditionFalse.
func Status(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}
