// Package node runs a real one-node Kubernetes cluster for tests, the way
// Kubernetes' own hack/local-up-cluster.sh does: test/controlplane's etcd,
// kube-apiserver and kube-controller-manager, plus kube-scheduler, a kubelet
// on containerd and runc, kube-proxy in iptables mode, a bridge CNI network
// with host-local IPAM, and CoreDNS answering cluster names only.
//
// Nothing leaves the machine: pods live on a bridge of their own
// (BridgeName, PodCIDR) with no uplink and no masquerade, traffic from the
// pod range to any other interface is dropped, CoreDNS has no upstream, and
// images are imported from archives built here, never pulled.
//
// The cluster needs root (it creates a bridge, iptables rules, mounts and
// cgroups); Start skips the test, saying why, when it is not root, and
// fails it with one line naming the package when a program is missing. Everything it makes is removed when the test ends, also
// when it fails or is interrupted (SIGINT, SIGTERM), and a check at the very
// end compares the machine with a snapshot taken before the start and fails
// the test on any process, mount, interface, network namespace, iptables
// chain or rule, cgroup, sysctl or file left behind.
package node

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// The cluster's names and address ranges (docs/testing.md lists them).
const (
	// NodeName is the node's name.
	NodeName = "formspec-node"
	// BridgeName is the Linux bridge the pods are attached to.
	BridgeName = "fsnode0"
	// PodCIDR is the pods' range, routed only on BridgeName.
	PodCIDR = "10.244.0.0/24"
	// NodeIP is the bridge's address: the pods' gateway, the node's
	// InternalIP (the kubelet refuses a loopback one), where CoreDNS
	// answers and where the pods reach the API server.
	NodeIP = "10.244.0.1"
	// ServiceCIDR is the Service range of test/controlplane's API server.
	ServiceCIDR = "10.96.0.0/16"
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// apiProxyPort is where the pods reach the API server on NodeIP: the
	// kubernetes Service's endpoint (the API server itself listens on
	// loopback only).
	apiProxyPort = 6443
	// kubeletPort is the kubelet's API (logs, exec) on NodeIP.
	kubeletPort = 10250
)

// EnvBinDir names the environment variable holding the directory with the
// node binaries built by test/node-binaries.sh.
const EnvBinDir = "FORMSPEC_NODE_BIN"

// nodeBinaries are the binaries test/node-binaries.sh builds into BinDir:
// the node's own and the kubectl its tests run, of the cluster's version
// (the machine's kubectl, if any, may be several versions away).
var nodeBinaries = []string{"kubelet", "kube-proxy", "kube-scheduler", "kubectl", "coredns"}

// k8sVersion is the version test/node-binaries.sh builds, which names its
// default output directory.
const k8sVersion = "v1.37.2"

// startTimeout bounds how long each component may take to become ready: a
// guard against a hang, not a performance assertion.
const startTimeout = 3 * time.Minute

// Controllers are the kube-controller-manager controllers of the cluster:
// test/controlplane's defaults plus those that turn Deployments and
// StatefulSets into pods and Services into endpoints, as in a real cluster,
// and the node lifecycle controller, which lifts the not-ready taint the
// kubelet registers the node with.
var Controllers = append(append([]string(nil), controlplane.DefaultControllers...),
	"deployment-controller",
	"statefulset-controller",
	"replicaset-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"root-ca-certificate-publisher-controller",
	"horizontal-pod-autoscaler-controller",
	"disruption-controller",
	"pod-garbage-collector-controller",
	"node-lifecycle-controller",
)

// hostBinaries are the programs from Debian's packages that the cluster
// and its teardown run, with the package that provides each. .ci/run
// installs these packages, and docs/testing.md lists them; keep the three
// in step.
var hostBinaries = map[string]string{
	"containerd":            "containerd",
	"ctr":                   "containerd",
	"runc":                  "runc",
	"iptables-save":         "iptables",
	"iptables-restore":      "iptables",
	"iptables-nft-save":     "iptables",
	"ip6tables-nft-save":    "iptables",
	"iptables-legacy-save":  "iptables",
	"ip6tables-legacy-save": "iptables",
	"nft":                   "nftables",
	"ip":                    "iproute2",
}

