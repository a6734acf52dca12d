package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// fullWorkspace sets every field of v1alpha1.WorkspaceSpec, the pod
// passthrough fields with realistic core objects.
func fullWorkspace() v1alpha1.Workspace {
	return v1alpha1.Workspace{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
		ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "default"},
		Spec: v1alpha1.WorkspaceSpec{
			Owner:        "acme-corp",
			Region:       "eu-west-1",
			ClusterClass: "standard",
			Environment:  "production",
			Version:      "1.4.2",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
			},
			Cache:  map[string]any{"ttl": "5m", "sizes": map[string]any{"forms": 100}},
			Config: map[string]string{"LOG_LEVEL": "debug", "feature.flags": "beta"},
			Datastores: []v1alpha1.DatastoreRef{
				{Name: "orders"},
				{Name: "orders", Namespace: "shared", EnvPrefix: "SHARED_"},
			},
			Pod: v1alpha1.PodOverrides{
				Annotations:  map[string]string{"example.com/team": "forms"},
				Labels:       map[string]string{"tier": "gold"},
				NodeSelector: map[string]string{"topology.kubernetes.io/zone": "eu-west-1a"},
				Tolerations:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "forms", Effect: corev1.TaintEffectNoSchedule}},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
					}}},
				}},
				TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
					MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"formspec.dev/workspace": "acme"}},
				}},
				SecurityContext:          &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000)), FSGroup: ptr(int64(2000))},
				ContainerSecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr(false)},
				ServiceAccountName:       "acme",
				ImagePullSecrets:         []corev1.LocalObjectReference{{Name: "regcred"}},
				PriorityClassName:        "workspace-high",
				ExtraEnv: []corev1.EnvVar{
					{Name: "GREETING", Value: "hello"},
					{Name: "API_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "acme-api"}, Key: "key",
					}}},
				},
				ExtraEnvFrom:      []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "acme-extra"}}}},
				ExtraVolumes:      []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}}},
				ExtraVolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch", ReadOnly: true}},
			},
			DisruptionBudget: &v1alpha1.DisruptionBudget{MaxUnavailable: ptr(intstr.FromString("25%"))},
		},
	}
}

// minimalWorkspace is a Workspace with only the required fields.
func minimalWorkspace(t testing.TB) controlplane.Object {
	t.Helper()
	return with(t, controlplane.Object{
		"apiVersion": v1alpha1.APIVersion,
		"kind":       "Workspace",
		"metadata":   map[string]any{"name": "acme", "namespace": "default"},
		"spec":       map[string]any{"clusterClass": "standard"},
	}, nil)
}

