package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// EnvOutage is how long TestFaults keeps Cluster Control down (a Go
// duration; default defaultOutage).
const EnvOutage = "FORMSPEC_FAULTS_OUTAGE"

// defaultOutage is the documented length of the Cluster Control outage.
const defaultOutage = 5 * time.Minute

// drivePeriod is how often the driver touches a workspace during a fault:
// with Metacontroller's resyncs, a steady stream of hook calls for a fault
// to disturb.
const drivePeriod = 200 * time.Millisecond

// TestFaults drives a fleet of workspaces (FORMSPEC_FLEET_WORKSPACES, 50
// by default, every class shape, each with a granted claim) on the
// one-node cluster, with Metacontroller in a pod and the chart installed
// through Helm's library, and does one fault after another to it. Each
// subtest is a row of docs/reliability.md: it asserts what that row says
// must hold and logs the figures the table quotes. Every fault starts from
// a converged fleet and leaves one behind.
func TestFaults(t *testing.T) {
	mcBin := requireSuite(t, EnvFaults, "test-faults")
	root := controlplane.RepoRoot(t)
	repo, tag, _ := strings.Cut(hooksImage(t), ":")
	chart := filepath.Join(root, chartDir)
	f := startFleet(t, mcBin, nil, chart, fmt.Sprintf("defaultVersion: %s\nimage:\n  repository: %s\n  tag: %s\n  pullPolicy: Never\n", WorkspaceVersion, repo, tag)+plainHTTPClusterControl)
	figs := &figures{}
	t.Cleanup(func() { t.Logf("figures:\n%s", figs) })
	for _, fault := range []struct {
		name string
		run  func(*testing.T, *fleet, *figures)
	}{
		{"HookDeploymentRolled", faultHookDeploymentRolled},
		{"HookPodKilled", faultHookPodKilled},
		{"ReporterKilled", faultReporterKilled},
		{"MetacontrollerDeletedMidTeardown", faultMetacontrollerDeletedMidTeardown},
		{"APIServerRestarted", faultAPIServerRestarted},
		{"ClusterControlDown", faultClusterControlDown},
		{"EndpointSecretRecreated", faultEndpointSecretRecreated},
	} {
		t.Run(fault.name, func(t *testing.T) {
			f.waitConverged(t, "before the fault", waitTimeout)
			fault.run(t, f, figs.row(fault.name))
			f.tm.Phase(fault.name)
		})
	}
}

// figures collects what each fault measured, for docs/reliability.md.
type figures struct {
	mu   sync.Mutex
	name string
	rows *[]string
}

func (fg *figures) row(name string) *figures {
	fg.mu.Lock()
	defer fg.mu.Unlock()
	if fg.rows == nil {
		fg.rows = new([]string)
	}
	return &figures{name: name, rows: fg.rows}
}

// add records one figure of the row.
func (fg *figures) add(format string, args ...any) {
	*fg.rows = append(*fg.rows, fg.name+": "+fmt.Sprintf(format, args...))
}

func (fg *figures) String() string { return strings.Join(*fg.rows, "\n") }

// settle keeps watching for one resync period after a fault is over, so
// that Metacontroller has synced every workspace at least once since.
func (f *fleet) settle() { time.Sleep(f.resync) }

// driveDuring runs the driver while fn runs and returns what it did.
// The driver stops also when fn ends the test (t.Fatal), so that it does
// not go on touching workspaces under the faults after it.
func (f *fleet) driveDuring(fn func()) (touched, failed int64) {
	ctx, cancel := context.WithCancel(context.Background())
	stop := f.drive(ctx, drivePeriod)
	defer func() { cancel(); stop() }()
	fn()
	cancel()
	return stop()
}

// reportUndisturbed logs a window's figures and fails on any disturbance,
// and on any failed hook call allow (if not nil) does not expect.
func (f *fleet) reportUndisturbed(t *testing.T, figs *figures, w *window, touched int64, allow func(failedCall) bool) {
	t.Helper()
	d := f.requireUndisturbed(t, w, expectation{allow: allow})
	figs.add("%d workspaces watched for %.0f s, %d touched by the driver; failed hook calls %d, left Ready/Idle %d, new ReplicaSets %d, recreated credentials Secrets %d",
		len(w.steady), time.Since(w.start).Seconds(), touched, len(d.failedCalls), len(d.leftSteady), len(d.newReplicaSets), len(d.recreatedSecrets))
}

// faultHookDeploymentRolled rolls the hook Deployment the way an operator
// does, with a helm upgrade that changes one of the hook server's
// arguments: no hook call may fail, no Workspace leave Ready and no
// workspace get a new ReplicaSet.
func faultHookDeploymentRolled(t *testing.T, f *fleet, figs *figures) {
	w := f.open(t)
	before := podNames(f.c.hookPods(t))
	var rolled time.Duration
	touched, _ := f.driveDuring(func() {
		f.helm.upgrade(t, f.chart, "extraArgs={--max-inflight=48}")
		f.c.waitRolledOut(t, hooksNamespace, hooksName)
		rolled = time.Since(w.start)
		f.settle()
	})
	after := podNames(f.c.hookPods(t))
	if slices.ContainsFunc(after, func(p string) bool { return slices.Contains(before, p) }) {
		t.Errorf("the hook pods were not all replaced: before %v, after %v", before, after)
	}
	figs.add("hook Deployment rolled (2 new pods) in %.1f s", rolled.Seconds())
	f.reportUndisturbed(t, figs, w, touched, nil)
}

func podNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// faultHookPodKilled kills every container of one hook pod with SIGKILL,
// which no drain can soften. No Workspace may leave Ready and no
// workspace get a new ReplicaSet, as for a roll. Hook calls can fail
// here, and only these: those in flight on the killed pod, and those
// Metacontroller's connections carried to its address (a Service endpoint
// until the kubelet sees the container gone) before its container
// listened again, refused. Nothing can answer for a killed process;
// Metacontroller retries each at once, and the other replica answers.
func faultHookPodKilled(t *testing.T, f *fleet, figs *figures) {
	w := f.open(t)
	pod := f.c.hookPods(t)[0]
	var killed, back time.Time
	touched, _ := f.driveDuring(func() {
		killed = time.Now()
		before := map[string]int32{}
		for _, ctr := range []string{"hooks", "reporter"} {
			before[ctr] = f.c.killContainer(t, pod, ctr)
		}
		for ctr, n := range before {
			f.c.waitRestarted(t, pod, ctr, n)
		}
		back = time.Now()
		f.settle()
	})
	refused := 0
	allow := func(fc failedCall) bool {
		// The log's times are the Metacontroller pod's clock, this node's.
		ok := !fc.at.Before(killed.Add(-time.Second)) && !fc.at.After(back.Add(time.Second)) && connectionFailure(fc.msg)
		if ok {
			refused++
		}
		return ok
	}
	figs.add("pod %s killed (hooks and reporter containers, SIGKILL), Ready again after %.1f s", pod.Name, back.Sub(killed).Seconds())
	f.reportUndisturbed(t, figs, w, touched, allow)
	figs.add("%d of the failed hook calls were refused or cut connections to the killed pod while it was down, each retried by Metacontroller", refused)
}

// connectionFailure reports whether a hook call failed for want of a
// server at the other end: refused, reset or closed under it.
func connectionFailure(msg string) bool {
	for _, s := range []string{"connection refused", "connection reset by peer", ": EOF", "broken pipe"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// faultReporterKilled kills the reporter container of each hook pod in
// turn while it holds what Cluster Control has not acknowledged (deletions
// kept as tombstones, Cluster Control refusing workspace reports
// meanwhile; directives not yet carried out), and makes more deletions
// and claim decisions while it is down. None may be lost: each deletion
// reaches Cluster Control, each claim decision becomes an Event, each
// directive is written and reported consumed.
func faultReporterKilled(t *testing.T, f *fleet, figs *figures) {
	members := f.members()
	byClass := func(class string, skip int) *fleetWorkspace {
		for _, w := range members {
			if w.class == class && !w.idle {
				if skip == 0 {
					return w
				}
				skip--
			}
		}
		t.Fatalf("the fleet has too few running workspaces of class %s", class)
		return nil
	}
	early := []*fleetWorkspace{byClass("fleet-plain", 0), byClass("fleet-hpa", 0)}
	late := []*fleetWorkspace{byClass("fleet-plain", 1), byClass("fleet-pdb", 0)}
	restarted := []*fleetWorkspace{byClass("fleet-pdb", 1), byClass("fleet-hpa", 1)}
	idled := byClass("fleet-zero", 0)

	// Cluster Control refuses workspace reports, so the first deletions
	// stay with the reporters as tombstones.
	f.clusterControlAdmin(t, http.MethodPut, "/admin/faults", ccFault{Path: "/v1/workspace-status", Status: http.StatusServiceUnavailable})
	f.undoAtEnd(t, http.MethodDelete, "/admin/faults", nil)
	for _, w := range early {
		f.deleteWorkspace(t, w)
	}
	f.c.waitFor(t, "the reporters holding the first deletions as tombstones", func() (bool, string) {
		n, err := f.c.reporterMetric(t, "formspec_reporter_tombstones")
		return err == nil && n >= float64(len(early)), fmt.Sprintf("%v tombstones (%v)", n, err)
	}, hooksNamespace)
	tombstones, _ := f.c.reporterMetric(t, "formspec_reporter_tombstones")

	// Directives the reporters have to write and then see carried out.
	const hash = "sha256:fa17edfa17edfa17edfa17edfa17edfa17edfa17edfa17edfa17edfa17edfa17"
	for _, w := range restarted {
		putDirective(t, f.admin, w.ns, w.name, hash)
	}
	f.clusterControlAdmin(t, http.MethodPut, "/admin/directives", ccapi.Directive{Namespace: idled.ns, Name: idled.name, Action: ccapi.ActionIdle})

	// Then the reporters die, one after the other, and while each is down
	// more is decided. (Killed together, they would take both pods out of
	// the hook Service until they are back: a pod is ready only with all
	// its containers.)
	granted := &fleetWorkspace{ns: early[0].ns, name: "late-claim"}
	denied := &fleetWorkspace{ns: early[0].ns, name: "stranger-claim"}
	decisions := []*v1alpha1.ResourceClaim{fleetClaim(granted, claimstest.Owner), fleetClaim(denied, claimstest.Stranger)}
	unconsumed := 0
	if st, err := clusterControlState(f.admin); err == nil {
		for _, w := range append(slices.Clone(restarted), idled) {
			if len(consumedFor(st, w.ns, w.name)) == 0 {
				unconsumed++
			}
		}
	}
	killed := time.Now()
	var down time.Duration
	for i, p := range f.c.hookPods(t) {
		died := time.Now()
		before := f.c.killContainer(t, p, "reporter")
		f.deleteWorkspace(t, late[i%len(late)])
		f.c.apply(t, decisions[i%len(decisions)])
		f.c.waitRestarted(t, p, "reporter", before)
		down = max(down, time.Since(died))
	}
	f.clusterControlAdmin(t, http.MethodDelete, "/admin/faults", nil)

	deleted := append(slices.Clone(early), late...)
	f.forget(deleted...)
	f.setIdle(idled, true)
	start := time.Now()
	f.c.waitFor(t, "every deletion, claim decision and directive delivered", func() (bool, string) {
		st, err := clusterControlState(f.admin)
		if err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, w := range deleted {
			if rep, ok := st.Workspaces[w.key()]; !ok || !rep.Deleted {
				missing = append(missing, "deletion of "+w.key())
			}
		}
		for _, w := range restarted {
			if len(consumedFor(st, w.ns, w.name)) == 0 {
				missing = append(missing, "restart of "+w.key())
			}
		}
		if len(consumedFor(st, idled.ns, idled.name)) == 0 {
			missing = append(missing, "idle of "+idled.key())
		}
		for claim, reason := range map[string]string{granted.claim(): "ClaimGranted", denied.claim(): "ClaimDenied"} {
			if !f.c.hasEvent(t, granted.ns, "ResourceClaim", claim, reason) {
				missing = append(missing, reason+" Event on "+claim)
			}
		}
		return len(missing) == 0, strings.Join(missing, ", ")
	}, hooksNamespace)
	delivered := time.Since(start)
	for _, w := range []*fleetWorkspace{granted, denied} {
		if err := f.c.Client().Delete(v1alpha1.APIVersion, "ResourceClaim", w.ns, w.claim()); err != nil {
			t.Fatal(err)
		}
	}
	failed := f.c.failedHookCalls(t, killed)
	figs.add("the reporter of each hook pod killed (SIGKILL) in turn, holding %v tombstones between them and %d of the %d directives not yet consumed, each back (pod Ready) within %.1f s; %d deletions, 2 claim decisions, %d directives all delivered %.1f s after Cluster Control took reports again; %d syncs failed meanwhile, %d of them hook calls",
		tombstones, unconsumed, len(restarted)+1, down.Seconds(), len(deleted), len(restarted)+1, delivered.Seconds(), len(failed), hookCalls(failed))
}

// ccFault is the body of the reference Cluster Control's PUT /admin/faults.
type ccFault struct {
	Path   string `json:"path,omitempty"`
	Status int    `json:"status,omitempty"`
}

// clusterControlAdmin calls the reference Cluster Control's admin API,
// failing the test on an error.
func (f *fleet) clusterControlAdmin(t *testing.T, method, path string, body any) {
	t.Helper()
	if err := f.callClusterControlAdmin(method, path, body); err != nil {
		t.Fatal(err)
	}
}

// callClusterControlAdmin calls the reference Cluster Control's admin
// API.
func (f *fleet) callClusterControlAdmin(method, path string, body any) error {
	var r *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	} else {
		r = bytes.NewReader(nil)
	}
	req, err := adminRequest(method, f.admin+path, r)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s %s: status %d", method, path, resp.StatusCode)
	}
	return nil
}