// cniPlugins are the CNI plugins used, from containernetworking-plugins.
var cniPlugins = []string{"bridge", "host-local", "loopback"}

// cniBinDir is where Debian's containernetworking-plugins installs them.
const cniBinDir = "/usr/lib/cni"

// Cluster is a running one-node cluster.
type Cluster struct {
	*controlplane.ControlPlane
	// Dir holds every file of the node (containerd's root and state, the
	// kubelet's root directory, configuration and logs).
	Dir string

	bin        string // node binaries
	containerd string // containerd's socket
	kubeconfig string // the admin kubeconfig, in Dir
}

// Timings records how long each phase of a test took and prints them when
// the test ends.
type Timings struct {
	mu     sync.Mutex
	phases []string
	last   time.Time
}

// Phase records that the phase named what has just finished.
func (tm *Timings) Phase(what string) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	now := time.Now()
	tm.phases = append(tm.phases, fmt.Sprintf("%-40s %6.1fs", what, now.Sub(tm.last).Seconds()))
	tm.last = now
}

func (tm *Timings) String() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return strings.Join(tm.phases, "\n")
}

// NewTimings returns a phase timer that starts now and logs every phase's
// duration when the test ends.
func NewTimings(t *testing.T) *Timings {
	tm := &Timings{last: time.Now()}
	t.Cleanup(func() { t.Logf("phases:\n%s", tm) })
	return tm
}

// BinDir returns the node binaries' directory: FORMSPEC_NODE_BIN, or where
// test/node-binaries.sh builds by default.
func BinDir() string {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		return dir
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "formspec-hooks", "node-"+k8sVersion)
}

// controlPlaneBinDir makes test/controlplane find its binaries where
// test/k8s-binaries.sh builds them by default when FORMSPEC_K8S_BIN is unset.
func controlPlaneBinDir(t *testing.T) {
	if os.Getenv(controlplane.EnvBinDir) != "" {
		return
	}
	if home, err := os.UserHomeDir(); err == nil {
		t.Setenv(controlplane.EnvBinDir, filepath.Join(home, ".cache", "formspec-hooks", "k8s-"+k8sVersion))
	}
}

// RequirePrerequisites skips the test, saying why, when it does not run as
// root, since only root can make a node. As root the test is meant to run,
// so a missing prerequisite fails it before anything is started, with one
// line that names what to install.
func RequirePrerequisites(t *testing.T) {
	t.Helper()
	controlPlaneBinDir(t)
	if os.Geteuid() != 0 {
		t.Skip("skipping the one-node cluster: it needs root: it creates a bridge, iptables rules, mounts, cgroups and network namespaces (run make test-node as root)")
	}
	if err := Prerequisites(); err != nil {
		t.Fatal("the one-node cluster cannot start: " + err.Error())
	}
}

// Prerequisites returns the first thing missing for a cluster here, as
// one line that names what provides it, or nil. It does not check for
// root (RequirePrerequisites does).
func Prerequisites() error {
	for _, name := range nodeBinaries {
		if _, err := os.Stat(filepath.Join(BinDir(), name)); err != nil {
			return fmt.Errorf("%s has no %s: build the node binaries with make node-binaries (test/node-binaries.sh), or set %s", BinDir(), name, EnvBinDir)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(hostBinaries)) {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("%s not found: apt-get install %s (.ci/run installs it)", name, hostBinaries[name])
		}
	}
	for _, p := range cniPlugins {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			return fmt.Errorf("CNI plugin %s not found in %s: apt-get install containernetworking-plugins (.ci/run installs it)", p, cniBinDir)
		}
	}
	if _, err := controlplane.BinDir(); err != nil {
		return err
	}
	return nil
}

