package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// interceptorBin is the KEDA HTTP add-on's interceptor that
// test/keda-binaries.sh builds.
func interceptorBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("FORMSPEC_KEDA_BIN")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "formspec-hooks", "keda-http-v0.15.0")
	}
	bin := filepath.Join(dir, "interceptor")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("no KEDA HTTP interceptor at %s: build it with 'make keda-binaries' (or test/keda-binaries.sh); test/node's TestWakeOnRequest builds it when it runs", bin)
	}
	return bin
}

// TestInterceptorRoutes runs the add-on's interceptor, as it is, against a
// real API server holding the wake controller's routes from the fixtures,
// and checks what the wake relies on: a request for a workspace with no
// ready endpoint is held and counted in the admin queue under the
// workspace's namespace/name; the overflow route answers 503 with
// Retry-After at once; a host no route names gets 404. (The interceptor
// listens on every interface of this machine, on free ports, for the
// seconds the test runs; it has no flag for loopback only.)
func TestInterceptorRoutes(t *testing.T) {
	bin := interceptorBin(t)
	cp := controlplane.Start(t, controlplane.WithoutControllerManager())
	c := cp.Client()
	crds, err := controlplane.KEDAHTTPCRDs(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.InstallCRDs(crds...); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"held", "overflow"} {
		ensureNamespace(t, c, ns)
		if _, err := c.Create(controlplane.Object{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "acme", "namespace": ns},
			"spec": map[string]any{"ports": []any{map[string]any{"name": "http", "port": 80}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The same routes as in the fixtures, each in a namespace of its own.
	for ns, fixture := range map[string]string{"held": "route-attached", "overflow": "overflow-refuses-with-503"} {
		raw, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "fixtures", "wake", "sync", fixture, "response.json"))
		if err != nil {
			t.Fatal(err)
		}
		var resp struct{ Attachments []controlplane.Object }
		if err := json.Unmarshal(raw, &resp); err != nil || len(resp.Attachments) != 1 {
			t.Fatalf("%s: want one attachment: %v", fixture, err)
		}
		route := resp.Attachments[0]
		route["metadata"].(map[string]any)["namespace"] = ns
		route["spec"].(map[string]any)["rules"] = []any{map[string]any{"hosts": []any{"acme." + ns}}}
		if _, err := c.Create(route); err != nil {
			t.Fatalf("the API server refuses the %s route: %v", fixture, err)
		}
	}

	ports := controlplane.FreePorts(t, 2)
	proxy, admin := fmt.Sprintf("http://127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	p := controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: t.TempDir(), Env: []string{
		fmt.Sprintf("KEDA_HTTP_PROXY_PORT=%d", ports[0]), fmt.Sprintf("KEDA_HTTP_ADMIN_PORT=%d", ports[1]),
		"OTEL_PROM_EXPORTER_ENABLED=false", "KEDA_HTTP_CONNECT_TIMEOUT=200ms",
	}}, bin, "--kubeconfig="+cp.Kubeconfig)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx, func() bool {
		q, err := queue(admin)
		return err == nil && strings.Contains(q, `"held/acme"`) && strings.Contains(q, `"overflow/acme"`)
	}); err != nil {
		t.Fatalf("the interceptor never listed both routes: %v", err)
	}

	t.Run("Held", func(t *testing.T) {
		reqCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			code, _, err := getWithHost(reqCtx, proxy+"/", "acme.held")
			if reqCtx.Err() == nil {
				t.Errorf("the request was answered (%d, %v) while the workspace has no endpoint, want it held", code, err)
			}
		}()
		testsync.WaitFor(t, "the held request in the admin queue", func() bool {
			q, err := queue(admin)
			return err == nil && strings.Contains(q, `"held/acme":{"Concurrency":1,"RequestCount":1}`)
		})
		stop()
		<-done
		testsync.WaitFor(t, "the queue to empty once the client gives up", func() bool {
			q, err := queue(admin)
			return err == nil && strings.Contains(q, `"held/acme":{"Concurrency":0,"RequestCount":1}`)
		})
	})
	t.Run("Overflow", func(t *testing.T) {
		code, h, err := getWithHost(context.Background(), proxy+"/", "acme.overflow")
		if err != nil || code != http.StatusServiceUnavailable || h.Get("Retry-After") != "5" {
			t.Errorf("overflow route: status %d, Retry-After %q, %v; want 503 and 5", code, h.Get("Retry-After"), err)
		}
	})
	t.Run("UnknownHost", func(t *testing.T) {
		if code, _, err := getWithHost(context.Background(), proxy+"/", "nobody.nowhere"); err != nil || code != http.StatusNotFound {
			t.Errorf("unknown host: status %d, %v; want 404", code, err)
		}
	})
}

func queue(admin string) (string, error) {
	resp, err := http.Get(admin + "/queue")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), err
}

func getWithHost(ctx context.Context, url, host string) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, nil
}