// undoAtEnd has Cluster Control undo a fault (an idempotent call to its
// admin API) when the test ends, also when it ends before the fault's own
// undo, so that the rows after it do not fail for this one's reason.
func (f *fleet) undoAtEnd(t *testing.T, method, path string, body any) {
	t.Cleanup(func() {
		if err := f.callClusterControlAdmin(method, path, body); err != nil {
			t.Errorf("cannot undo the fault: %v", err)
		}
	})
}

// deleteWorkspace deletes a workspace as kubectl does.
func (f *fleet) deleteWorkspace(t *testing.T, w *fleetWorkspace) {
	t.Helper()
	if err := f.c.Client().DeleteWithPropagation(v1alpha1.APIVersion, "Workspace", w.ns, w.name, "Background"); err != nil {
		t.Fatalf("cannot delete Workspace %s: %v", w.key(), err)
	}
}

// setIdle records that a workspace was idled (or woken).
func (f *fleet) setIdle(w *fleetWorkspace, idle bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.idle = idle
}

// hasEvent reports whether an events.k8s.io/v1 Event with reason regards
// an object, looked up as kubectl events --for does.
func (c *Cluster) hasEvent(t *testing.T, namespace, kind, name, reason string) bool {
	t.Helper()
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	sel := "regarding.kind=" + kind + ",regarding.name=" + name + ",reason=" + reason
	c.getJSON(t, "/apis/events.k8s.io/v1/namespaces/"+namespace+"/events?fieldSelector="+url.QueryEscape(sel), &list)
	return len(list.Items) > 0
}