// Start brings up the one-node cluster for the duration of the test, with
// the image archives preloaded into containerd, and returns when the node
// is Ready, CoreDNS answers and the pods can reach the API server. Each
// phase is recorded in tm. It skips or fails the test as
// RequirePrerequisites does.
func Start(t *testing.T, tm *Timings, images ...string) *Cluster {
	t.Helper()
	RequirePrerequisites(t)

	// A run killed before its cleanups (SIGKILL, a go test timeout) leaves
	// its node behind; remove it so that this run starts clean.
	if err := takeSnapshot(t).clean(); err != nil {
		t.Logf("removing what an earlier run left:\n%v", err)
		removeLeftovers(t, nil)
	}
	before := takeSnapshot(t)
	if err := before.clean(); err != nil {
		t.Fatalf("cannot remove what an earlier run left:\n%v", err)
	}
	// An interrupted go test (Ctrl-C, a CI cancel) would otherwise exit
	// without running cleanups and leave the bridge, rules and mounts. The
	// handler stays until the very end, cleanups included.
	var teardown sync.Mutex
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	stopSignals := make(chan struct{})
	go func() {
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "node: %v: removing the one-node cluster\n", s)
			teardown.Lock()
			removeLeftovers(t, before)
			os.Exit(1)
		case <-stopSignals:
		}
	}()
	// Registered first, so it runs last: after every process has been
	// stopped by its own cleanup, everything else the node made goes, and
	// nothing may be left.
	t.Cleanup(func() {
		teardown.Lock()
		defer teardown.Unlock()
		signal.Stop(sig)
		close(stopSignals)
		removeLeftovers(t, before)
		if leaks := before.diff(takeSnapshot(t)); len(leaks) > 0 {
			t.Errorf("the one-node cluster left things behind:\n%s", strings.Join(leaks, "\n"))
		}
		tm.Phase("teardown and leak check")
	})

	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, bin: BinDir(), containerd: filepath.Join(dir, "containerd", "containerd.sock")}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	c.ControlPlane = controlplane.Start(t, controlplane.WithControllers(Controllers...),
		// kubectl logs and exec reach the kubelet at the node's address;
		// its name resolves nowhere.
		controlplane.WithAPIServerFlags("--kubelet-preferred-address-types=InternalIP"))
	// The node's own copy, so that every node process has the node's
	// directory on its command line (which is how teardown finds them).
	kubeconfig, err := os.ReadFile(c.ControlPlane.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c.kubeconfig = c.writeFile(t, "kubeconfig", string(kubeconfig))
	tm.Phase("control plane")

	if err := setUpNetwork(); err != nil {
		t.Fatalf("cannot set up the pod network: %v", err)
	}
	c.startAPIProxy(t)
	tm.Phase("pod network")

	c.startContainerd(t, ctx)
	for _, archive := range images {
		if err := c.ImportImage(archive); err != nil {
			t.Fatal(err)
		}
	}
	tm.Phase("containerd and images")

	c.startKubelet(t, ctx)
	tm.Phase("kubelet (node Ready)")
	c.startScheduler(t)
	c.startKubeProxy(t, ctx)
	c.startCoreDNS(t, ctx)
	tm.Phase("scheduler, kube-proxy, CoreDNS")
	return c
}

// ImportImage imports an image archive (docker or OCI) into containerd's
// k8s.io namespace, where the kubelet finds it, under its name. An OCI
// archive's image is also tagged repository@digest (its index's digest),
// the reference a pull from a registry would have left: the release's
// chart and install.yaml name the image by tag and digest, which the
// kubelet resolves by the digest alone.
func (c *Cluster) ImportImage(archive string) error {
	ctr := func(args ...string) ([]byte, error) {
		return exec.Command("ctr", append([]string{"--address", c.containerd, "-n", "k8s.io", "images"}, args...)...).CombinedOutput()
	}
	if out, err := ctr("import", archive); err != nil {
		return fmt.Errorf("cannot import %s into containerd: %v\n%s", archive, err, out)
	}
	refs, err := ociDigestRefs(archive)
	if err != nil {
		return err
	}
	for name, byDigest := range refs {
		if out, err := ctr("tag", "--force", name, byDigest); err != nil {
			return fmt.Errorf("cannot tag %s as %s: %v\n%s", name, byDigest, err, out)
		}
	}
	return nil
}

