package node

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What the cluster makes is recognised by name, so that removeLeftovers
// works from the machine's state alone: after a normal end, after a failed
// start, and before a start that finds what a killed run left.
const (
	// dirPrefix starts the name of every directory a Start creates under
	// os.TempDir(); every node process has such a path on its command line.
	dirPrefix = "formspec-node-"
	// netnsDir holds the network namespaces containerd's CRI plugin
	// creates, named cni-<uuid>.
	netnsDir = "/run/netns"
	// cniCacheDir is where libcni caches each attachment's result, in files
	// named <network>-<container>-<interface>.
	cniCacheDir = "/var/lib/cni"
	// containerLogLinks holds the kubelet's symlinks to container logs.
	containerLogLinks = "/var/log/containers"
	// podCgroup is the cgroup the kubelet (cgroupfs driver) puts every pod
	// under, in each hierarchy.
	podCgroup = "kubepods"
)

// createdPaths are system directories the node's components create when
// missing (containerd's shims keep their sockets in /run/containerd/s
// whatever the configuration says); each is removed at the end, with what
// the node left in it, if it did not exist before.
var createdPaths = []string{netnsDir, cniCacheDir, containerLogLinks, "/run/containerd"}

// sysctls are the kernel settings the kubelet, kube-proxy or the bridge
// plugin may change; each is put back.
var sysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv6/conf/all/forwarding",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// iptablesBackends are the save commands of both iptables backends and both
// families: the kubelet and kube-proxy probe all four.
var iptablesBackends = []string{"iptables-nft", "ip6tables-nft", "iptables-legacy", "ip6tables-legacy"}

// snapshot is the part of the machine's state the cluster touches.
type snapshot struct {
	processes []string          // node processes: pid and command line
	mounts    []string          // mount points
	links     []string          // network interfaces
	netns     []string          // named network namespaces
	iptables  map[string]string // per backend, iptables-save without counters
	nftables  string            // nft list tables
	cgroups   []string          // podCgroup directories
	sysctls   map[string]string
	paths     map[string]bool // createdPaths that exist
	dirs      []string        // dirPrefix directories
}

func takeSnapshot(t *testing.T) *snapshot {
	t.Helper()
	s := &snapshot{
		processes: nodeProcesses(),
		mounts:    mountPoints(),
		netns:     readDirNames(netnsDir),
		iptables:  map[string]string{},
		cgroups:   podCgroups(),
		sysctls:   map[string]string{},
		paths:     map[string]bool{},
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				s.links = append(s.links, strings.TrimSuffix(f[1], ":"))
			}
		}
	}
	for _, b := range iptablesBackends {
		s.iptables[b] = iptablesSave(b)
	}
	if out, err := exec.Command("nft", "list", "tables").CombinedOutput(); err == nil {
		s.nftables = string(out)
	}
	for _, k := range sysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			s.sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	for _, p := range createdPaths {
		_, err := os.Lstat(p)
		s.paths[p] = err == nil
	}
	s.dirs, _ = filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	return s
}

// clean returns an error when something of a node is present, which would
// make the leak check meaningless.
func (s *snapshot) clean() error {
	var found []string
	if len(s.processes) > 0 {
		found = append(found, "processes: "+strings.Join(s.processes, "; "))
	}
	if slices.Contains(s.links, BridgeName) {
		found = append(found, "bridge "+BridgeName)
	}
	if len(s.cgroups) > 0 {
		found = append(found, "cgroups: "+strings.Join(s.cgroups, " "))
	}
	for b, dump := range s.iptables {
		if strings.Contains(dump, ":KUBE-") || strings.Contains(dump, ":"+isolationChain) {
			found = append(found, b+" has KUBE-* chains")
		}
	}
	if len(found) > 0 {
		return errors.New(strings.Join(found, "\n"))
	}
	return nil
}

// diff lists what differs between s (before) and after.
func (s *snapshot) diff(after *snapshot) []string {
	var out []string
	list := func(what string, before, after []string) {
		for _, v := range after {
			if !slices.Contains(before, v) {
				out = append(out, fmt.Sprintf("%s added: %s", what, v))
			}
		}
		for _, v := range before {
			if !slices.Contains(after, v) {
				out = append(out, fmt.Sprintf("%s removed: %s", what, v))
			}
		}
	}
	list("process", s.processes, after.processes)
	list("mount", s.mounts, after.mounts)
	list("interface", s.links, after.links)
	list("network namespace", s.netns, after.netns)
	list("cgroup", s.cgroups, after.cgroups)
	list("directory", s.dirs, after.dirs)
	for _, b := range iptablesBackends {
		list(b+" rule", strings.Split(s.iptables[b], "\n"), strings.Split(after.iptables[b], "\n"))
	}
	list("nft table", strings.Split(s.nftables, "\n"), strings.Split(after.nftables, "\n"))
	for _, k := range sysctls {
		if s.sysctls[k] != after.sysctls[k] {
			out = append(out, fmt.Sprintf("sysctl %s: %q before, %q after", k, s.sysctls[k], after.sysctls[k]))
		}
	}
	for _, p := range createdPaths {
		if s.paths[p] != after.paths[p] {
			out = append(out, fmt.Sprintf("%s: existed before: %v, after: %v", p, s.paths[p], after.paths[p]))
		}
	}
	return out
}