// faultMetacontrollerDeletedMidTeardown deletes a workspace of each class
// and, once one of them is halfway through its teardown (scaled to zero,
// its ConfigMap still there), the Metacontroller pod. The new
// Metacontroller must finish every teardown in order (no pod outlives
// the ConfigMap it reads), leave nothing of them behind and release
// their finalizers.
func faultMetacontrollerDeletedMidTeardown(t *testing.T, f *fleet, figs *figures) {
	var doomed []*fleetWorkspace
	for _, cls := range fleetClasses {
		for _, w := range f.members() {
			if w.class == cls.Name && !w.idle {
				doomed = append(doomed, w)
				break
			}
		}
	}
	trackers := map[string]*teardown{}
	for _, w := range doomed {
		trackers[w.key()] = f.c.trackTeardown(t, w)
	}
	start := time.Now()
	for _, w := range doomed {
		f.deleteWorkspace(t, w)
	}
	f.c.waitFor(t, "a teardown halfway: Deployment scaled to zero, ConfigMap still there", func() (bool, string) {
		for _, w := range doomed {
			d, err := f.c.Client().Get("apps/v1", "Deployment", w.ns, w.name)
			if err != nil {
				continue
			}
			if _, err := f.c.Client().Get("v1", "ConfigMap", w.ns, w.name+"-config"); err == nil && intField(d, "spec", "replicas") == 0 {
				return true, ""
			}
		}
		return false, "no teardown halfway yet"
	}, doomed[0].ns)
	mc := f.c.pod(t, "metacontroller", "metacontroller-0")
	halfway := time.Since(start)
	if err := f.c.Client().Delete("v1", "Pod", "metacontroller", "metacontroller-0"); err != nil {
		t.Fatalf("cannot delete the Metacontroller pod: %v", err)
	}
	f.c.waitFor(t, "a new Metacontroller pod Ready", func() (bool, string) {
		// Between the old pod going and the StatefulSet making the new
		// one, there is none to read.
		var p corev1.Pod
		if err := f.c.getInto("/api/v1/namespaces/metacontroller/pods/metacontroller-0", &p); err != nil {
			return false, err.Error()
		}
		return p.UID != mc.UID && podReady(p), string(p.Status.Phase)
	}, "metacontroller")
	mcBack := time.Since(start)
	for _, w := range doomed {
		trackers[w.key()].wait(t)
	}
	done := time.Since(start)
	f.forget(doomed...)
	byWatch := 0
	for _, w := range doomed {
		exact, err := trackers[w.key()].inOrder()
		if err != nil {
			t.Errorf("%s: %v", w.key(), err)
		}
		if exact {
			byWatch++
		}
		if err := f.c.Client().Delete(v1alpha1.APIVersion, "ResourceClaim", w.ns, w.claim()); err != nil {
			t.Fatal(err)
		}
	}
	// What the garbage collector still has to remove (ReplicaSets, pods
	// that have stopped and wait for the kubelet) goes on its own; what
	// stays is orphaned.
	f.c.waitFor(t, "nothing left of the deleted workspaces", func() (bool, string) {
		var left []string
		for _, w := range doomed {
			left = append(left, f.c.leftOf(t, w)...)
		}
		return len(left) == 0, strings.Join(left, ", ")
	}, doomed[0].ns)
	figs.add("%d workspaces deleted (one per class); Metacontroller pod deleted %.1f s in, a new one Ready at %.1f s; every teardown done in order at %.1f s (the order from the API server's resourceVersions for %d of them, from polling for the rest), nothing of them left at %.1f s",
		len(doomed), halfway.Seconds(), mcBack.Seconds(), done.Seconds(), byWatch, time.Since(start).Seconds())
}

// teardown records when each part of a deleted workspace disappeared:
// by polling, every 200 ms, and by watching, as the API server ordered
// the writes.
type teardown struct {
	c                                         *Cluster
	w                                         *fleetWorkspace
	podsGone, configGone, serviceGone, wsGone time.Time
	done                                      chan struct{}
	order                                     teardownOrder
	stopWatches                               context.CancelFunc
}

// teardownOrder is the resourceVersion of each write that ended a part
// of a workspace: each of its pods finishing (or going, if it had not
// finished), its ConfigMap and its Service going. The API server
// orders its writes by these (k8s.io/apimachinery's
// resourceversion.CompareResourceVersion), where a poll sees two parts
// gone at once when both went within one of its 200 ms.
type teardownOrder struct {
	mu                      sync.Mutex
	pods                    map[string]string // pod → its ending write; "" while it runs
	configGone, serviceGone string
}

// watchedObject is what the teardown watches read of an object.
type watchedObject struct {
	Metadata struct {
		Name            string            `json:"name"`
		Labels          map[string]string `json:"labels"`
		ResourceVersion string            `json:"resourceVersion"`
	} `json:"metadata"`
	Status struct {
		Phase corev1.PodPhase `json:"phase"`
	} `json:"status"`
}

// watchTeardown watches a workspace's pods, ConfigMap and Service until
// ctx ends.
func (c *Cluster) watchTeardown(ctx context.Context, w *fleetWorkspace, o *teardownOrder) {
	o.pods = map[string]string{}
	read := func(ev watchEvent) (watchedObject, bool) {
		var obj watchedObject
		return obj, json.Unmarshal(ev.Object, &obj) == nil
	}
	c.watch(ctx, "/api/v1/namespaces/"+w.ns+"/pods", func(ev watchEvent) {
		obj, ok := read(ev)
		if !ok || obj.Metadata.Labels[v1alpha1.LabelWorkspace] != w.name {
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		ended, seen := o.pods[obj.Metadata.Name]
		switch {
		case seen && ended != "":
		case ev.Type == "DELETED", obj.Status.Phase == corev1.PodSucceeded, obj.Status.Phase == corev1.PodFailed:
			o.pods[obj.Metadata.Name] = obj.Metadata.ResourceVersion
		default:
			o.pods[obj.Metadata.Name] = ""
		}
	})
	for _, part := range []struct {
		path, name string
		gone       *string
	}{
		{"/api/v1/namespaces/" + w.ns + "/configmaps", w.name + "-config", &o.configGone},
		{"/api/v1/namespaces/" + w.ns + "/services", w.name, &o.serviceGone},
	} {
		c.watch(ctx, part.path, func(ev watchEvent) {
			if obj, ok := read(ev); ok && ev.Type == "DELETED" && obj.Metadata.Name == part.name {
				o.mu.Lock()
				defer o.mu.Unlock()
				*part.gone = obj.Metadata.ResourceVersion
			}
		})
	}
}

// complete reports whether every part's ending write was seen.
func (o *teardownOrder) complete() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.configGone == "" || o.serviceGone == "" || len(o.pods) == 0 {
		return false
	}
	for _, rv := range o.pods {
		if rv == "" {
			return false
		}
	}
	return true
}

