package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
)

// checkRestartConsumedAfterRollout gives a running Workspace a
// restart_required directive through Cluster Control and makes its rollout
// slow: the new pod cannot start until the test allows it. Until every pod
// runs the new binary, Cluster Control must not hear that the directive
// was consumed; once the rollout has completed it must.
//
// The stand-in workspace pods have no readiness probe (the hooks render
// none), so a pod is ready the moment its container starts and a delay
// inside the image could not hold a rollout back. What holds it is a
// start gate: the pods mount a Secret (spec.pod.extraVolumes), which the
// test deletes before the restart, so the new pod waits in
// ContainerCreating beside the old one, Ready, until the Secret is back.
func (c *Cluster) checkRestartConsumedAfterRollout(t *testing.T, admin, class string) {
	t.Helper()
	const (
		ns, name = "node-restart", "slow"
		gate     = "slow-start-gate"
		hash     = "sha256:5e1f0c005e1f0c005e1f0c005e1f0c005e1f0c005e1f0c005e1f0c005e1f0c00"
	)
	c.apply(t, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}})
	gateSecret := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": gate, "namespace": ns},
		"stringData": map[string]any{"open": "yes"}}
	c.apply(t, gateSecret)
	ws := standInWorkspace(ns, name, class)
	ws.Spec.Pod = v1alpha1.PodOverrides{
		ExtraVolumes:      []corev1.Volume{{Name: "start-gate", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: gate}}}},
		ExtraVolumeMounts: []corev1.VolumeMount{{Name: "start-gate", MountPath: "/start-gate", ReadOnly: true}},
	}
	c.apply(t, ws)
	c.waitWorkspacePhase(t, ns, name, v1alpha1.PhaseReady)
	c.waitDeploymentReady(t, ns, name)

	// Running pods keep their mounted copy; a new one cannot start.
	if err := c.Client().Delete("v1", "Secret", ns, gate); err != nil {
		t.Fatalf("cannot delete Secret %s/%s: %v", ns, gate, err)
	}
	putDirective(t, admin, ns, name, hash)

	key := ns + "/" + name
	sawRollout := false
	c.waitFor(t, "Cluster Control to hear of the rollout of "+hash+" in progress, the directive not consumed", func() (bool, string) {
		st, err := clusterControlState(admin)
		if err != nil {
			return false, err.Error()
		}
		if consumed := consumedFor(st, ns, name); len(consumed) > 0 {
			t.Fatalf("Cluster Control was told the restart was consumed while the new pod could not start: %v", consumed)
		}
		rep, ok := st.Workspaces[key]
		if !ok || rep.Status == nil {
			return false, "no report yet"
		}
		s := rep.Status
		sawRollout = s.ArtifactHash != hash && s.UpdatedReplicas >= 1 && s.Replicas > s.UpdatedReplicas
		return sawRollout, fmt.Sprintf("reported %+v", *s)
	}, ns)
	old, err := c.podHashes(ns, name)
	if err != nil {
		t.Fatal(err)
	}

	// Let the new pod start. From now until Cluster Control hears of the
	// consumption, every look at it must find a pod of the old template
	// gone or the directive still pending.
	c.apply(t, gateSecret)
	c.waitFor(t, "the restart of "+key+" reported consumed once every pod runs "+hash, func() (bool, string) {
		st, err := clusterControlState(admin)
		if err != nil {
			return false, err.Error()
		}
		if len(consumedFor(st, ns, name)) == 0 {
			return false, "not consumed yet"
		}
		pods, err := c.podHashes(ns, name)
		if err != nil {
			return false, err.Error()
		}
		for pod, h := range pods {
			if h != hash {
				t.Fatalf("the restart was reported consumed while pod %s still runs artifact hash %q (pods %v)", pod, h, pods)
			}
		}
		return true, ""
	}, ns)
	t.Logf("pods while the rollout was held: %v", old)
}

// podHashes returns the artifact hash of each pod of a workspace that has
// not finished, terminating ones included: a pod shutting down still runs
// its binary.
func (c *Cluster) podHashes(namespace, ws string) (map[string]string, error) {
	pods, err := c.listPods(namespace, v1alpha1.LabelWorkspace+"="+ws)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods {
		if !finished(p) {
			out[p.Name] = p.Annotations[v1alpha1.AnnotationArtifactBinaryHash]
		}
	}
	return out, nil
}

// putDirective asks Cluster Control, through its admin API, to restart a
// workspace onto hash.
func putDirective(t *testing.T, admin, namespace, name, hash string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"namespace": namespace, "name": name, "action": "restart_required", "artifactHash": hash})
	req, err := adminRequest(http.MethodPut, admin+"/admin/directives", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("PUT %s/admin/directives: %v", admin, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT %s/admin/directives: status %d", admin, resp.StatusCode)
	}
}

// clusterControlState reads the reference Cluster Control's state.
func clusterControlState(admin string) (*clustercontrol.AdminState, error) {
	body, err := getAdmin(admin + "/admin/state")
	if err != nil {
		return nil, err
	}
	var st clustercontrol.AdminState
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// consumedFor lists the consumptions Cluster Control recorded for one
// workspace.
func consumedFor(st *clustercontrol.AdminState, namespace, name string) []string {
	var out []string
	for _, c := range st.Consumed {
		if c.Namespace == namespace && c.Name == name {
			out = append(out, strings.TrimSpace(c.Action+" "+c.ArtifactHash))
		}
	}
	return out
}