func testWorkspace(t *testing.T, c *controlplane.Client) {
	base := minimalWorkspace(t)

	runSchemaCases(t, c, map[string]schemaCase{
		"Minimal": {
			reason: "clusterClass is the only required field.",
			obj:    base,
		},
		"GoTypeFullyPopulated": {
			reason: "Every field of v1alpha1.WorkspaceSpec, as the Go type encodes it, is in the schema, and the core objects passed through under pod keep every field.",
			obj:    jsonCopy(t, fullWorkspace()).(map[string]any),
		},
		"MinAvailableInteger": {
			reason: "A budget may be a number of pods.",
			obj:    with(t, base, fields{"spec.disruptionBudget": map[string]any{"minAvailable": 1}}),
		},
		"MinAvailablePercent": {
			reason: "A budget may be a percentage.",
			obj:    with(t, base, fields{"spec.disruptionBudget": map[string]any{"minAvailable": "100%"}}),
		},
		"NoSpec": {
			reason:   "spec is required.",
			obj:      with(t, base, fields{"spec": remove{}}),
			wantErrs: []string{"spec: Required value"},
		},
		"NoClusterClass": {
			reason:   "clusterClass is required.",
			obj:      with(t, base, fields{"spec.clusterClass": remove{}}),
			wantErrs: []string{"spec.clusterClass: Required value"},
		},
		"BadEnvironment": {
			reason:   "environment is one of development, staging, production.",
			obj:      with(t, base, fields{"spec.environment": "prod"}),
			wantErrs: []string{`spec.environment: Unsupported value: "prod"`},
		},
		"BadVersion": {
			reason:   "version becomes an image tag.",
			obj:      with(t, base, fields{"spec.version": "1.0 beta"}),
			wantErrs: []string{"spec.version", "should match"},
		},
		"BothBudgets": {
			reason:   "A budget sets exactly one of minAvailable and maxUnavailable.",
			obj:      with(t, base, fields{"spec.disruptionBudget": map[string]any{"minAvailable": 1, "maxUnavailable": 1}}),
			wantErrs: []string{"spec.disruptionBudget", "exactly one of minAvailable or maxUnavailable must be set"},
		},
		"EmptyBudget": {
			reason:   "An empty budget sets neither.",
			obj:      with(t, base, fields{"spec.disruptionBudget": map[string]any{}}),
			wantErrs: []string{"spec.disruptionBudget", "exactly one of minAvailable or maxUnavailable must be set"},
		},
		"NegativeBudget": {
			reason:   "A number of pods is not negative.",
			obj:      with(t, base, fields{"spec.disruptionBudget": map[string]any{"maxUnavailable": -1}}),
			wantErrs: []string{"spec.disruptionBudget.maxUnavailable", "non-negative integer or a percentage"},
		},
		"BudgetOver100Percent": {
			reason:   "A percentage is at most 100%.",
			obj:      with(t, base, fields{"spec.disruptionBudget": map[string]any{"minAvailable": "150%"}}),
			wantErrs: []string{"spec.disruptionBudget.minAvailable", "non-negative integer or a percentage"},
		},
		"DuplicateDatastore": {
			reason:   "Two entries for the same datastore would inject the same credentials twice.",
			obj:      with(t, base, fields{"spec.datastores": []any{map[string]any{"name": "orders"}, map[string]any{"name": "orders", "envPrefix": "B_"}}}),
			wantErrs: []string{"spec.datastores", "datastores entries must be unique by name and namespace"},
		},
		"DuplicateDatastoreWithNamespace": {
			reason:   "Uniqueness is by name and namespace together.",
			obj:      with(t, base, fields{"spec.datastores": []any{map[string]any{"name": "orders", "namespace": "shared"}, map[string]any{"name": "orders", "namespace": "shared"}}}),
			wantErrs: []string{"spec.datastores", "datastores entries must be unique by name and namespace"},
		},
		"DatastoreWithoutName": {
			reason:   "A datastore entry needs a name.",
			obj:      with(t, base, fields{"spec.datastores": []any{map[string]any{"namespace": "shared"}}}),
			wantErrs: []string{"spec.datastores[0].name: Required value"},
		},
		"BadEnvPrefix": {
			reason:   "envPrefix starts environment variable names.",
			obj:      with(t, base, fields{"spec.datastores": []any{map[string]any{"name": "orders", "envPrefix": "1-X"}}}),
			wantErrs: []string{"spec.datastores[0].envPrefix", "should match"},
		},
		"BadQuantity": {
			reason:   "resources has the ResourceRequirements shape: quantities are validated.",
			obj:      with(t, base, fields{"spec.resources": map[string]any{"requests": map[string]any{"cpu": "lots"}}}),
			wantErrs: []string{"spec.resources.requests.cpu", "should match"},
		},
		"ConfigValueNotAString": {
			reason:   "config is a string map.",
			obj:      with(t, base, fields{"spec.config": map[string]any{"replicas": 3}}),
			wantErrs: []string{"spec.config.replicas", "must be of type string"},
		},
		"ConfigKeyNotAConfigMapKey": {
			reason:   "config keys become ConfigMap keys.",
			obj:      with(t, base, fields{"spec.config": map[string]any{"log level": "debug"}}),
			wantErrs: []string{"spec.config", "config keys must consist of alphanumeric characters"},
		},
		"CacheNotAnObject": {
			reason:   "cache is a free-form object.",
			obj:      with(t, base, fields{"spec.cache": "redis"}),
			wantErrs: []string{"spec.cache", "must be of type object"},
		},
		"VolumeWithoutName": {
			reason:   "A passed-through volume still needs a name for its mounts.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"extraVolumes": []any{map[string]any{"emptyDir": map[string]any{}}}}}),
			wantErrs: []string{"spec.pod.extraVolumes[0].name: Required value"},
		},
		"MountWithoutPath": {
			reason:   "A passed-through volume mount needs a mountPath.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "scratch"}}}}),
			wantErrs: []string{"spec.pod.extraVolumeMounts[0].mountPath: Required value"},
		},
		"EnvWithoutName": {
			reason:   "A passed-through environment variable needs a name.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"extraEnv": []any{map[string]any{"value": "x"}}}}),
			wantErrs: []string{"spec.pod.extraEnv[0].name: Required value"},
		},
		"VolumeNamedTmp": {
			reason:   "tmp is the operator's writable /tmp; a second volume of that name would make the Deployment invalid.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"extraVolumes": []any{map[string]any{"name": "tmp", "emptyDir": map[string]any{}}}}}),
			wantErrs: []string{"spec.pod.extraVolumes[0].name", "operator's volumes"},
		},
		"VolumeNamedLikeABinding": {
			reason:   "binding-* names belong to injected credentials.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"extraVolumes": []any{map[string]any{"name": "binding-orders", "emptyDir": map[string]any{}}}}}),
			wantErrs: []string{"spec.pod.extraVolumes[0].name", "operator's volumes"},
		},
		"MountOverBindings": {
			reason:   "/bindings is where credentials are mounted.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/bindings/orders"}}}}),
			wantErrs: []string{"spec.pod.extraVolumeMounts[0].mountPath", "operator's mounts"},
		},
		"MountOverTmp": {
			reason:   "/tmp is the operator's mount.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/tmp"}}}}),
			wantErrs: []string{"spec.pod.extraVolumeMounts[0].mountPath", "operator's mounts"},
		},
		"EnvOverridesOperator": {
			reason:   "The operator's environment cannot be overridden.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"extraEnv": []any{map[string]any{"name": "WORKSPACE_ID", "value": "other"}}}}),
			wantErrs: []string{"spec.pod.extraEnv[0].name", "set by the operator"},
		},
		"AffinityNotAnObject": {
			reason:   "Passthrough fields keep their core type's JSON kind.",
			obj:      with(t, base, fields{"spec.pod": map[string]any{"affinity": []any{}}}),
			wantErrs: []string{"spec.pod.affinity", "must be of type object"},
		},
		"NameNotDNS1035": {
			reason:   "The workspace name names its Service, so it must be a DNS-1035 label.",
			obj:      with(t, base, fields{"metadata.name": "1acme"}),
			wantErrs: []string{"metadata.name must be a DNS-1035 label"},
		},
		"NameTooLong": {
			reason:   "A DNS-1035 label is at most 63 characters.",
			obj:      with(t, base, fields{"metadata.name": strings.Repeat("a", 64)}),
			wantErrs: []string{"metadata.name must be a DNS-1035 label"},
		},
	})
}
