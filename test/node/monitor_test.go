package node

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// phaseMonitor records every phase each Workspace goes through, from a
// watch, so that a check can tell whether one left Ready (or Idle) during
// a window, however briefly: a poll could miss a status that lasted one
// sync.
type phaseMonitor struct {
	mu      sync.Mutex
	current map[string]string
	changes map[string][]phaseChange
}

// phaseChange is a Workspace turning to a phase, with the reasons of its
// conditions then.
type phaseChange struct {
	at      time.Time
	phase   string
	reasons string
}

// startPhaseMonitor watches every Workspace until the test ends.
func (c *Cluster) startPhaseMonitor(t *testing.T) *phaseMonitor {
	m := &phaseMonitor{current: map[string]string{}, changes: map[string][]phaseChange{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := c.watch(ctx, "/apis/"+v1alpha1.APIVersion+"/workspaces", m.observe)
	t.Cleanup(func() {
		cancel()
		t.Logf("the Workspace watch was re-established %d times", <-done)
	})
	return m
}

func (m *phaseMonitor) observe(ev watchEvent) {
	var ws v1alpha1.Workspace
	if err := json.Unmarshal(ev.Object, &ws); err != nil {
		return
	}
	key := ws.Namespace + "/" + ws.Name
	phase := ws.Status.Phase
	if ev.Type == "DELETED" {
		phase = "Deleted"
	}
	var reasons []string
	for _, c := range ws.Status.Conditions {
		reasons = append(reasons, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.current[key]; ok && cur == phase {
		return
	}
	m.current[key] = phase
	m.changes[key] = append(m.changes[key], phaseChange{at: time.Now(), phase: phase, reasons: strings.Join(reasons, " ")})
}

// departures lists each Workspace of want that was not in its phase
// (want[key]) at start, or turned to another phase between start and end.
func (m *phaseMonitor) departures(want map[string]string, start, end time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		phase := ""
		for _, ch := range m.changes[key] {
			if ch.at.After(start) {
				if ch.at.After(end) {
					break
				}
				if ch.phase != want[key] {
					out = append(out, fmt.Sprintf("%s turned %s at +%.1fs (%s)", key, ch.phase, ch.at.Sub(start).Seconds(), ch.reasons))
				}
				continue
			}
			phase = ch.phase
		}
		if phase != want[key] {
			out = append(out, fmt.Sprintf("%s was %q, not %s, when the window opened", key, phase, want[key]))
		}
	}
	return out
}

// workspaceReplicaSets returns every ReplicaSet of a workspace Deployment
// (the pod template's formspec.dev/workspace label is on its ReplicaSets
// too), as namespace/workspace: ReplicaSet names, by UID.
func (c *Cluster) workspaceReplicaSets(t *testing.T) map[string]string {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	c.getJSON(t, "/apis/apps/v1/replicasets?labelSelector="+url.QueryEscape(v1alpha1.LabelWorkspace), &list)
	out := map[string]string{}
	for _, rs := range list.Items {
		out[string(rs.Metadata.UID)] = rs.Metadata.Namespace + "/" + rs.Metadata.Labels[v1alpha1.LabelWorkspace] + ": " + rs.Metadata.Name
	}
	return out
}

// credentialsSecrets returns the UID of every claim's credentials Secret
// in namespaces, by namespace/name.
func (c *Cluster) credentialsSecrets(t *testing.T, namespaces []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range namespaces {
		var list struct {
			Items []struct {
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"items"`
		}
		c.getJSON(t, "/api/v1/namespaces/"+ns+"/secrets", &list)
		for _, s := range list.Items {
			if strings.HasSuffix(s.Metadata.Name, "-credentials") {
				out[ns+"/"+s.Metadata.Name] = string(s.Metadata.UID)
			}
		}
	}
	return out
}

// failedCall is a sync Metacontroller reported failed: when, and what it
// said. Most are hook calls that failed (hook); the rest failed talking
// to the API server.
type failedCall struct {
	at   time.Time
	msg  string
	hook bool
}

// hookCalls counts the failures that were hook calls.
func hookCalls(calls []failedCall) int {
	n := 0
	for _, c := range calls {
		if c.hook {
			n++
		}
	}
	return n
}

func (fc failedCall) String() string { return fc.at.Format("15:04:05.000") + " " + fc.msg }

// failedHookCalls lists what Metacontroller reported as a failed sync
// since a time: each "failed to sync" line of its log, which it writes
// for every hook call that did not give an answer it could use (a
// refused or cut connection, a timeout, a 5xx, an undecodable body),
// beside a SyncError Event on the parent. A 429 is not one: Metacontroller
// requeues after its Retry-After without an error. The log is the current
// Metacontroller pod's.
//
// Metacontroller's log times are whole seconds (RFC 3339), so a line
// of the second since falls in counts: a call cut a fraction of a
// second after since is logged as before it.
func (c *Cluster) failedHookCalls(t *testing.T, since time.Time) []failedCall {
	t.Helper()
	since = since.Truncate(time.Second)
	var out []failedCall
	logs := c.kubectl(t, "-n", "metacontroller", "logs", "metacontroller-0", "--since-time="+since.UTC().Format(time.RFC3339))
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, "failed to sync") {
			continue
		}
		var entry struct {
			TS    time.Time `json:"ts"`
			Error string    `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Error == "" {
			entry.Error = line
		}
		if !entry.TS.Before(since) || entry.TS.IsZero() {
			out = append(out, failedCall{at: entry.TS, msg: entry.Error, hook: strings.Contains(entry.Error, " hook failed")})
		}
	}
	return out
}

// getJSON GETs an API path into v, failing the test on an error.
func (c *Cluster) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := c.getInto(path, v); err != nil {
		t.Fatal(err)
	}
}

// getInto GETs an API path into v.
func (c *Cluster) getInto(path string, v any) error {
	raw, err := c.Client().Do("GET", path, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// listPods lists the pods of a namespace that a label selector selects.
func (c *Cluster) listPods(namespace, selector string) ([]corev1.Pod, error) {
	raw, err := c.Client().Do("GET", "/api/v1/namespaces/"+namespace+"/pods?labelSelector="+url.QueryEscape(selector), nil)
	if err != nil {
		return nil, err
	}
	var list corev1.PodList
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// finished reports whether all of a pod's containers have stopped for
// good: it is Succeeded or Failed until the kubelet removes it.
func finished(p corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// window is what a fault's check compares with: when it opened, and the
// workspaces' phases, ReplicaSets and credentials Secrets then.
type window struct {
	start   time.Time
	steady  map[string]string
	rs      map[string]string
	secrets map[string]string
}

// open opens a window on the fleet as it is now.
func (f *fleet) open(t *testing.T) *window {
	t.Helper()
	return &window{start: time.Now(), steady: f.steady(), rs: f.c.workspaceReplicaSets(t), secrets: f.c.credentialsSecrets(t, f.namespaces)}
}

// disturbance is what a window saw happen to workspaces it did not
// expect to change.
type disturbance struct {
	leftSteady, newReplicaSets, recreatedSecrets []string
	failedCalls                                  []failedCall
}

// disturbances looks at what happened since w opened to every workspace
// but those of skip (keys): which left its steady phase, got a new
// ReplicaSet or a recreated credentials Secret; and which hook calls
// Metacontroller saw fail.
func (f *fleet) disturbances(t *testing.T, w *window, skip ...string) disturbance {
	t.Helper()
	var d disturbance
	want := maps.Clone(w.steady)
	for _, k := range skip {
		delete(want, k)
	}
	d.leftSteady = f.phases.departures(want, w.start, time.Now())
	skipped := func(key string) bool {
		return slices.ContainsFunc(skip, func(k string) bool { return strings.HasPrefix(key, k+": ") || key == k })
	}
	for uid, rs := range f.c.workspaceReplicaSets(t) {
		if _, ok := w.rs[uid]; !ok && !skipped(rs) {
			d.newReplicaSets = append(d.newReplicaSets, rs)
		}
	}
	slices.Sort(d.newReplicaSets)
	now := f.c.credentialsSecrets(t, f.namespaces)
	for name, uid := range w.secrets {
		// Only the claims of the fleet's workspaces: a deleted workspace's
		// claim may stay, and goes its own way.
		ws := strings.TrimSuffix(strings.TrimSuffix(name, "-credentials"), "-orders")
		if _, member := w.steady[ws]; !member || skipped(ws) {
			continue
		}
		if now[name] != uid {
			d.recreatedSecrets = append(d.recreatedSecrets, fmt.Sprintf("%s: UID %s, then %q", name, uid, now[name]))
		}
	}
	slices.Sort(d.recreatedSecrets)
	d.failedCalls = f.c.failedHookCalls(t, w.start)
	return d
}

// requireUndisturbed fails the test for every disturbance since w opened
// to the workspaces but those of skip, and for every failed hook call
// allow (if not nil) does not expect, and returns them for the figures.
func (f *fleet) requireUndisturbed(t *testing.T, w *window, allow func(failedCall) bool, skip ...string) disturbance {
	t.Helper()
	d := f.disturbances(t, w, skip...)
	var calls []string
	for _, fc := range d.failedCalls {
		if allow == nil || !allow(fc) {
			calls = append(calls, fc.String())
		}
	}
	for what, list := range map[string][]string{
		"Workspaces left their steady phase":            d.leftSteady,
		"workspace Deployments got a new ReplicaSet":    d.newReplicaSets,
		"credentials Secrets were recreated or lost":    d.recreatedSecrets,
		"hook calls failed, as Metacontroller saw them": calls,
	} {
		if len(list) > 0 {
			t.Errorf("%d %s:\n%s", len(list), what, strings.Join(firstLines(list, 10), "\n"))
		}
	}
	return d
}

func firstLines(list []string, n int) []string {
	if len(list) <= n {
		return list
	}
	return append(slices.Clone(list[:n]), fmt.Sprintf("... and %d more", len(list)-n))
}
