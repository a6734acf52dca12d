package node

import (
	"cmp"
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// phaseMonitor records every phase each Workspace goes through, from a
// watch, so that a check can tell whether one left Ready (or Idle) during
// a window, however briefly: a poll could miss a status that lasted one
// sync.
type phaseMonitor struct {
	mu      sync.Mutex
	current map[string]phaseChange
	changes map[string][]phaseChange
}

// phaseChange is a Workspace turning to a phase, with the reasons of its
// conditions then. rollingOut says whether it is Progressing for a
// rollout only, still Ready: its old pods serve until the new ones are
// available. A change of rollingOut alone is a change too, so that a
// rollout that stops serving shows.
type phaseChange struct {
	at         time.Time
	phase      string
	reasons    string
	rollingOut bool
}

// startPhaseMonitor watches every Workspace until the test ends.
func (c *Cluster) startPhaseMonitor(t *testing.T) *phaseMonitor {
	m := &phaseMonitor{current: map[string]phaseChange{}, changes: map[string][]phaseChange{}}
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
	ready := meta.FindStatusCondition(ws.Status.Conditions, v1alpha1.ConditionReady)
	progressing := meta.FindStatusCondition(ws.Status.Conditions, v1alpha1.ConditionProgressing)
	rollingOut := phase == v1alpha1.PhaseProgressing &&
		ready != nil && ready.Status == metav1.ConditionTrue &&
		progressing != nil && progressing.Status == metav1.ConditionTrue && progressing.Reason == v1alpha1.ReasonRollingOut
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.current[key]; ok && cur.phase == phase && cur.rollingOut == rollingOut {
		return
	}
	ch := phaseChange{at: time.Now(), phase: phase, reasons: strings.Join(reasons, " "), rollingOut: rollingOut}
	m.current[key] = ch
	m.changes[key] = append(m.changes[key], ch)
}

// departures lists each Workspace of want that was not in its phase
// (want[key]) at start, or turned to another phase between start and end.
// A Workspace of rolling may turn Progressing while it rolls out and stays
// Ready (rollingOut), but must be back in its phase at end.
func (m *phaseMonitor) departures(want map[string]string, rolling []string, start, end time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, key := range slices.Sorted(maps.Keys(want)) {
		rolls := slices.Contains(rolling, key)
		phase := ""
		var last *phaseChange
		for _, ch := range m.changes[key] {
			if ch.at.After(start) {
				if ch.at.After(end) {
					break
				}
				last = &ch
				if ch.phase != want[key] && !(rolls && ch.rollingOut) {
					out = append(out, fmt.Sprintf("%s turned %s at +%.1fs (%s)", key, ch.phase, ch.at.Sub(start).Seconds(), ch.reasons))
				}
				continue
			}
			phase = ch.phase
		}
		if phase != want[key] {
			out = append(out, fmt.Sprintf("%s was %q, not %s, when the window opened", key, phase, want[key]))
		}
		if last != nil && last.phase != want[key] && rolls && last.rollingOut {
			out = append(out, fmt.Sprintf("%s was still rolling out when the window closed (%s since +%.1fs)", key, last.phase, last.at.Sub(start).Seconds()))
		}
	}
	return out
}

// replicaSet is a ReplicaSet of a workspace Deployment (the pod
// template's formspec.dev/workspace label is on its ReplicaSets too).
type replicaSet struct {
	// workspace is the workspace's key, namespace/name.
	workspace, name string
	created         time.Time
}

func (rs replicaSet) String() string { return rs.workspace + ": " + rs.name }

// replicaSetOf reads a ReplicaSet object; ok is false for one that is not
// a workspace Deployment's.
func replicaSetOf(m metav1.ObjectMeta) (uid string, rs replicaSet, ok bool) {
	ws, ok := m.Labels[v1alpha1.LabelWorkspace]
	return string(m.UID), replicaSet{workspace: m.Namespace + "/" + ws, name: m.Name, created: m.CreationTimestamp.Time}, ok
}

// replicaSetMonitor records every ReplicaSet of a workspace Deployment
// that exists at any moment, from a watch, so that a check counts the
// ReplicaSets a window created even once the Deployment controller has
// deleted them again: it keeps only revisionHistoryLimit old ones, so
// what is left at the end can hide a workspace that rolled twice.
type replicaSetMonitor struct {
	mu   sync.Mutex
	seen map[string]replicaSet
}

// startReplicaSetMonitor watches every ReplicaSet until the test ends.
func (c *Cluster) startReplicaSetMonitor(t *testing.T) *replicaSetMonitor {
	m := &replicaSetMonitor{seen: map[string]replicaSet{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := c.watch(ctx, "/apis/apps/v1/replicasets", func(ev watchEvent) {
		var obj struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if json.Unmarshal(ev.Object, &obj) != nil {
			return
		}
		if uid, rs, ok := replicaSetOf(obj.Metadata); ok {
			m.mu.Lock()
			m.seen[uid] = rs
			m.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		cancel()
		t.Logf("the ReplicaSet watch was re-established %d times", <-done)
	})
	return m
}

// all returns every ReplicaSet the monitor has seen, by UID.
func (m *replicaSetMonitor) all() map[string]replicaSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.seen)
}

// workspaceReplicaSets lists every ReplicaSet of a workspace Deployment
// there is now, by UID.
func (c *Cluster) workspaceReplicaSets(t *testing.T) map[string]replicaSet {
	t.Helper()
	var list struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	c.getJSON(t, "/apis/apps/v1/replicasets?labelSelector="+url.QueryEscape(v1alpha1.LabelWorkspace), &list)
	out := map[string]replicaSet{}
	for _, item := range list.Items {
		if uid, rs, ok := replicaSetOf(item.Metadata); ok {
			out[uid] = rs
		}
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
	rs      map[string]replicaSet
	secrets map[string]string
}

// open opens a window on the fleet as it is now.
func (f *fleet) open(t *testing.T) *window {
	t.Helper()
	return &window{start: time.Now(), steady: f.steady(), rs: f.c.workspaceReplicaSets(t), secrets: f.c.credentialsSecrets(t, f.namespaces)}
}

// expectation is what a window may see happen; the zero value expects
// nothing at all.
type expectation struct {
	// allow accepts the failed hook calls a fault causes; nil accepts none.
	allow func(failedCall) bool
	// skip are the workspaces (keys) a fault acts on: nothing is checked
	// of them.
	skip []string
	// rollOnce are the workspaces (keys) whose pod template changes once:
	// each must get exactly one new ReplicaSet, may be Progressing while
	// it rolls out as long as it stays Ready, and must be back in its
	// steady phase when the window closes; the rest is checked as for
	// every workspace.
	rollOnce []string
}

// disturbance is what a window saw happen to workspaces that it did not
// expect.
type disturbance struct {
	leftSteady, recreatedSecrets []string
	// newReplicaSets are the ReplicaSets created since the window opened
	// of every workspace but those skipped, expected ones included.
	newReplicaSets []string
	// wrongRolls are the workspaces whose count of new ReplicaSets is not
	// the one expected: one for those of rollOnce, none for the others.
	wrongRolls  []string
	failedCalls []failedCall
}

// newReplicaSets returns the ReplicaSets created since w opened, as the
// watch saw them and as they are listed now, by workspace key: those it
// did not know then and created since the whole second it opened in
// (creation times are whole seconds). The watch keeps those the
// Deployment controller has deleted since; the list, those the watch has
// not delivered yet.
func (f *fleet) newReplicaSets(t *testing.T, w *window) map[string][]replicaSet {
	t.Helper()
	seen := f.replicaSets.all()
	maps.Copy(seen, f.c.workspaceReplicaSets(t))
	since := w.start.Truncate(time.Second)
	out := map[string][]replicaSet{}
	for uid, rs := range seen {
		if _, known := w.rs[uid]; !known && !rs.created.Before(since) {
			out[rs.workspace] = append(out[rs.workspace], rs)
		}
	}
	for _, list := range out {
		slices.SortFunc(list, func(a, b replicaSet) int { return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.name, b.name)) })
	}
	return out
}

// disturbances looks at what happened since w opened to every workspace
// but those e skips: which left its steady phase (but for a rollout e
// expects), got a number of new ReplicaSets other than e expects or a
// recreated credentials Secret; and which hook calls Metacontroller saw
// fail.
func (f *fleet) disturbances(t *testing.T, w *window, e expectation) disturbance {
	t.Helper()
	var d disturbance
	want := maps.Clone(w.steady)
	for _, k := range e.skip {
		delete(want, k)
	}
	d.leftSteady = f.phases.departures(want, e.rollOnce, w.start, time.Now())
	created := f.newReplicaSets(t, w)
	keys := slices.Sorted(maps.Keys(want))
	for key := range created {
		if _, ok := want[key]; !ok && !slices.Contains(e.skip, key) {
			// A workspace the fleet no longer or never had.
			keys = append(keys, key)
		}
	}
	for _, key := range keys {
		list := created[key]
		for _, rs := range list {
			d.newReplicaSets = append(d.newReplicaSets, rs.String())
		}
		wantRolls := 0
		if slices.Contains(e.rollOnce, key) {
			wantRolls = 1
		}
		if len(list) != wantRolls {
			var names []string
			for _, rs := range list {
				names = append(names, rs.name)
			}
			d.wrongRolls = append(d.wrongRolls, fmt.Sprintf("%s: %d new ReplicaSets %v, want %d", key, len(list), names, wantRolls))
		}
	}
	slices.Sort(d.newReplicaSets)
	slices.Sort(d.wrongRolls)
	now := f.c.credentialsSecrets(t, f.namespaces)
	for name, uid := range w.secrets {
		// Only the claims of the fleet's workspaces: a deleted workspace's
		// claim may stay, and goes its own way.
		ws := strings.TrimSuffix(strings.TrimSuffix(name, "-credentials"), "-orders")
		if _, member := w.steady[ws]; !member || slices.Contains(e.skip, ws) {
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
// that e does not expect, and for every failed hook call e.allow (if not
// nil) does not accept, and returns them for the figures.
func (f *fleet) requireUndisturbed(t *testing.T, w *window, e expectation) disturbance {
	t.Helper()
	d := f.disturbances(t, w, e)
	var calls []string
	for _, fc := range d.failedCalls {
		if e.allow == nil || !e.allow(fc) {
			calls = append(calls, fc.String())
		}
	}
	for what, list := range map[string][]string{
		"Workspaces left their steady phase": d.leftSteady,
		"workspace Deployments did not get the new ReplicaSets expected (exactly one where a change rolls them, none elsewhere)": d.wrongRolls,
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
