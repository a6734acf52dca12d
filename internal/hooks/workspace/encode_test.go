package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/internal/codec"
)

// everyPodOption is a spec.pod that sets every option a Workspace has for
// its pods, each of which buildDeployment copies into the pod spec.
const everyPodOption = `{"annotations":{"a":"b"},"labels":{"l":"v"},"nodeSelector":{"pool":"fast"},
  "tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule"}],
  "affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}},
  "topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"ScheduleAnyway"}],
  "securityContext":{"runAsUser":1000,"fsGroup":2000},
  "containerSecurityContext":{"runAsUser":1000},
  "serviceAccountName":"reader","imagePullSecrets":[{"name":"pull"}],"priorityClassName":"high",
  "extraEnv":[{"name":"E","value":"v"}],"extraEnvFrom":[{"secretRef":{"name":"s"}}],
  "extraVolumes":[{"name":"x","configMap":{"name":"cm"}}],"extraVolumeMounts":[{"name":"x","mountPath":"/x"}]}`

// TestWireSpecs checks that a Deployment buildDeployment makes encodes
// through wirePodSpec to exactly the bytes of its corev1.PodSpec, and a
// Service buildService makes through wireServiceSpec to those of its
// corev1.ServiceSpec, for every Workspace sync fixture and for a spec that
// sets every pod option: a field a builder sets and the short form leaves
// out fails here.
func TestWireSpecs(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "..", "..", "fixtures", "workspace", "sync", "*"))
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string][]byte{}
	for _, dir := range dirs {
		body, err := os.ReadFile(filepath.Join(dir, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		bodies[filepath.Base(dir)] = body
	}
	first := bodies["first-sync"]
	every := bytes.Replace(first, []byte(`"clusterClass"`), []byte(`"pod": `+everyPodOption+`, "clusterClass"`), 1)
	if bytes.Equal(every, first) {
		t.Fatal("the first-sync fixture has no clusterClass to put spec.pod before")
	}
	bodies["every-pod-option"] = every

	h := New(Config{ResourceImage: "formahub/formspec-resource", DefaultVersion: "latest"})
	built, services := 0, 0
	for name, body := range bodies {
		var req Request
		if err := req.Decode(body); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d, err := h.decideSync(observe(&req))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, child := range d.children {
			if svc, ok := child.(*corev1.Service); ok {
				same(t, name+" Service", svc.Spec, shortService(&svc.Spec))
				services++
			}
			dep, ok := child.(*appsv1.Deployment)
			if !ok {
				continue
			}
			built++
			same(t, name+" pod spec", dep.Spec.Template.Spec, shortPod(&dep.Spec.Template.Spec))
			if name == "every-pod-option" && dep.Spec.Template.Spec.PriorityClassName != "high" {
				t.Errorf("every-pod-option: the spec did not reach the pod: %+v", dep.Spec.Template.Spec)
			}
		}
	}
	if built < len(bodies)/2 || services < len(bodies)/2 {
		t.Fatalf("only %d of %d requests built a Deployment, %d a Service", built, len(bodies), services)
	}
}

// same fails t when whole and short do not encode to the same bytes.
func same(t *testing.T, what string, whole, short any) {
	t.Helper()
	a, err := codec.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	b, err := codec.Marshal(short)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("%s: the short form differs:\nwhole: %s\nshort: %s", what, a, b)
	}
}
