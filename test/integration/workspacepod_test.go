package integration

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// credentialsMessage is what the rule refusing a credentials Secret says.
const credentialsMessage = `a suffix reserved for the operator's credentials Secrets`

// secretVolumes are volume sources that name a Secret (every one
// VisitPodSecretNames knows), each with its other required fields, as
// functions of the Secret's name, and the path of the name in the source.
var secretVolumes = map[string]struct {
	source func(secret string) map[string]any
	path   string
}{
	"AzureFile": {func(s string) map[string]any {
		return map[string]any{"azureFile": map[string]any{"secretName": s, "shareName": "share"}}
	}, "azureFile.secretName"},
	"CephFS": {func(s string) map[string]any {
		return map[string]any{"cephfs": map[string]any{"monitors": []any{"10.0.0.1:6789"}, "secretRef": map[string]any{"name": s}}}
	}, "cephfs.secretRef.name"},
	"Cinder": {func(s string) map[string]any {
		return map[string]any{"cinder": map[string]any{"volumeID": "vol-1", "secretRef": map[string]any{"name": s}}}
	}, "cinder.secretRef.name"},
	"CSI": {func(s string) map[string]any {
		return map[string]any{"csi": map[string]any{"driver": "secrets-store.csi.k8s.io", "nodePublishSecretRef": map[string]any{"name": s}}}
	}, "csi.nodePublishSecretRef.name"},
	"FlexVolume": {func(s string) map[string]any {
		return map[string]any{"flexVolume": map[string]any{"driver": "example/driver", "secretRef": map[string]any{"name": s}}}
	}, "flexVolume.secretRef.name"},
	"ISCSI": {func(s string) map[string]any {
		return map[string]any{"iscsi": map[string]any{"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:storage", "lun": 0, "secretRef": map[string]any{"name": s}}}
	}, "iscsi.secretRef.name"},
	"Projected": {func(s string) map[string]any {
		return map[string]any{"projected": map[string]any{"sources": []any{
			map[string]any{"configMap": map[string]any{"name": "acme-extra"}},
			map[string]any{"secret": map[string]any{"name": s}},
		}}}
	}, "projected.sources[1].secret.name"},
	"RBD": {func(s string) map[string]any {
		return map[string]any{"rbd": map[string]any{"monitors": []any{"10.0.0.1:6789"}, "image": "disk", "secretRef": map[string]any{"name": s}}}
	}, "rbd.secretRef.name"},
	"ScaleIO": {func(s string) map[string]any {
		return map[string]any{"scaleIO": map[string]any{"gateway": "https://gw", "system": "sys", "secretRef": map[string]any{"name": s}}}
	}, "scaleIO.secretRef.name"},
	"Secret": {func(s string) map[string]any {
		return map[string]any{"secret": map[string]any{"secretName": s}}
	}, "secret.secretName"},
	"StorageOS": {func(s string) map[string]any {
		return map[string]any{"storageos": map[string]any{"volumeName": "vol", "secretRef": map[string]any{"name": s}}}
	}, "storageos.secretRef.name"},
}

// secretPod is a spec.pod naming the Secret secret in every way a pod can:
// image pull Secret, environment variable, envFrom and one volume of each
// kind that takes a Secret.
func secretPod(secret string) map[string]any {
	var volumes []any
	for _, name := range slices.Sorted(maps.Keys(secretVolumes)) {
		v := secretVolumes[name].source(secret)
		v["name"] = "v-" + strings.ToLower(name)
		volumes = append(volumes, v)
	}
	return map[string]any{
		"imagePullSecrets": []any{map[string]any{"name": secret}},
		"extraEnv": []any{map[string]any{"name": "DB_PASSWORD", "valueFrom": map[string]any{
			"secretKeyRef": map[string]any{"name": secret, "key": "password"},
		}}},
		"extraEnvFrom": []any{map[string]any{"prefix": "DB_", "secretRef": map[string]any{"name": secret}}},
		"extraVolumes": volumes,
	}
}