// inOrder checks that the ConfigMap and the Service went after the last
// pod stopped: by the writes' resourceVersions when the watches saw them
// all (exact), by the poll's times otherwise.
func (tr *teardown) inOrder() (exact bool, err error) {
	deadline := time.Now().Add(10 * time.Second)
	for !tr.order.complete() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	tr.stopWatches()
	if !tr.order.complete() {
		if tr.configGone.Before(tr.podsGone) {
			return false, fmt.Errorf("its ConfigMap went %v before its last pod (by polling)", tr.podsGone.Sub(tr.configGone))
		}
		if tr.serviceGone.Before(tr.podsGone) {
			return false, fmt.Errorf("its Service went %v before its last pod (by polling)", tr.podsGone.Sub(tr.serviceGone))
		}
		return false, nil
	}
	o := &tr.order
	o.mu.Lock()
	defer o.mu.Unlock()
	last, lastPod := "", ""
	for pod, rv := range o.pods {
		if last == "" {
			last, lastPod = rv, pod
		} else if c, err := resourceversion.CompareResourceVersion(rv, last); err == nil && c > 0 {
			last, lastPod = rv, pod
		}
	}
	for part, rv := range map[string]string{"ConfigMap": o.configGone, "Service": o.serviceGone} {
		c, err := resourceversion.CompareResourceVersion(rv, last)
		if err != nil {
			return true, fmt.Errorf("cannot order the teardown's writes: %v", err)
		}
		if c < 0 {
			return true, fmt.Errorf("its %s went (resourceVersion %s) before pod %s stopped (%s)", part, rv, lastPod, last)
		}
	}
	return true, nil
}

