package controlplane

import (
	"testing"
)

// TestRestartAPIServer restarts kube-apiserver: the same port and etcd
// serve what was stored before, and the restarted process is the one the
// control plane stops at the end.
func TestRestartAPIServer(t *testing.T) {
	cp := Start(t, WithoutControllerManager())
	c := cp.Client()
	cm := Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "before-restart", "namespace": "default"}, "data": map[string]any{"k": "v"}}
	if _, err := c.Create(cm); err != nil {
		t.Fatal(err)
	}
	first := cp.apiserver.cmd.Process.Pid
	if gone := cp.RestartAPIServer(t); gone <= 0 {
		t.Errorf("RestartAPIServer says the API server was gone for %v", gone)
	}
	if cp.apiserver.cmd.Process.Pid == first {
		t.Errorf("kube-apiserver still runs as pid %d: it was not restarted", first)
	}
	got, err := c.Get("v1", "ConfigMap", "default", "before-restart")
	if err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if data, _ := got["data"].(map[string]any); data["k"] != "v" {
		t.Errorf("after the restart, the ConfigMap holds %v, want k: v", got["data"])
	}
}
