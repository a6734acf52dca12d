package node

import (
	"bufio"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// hookPods returns the hook Deployment's pods that are not being deleted,
// sorted by name.
func (c *Cluster) hookPods(t *testing.T) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	c.getJSON(t, "/api/v1/namespaces/"+hooksNamespace+"/pods?labelSelector="+url.QueryEscape("app.kubernetes.io/name="+hooksName), &list)
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// pod reads a pod.
func (c *Cluster) pod(t *testing.T, namespace, name string) corev1.Pod {
	t.Helper()
	var p corev1.Pod
	c.getJSON(t, "/api/v1/namespaces/"+namespace+"/pods/"+name, &p)
	return p
}

// containerStatus is a container's status in a pod, or the zero one.
func containerStatus(p corev1.Pod, container string) corev1.ContainerStatus {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == container {
			return s
		}
	}
	return corev1.ContainerStatus{}
}

// containerPIDs returns the host PIDs of a container's processes: those
// whose cgroup, which the kubelet names after the pod's UID and the
// container's ID, is the container's.
func containerPIDs(p corev1.Pod, container string) []int {
	_, id, ok := strings.Cut(containerStatus(p, container).ContainerID, "://")
	if !ok {
		return nil
	}
	suffix := "/pod" + string(p.UID) + "/" + id
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if strings.HasSuffix(sc.Text(), suffix) {
				pids = append(pids, pid)
				break
			}
		}
		_ = f.Close()
	}
	return pids
}

// killContainer sends SIGKILL to every process of one container of a pod,
// as the kernel's OOM killer or a crash would end it, and returns the
// container's restart count before.
func (c *Cluster) killContainer(t *testing.T, p corev1.Pod, container string) int32 {
	t.Helper()
	pids := containerPIDs(p, container)
	if len(pids) == 0 {
		t.Fatalf("no process of container %s of pod %s/%s found on the node", container, p.Namespace, p.Name)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill -9 %d (container %s of %s): %v", pid, container, p.Name, err)
		}
	}
	return containerStatus(p, container).RestartCount
}

// waitRestarted waits until a container that had restarted `before`
// times has restarted since, runs and is ready, and so is its pod.
func (c *Cluster) waitRestarted(t *testing.T, p corev1.Pod, container string, before int32) {
	t.Helper()
	c.waitFor(t, fmt.Sprintf("container %s of %s restarted and ready", container, p.Name), func() (bool, string) {
		now := c.pod(t, p.Namespace, p.Name)
		s := containerStatus(now, container)
		return s.RestartCount > before && s.State.Running != nil && s.Ready && podReady(now), fmt.Sprintf("%+v", s)
	}, p.Namespace)
}

// podReady reports a pod's Ready condition.
func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// metricValue returns the sum of a metric's samples (every label set) in a
// Prometheus text exposition.
func metricValue(exposition, name string) float64 {
	var sum float64
	for _, line := range strings.Split(exposition, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		metric, _, _ := strings.Cut(fields[0], "{")
		if metric != name {
			continue
		}
		if v, err := strconv.ParseFloat(fields[1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// reporterMetric sums a reporter metric over the hook pods, scraping each
// pod's reporter (port 9091) from the node.
func (c *Cluster) reporterMetric(t *testing.T, name string) (float64, error) {
	t.Helper()
	var sum float64
	for _, p := range c.hookPods(t) {
		body, err := get("http://" + p.Status.PodIP + ":9091/metrics")
		if err != nil {
			return 0, err
		}
		sum += metricValue(body, name)
	}
	return sum, nil
}

// processRSS returns a process's resident set size in bytes, from
// /proc/<pid>/status.
func processRSS(pid int) (int64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
