package controlplane

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// RestartAPIServer stops kube-apiserver (SIGTERM, as a node's kubelet or
// systemd stops it for an upgrade) and starts it again with the same
// flags, on the same port, with the same etcd: what every client sees as
// the API server restarting. It returns once the new one answers /readyz,
// with how long the API server was gone (from the stop to ready again).
// The new process writes on in the same log and is stopped when the
// control plane is.
func (cp *ControlPlane) RestartAPIServer(t testing.TB) time.Duration {
	t.Helper()
	stopped := time.Now()
	if err := cp.apiserver.restart(); err != nil {
		t.Fatalf("cannot restart kube-apiserver: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := waitFor(ctx, cp.apiserver, func() bool {
		_, err := cp.client.Do(http.MethodGet, "/readyz", nil)
		return err == nil
	}); err != nil {
		t.Fatalf("kube-apiserver did not become ready after its restart: %v", err)
	}
	return time.Since(stopped)
}
