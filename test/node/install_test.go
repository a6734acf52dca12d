package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// waitTimeout bounds each wait for the cluster to converge: a guard against
// a hang, not a performance assertion.
const waitTimeout = 4 * time.Minute

// installBase is the kustomization the tests apply, relative to the
// repository.
const installBase = "deploy/overlays/insecure-http"

// hooksNamespace and hooksName are where deploy/ installs the hook server.
const (
	hooksNamespace = "formspec-system"
	hooksName      = "formspec-hooks"
)

// TestInstall applies the install the way users do (kubectl apply -k of
// installBase, with only the image reference changed) to a real node, and checks that the hook
// pods become Ready through their probes under their securityContext and
// that the hooks answer through their Service.
func TestInstall(t *testing.T) {
	RequirePrerequisites(t)
	c, tm := startInstalled(t, "", (*Cluster).install, "kubectl apply -k, hook pods Ready")

	t.Run("pods run as their securityContext says", func(t *testing.T) { c.checkHookProcesses(t) })
	t.Run("hooks answer through the Service", func(t *testing.T) { c.checkFixturesThroughService(t) })
	t.Run("cluster DNS answers cluster names only", func(t *testing.T) { c.checkDNS(t) })
	tm.Phase("checks")
}

// startInstalled builds the images (the Metacontroller one when mcBin is
// set), starts a cluster with them, runs install, and times both; phase
// names the install's phase.
func startInstalled(t *testing.T, mcBin string, install func(*Cluster, *testing.T), phase string) (*Cluster, *Timings) {
	t.Helper()
	tm := NewTimings(t)
	archives := buildImages(t, mcBin)
	tm.Phase("images built")
	c := Start(t, tm, archives.Paths()...)
	install(c, t)
	tm.Phase(phase)
	return c, tm
}

// buildImages builds the image archives of the test programs, the
// Metacontroller one when mcBin is set, beside the release's image
// archive: the cluster tests run what `make release` ships.
func buildImages(t *testing.T, mcBin string) Archives {
	t.Helper()
	nodeDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	archives, err := BuildImages(hooksArchive(t), hooksImage(t), nodeDir, t.TempDir(), mcBin)
	if err != nil {
		t.Fatalf("cannot build the images: %v", err)
	}
	return archives
}

