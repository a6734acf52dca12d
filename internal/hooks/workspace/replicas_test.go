package workspace

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

func TestScalingFor(t *testing.T) {
	idle := map[string]string{v1alpha1.AnnotationIdle: "true"}
	auto := []string{v1alpha1.FeatureAutoScaling}
	cases := map[string]struct {
		reason      string
		annotations map[string]string
		scaling     v1alpha1.Scaling
		features    []string
		observed    *int32
		want        scaling
	}{
		"Defaults": {
			reason: "An empty scaling policy runs one replica with the default CPU target.",
			want:   scaling{min: 1, max: 1, targetCPU: 80, replicas: 1},
		},
		"MinZeroStillOne": {
			reason:  "minReplicas 0 without idle still runs one replica.",
			scaling: v1alpha1.Scaling{MinReplicas: ptr.To[int32](0)},
			want:    scaling{min: 1, max: 1, targetCPU: 80, replicas: 1},
		},
		"IdleScaleToZero": {
			reason:      "An idle workspace of a scale-to-zero class runs no pods and gets no HPA.",
			annotations: idle,
			scaling:     v1alpha1.Scaling{ScaleToZero: true, MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](5)},
			features:    auto,
			want:        scaling{idle: true, min: 2, max: 5, targetCPU: 80, replicas: 0},
		},
		"IdleWithoutScaleToZero": {
			reason:      "The idle annotation has no effect when the class does not allow scale to zero.",
			annotations: idle,
			scaling:     v1alpha1.Scaling{MinReplicas: ptr.To[int32](2)},
			want:        scaling{min: 2, max: 2, targetCPU: 80, replicas: 2},
		},
		"IdleValueMustBeTrue": {
			reason:      "Only the value \"true\" means idle.",
			annotations: map[string]string{v1alpha1.AnnotationIdle: "yes"},
			scaling:     v1alpha1.Scaling{ScaleToZero: true},
			want:        scaling{min: 1, max: 1, targetCPU: 80, replicas: 1},
		},
		"HPANothingObserved": {
			reason:   "Under an HPA with no Deployment yet, start at the HPA's minimum.",
			scaling:  v1alpha1.Scaling{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](6), TargetCPUUtilizationPercentage: ptr.To[int32](60)},
			features: auto,
			want:     scaling{min: 2, max: 6, hpa: true, targetCPU: 60, replicas: 2},
		},
		"HPAKeepsObserved": {
			reason:   "Under an HPA, the observed count is sent back so the merge changes nothing.",
			scaling:  v1alpha1.Scaling{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](6)},
			features: auto,
			observed: ptr.To[int32](5),
			want:     scaling{min: 2, max: 6, hpa: true, targetCPU: 80, replicas: 5},
		},
		"HPAClampsHigh": {
			reason:   "An observed count above the HPA's maximum is clamped to it.",
			scaling:  v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)},
			features: auto,
			observed: ptr.To[int32](9),
			want:     scaling{min: 1, max: 3, hpa: true, targetCPU: 80, replicas: 3},
		},
		"HPAClampsLow": {
			reason:   "A Deployment scaled to zero (say, just woken from idle) comes back at the HPA's minimum.",
			scaling:  v1alpha1.Scaling{MinReplicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](4)},
			features: auto,
			observed: ptr.To[int32](0),
			want:     scaling{min: 2, max: 4, hpa: true, targetCPU: 80, replicas: 2},
		},
		"MaxBelowMin": {
			reason:  "A maxReplicas below the floor is raised to it, so the HPA stays valid.",
			scaling: v1alpha1.Scaling{MinReplicas: ptr.To[int32](3), MaxReplicas: ptr.To[int32](1)},
			want:    scaling{min: 3, max: 3, targetCPU: 80, replicas: 3},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			class := &v1alpha1.ClusterClass{Spec: v1alpha1.ClusterClassSpec{Scaling: tc.scaling, Features: tc.features}}
			got := scalingFor(ws, class, tc.observed)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(scaling{})); diff != "" {
				t.Errorf("%s\nscalingFor(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