// testWorkspacePod checks spec.pod against the real API server: each
// passed-through field has its core type's schema, and no field may name
// an operator credentials Secret ("<claim>-credentials").
func testWorkspacePod(t *testing.T, c *controlplane.Client) {
	base := minimalWorkspace(t)
	pod := func(p map[string]any) controlplane.Object { return with(t, base, fields{"spec.pod": p}) }

	every := with(t, base, fields{"spec.pod": everyField[v1alpha1.PodOverrides](), "spec.resources": everyField[corev1.ResourceRequirements]()})
	cases := map[string]schemaCase{
		"EveryGoFieldKept": {
			reason: "Every field of the Go types the hooks decode spec.pod and spec.resources with, set, comes back: the schemas prune nothing a client sends. " +
				"The exception is the null creationTimestamp Go writes for an ephemeral volume's claim template, pruned as in every CRD that embeds ObjectMeta.",
			obj:      every,
			wantSpec: with(t, every, fields{"spec.pod.extraVolumes": withoutClaimCreationTimestamp(t, every)})["spec"],
		},
		"OtherSecretsEverywhere": {
			reason: "Every kind of Secret reference is passed through, untouched, when the Secret is not a credentials Secret.",
			obj:    pod(secretPod("acme-api")),
		},
		"CredentialsInTheMiddleOfAName": {
			reason: "Only the suffix is reserved.",
			obj:    pod(secretPod("credentials-archive")),
		},
		"BareCredentials": {
			reason: `A claim's name is never empty, so "credentials" alone is not a credentials Secret.`,
			obj:    pod(map[string]any{"extraEnvFrom": []any{map[string]any{"secretRef": map[string]any{"name": "credentials"}}}}),
		},
		"TypedValues": {
			reason: "Values of the right types in the core objects are kept as sent: integers, quantities as numbers and strings, booleans, nested selectors, an ephemeral volume's claim template.",
			obj: pod(map[string]any{
				"tolerations": []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}},
				"topologySpreadConstraints": []any{map[string]any{
					"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
					"labelSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "tier", "operator": "In", "values": []any{"gold"}}}},
				}},
				"securityContext":          map[string]any{"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": map[string]any{"type": "RuntimeDefault"}},
				"containerSecurityContext": map[string]any{"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []any{"ALL"}}},
				"extraEnv": []any{map[string]any{"name": "MEM_LIMIT", "valueFrom": map[string]any{
					"resourceFieldRef": map[string]any{"resource": "limits.memory", "divisor": "1Mi"},
				}}},
				"extraVolumes": []any{
					map[string]any{"name": "scratch", "emptyDir": map[string]any{"sizeLimit": 1073741824}},
					map[string]any{"name": "cache", "ephemeral": map[string]any{"volumeClaimTemplate": map[string]any{
						"metadata": map[string]any{"labels": map[string]any{"tier": "gold"}},
						"spec": map[string]any{
							"accessModes": []any{"ReadWriteOnce"},
							"resources":   map[string]any{"requests": map[string]any{"storage": "1Gi"}},
						},
					}}},
					map[string]any{"name": "conf", "configMap": map[string]any{"name": "acme-extra", "defaultMode": 0o440, "items": []any{map[string]any{"key": "a", "path": "a.conf"}}}},
				},
				"extraVolumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/scratch", "readOnly": true}},
			}),
		},
		"TolerationSecondsNotANumber": {
			reason:   "The hook could not decode a string into a Toleration's int64: the API server refuses it.",
			obj:      pod(map[string]any{"tolerations": []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "abc"}}}),
			wantErrs: []string{"spec.pod.tolerations[0].tolerationSeconds", "must be of type integer"},
		},
		"MaxSkewOutOfInt32": {
			reason:   "An int32 field refuses what Go cannot decode into an int32.",
			obj:      pod(map[string]any{"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1 << 40, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}}}),
			wantErrs: []string{"spec.pod.topologySpreadConstraints[0].maxSkew", "should be less than or equal to 2147483647"},
		},
		"TopologySpreadWithoutKey": {
			reason:   "Fields the core type requires are required.",
			obj:      pod(map[string]any{"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}}}),
			wantErrs: []string{"spec.pod.topologySpreadConstraints[0].topologyKey: Required value"},
		},
		"RunAsUserNotANumber": {
			reason:   "A PodSecurityContext's runAsUser is an integer.",
			obj:      pod(map[string]any{"securityContext": map[string]any{"runAsUser": "root"}}),
			wantErrs: []string{"spec.pod.securityContext.runAsUser", "must be of type integer"},
		},
		"PrivilegedNotABoolean": {
			reason:   "A SecurityContext's privileged is a boolean.",
			obj:      pod(map[string]any{"containerSecurityContext": map[string]any{"privileged": "yes"}}),
			wantErrs: []string{"spec.pod.containerSecurityContext.privileged", "must be of type boolean"},
		},
		"NodeAffinityTermsNotAList": {
			reason:   "Affinity is typed all the way down.",
			obj:      pod(map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": "zone=a"}}}}),
			wantErrs: []string{"spec.pod.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms", "must be of type array"},
		},
		"EnvFieldRefNotAnObject": {
			reason:   "An EnvVarSource's fieldRef is an object.",
			obj:      pod(map[string]any{"extraEnv": []any{map[string]any{"name": "POD", "valueFrom": map[string]any{"fieldRef": "metadata.name"}}}}),
			wantErrs: []string{"spec.pod.extraEnv[0].valueFrom.fieldRef", "must be of type object"},
		},
		"EnvFromNotAnObject": {
			reason:   "An EnvFromSource is an object.",
			obj:      pod(map[string]any{"extraEnvFrom": []any{"acme-extra"}}),
			wantErrs: []string{"spec.pod.extraEnvFrom[0]", "must be of type object"},
		},
		"DefaultModeNotANumber": {
			reason:   "A volume's defaultMode is an integer, not an octal string.",
			obj:      pod(map[string]any{"extraVolumes": []any{map[string]any{"name": "conf", "configMap": map[string]any{"name": "acme-extra", "defaultMode": "0644"}}}}),
			wantErrs: []string{"spec.pod.extraVolumes[0].configMap.defaultMode", "must be of type integer"},
		},
		"SizeLimitNotAQuantity": {
			reason:   "Quantities inside volumes are validated.",
			obj:      pod(map[string]any{"extraVolumes": []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{"sizeLimit": "lots"}}}}),
			wantErrs: []string{"spec.pod.extraVolumes[0].emptyDir.sizeLimit", "should match"},
		},
		"ReadOnlyNotABoolean": {
			reason:   "A VolumeMount's readOnly is a boolean.",
			obj:      pod(map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "scratch", "mountPath": "/scratch", "readOnly": "true"}}}),
			wantErrs: []string{"spec.pod.extraVolumeMounts[0].readOnly", "must be of type boolean"},
		},
		"ResourceLimitNotAQuantity": {
			reason:   "spec.resources is the core ResourceRequirements.",
			obj:      with(t, base, fields{"spec.resources": map[string]any{"limits": map[string]any{"memory": true}}}),
			wantErrs: []string{"spec.resources.limits.memory", "must be of type"},
		},
		"CredentialsAsImagePullSecret": {
			reason:   "An image pull Secret is a Secret reference too.",
			obj:      pod(map[string]any{"imagePullSecrets": []any{map[string]any{"name": "orders-credentials"}}}),
			wantErrs: []string{"spec.pod.imagePullSecrets[0].name", credentialsMessage},
		},
		"CredentialsInEnv": {
			reason: "A variable may not read a key of another workspace's credentials.",
			obj: pod(map[string]any{"extraEnv": []any{map[string]any{"name": "DB_PASSWORD", "valueFrom": map[string]any{
				"secretKeyRef": map[string]any{"name": "orders-credentials", "key": "password"},
			}}}}),
			wantErrs: []string{"spec.pod.extraEnv[0].valueFrom.secretKeyRef.name", credentialsMessage},
		},
		"CredentialsInEnvFrom": {
			reason:   "envFrom may not import another workspace's credentials.",
			obj:      pod(map[string]any{"extraEnvFrom": []any{map[string]any{"secretRef": map[string]any{"name": "orders-credentials"}}}}),
			wantErrs: []string{"spec.pod.extraEnvFrom[0].secretRef.name", credentialsMessage},
		},
	}
	for name, v := range secretVolumes {
		vol := v.source("orders-credentials")
		vol["name"] = "creds"
		cases["CredentialsInVolume"+name] = schemaCase{
			reason:   "No kind of volume may mount another workspace's credentials.",
			obj:      pod(map[string]any{"extraVolumes": []any{map[string]any{"name": "scratch", "emptyDir": map[string]any{}}, vol}}),
			wantErrs: []string{"spec.pod.extraVolumes[1]." + v.path, credentialsMessage},
		}
	}
	runSchemaCases(t, c, cases)
}