// trackTeardown polls a workspace's parts until it and they are gone,
// and watches them, until inOrder, for the order of their ends.
func (c *Cluster) trackTeardown(t *testing.T, w *fleetWorkspace) *teardown {
	tr := &teardown{c: c, w: w, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	tr.stopWatches = cancel
	t.Cleanup(cancel)
	c.watchTeardown(ctx, w, &tr.order)
	go func() {
		defer close(tr.done)
		deadline := time.Now().Add(2 * waitTimeout)
		gone := func(at *time.Time, apiVersion, kind, name string) {
			if at.IsZero() {
				if _, err := c.Client().Get(apiVersion, kind, w.ns, name); controlplane.IsNotFound(err) {
					*at = time.Now()
				}
			}
		}
		for time.Now().Before(deadline) && (tr.podsGone.IsZero() || tr.configGone.IsZero() || tr.serviceGone.IsZero() || tr.wsGone.IsZero()) {
			if tr.podsGone.IsZero() {
				if pods, err := c.podHashes(w.ns, w.name); err == nil && len(pods) == 0 {
					tr.podsGone = time.Now()
				}
			}
			gone(&tr.configGone, "v1", "ConfigMap", w.name+"-config")
			gone(&tr.serviceGone, "v1", "Service", w.name)
			gone(&tr.wsGone, v1alpha1.APIVersion, "Workspace", w.name)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	return tr
}

// wait waits for the teardown to be over and fails if it did not end.
func (tr *teardown) wait(t *testing.T) {
	t.Helper()
	<-tr.done
	if tr.podsGone.IsZero() || tr.configGone.IsZero() || tr.serviceGone.IsZero() || tr.wsGone.IsZero() {
		t.Fatalf("%s: teardown not over within %v: pods gone %v, ConfigMap %v, Service %v, Workspace %v (zero: still there)",
			tr.w.key(), 2*waitTimeout, tr.podsGone, tr.configGone, tr.serviceGone, tr.wsGone)
	}
}

// leftOf lists what is left of a deleted workspace: any object of the
// kinds it had that carries its label or its name. Its claim's
// credentials Secret is the claim's, not the workspace's.
func (c *Cluster) leftOf(t *testing.T, w *fleetWorkspace) []string {
	t.Helper()
	sel := url.QueryEscape(v1alpha1.LabelWorkspace + "=" + w.name)
	var out []string
	for _, path := range []string{
		"/apis/apps/v1/namespaces/" + w.ns + "/deployments?labelSelector=" + sel,
		"/apis/apps/v1/namespaces/" + w.ns + "/replicasets?labelSelector=" + sel,
		"/api/v1/namespaces/" + w.ns + "/pods?labelSelector=" + sel,
		"/api/v1/namespaces/" + w.ns + "/services?labelSelector=" + sel,
		"/api/v1/namespaces/" + w.ns + "/configmaps?labelSelector=" + sel,
		"/apis/autoscaling/v2/namespaces/" + w.ns + "/horizontalpodautoscalers?labelSelector=" + sel,
		"/apis/policy/v1/namespaces/" + w.ns + "/poddisruptionbudgets?labelSelector=" + sel,
	} {
		var list struct {
			Kind  string `json:"kind"`
			Items []struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"items"`
		}
		c.getJSON(t, path, &list)
		for _, item := range list.Items {
			out = append(out, strings.TrimSuffix(list.Kind, "List")+" "+w.ns+"/"+item.Metadata.Name)
		}
	}
	return out
}

// faultAPIServerRestarted restarts kube-apiserver under the fleet, then
// changes three workspaces: everything must converge within one resync
// of the API server being back, the changes applied and every workspace
// in its steady phase again, Cluster Control told.
func faultAPIServerRestarted(t *testing.T, f *fleet, figs *figures) {
	var changed []*fleetWorkspace
	for _, w := range f.members() {
		if !w.idle && len(changed) < 3 {
			changed = append(changed, w)
		}
	}
	// Each change must roll its workspace: a new config hash on the
	// Deployment's pod template, rolled out.
	hashes := map[string]string{}
	for _, ws := range changed {
		hashes[ws.key()] = f.c.configHash(t, ws)
	}
	w := f.open(t)
	var gone, converged time.Duration
	f.driveDuring(func() {
		gone = f.restartAPIServer(t)
		back := time.Now()
		value := "restarted-" + back.Format("150405")
		for _, ws := range changed {
			f.c.patch(t, v1alpha1.APIVersion, "Workspace", ws.ns, ws.name, map[string]any{"spec": map[string]any{"config": map[string]any{"FAULT": value}}})
		}
		for _, ws := range changed {
			f.c.waitFor(t, "the change applied to "+ws.key(), func() (bool, string) {
				cm, err := f.c.Client().Get("v1", "ConfigMap", ws.ns, ws.name+"-config")
				if err != nil {
					return false, err.Error()
				}
				return stringField(cm, "data", "FAULT") == value, fmt.Sprint(cm["data"])
			}, ws.ns)
			f.c.waitFor(t, "a new pod template for "+ws.key(), func() (bool, string) {
				h := f.c.configHash(t, ws)
				return h != hashes[ws.key()], "config hash still " + h
			}, ws.ns)
			f.c.waitRolledOut(t, ws.ns, ws.name)
		}
		f.waitConverged(t, "after the API server restart", 2*f.resync+waitTimeout)
		converged = time.Since(back)
	})
	failed := f.c.failedHookCalls(t, w.start)
	figs.add("kube-apiserver stopped and started again: gone %.1f s; every workspace converged (3 changed, rolled) %.1f s after it was back (one resync: %.0f s); %d syncs failed meanwhile, %d of them hook calls",
		gone.Seconds(), converged.Seconds(), f.resync.Seconds(), len(failed), hookCalls(failed))
	if converged > f.resync {
		t.Errorf("the fleet converged %.1f s after the API server was back, more than one resync (%v)", converged.Seconds(), f.resync)
	}
}

// configHash is the config hash on a workspace's Deployment's pod
// template.
func (c *Cluster) configHash(t *testing.T, w *fleetWorkspace) string {
	t.Helper()
	d, err := c.Client().Get("apps/v1", "Deployment", w.ns, w.name)
	if err != nil {
		t.Fatalf("cannot read Deployment %s: %v", w.key(), err)
	}
	return stringField(d, "spec", "template", "metadata", "annotations", v1alpha1.AnnotationConfigHash)
}

// outage is EnvOutage, or defaultOutage.
func outage(t *testing.T) time.Duration {
	t.Helper()
	v := os.Getenv(EnvOutage)
	if v == "" {
		return defaultOutage
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive Go duration", EnvOutage, v)
	}
	return d
}

// faultClusterControlDown takes Cluster Control down (connections
// refused) for the outage while workspaces change: created, deleted,
// reconfigured, woken. The reporters' memory must stay bounded (neither
// reporter restarted, its RSS below half its container's limit, its
// backlog at most one report per workspace it holds), and within one
// resync of Cluster Control's return it must hold the latest state of
// every workspace.
func faultClusterControlDown(t *testing.T, f *fleet, figs *figures) {
	length := outage(t)
	pods := f.c.hookPods(t)
	restarts := map[string]int32{}
	for _, p := range pods {
		restarts[p.Name] = containerStatus(p, "reporter").RestartCount
	}
	f.clusterControlAdmin(t, http.MethodPut, "/admin/down", map[string]bool{"down": true})
	f.undoAtEnd(t, http.MethodPut, "/admin/down", map[string]bool{"down": false})
	start := time.Now()
	samples := &memorySamples{reporters: len(pods)}
	ctx, cancel := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() { defer close(sampled); f.c.sampleReporterMemory(ctx, samples) }()
	defer func() { cancel(); <-sampled }()

	// Every round reconfigures two running workspaces (their pods roll),
	// wakes an idle one every other round, deletes one (three at most)
	// and creates one.
	var deleted []*fleetWorkspace
	round := func(r int) {
		var running, idle []*fleetWorkspace
		for _, w := range f.members() {
			if w.idle {
				idle = append(idle, w)
			} else {
				running = append(running, w)
			}
		}
		if len(running) < 2 {
			t.Fatalf("too few running workspaces left to change: %d (make the fleet larger)", len(running))
		}
		for i := range 2 {
			w := running[(2*r+i)%len(running)]
			f.c.patch(t, v1alpha1.APIVersion, "Workspace", w.ns, w.name, map[string]any{"spec": map[string]any{"config": map[string]any{"OUTAGE": fmt.Sprint(r)}}})
		}
		if r%2 == 1 && len(idle) > 0 {
			f.c.patch(t, v1alpha1.APIVersion, "Workspace", idle[0].ns, idle[0].name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationIdle: nil}}})
			f.setIdle(idle[0], false)
		}
		if len(deleted) < 3 {
			w := running[len(running)-1]
			f.deleteWorkspace(t, w)
			f.forget(w)
			deleted = append(deleted, w)
		}
		f.create(t, 1)
	}
	rounds := 0
	for time.Since(start) < length {
		round(rounds)
		rounds++
		sleepCtx(context.Background(), min(length/5, length-time.Since(start)))
	}
	f.clusterControlAdmin(t, http.MethodPut, "/admin/down", map[string]bool{"down": false})
	up := time.Now()
	delivered, staleAtBound := f.waitDelivered(t, deleted, f.resync, 2*f.resync+waitTimeout)
	cancel()
	<-sampled
	figs.add("Cluster Control down %.0f s while %d rounds of changes were made (%d workspaces now, %d deleted); reporter RSS %s; pending reports at most %v, both reporters together; latest state of every workspace delivered %.1f s after it was back (one resync: %.0f s)",
		up.Sub(start).Seconds(), rounds, len(f.members()), len(deleted), samples, samples.maxPending, delivered.Seconds(), f.resync.Seconds())
	for _, p := range f.c.hookPods(t) {
		if n, ok := restarts[p.Name]; !ok || containerStatus(p, "reporter").RestartCount != n {
			t.Errorf("pod %s: its reporter restarted during the outage (or the pod is new): %d restarts before, %d after", p.Name, n, containerStatus(p, "reporter").RestartCount)
		}
	}
	samples.check(t, reporterMemoryLimit/2)
	if delivered > f.resync {
		t.Errorf("the latest state of every workspace reached Cluster Control %.1f s after it was back, more than one resync (%v); still stale at the last look within it:\n%s",
			delivered.Seconds(), f.resync, staleAtBound)
	}
	f.waitConverged(t, "after the outage", waitTimeout)
}

// reporterMemoryLimit is the reporter container's memory limit, the
// chart's default.
const reporterMemoryLimit = 128 << 20

// memorySamples are the reporters' RSS and backlog over an outage.
type memorySamples struct {
	mu                  sync.Mutex
	first, last, maxRSS int64
	n                   int
	maxPending          float64
	// reporters is how many reporters each sample must find.
	reporters int
	// missed lists the samples that did not read every reporter's RSS
	// and metrics; overBacklog those where a reporter held more pending
	// reports than workspaces and tombstones.
	missed, overBacklog []string
}

// check fails the test unless every sample read every reporter, no
// reporter's backlog was ever larger than what it holds, and the largest
// RSS stayed below limit.
func (s *memorySamples) check(t *testing.T, limit int64) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 || len(s.missed) > 0 {
		t.Errorf("the reporters' memory was not sampled as it should be: %d samples, %d of them short of the %d reporters: %s",
			s.n, len(s.missed), s.reporters, strings.Join(firstLines(s.missed, 5), "; "))
	}
	if len(s.overBacklog) > 0 {
		t.Errorf("a reporter held more pending reports than workspaces and tombstones: %s", strings.Join(firstLines(s.overBacklog, 5), "; "))
	}
	if s.maxRSS >= limit {
		t.Errorf("a reporter's RSS reached %.1f MiB, at least %d MiB", float64(s.maxRSS)/(1<<20), limit>>20)
	}
}

func (s *memorySamples) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%.1f MiB at the start, %.1f MiB at the end, at most %.1f MiB (%d samples, largest reporter)",
		float64(s.first)/(1<<20), float64(s.last)/(1<<20), float64(s.maxRSS)/(1<<20), s.n)
}

// sampleReporterMemory records the largest reporter's RSS and the
// reporters' pending reports every 5 s until ctx ends, and each sample
// that did not read every reporter or found one holding a larger backlog
// than the workspaces and tombstones it tracks.
func (c *Cluster) sampleReporterMemory(ctx context.Context, s *memorySamples) {
	for ctx.Err() == nil {
		at := time.Now().Format("15:04:05")
		var largest int64
		rssRead := 0
		for _, p := range containerProcesses("/usr/local/bin/formspec-reporter") {
			var pid int
			if _, err := fmt.Sscan(p.pid, &pid); err == nil {
				if rss, err := processRSS(pid); err == nil {
					largest = max(largest, rss)
					rssRead++
				}
			}
		}
		pending, scraped := 0.0, 0
		var over []string
		if pods, err := c.listPods(hooksNamespace, "app.kubernetes.io/name="+hooksName); err == nil {
			for _, p := range pods {
				body, err := get("http://" + p.Status.PodIP + ":9091/metrics")
				if err != nil {
					continue
				}
				scraped++
				mine := metricValue(body, "formspec_reporter_pending_workspaces")
				pending += mine
				if held := metricValue(body, "formspec_reporter_tracked_workspaces") + metricValue(body, "formspec_reporter_tombstones"); mine > held {
					over = append(over, fmt.Sprintf("%s: %s pending %v, holding %v", at, p.Name, mine, held))
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if s.n == 0 {
			s.first = largest
		}
		s.n++
		s.last = largest
		s.maxRSS = max(s.maxRSS, largest)
		s.maxPending = max(s.maxPending, pending)
		if rssRead < s.reporters || scraped < s.reporters {
			s.missed = append(s.missed, fmt.Sprintf("%s: RSS of %d, metrics of %d", at, rssRead, scraped))
		}
		s.overBacklog = append(s.overBacklog, over...)
		s.mu.Unlock()
		sleepCtx(ctx, 5*time.Second)
	}
}

// waitDelivered waits until Cluster Control holds the latest state of
// every workspace (the status the API server has, field for field as the
// reporter copies it) and the deletion of each deleted one, and returns
// how long that took.
//
// It also returns what was still stale at the last look within bound;
// "" if nothing was stale by then.
func (f *fleet) waitDelivered(t *testing.T, deleted []*fleetWorkspace, bound, limit time.Duration) (took time.Duration, staleAtBound string) {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < limit {
		lookedAt := time.Since(start)
		var stale []string
		st, err := clusterControlState(f.admin)
		listed, lerr := f.listWorkspaces()
		switch {
		case err != nil:
			stale = append(stale, err.Error())
		case lerr != nil:
			stale = append(stale, lerr.Error())
		default:
			for key, ws := range listed {
				rep, ok := st.Workspaces[key]
				if !ok || rep.Deleted || rep.Status == nil {
					stale = append(stale, key+": "+describeReport(rep, ok))
					continue
				}
				got, want := *rep.Status, ws.Status
				if got.Phase != want.Phase || got.ObservedGeneration != want.ObservedGeneration || got.Replicas != want.Replicas ||
					got.ReadyReplicas != want.ReadyReplicas || got.UpdatedReplicas != want.UpdatedReplicas || got.ArtifactHash != want.ArtifactHash {
					stale = append(stale, fmt.Sprintf("%s: Cluster Control has %s gen %d %d/%d/%d, the API %s gen %d %d/%d/%d", key,
						got.Phase, got.ObservedGeneration, got.Replicas, got.ReadyReplicas, got.UpdatedReplicas,
						want.Phase, want.ObservedGeneration, want.Replicas, want.ReadyReplicas, want.UpdatedReplicas))
				}
			}
			for _, w := range deleted {
				if rep, ok := st.Workspaces[w.key()]; !ok || !rep.Deleted {
					stale = append(stale, w.key()+": deletion not delivered")
				}
			}
		}
		if len(stale) == 0 {
			return time.Since(start), staleAtBound
		}
		slices.Sort(stale)
		last = strings.Join(firstLines(stale, 10), "\n")
		if lookedAt <= bound {
			staleAtBound = last
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("Cluster Control did not get the latest state of every workspace within %v:\n%s", limit, last)
	return 0, ""
}

// faultEndpointSecretRecreated deletes one namespace's Datastore endpoint
// Secret and creates it again. The decision is revocation: without the
// Secret (and the consent its label gives) the Datastore is denied, so
// are its claims, their credentials Secrets go and the workspaces roll
// without them, Degraded. Once the Secret is back no pod may be left
// without its credentials. The other namespaces must not notice.
func faultEndpointSecretRecreated(t *testing.T, f *fleet, figs *figures) {
	ns := f.namespaces[0]
	var affected []*fleetWorkspace
	var keys []string
	for _, w := range f.members() {
		if w.ns == ns {
			affected = append(affected, w)
			keys = append(keys, w.key())
		}
	}
	w := f.open(t)
	if err := f.c.Client().Delete("v1", "Secret", ns, fleetEndpoint); err != nil {
		t.Fatalf("cannot delete Secret %s/%s: %v", ns, fleetEndpoint, err)
	}
	f.c.waitFor(t, "the credentials of "+ns+" revoked", func() (bool, string) {
		listed, err := f.listWorkspaces()
		if err != nil {
			return false, err.Error()
		}
		for _, a := range affected {
			ws := listed[a.key()]
			if ws.Status.Phase != v1alpha1.PhaseDegraded || len(ws.Status.Datastores) != 1 || ws.Status.Datastores[0].State != v1alpha1.DatastoreDenied {
				return false, fmt.Sprintf("%s: %s %+v", a.key(), ws.Status.Phase, ws.Status.Datastores)
			}
			if _, err := f.c.Client().Get("v1", "Secret", ns, a.claim()+"-credentials"); !controlplane.IsNotFound(err) {
				return false, a.claim() + "-credentials still there"
			}
			if !a.idle {
				if bad := f.c.podsWithCredentials(t, a, true); len(bad) > 0 {
					return false, fmt.Sprintf("pods still with credentials: %v", bad)
				}
			}
		}
		return true, ""
	}, ns)
	revoked := time.Since(w.start)
	recreated := time.Now()
	f.c.apply(t, fleetEndpointSecret(ns))
	f.c.waitFor(t, "every pod of "+ns+" with its credentials again", func() (bool, string) {
		listed, err := f.listWorkspaces()
		if err != nil {
			return false, err.Error()
		}
		for _, a := range affected {
			ws := listed[a.key()]
			if ws.Status.Phase != a.steady() || len(ws.Status.Datastores) != 1 || ws.Status.Datastores[0].State != v1alpha1.DatastoreInjected {
				return false, fmt.Sprintf("%s: %s %+v", a.key(), ws.Status.Phase, ws.Status.Datastores)
			}
			if !a.idle {
				if bad := f.c.podsWithCredentials(t, a, false); len(bad) > 0 {
					return false, fmt.Sprintf("pods without credentials: %v", bad)
				}
			}
		}
		return true, ""
	}, ns)
	restored := time.Since(recreated)
	d := f.requireUndisturbed(t, w, expectation{skip: keys})
	figs.add("endpoint Secret of %s deleted: %d workspaces' credentials revoked (Degraded, pods rolled without them) after %.1f s; created again: every pod with its credentials after %.1f s; the other %d workspaces undisturbed (failed hook calls %d)",
		ns, len(affected), revoked.Seconds(), restored.Seconds(), len(w.steady)-len(affected), len(d.failedCalls))
}

// podsWithCredentials lists the workspace's running pods that are
// wrong: with revoked, those that still hold the claim's credentials;
// otherwise those that do not (the Secret in their envFrom, the password
// in the environment the stand-in image prints).
func (c *Cluster) podsWithCredentials(t *testing.T, w *fleetWorkspace, revoked bool) []string {
	t.Helper()
	var list corev1.PodList
	c.getJSON(t, "/api/v1/namespaces/"+w.ns+"/pods?labelSelector="+url.QueryEscape(v1alpha1.LabelWorkspace+"="+w.name), &list)
	secret := w.claim() + "-credentials"
	var bad []string
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		refers := slices.ContainsFunc(p.Spec.Containers[0].EnvFrom, func(e corev1.EnvFromSource) bool {
			return e.SecretRef != nil && e.SecretRef.Name == secret
		})
		switch {
		case revoked:
			if refers {
				bad = append(bad, p.Name)
			}
		case !refers || !podReady(p):
			bad = append(bad, p.Name)
		default:
			if env, err := get("http://" + p.Status.PodIP + ":8080/env"); err != nil || !strings.Contains(env, fleetEnvPrefix+"password="+fleetPassword(w.ns)+"\n") {
				bad = append(bad, p.Name+" (no password in its environment)")
			}
		}
	}
	if !revoked && len(list.Items) == 0 {
		bad = append(bad, "no pod")
	}
	return bad
}
