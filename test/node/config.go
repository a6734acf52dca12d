package node

import (
	"fmt"
	"path/filepath"
)

// PauseImage is the sandbox image containerd starts every pod with; it is
// imported from PauseArchive under exactly this name, which containerd's
// sandbox_image names.
const PauseImage = "formspec.test/pause:node-test"

// containerdConfig keeps containerd's root, state, sockets, CNI
// configuration and IPAM state under dir, away from any system containerd.
//
// restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, and a sandbox
// asking for a negative OOM score then fails in runc ("can't get final
// child's PID from pipe: EOF"); with it, scores are clamped to what the
// runtime may set. netns_mounts_under_state_dir keeps the pods' network
// namespaces under dir too, instead of /run/netns, and runc's Root its
// state, instead of /run/containerd/runc.
func containerdConfig(dir, socket string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[8]q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
    max_conf_num = 1
`,
		filepath.Join(dir, "containerd", "root"),
		filepath.Join(dir, "containerd", "state"),
		socket,
		filepath.Join(dir, "containerd", "opt"),
		PauseImage,
		cniBinDir,
		filepath.Join(dir, "cni", "net.d"),
		filepath.Join(dir, "runc"),
	)
}

// cniConfig attaches pods to BridgeName with addresses from PodCIDR. The
// bridge is the pods' gateway (isGateway) but nothing is masqueraded
// (ipMasq false) and the host has no route from the bridge to anywhere
// else; hairpin mode lets a pod reach itself through its Service.
func cniConfig(dir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "formspec-node",
  "plugins": [{
    "type": "bridge",
    "bridge": %[1]q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %[2]q,
      "ranges": [[{"subnet": %[3]q, "gateway": %[4]q}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
`, BridgeName, filepath.Join(dir, "cni", "ipam"), PodCIDR, NodeIP)
}

// kubeletConfig is the kubelet's configuration for this machine: cgroup v1
// with the cgroupfs driver (failCgroupV1: false), swap tolerated, no image
// garbage collection (the preloaded images cannot be pulled again), low
// eviction thresholds (a test must not lose its pods to a full disk), no
// resolv.conf from the host (pods resolve cluster names only), its API on
// NodeIP only with anonymous access (the API server has no kubelet client
// certificate, and kubectl logs must work), and no iptables chains of its
// own (makeIPTablesUtilChains: false; kube-proxy makes what Services need).
func kubeletConfig(dir, socket string, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://%[1]s
address: %[2]s
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[4]d
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDNS: [%[2]s]
clusterDomain: %[5]s
resolvConf: ""
podLogsDir: %[6]s
volumePluginDir: %[7]s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
makeIPTablesUtilChains: false
registerNode: true
serializeImagePulls: false
shutdownGracePeriod: 0s
syncFrequency: 10s
`, socket, NodeIP, kubeletPort, healthzPort, ClusterDomain,
		filepath.Join(dir, "kubelet", "pod-logs"),
		filepath.Join(dir, "kubelet", "volume-plugins"))
}

// kubeProxyConfig runs kube-proxy in iptables mode for the pod range, with
// NodePorts on the bridge only (never on the machine's real interfaces), and
// leaves the conntrack sysctls as they are.
func kubeProxyConfig(kubeconfig string, healthzPort, metricsPort int) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
clusterCIDR: %[3]s
healthzBindAddress: 127.0.0.1:%[4]d
metricsBindAddress: 127.0.0.1:%[5]d
nodePortAddresses: ["%[6]s/32"]
iptables:
  masqueradeAll: false
  localhostNodePorts: false
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, NodeName, PodCIDR, healthzPort, metricsPort, NodeIP)
}

// coreFile serves cluster names (and their reverse lookups) on NodeIP from
// the API server. There is no forward plugin and no root zone, so any other
// name is REFUSED: nothing is asked upstream.
func coreFile(kubeconfig string, readyPort int) string {
	return fmt.Sprintf(`%[1]s:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %[2]s
    ready 127.0.0.1:%[3]d
    errors
    kubernetes %[1]s in-addr.arpa ip6.arpa {
        kubeconfig %[4]s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
`, ClusterDomain, NodeIP, readyPort, kubeconfig)
}