// removeLeftovers removes everything a node makes, in the order that lets
// each step succeed: processes first (so that nothing recreates what follows
// or holds it busy), then mounts and network namespaces, the bridge,
// iptables chains, cgroups and files. before, when known, says which
// sysctls to put back and which system directories were there already.
func removeLeftovers(t *testing.T, before *snapshot) {
	t.Helper()
	logf := func(format string, args ...any) { t.Logf("teardown: "+format, args...) }

	// The kubelet and containerd first (they would restart containers),
	// then the shims and the containers in the pod cgroups.
	killUntilGone(logf, nodeProcesses)
	killUntilGone(logf, podProcesses)

	for range 3 {
		mounts := ourMounts()
		if len(mounts) == 0 {
			break
		}
		for _, m := range slices.Backward(mounts) {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				logf("cannot unmount %s: %v", m, err)
			}
		}
	}
	for _, name := range readDirNames(netnsDir) {
		if strings.HasPrefix(name, "cni-") {
			if err := os.Remove(filepath.Join(netnsDir, name)); err != nil {
				logf("cannot remove network namespace %s: %v", name, err)
			}
		}
	}

	if out, err := exec.Command("ip", "-o", "link", "show", "master", BridgeName).Output(); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
				_ = exec.Command("ip", "link", "del", name).Run()
			}
		}
	}
	if exec.Command("ip", "link", "show", BridgeName).Run() == nil {
		if out, err := exec.Command("ip", "link", "del", BridgeName).CombinedOutput(); err != nil {
			logf("cannot delete %s: %v: %s", BridgeName, err, out)
		}
	}

	if proxy := filepath.Join(BinDir(), "kube-proxy"); fileExists(proxy) {
		// kube-proxy's own cleanup knows its rules best; whatever it
		// leaves, the loop below removes.
		_ = exec.Command(proxy, "--cleanup").Run()
	}
	for _, b := range iptablesBackends {
		if rules := iptablesCleanup(iptablesSave(b)); rules != "" {
			if err := iptablesRestore(b+"-restore", rules); err != nil {
				logf("%v", err)
			}
		}
	}

	// Without a snapshot (what a killed run left), every empty table goes:
	// an empty table is harmless to delete whoever made it.
	var tablesBefore string
	if before != nil {
		tablesBefore = before.nftables
	}
	removeEmptyTables(logf, tablesBefore)

	for range 50 {
		if removeCgroups() {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	for _, link := range readDirNames(containerLogLinks) {
		p := filepath.Join(containerLogLinks, link)
		if dest, err := os.Readlink(p); err == nil && strings.Contains(dest, "/"+dirPrefix) {
			_ = os.Remove(p)
		}
	}
	for _, name := range readDirNames(filepath.Join(cniCacheDir, "results")) {
		// The pod network's and containerd's loopback network's.
		if strings.HasPrefix(name, "formspec-node-") || strings.HasPrefix(name, "cni-loopback-") {
			_ = os.Remove(filepath.Join(cniCacheDir, "results", name))
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		keepLogs(t, d)
		if err := os.RemoveAll(d); err != nil {
			logf("cannot remove %s: %v", d, err)
		}
	}
	if before == nil {
		return
	}
	for _, p := range createdPaths {
		if !before.paths[p] {
			if err := os.RemoveAll(p); err != nil {
				logf("cannot remove %s: %v", p, err)
			}
		}
	}
	for _, k := range sysctls {
		if v, ok := before.sysctls[k]; ok {
			_ = os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644)
		}
	}
}

// keepLogs copies a failed test's node logs out of dir before it goes.
func keepLogs(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		return
	}
	keep, err := os.MkdirTemp("", "node-logs-")
	if err != nil {
		return
	}
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(keep, filepath.Base(l)), data, 0o644)
		}
	}
	t.Logf("node logs kept in %s", keep)
}