// ociDigestRefs reads an OCI archive's index.json and returns, for each
// image it names, its name and repository@digest; nothing for a docker
// archive.
func ociDigestRefs(archive string) (map[string]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var index v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return nil, fmt.Errorf("%s: index.json: %w", archive, err)
		}
		refs := map[string]string{}
		for _, m := range index.Manifests {
			n := m.Annotations[annotationImageName]
			if n == "" {
				continue
			}
			tag, err := name.NewTag(n)
			if err != nil {
				return nil, fmt.Errorf("%s: image name %q: %w", archive, n, err)
			}
			refs[n] = tag.Repository.Name() + "@" + m.Digest.String()
		}
		return refs, nil
	}
}

func (c *Cluster) start(t *testing.T, name string, args ...string) *controlplane.Process {
	return controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: c.Dir, LogLines: 60}, name, args...)
}

func (c *Cluster) writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(c.Dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// setUpNetwork creates the bridge with the node's address, routes the
// Service range onto it (so that nothing addressed there takes the default
// route out), and drops anything from or to the pod range that would cross
// another interface.
func setUpNetwork() error {
	prefix := strings.SplitN(PodCIDR, "/", 2)[1]
	for _, args := range [][]string{
		{"link", "add", BridgeName, "type", "bridge"},
		{"addr", "add", NodeIP + "/" + prefix, "dev", BridgeName},
		{"link", "set", BridgeName, "up"},
		{"route", "add", ServiceCIDR, "dev", BridgeName},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	rules := fmt.Sprintf(`*filter
:%[1]s - [0:0]
-I FORWARD 1 -j %[1]s
-A %[1]s -s %[2]s ! -o %[3]s -j DROP
-A %[1]s -d %[2]s ! -i %[3]s -j DROP
COMMIT
`, isolationChain, PodCIDR, BridgeName)
	return iptablesRestore("iptables-restore", rules)
}

// isolationChain holds the rules that keep the pods' traffic on the bridge.
const isolationChain = "FORMSPEC-NODE-ISOLATION"

func iptablesRestore(bin, rules string) error {
	cmd := exec.Command(bin, "-w", "--noflush")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s\n%s", bin, err, out, rules)
	}
	return nil
}

// startAPIProxy forwards NodeIP:apiProxyPort to the API server on loopback
// and makes it the kubernetes Service's endpoint, so that pods (Metacontroller
// with its in-cluster configuration) reach the API server at 10.96.0.1:443.
// It is a plain TCP relay: TLS is between the pod and the API server, whose
// certificate names 10.96.0.1.
func (c *Cluster) startAPIProxy(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(NodeIP, strconv.Itoa(apiProxyPort)))
	if err != nil {
		t.Fatalf("cannot listen for the API server relay: %v", err)
	}
	upstream := strings.TrimPrefix(c.URL, "https://")
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]struct{}{}
	track := func(conn net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[conn] = struct{}{}
		} else {
			delete(conns, conn)
		}
	}
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		for conn := range conns {
			_ = conn.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			down, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				relay(down, upstream, track)
			}()
		}
	}()
	_, err = c.Client().Apply(controlplane.Object{
		"apiVersion": "discovery.k8s.io/v1",
		"kind":       "EndpointSlice",
		"metadata": map[string]any{
			"name":      "kubernetes",
			"namespace": "default",
			"labels": map[string]any{
				"kubernetes.io/service-name":             "kubernetes",
				"endpointslice.kubernetes.io/managed-by": "formspec-node-test",
			},
		},
		"addressType": "IPv4",
		"endpoints":   []any{map[string]any{"addresses": []any{NodeIP}, "conditions": map[string]any{"ready": true}}},
		"ports":       []any{map[string]any{"name": "https", "port": apiProxyPort, "protocol": "TCP"}},
	}, "formspec-node-test")
	if err != nil {
		t.Fatalf("cannot publish the API server's endpoint: %v", err)
	}
}