// everyField returns a T with every field set, as encoding/json encodes
// it: each pointer allocated, each slice and map given one element, each
// string "a" (valid wherever the template restricts a name or path),
// numbers and booleans left at zero, each Quantity 1. A nested ObjectMeta
// (an ephemeral volume's claim template) gets the labels and annotations
// that are all a pod may set there.
func everyField[T any]() any {
	var v T
	setEveryField(reflect.ValueOf(&v).Elem())
	return v
}

// setEveryField sets everything under v; see everyField.
func setEveryField(v reflect.Value) {
	switch v.Type() {
	case reflect.TypeFor[resource.Quantity]():
		v.Set(reflect.ValueOf(resource.MustParse("1")))
		return
	case reflect.TypeFor[metav1.ObjectMeta]():
		v.Set(reflect.ValueOf(metav1.ObjectMeta{Labels: map[string]string{"a": "a"}, Annotations: map[string]string{"a": "a"}}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("a")
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		setEveryField(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		setEveryField(v.Index(0))
	case reflect.Map:
		key, elem := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		setEveryField(key)
		setEveryField(elem)
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(key, elem)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setEveryField(v.Field(i))
			}
		}
	}
}

// withoutClaimCreationTimestamp returns obj's extraVolumes without the
// creationTimestamp of their ephemeral volumes' claim templates.
func withoutClaimCreationTimestamp(t *testing.T, obj controlplane.Object) any {
	t.Helper()
	pod := jsonCopy(t, obj).(map[string]any)["spec"].(map[string]any)["pod"].(map[string]any)
	volumes := pod["extraVolumes"].([]any)
	for _, v := range volumes {
		claim := v.(map[string]any)["ephemeral"].(map[string]any)["volumeClaimTemplate"].(map[string]any)
		delete(claim["metadata"].(map[string]any), "creationTimestamp")
	}
	return volumes
}

// testFixtureWorkspaces dry-run creates the Workspace of every workspace
// fixture request. The CRD must refuse exactly the specs the hooks' Go
// types cannot decode: a fixture the hook can read must be a Workspace the
// API server accepts unchanged (nothing pruned), and one it cannot read
// shows a spec that only an older CRD would have let in.
func testFixtureWorkspaces(t *testing.T, c *controlplane.Client) {
	requests, err := filepath.Glob(filepath.Join(controlplane.RepoRoot(t), "fixtures", "workspace", "*", "*", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(requests) == 0 {
		t.Fatal("no fixtures/workspace/<hook>/<case>/request.json found")
	}
	for _, path := range requests {
		rel, _ := filepath.Rel(filepath.Join(controlplane.RepoRoot(t), "fixtures"), filepath.Dir(path))
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var req struct {
				Parent controlplane.Object `json:"parent"`
			}
			if err := json.Unmarshal(data, &req); err != nil {
				t.Fatal(err)
			}
			md, _ := req.Parent["metadata"].(map[string]any)
			obj := controlplane.Object{
				"apiVersion": req.Parent["apiVersion"],
				"kind":       req.Parent["kind"],
				"metadata":   map[string]any{"name": md["name"], "namespace": md["namespace"]},
				"spec":       req.Parent["spec"],
			}
			spec, _ := json.Marshal(req.Parent["spec"])
			var ws v1alpha1.WorkspaceSpec
			decodeErr := json.Unmarshal(spec, &ws)
			ensureNamespace(t, c, md["namespace"].(string))
			tc := schemaCase{reason: "The hooks decode this spec, so the API server must accept it unchanged.", obj: obj}
			if decodeErr != nil {
				tc = schemaCase{
					reason:   "The hooks cannot decode this spec (" + decodeErr.Error() + "), so the API server must refuse it.",
					obj:      obj,
					wantErrs: []string{"spec."},
				}
			}
			runSchemaCases(t, c, map[string]schemaCase{"Parent": tc})
		})
	}
}

// testRestrictedPodSecurity checks what docs/security.md tells platform
// teams: the pods of every workspace fixture's Deployment are admitted in
// a namespace enforcing the Pod Security Standard "restricted", and the
// same pod with a hostPath volume (which spec.pod.extraVolumes may ask for)
// is refused.
func testRestrictedPodSecurity(t *testing.T, c *controlplane.Client) {
	const ns = "restricted"
	if _, err := c.Create(controlplane.Object{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{"pod-security.kubernetes.io/enforce": "restricted"}},
	}); err != nil {
		t.Fatalf("cannot create namespace %s: %v", ns, err)
	}
	responses, err := filepath.Glob(filepath.Join(controlplane.RepoRoot(t), "fixtures", "workspace", "sync", "*", "response.json"))
	if err != nil {
		t.Fatal(err)
	}
	var last controlplane.Object
	for _, resp := range responses {
		children, err := fixtureObjects(resp)
		if err != nil {
			t.Fatal(err)
		}
		for _, child := range children {
			if child["kind"] != "Deployment" {
				continue
			}
			pod := podOf(t, c, child, ns)
			t.Run(filepath.Base(filepath.Dir(resp)), func(t *testing.T) {
				if _, err := c.DryRunCreate(pod); err != nil {
					t.Errorf("the fixture's pod template does not meet the restricted standard: %v", err)
				}
			})
			last = pod
		}
	}
	if last == nil {
		t.Fatal("no workspace sync fixture returns a Deployment")
	}
	t.Run("HostPathVolume", func(t *testing.T) {
		volumes := append(last["spec"].(map[string]any)["volumes"].([]any), map[string]any{
			"name": "kubelet", "hostPath": map[string]any{"path": "/var/lib/kubelet/pods"},
		})
		_, err := c.DryRunCreate(with(t, last, fields{"spec.volumes": volumes}))
		var apiErr *controlplane.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusForbidden ||
			!strings.Contains(apiErr.Status.Message, `violates PodSecurity "restricted:latest"`) || !strings.Contains(apiErr.Status.Message, "hostPath") {
			t.Errorf("want a 403 naming the restricted standard and hostPath, got %v", err)
		}
	})
}

// podOf returns a Pod in namespace ns with the Deployment's pod template,
// creating the service account it runs as (no controller does here).
func podOf(t *testing.T, c *controlplane.Client, deployment controlplane.Object, ns string) controlplane.Object {
	t.Helper()
	spec := deployment["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	sa, _ := spec["serviceAccountName"].(string)
	createIfAbsent(t, c, controlplane.Object{
		"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": cmp.Or(sa, "default"), "namespace": ns},
	})
	pod := controlplane.Object{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "ws", "namespace": ns},
		"spec":     spec,
	}
	// Priority admission looks the class up in an informer cache that a
	// class created a moment ago may not have reached; Pod Security does
	// not depend on it.
	return with(t, pod, fields{"spec.priorityClassName": remove{}})
}
