package integration

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

func testClusterClass(t *testing.T, c *controlplane.Client) {
	base := controlplane.Object{
		"apiVersion": v1alpha1.APIVersion,
		"kind":       "ClusterClass",
		"metadata":   map[string]any{"name": "standard"},
		"spec": map[string]any{
			"nodeType": "general-purpose",
			"scaling":  map[string]any{"minReplicas": 2, "maxReplicas": 4, "targetCPUUtilizationPercentage": 70},
			"features": []any{"auto-scaling"},
		},
	}
	base = with(t, base, nil)
	full := jsonCopy(t, v1alpha1.ClusterClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ClusterClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "premium"},
		Spec: v1alpha1.ClusterClassSpec{
			SLA:           "premium",
			NodeType:      "c6i.2xlarge",
			MaxWorkspaces: 40,
			Pricing:       json.RawMessage(`{"currency":"EUR","monthly":"49.00","tiers":[{"upTo":10}]}`),
			Scaling: v1alpha1.Scaling{
				MinReplicas:                    ptr(int32(3)),
				MaxReplicas:                    ptr(int32(10)),
				ScaleToZero:                    true,
				TargetCPUUtilizationPercentage: ptr(int32(100)),
				IdleAfterSeconds:               600,
				WakeTimeoutSeconds:             ptr(int32(45)),
				MaxHeldRequests:                ptr(int32(200)),
			},
			Features: []string{v1alpha1.FeatureAutoScaling, v1alpha1.FeatureWakeOnRequest, "gpu"},
		},
	}).(map[string]any)

	runSchemaCases(t, c, map[string]schemaCase{
		"Typical": {
			reason: "A class with a node type, bounded scaling and auto-scaling is valid.",
			obj:    base,
		},
		"GoTypeFullyPopulated": {
			reason: "Every field of v1alpha1.ClusterClassSpec, as the Go type encodes it, is in the schema and nothing is pruned.",
			obj:    full,
		},
		"NoSpecDefaults": {
			reason: "Every field is optional; an empty class defaults minReplicas to 1 and the CPU target to 80.",
			obj:    with(t, base, fields{"spec": remove{}}),
			wantSpec: jsonCopy(t, map[string]any{
				"scaling": map[string]any{"minReplicas": 1, "targetCPUUtilizationPercentage": 80},
			}),
		},
		"PartialScalingDefaults": {
			reason: "Defaults fill in only what is unset.",
			obj:    with(t, base, fields{"spec.scaling": map[string]any{"maxReplicas": 5}}),
			wantSpec: jsonCopy(t, map[string]any{
				"nodeType": "general-purpose",
				"scaling":  map[string]any{"minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 80},
				"features": []any{"auto-scaling"},
			}),
		},
		"MinZeroMaxOne": {
			reason: "maxReplicas must be at least max(1, minReplicas): 1 is enough when minReplicas is 0.",
			obj:    with(t, base, fields{"spec.scaling.minReplicas": 0, "spec.scaling.maxReplicas": 1}),
		},
		"MaxEqualsMin": {
			reason: "maxReplicas may equal minReplicas.",
			obj:    with(t, base, fields{"spec.scaling.minReplicas": 3, "spec.scaling.maxReplicas": 3}),
		},
		"MaxWorkspacesZero": {
			reason: "maxWorkspaces 0 means no limit.",
			obj:    with(t, base, fields{"spec.maxWorkspaces": 0}),
		},
		"AutoScalingWithoutMax": {
			reason:   "The auto-scaling feature needs maxReplicas: it is the HPA's maximum.",
			obj:      with(t, base, fields{"spec.scaling.maxReplicas": remove{}}),
			wantErrs: []string{"spec.scaling", "scaling.maxReplicas is required with the auto-scaling feature"},
		},
		"NoAutoScalingNoMax": {
			reason: "Without auto-scaling maxReplicas is optional.",
			obj:    with(t, base, fields{"spec.scaling.maxReplicas": remove{}, "spec.features": []any{"gpu"}}),
		},
		"NegativeMinReplicas": {
			reason:   "minReplicas may not be negative.",
			obj:      with(t, base, fields{"spec.scaling.minReplicas": -1}),
			wantErrs: []string{"spec.scaling.minReplicas", "greater than or equal to 0"},
		},
		"MaxBelowMin": {
			reason:   "maxReplicas below minReplicas is rejected by the CEL rule, on the maxReplicas field.",
			obj:      with(t, base, fields{"spec.scaling.minReplicas": 5, "spec.scaling.maxReplicas": 4}),
			wantErrs: []string{"spec.scaling.maxReplicas", "maxReplicas must be at least max(1, minReplicas)"},
		},
		"MaxZero": {
			reason:   "maxReplicas must be at least 1 even when minReplicas is 0.",
			obj:      with(t, base, fields{"spec.scaling.minReplicas": 0, "spec.scaling.maxReplicas": 0}),
			wantErrs: []string{"spec.scaling.maxReplicas", "greater than or equal to 1"},
		},
		"TargetZero": {
			reason:   "The CPU target is a percentage from 1.",
			obj:      with(t, base, fields{"spec.scaling.targetCPUUtilizationPercentage": 0}),
			wantErrs: []string{"spec.scaling.targetCPUUtilizationPercentage", "greater than or equal to 1"},
		},
		"TargetOver100": {
			reason:   "The CPU target is a percentage up to 100.",
			obj:      with(t, base, fields{"spec.scaling.targetCPUUtilizationPercentage": 101}),
			wantErrs: []string{"spec.scaling.targetCPUUtilizationPercentage", "less than or equal to 100"},
		},
		"NegativeMaxWorkspaces": {
			reason:   "maxWorkspaces may not be negative.",
			obj:      with(t, base, fields{"spec.maxWorkspaces": -1}),
			wantErrs: []string{"spec.maxWorkspaces", "greater than or equal to 0"},
		},
		"DuplicateFeature": {
			reason:   "features is a set.",
			obj:      with(t, base, fields{"spec.features": []any{"auto-scaling", "auto-scaling"}}),
			wantErrs: []string{"spec.features[1]", "Duplicate value"},
		},
		"NodeTypeNotALabelValue": {
			reason:   "nodeType becomes a nodeSelector label value.",
			obj:      with(t, base, fields{"spec.nodeType": "general purpose"}),
			wantErrs: []string{"spec.nodeType", "should match"},
		},
		"PricingNotAnObject": {
			reason:   "pricing is a free-form object, not a scalar.",
			obj:      with(t, base, fields{"spec.pricing": "cheap"}),
			wantErrs: []string{"spec.pricing", "must be of type object"},
		},
		"WakeOnRequest": {
			reason: "wake-on-request with scale-to-zero and its settings is valid.",
			obj: with(t, base, fields{"spec.features": []any{"wake-on-request"}, "spec.scaling.scaleToZero": true,
				"spec.scaling.idleAfterSeconds": 900, "spec.scaling.wakeTimeoutSeconds": 60, "spec.scaling.maxHeldRequests": 100}),
		},
		"WakeWithoutScaleToZero": {
			reason:   "Only an idle workspace is woken, so wake-on-request needs scaleToZero.",
			obj:      with(t, base, fields{"spec.features": []any{"wake-on-request"}}),
			wantErrs: []string{"spec.scaling", "scaling.scaleToZero must be true with the wake-on-request feature"},
		},
		"IdleAfterWithoutWake": {
			reason:   "idleAfterSeconds needs the interceptor's view of requests, so the feature.",
			obj:      with(t, base, fields{"spec.scaling.scaleToZero": true, "spec.scaling.idleAfterSeconds": 60}),
			wantErrs: []string{"spec.scaling.idleAfterSeconds", "scaling.idleAfterSeconds needs the wake-on-request feature"},
		},
		"MaxHeldZero": {
			reason:   "A cap of zero would refuse every request of a sleeping workspace.",
			obj:      with(t, base, fields{"spec.features": []any{"wake-on-request"}, "spec.scaling.scaleToZero": true, "spec.scaling.maxHeldRequests": 0}),
			wantErrs: []string{"spec.scaling.maxHeldRequests", "greater than or equal to 1"},
		},
		"NameTooLongForALabel": {
			reason:   "Workspaces carry the class name in a label, so it is at most 63 characters.",
			obj:      with(t, base, fields{"metadata.name": strings.Repeat("c", 64)}),
			wantErrs: []string{"metadata.name must be at most 63 characters"},
		},
	})
}