// relay copies between down and a new connection to upstream until either
// side closes.
func relay(down net.Conn, upstream string, track func(net.Conn, bool)) {
	defer func() { _ = down.Close() }()
	up, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer func() { _ = up.Close() }()
	track(down, true)
	track(up, true)
	defer track(down, false)
	defer track(up, false)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, down); done <- struct{}{} }()
	go func() { _, _ = io.Copy(down, up); done <- struct{}{} }()
	<-done
}

func (c *Cluster) startContainerd(t *testing.T, ctx context.Context) {
	t.Helper()
	config := c.writeFile(t, "containerd/config.toml", containerdConfig(c.Dir, c.containerd))
	c.writeFile(t, "cni/net.d/10-formspec-node.conflist", cniConfig(c.Dir))
	p := c.start(t, "containerd", "--config", config)
	if err := p.WaitReady(ctx, func() bool {
		return exec.Command("ctr", "--address", c.containerd, "version").Run() == nil
	}); err != nil {
		t.Fatalf("containerd did not start: %v", err)
	}
}

func (c *Cluster) startKubelet(t *testing.T, ctx context.Context) {
	t.Helper()
	healthz := controlplane.FreePorts(t, 1)[0]
	config := c.writeFile(t, "kubelet/config.yaml", kubeletConfig(c.Dir, c.containerd, healthz))
	p := c.start(t, filepath.Join(c.bin, "kubelet"),
		"--config="+config,
		"--kubeconfig="+c.kubeconfig,
		"--root-dir="+filepath.Join(c.Dir, "kubelet", "root"),
		"--cert-dir="+filepath.Join(c.Dir, "kubelet", "pki"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
		"--v=1",
	)
	if err := p.WaitReady(ctx, func() bool { return c.nodeReady() }); err != nil {
		t.Fatalf("the node did not become Ready: %v", err)
	}
}

// nodeReady reports whether the node's Ready condition is True.
func (c *Cluster) nodeReady() bool {
	node, err := c.Client().Get("v1", "Node", "", NodeName)
	if err != nil {
		return false
	}
	status, _ := node["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True"
		}
	}
	return false
}

func (c *Cluster) startScheduler(t *testing.T) {
	t.Helper()
	c.start(t, filepath.Join(c.bin, "kube-scheduler"),
		"--kubeconfig="+c.kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=1",
	)
}

func (c *Cluster) startKubeProxy(t *testing.T, ctx context.Context) {
	t.Helper()
	ports := controlplane.FreePorts(t, 2)
	config := c.writeFile(t, "kube-proxy/config.yaml", kubeProxyConfig(c.kubeconfig, ports[0], ports[1]))
	p := c.start(t, filepath.Join(c.bin, "kube-proxy"), "--config="+config, "--v=1")
	// Ready once it has synced the rules at least once (healthz answers 200).
	healthz := "http://127.0.0.1:" + strconv.Itoa(ports[0]) + "/healthz"
	if err := p.WaitReady(ctx, func() bool { return httpOK(healthz) }); err != nil {
		t.Fatalf("kube-proxy did not become healthy: %v", err)
	}
}

func (c *Cluster) startCoreDNS(t *testing.T, ctx context.Context) {
	t.Helper()
	ready := controlplane.FreePorts(t, 1)[0]
	corefile := c.writeFile(t, "coredns/Corefile", coreFile(c.kubeconfig, ready))
	p := c.start(t, filepath.Join(c.bin, "coredns"), "-conf", corefile)
	if err := p.WaitReady(ctx, func() bool { return httpOK("http://127.0.0.1:" + strconv.Itoa(ready) + "/ready") }); err != nil {
		t.Fatalf("CoreDNS did not become ready: %v", err)
	}
}

func httpOK(url string) bool {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode == http.StatusOK
}