// killUntilGone SIGKILLs the processes list returns until there are none,
// for at most ten seconds.
func killUntilGone(logf func(string, ...any), list func() []string) {
	for range 100 {
		procs := list()
		if len(procs) == 0 {
			return
		}
		for _, p := range procs {
			pid, _, _ := strings.Cut(p, " ")
			if n, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf("processes still running: %v", list())
}

// nodeProcesses lists the processes that have a node directory on their
// command line (containerd, its shims, the kubelet, kube-proxy, CoreDNS,
// kube-scheduler), as "pid command line".
func nodeProcesses() []string {
	var out []string
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		cmd := strings.TrimSpace(strings.ReplaceAll(string(raw), "\x00", " "))
		if strings.Contains(cmd, "/"+dirPrefix) {
			out = append(out, fmt.Sprintf("%d %s", pid, cmd))
		}
	}
	return out
}

// podProcesses lists the processes in the pod cgroups (the containers).
func podProcesses() []string {
	var out []string
	for _, dir := range podCgroups() {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, pid := range strings.Fields(string(data)) {
				if !slices.Contains(out, pid) {
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// cgroupMounts lists the mount points of every cgroup hierarchy.
func cgroupMounts() []string {
	var out []string
	for _, m := range readMountInfo() {
		if m.fstype == "cgroup" || m.fstype == "cgroup2" {
			out = append(out, m.point)
		}
	}
	return out
}

// podCgroups lists the podCgroup directories in every hierarchy.
func podCgroups() []string {
	var out []string
	for _, m := range cgroupMounts() {
		if p := filepath.Join(m, podCgroup); fileExists(p) {
			out = append(out, p)
		}
	}
	return out
}

// removeCgroups removes the podCgroup trees, deepest first, and reports
// whether none is left.
func removeCgroups() bool {
	for _, root := range podCgroups() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for _, d := range slices.Backward(dirs) {
			_ = syscall.Rmdir(d)
		}
	}
	return len(podCgroups()) == 0
}

type mountInfo struct{ point, fstype string }

func readMountInfo() []mountInfo {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var out []mountInfo
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if !ok || len(fields) < 5 {
			continue
		}
		fstype, _, _ := strings.Cut(post, " ")
		out = append(out, mountInfo{point: unescapeMount(fields[4]), fstype: fstype})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func mountPoints() []string {
	var out []string
	for _, m := range readMountInfo() {
		out = append(out, m.point)
	}
	return out
}

// ourMounts lists, in mount order, the mounts in node directories and the
// CRI plugin's network namespaces.
func ourMounts() []string {
	var out []string
	tmp := filepath.Join(os.TempDir(), dirPrefix)
	for _, m := range mountPoints() {
		if strings.HasPrefix(m, tmp) || strings.HasPrefix(m, netnsDir+"/cni-") {
			out = append(out, m)
		}
	}
	return out
}

// iptablesSave dumps one backend's rules without counters or comments
// (which carry timestamps), or "" when the backend is unavailable.
func iptablesSave(backend string) string {
	out, err := exec.Command(backend + "-save").Output()
	if err != nil {
		return ""
	}
	var lines []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		if strings.HasPrefix(line, ":") {
			// ":CHAIN POLICY [packets:bytes]": drop the counters.
			if i := strings.LastIndex(line, " ["); i > 0 {
				line = line[:i]
			}
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// nftFamilies are the nf_tables families of the nft iptables backends.
var nftFamilies = map[string]string{"iptables-nft": "ip", "ip6tables-nft": "ip6"}

// removeEmptyTables deletes the nf_tables tables that an iptables-nft call
// created (any call creates its table, with the built-in chains) when they
// were not there before (nft list tables output) and hold no rule now.
func removeEmptyTables(logf func(string, ...any), before string) {
	for backend, family := range nftFamilies {
		rules := map[string]int{}
		var table string
		for _, line := range strings.Split(iptablesSave(backend), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
				rules[table] += 0
			case strings.HasPrefix(line, "-A "):
				rules[table]++
			}
		}
		for table, n := range rules {
			if n > 0 || slices.Contains(strings.Split(before, "\n"), "table "+family+" "+table) {
				continue
			}
			if out, err := exec.Command("nft", "delete", "table", family, table).CombinedOutput(); err != nil {
				logf("nft delete table %s %s: %v: %s", family, table, err, out)
			}
		}
	}
}

// ourChain reports whether an iptables chain is the node's: the kubelet's
// and kube-proxy's KUBE-* chains, and the isolation chain.
func ourChain(name string) bool {
	return strings.HasPrefix(name, "KUBE-") || name == isolationChain
}

// iptablesCleanup turns a dump into an iptables-restore --noflush script
// that deletes every rule jumping to one of our chains from a chain that is
// not ours, then flushes and deletes our chains; "" when there is nothing.
func iptablesCleanup(dump string) string {
	var b strings.Builder
	var table string
	var deletes, chains []string
	flushTable := func() {
		if table != "" && (len(deletes) > 0 || len(chains) > 0) {
			fmt.Fprintf(&b, "*%s\n", table)
			for _, d := range deletes {
				fmt.Fprintln(&b, d)
			}
			for _, c := range chains {
				fmt.Fprintf(&b, "-F %s\n", c)
			}
			for _, c := range chains {
				fmt.Fprintf(&b, "-X %s\n", c)
			}
			fmt.Fprintln(&b, "COMMIT")
		}
		deletes, chains = nil, nil
	}
	for _, line := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			flushTable()
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if ourChain(name) {
				chains = append(chains, name)
			}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			if len(f) < 2 || ourChain(f[1]) {
				continue
			}
			for i, w := range f {
				if (w == "-j" || w == "-g") && i+1 < len(f) && ourChain(f[i+1]) {
					deletes = append(deletes, "-D"+line[2:])
					break
				}
			}
		case line == "COMMIT":
			flushTable()
			table = ""
		}
	}
	return b.String()
}

func readDirNames(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