// install applies deploy/ through a kustomization that only retags the
// hook image, after Metacontroller's CRDs (which users install first, with
// Metacontroller), and waits for the hook Deployment to be available.
func (c *Cluster) install(t *testing.T) {
	t.Helper()
	if err := c.Client().InstallCRDs(controlplane.MetacontrollerCRDs(t)); err != nil {
		t.Fatalf("cannot install Metacontroller's CRDs: %v", err)
	}
	root := controlplane.RepoRoot(t)
	repo, tag, _ := strings.Cut(hooksImage(t), ":")
	overlay := t.TempDir()
	// kustomize takes a base only by a relative path. deploy/ itself needs
	// cert-manager for the hooks' TLS certificate, which this cluster does
	// not have: its overlay for clusters without cert-manager is what a
	// user here would apply.
	deploy, err := filepath.Rel(overlay, filepath.Join(root, installBase))
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: %s
    newTag: %s
`, deploy, repo, tag)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o600); err != nil {
		t.Fatal(err)
	}
	c.kubectl(t, "apply", "-k", overlay)
	c.waitDeploymentReady(t, hooksNamespace, hooksName)
}

// kubectl runs kubectl against the cluster and returns its output.
func (c *Cluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(c.bin, "kubectl"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// waitDeploymentReady waits until every replica of a Deployment is ready
// and updated, and shows the pods' state and events if they never are.
func (c *Cluster) waitDeploymentReady(t *testing.T, namespace, name string) {
	t.Helper()
	c.waitFor(t, fmt.Sprintf("Deployment %s/%s ready", namespace, name), func() (bool, string) {
		d, err := c.Client().Get("apps/v1", "Deployment", namespace, name)
		if err != nil {
			return false, err.Error()
		}
		want := intField(d, "spec", "replicas")
		ready := intField(d, "status", "readyReplicas")
		updated := intField(d, "status", "updatedReplicas")
		return want > 0 && ready == want && updated == want, fmt.Sprintf("%d/%d ready, %d updated", ready, want, updated)
	}, namespace)
}

// waitFor polls cond every second until it holds, failing after waitTimeout
// with cond's last word and what the namespace's pods and events say.
func (c *Cluster) waitFor(t *testing.T, what string, cond func() (bool, string), namespace string) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last string
	for {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	out, _ := exec.Command(filepath.Join(c.bin, "kubectl"), "--kubeconfig", c.Kubeconfig, "-n", namespace, "get", "pods,events", "-o", "wide").CombinedOutput()
	desc, _ := exec.Command(filepath.Join(c.bin, "kubectl"), "--kubeconfig", c.Kubeconfig, "-n", namespace, "describe", "pods").CombinedOutput()
	t.Fatalf("%s: not after %v (last: %s)\n%s\n%s", what, waitTimeout, last, out, desc)
}

func intField(obj map[string]any, path ...string) int64 {
	var cur any = obj
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	f, _ := cur.(float64)
	return int64(f)
}

func stringField(obj map[string]any, path ...string) string {
	var cur any = obj
	for _, p := range path {
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	s, _ := cur.(string)
	return s
}

// hostProcess is a container's process as the host sees it.
type hostProcess struct {
	pid    string
	cmd    string
	uid    string // real, effective, saved, filesystem
	gid    string
	capEff string
	noNew  string // NoNewPrivs
	rootRO bool   // its / is mounted read-only
}

// containerProcesses finds the processes whose command line starts with
// prefix, reading /proc: the kubelet's view of securityContext is what
// the runtime was asked for, /proc is what it did.
func containerProcesses(prefix string) []hostProcess {
	var out []hostProcess
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		dir := filepath.Join("/proc", e.Name())
		raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		if !strings.HasPrefix(cmd, prefix) {
			continue
		}
		p := hostProcess{pid: e.Name(), cmd: cmd}
		status, _ := os.ReadFile(filepath.Join(dir, "status"))
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.Join(strings.Fields(v), " ")
			switch k {
			case "Uid":
				p.uid = v
			case "Gid":
				p.gid = v
			case "CapEff":
				p.capEff = v
			case "NoNewPrivs":
				p.noNew = v
			}
		}
		mounts, _ := os.ReadFile(filepath.Join(dir, "mountinfo"))
		for _, line := range strings.Split(string(mounts), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && f[4] == "/" {
				p.rootRO = slices.Contains(strings.Split(f[5], ","), "ro")
			}
		}
		out = append(out, p)
	}
	return out
}

// checkHookProcesses checks, from the host, that both containers of both
// hook pods run as 65532 with no capabilities, no privilege escalation and
// a read-only root filesystem.
func (c *Cluster) checkHookProcesses(t *testing.T) {
	for _, prefix := range []string{"/usr/local/bin/formspec-hooks serve", "/usr/local/bin/formspec-reporter"} {
		procs := containerProcesses(prefix)
		if len(procs) != 2 {
			t.Errorf("%d processes %q on the node, want 2 (one per replica): %+v", len(procs), prefix, procs)
		}
		for _, p := range procs {
			want := hostProcess{pid: p.pid, cmd: p.cmd, uid: "65532 65532 65532 65532", gid: "65532 65532 65532 65532", capEff: "0000000000000000", noNew: "1", rootRO: true}
			if diff := cmp.Diff(want, p, cmp.AllowUnexported(hostProcess{})); diff != "" {
				t.Errorf("process %s: -want, +got:\n%s", p.pid, diff)
			}
		}
	}
}

// serviceIP returns a Service's ClusterIP.
func (c *Cluster) serviceIP(t *testing.T, namespace, name string) string {
	t.Helper()
	svc, err := c.Client().Get("v1", "Service", namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	ip := stringField(svc, "spec", "clusterIP")
	if ip == "" {
		t.Fatalf("Service %s/%s has no clusterIP", namespace, name)
	}
	return ip
}

// checkFixturesThroughService posts every golden fixture to the hook
// Service's ClusterIP from the host (kube-proxy's rules carry it to a pod):
// the image's binary, configured by deploy/'s flags (the same values the
// fixtures were made with), must answer each with its golden response.
func (c *Cluster) checkFixturesThroughService(t *testing.T) {
	base := "http://" + c.serviceIP(t, hooksNamespace, hooksName)
	c.checkFixtures(t, base, &http.Client{Timeout: 10 * time.Second}, "")
}

// checkFixtures posts every golden fixture to base through client, with
// token as a bearer token unless it is empty, and wants each answered with
// its golden response.
func (c *Cluster) checkFixtures(t *testing.T, base string, client *http.Client, token string) {
	fixtures := filepath.Join(controlplane.RepoRoot(t), "fixtures")
	requests, err := filepath.Glob(filepath.Join(fixtures, "*", "*", "*", "request.json"))
	if err != nil || len(requests) == 0 {
		t.Fatalf("no fixtures under %s: %v", fixtures, err)
	}
	slices.Sort(requests)
	// Pods Ready is not yet rules in place: kube-proxy programs the
	// Service's endpoints on its own schedule, and until then a connection
	// is refused. Any HTTP answer (this empty body gets a 400) means the
	// Service leads to a hook pod.
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, _, err := post(client, base+"/v1/nodes/sync", token, []byte("{}"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Service %s never answered: %v", base, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	skipped := 0
	for _, req := range requests {
		dir := filepath.Dir(req)
		if _, err := os.Stat(filepath.Join(dir, "serve-flags")); err == nil {
			// A case of a mode the install does not run (serve-flags);
			// cmd/formspec-hooks answers it with those flags.
			skipped++
			continue
		}
		rel, _ := filepath.Rel(fixtures, filepath.Dir(dir))
		path := "/v1/" + filepath.ToSlash(rel)
		body, err := os.ReadFile(req)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, "response.json"))
		if err != nil {
			t.Fatal(err)
		}
		status, got, err := post(client, base+path, token, body)
		if err != nil {
			t.Fatalf("POST %s%s: %v", base, path, err)
		}
		if status != http.StatusOK {
			t.Errorf("POST %s (%s): status %d: %s", path, dir, status, got)
			continue
		}
		if diff := cmp.Diff(indent(t, want), indent(t, got)); diff != "" {
			t.Errorf("POST %s (%s): -want, +got:\n%s", path, dir, diff)
		}
	}
	t.Logf("%d fixtures answered through Service %s/%s (%s); %d of other serve flags left out", len(requests)-skipped, hooksNamespace, hooksName, base, skipped)
}

// post POSTs a JSON body, with token as a bearer token unless it is empty,
// and returns the answer's status and body.
func post(client *http.Client, url, token string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	got, err := io.ReadAll(resp.Body)
	return resp.StatusCode, got, err
}

func indent(t *testing.T, raw []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(raw), "", "  "); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, raw)
	}
	return buf.String()
}

// checkDNS asks the cluster's DNS server, as a pod would, for the hook
// Service's name (it must answer the ClusterIP) and for a name outside the
// cluster (it must not answer: there is no upstream).
func (c *Cluster) checkDNS(t *testing.T) {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, net.JoinHostPort(NodeIP, "53"))
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := hooksName + "." + hooksNamespace + ".svc." + ClusterDomain
	got, err := r.LookupHost(ctx, name)
	if err != nil {
		t.Fatalf("cannot resolve %s: %v", name, err)
	}
	if want := []string{c.serviceIP(t, hooksNamespace, hooksName)}; !slices.Equal(got, want) {
		t.Errorf("%s resolves to %v, want %v", name, got, want)
	}
	if addrs, err := r.LookupHost(ctx, "example.com"); err == nil {
		t.Errorf("example.com resolved to %v: the cluster DNS must not answer names outside %s", addrs, ClusterDomain)
	}
}

// get returns the body of a 200 answer to a GET.
func get(url string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	return do(req)
}

// do returns the body of a 200 answer to req.
func do(req *http.Request) (string, error) {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return string(body), nil
}
