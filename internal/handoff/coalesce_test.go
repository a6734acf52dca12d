package handoff

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
)

// wsStatus is a Ready workspace's status with ready replicas: statuses
// that differ only in that are the same state, told more recently.
func wsStatus(ns, name string, uid types.UID, ready int32) observation.Observation {
	return observation.Observation{Workspace: &observation.WorkspaceStatus{Namespace: ns, Name: name, UID: uid, Phase: "Ready", ReadyReplicas: ready}}
}

func withHashes(o observation.Observation, running, wanted string) observation.Observation {
	o.Workspace.ArtifactHash, o.Workspace.WantedArtifactHash = running, wanted
	return o
}

// changedAPI marks a status that changes the one the API server holds.
func changedAPI(o observation.Observation) observation.Observation {
	o.Workspace.StatusChanged = true
	return o
}

func withPhase(o observation.Observation, phase string) observation.Observation {
	o.Workspace.Phase = phase
	return o
}

func wsDeleted(ns, name string, uid types.UID) observation.Observation {
	return observation.Observation{WorkspaceDeleted: &observation.WorkspaceRef{Namespace: ns, Name: name, UID: uid}}
}

func node(name, version string) observation.Observation {
	return observation.Observation{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: version}}}
}

func pod(ns, name, nodeName string) observation.Observation {
	return observation.Observation{Pod: &observation.PodPlacement{Namespace: ns, Name: name, Workspace: "w", NodeName: nodeName}}
}

func claim(ns, name string, uid types.UID, reason string) observation.Observation {
	return observation.Observation{Claim: &observation.ClaimDecision{Namespace: ns, Name: name, UID: uid, Reason: reason}}
}

// describe decodes observations into one line each, naming the object and
// the field that tells one state of it from another.
func describe(t *testing.T, raws [][]byte) []string {
	t.Helper()
	var out []string
	for _, raw := range raws {
		var o observation.Observation
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		switch {
		case o.Workspace != nil:
			w := o.Workspace
			d := fmt.Sprintf("workspace %s/%s %s ready=%d", w.Namespace, w.Name, w.UID, w.ReadyReplicas)
			if w.WantedArtifactHash != "" {
				d += fmt.Sprintf(" %s->%s", w.ArtifactHash, w.WantedArtifactHash)
			}
			if w.Phase != "Ready" {
				d += " " + w.Phase
			}
			if w.StatusChanged {
				d += " changed"
			}
			out = append(out, d)
		case o.WorkspaceDeleted != nil:
			out = append(out, fmt.Sprintf("deleted %s/%s %s", o.WorkspaceDeleted.Namespace, o.WorkspaceDeleted.Name, o.WorkspaceDeleted.UID))
		case o.Node != nil:
			out = append(out, fmt.Sprintf("node %s %s", o.Node.Name, o.Node.ResourceVersion))
		case o.Pod != nil:
			out = append(out, fmt.Sprintf("pod %s/%s %s", o.Pod.Namespace, o.Pod.Name, o.Pod.NodeName))
		case o.Claim != nil:
			out = append(out, fmt.Sprintf("claim %s/%s %s %s", o.Claim.Namespace, o.Claim.Name, o.Claim.UID, o.Claim.Reason))
		}
	}
	return out
}

// queuedNow returns the queued observations' bytes and their total, without
// marking anything as being posted as peek does.
func queuedNow(c *Client) (raws [][]byte, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range c.queue {
		raws = append(raws, q.raw)
		size += len(q.raw)
	}
	return raws, size
}

// running returns a Client for url whose Run goes on until the test ends.
func running(t *testing.T, url string, opts Options) *Client {
	t.Helper()
	c, err := New(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Run(ctx) }()
	return c
}

// TestCoalescing shows which observations a newer one replaces in place,
// and which it is appended after.
func TestCoalescing(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          Options
		sends         []observation.Observation
		want          []string
		wantCoalesced uint64
		wantDropped   uint64
	}{{
		name:          "LatestStatusKeepsTheOlderPlace",
		sends:         []observation.Observation{wsStatus("ns", "a", "", 0), wsStatus("ns", "b", "", 1), wsStatus("ns", "a", "", 1)},
		want:          []string{"workspace ns/a  ready=1", "workspace ns/b  ready=1"},
		wantCoalesced: 1,
	}, {
		name: "DifferentObjectsAreNotMerged",
		sends: []observation.Observation{
			wsStatus("ns", "a", "", 0),
			wsStatus("other", "a", "", 0),
			wsStatus("ns", "a", "u1", 0),
			wsStatus("ns", "a", "u2", 0),
			claim("ns", "a", "", "Pending"),
			pod("ns", "a", "n1"),
			node("a", "1"),
		},
		want: []string{
			"workspace ns/a  ready=0",
			"workspace other/a  ready=0",
			"workspace ns/a u1 ready=0",
			"workspace ns/a u2 ready=0",
			"claim ns/a  Pending",
			"pod ns/a n1",
			"node a 1",
		},
	}, {
		// A transition the reporter announces (here a rollout starting,
		// then done) reaches it even when the next status follows at
		// once; further statuses of the same state still merge.
		name: "TransitionsAreKept",
		sends: []observation.Observation{
			wsStatus("ns", "a", "", 1),
			withHashes(wsStatus("ns", "a", "", 1), "h1", "h2"),
			withHashes(wsStatus("ns", "a", "", 1), "h2", "h2"),
			withHashes(wsStatus("ns", "a", "", 2), "h2", "h2"),
			withPhase(wsStatus("ns", "a", "", 0), "Degraded"),
		},
		want: []string{
			"workspace ns/a  ready=1",
			"workspace ns/a  ready=1 h1->h2",
			"workspace ns/a  ready=2 h2->h2",
			"workspace ns/a  ready=0 Degraded",
		},
		wantCoalesced: 1,
	}, {
		// A status that changed the API's reaches the reporter even when
		// a repeat of it follows, and replaces one that changed nothing.
		name: "ChangesOfTheAPIsStatusAreKept",
		sends: []observation.Observation{
			changedAPI(wsStatus("ns", "a", "", 0)),
			wsStatus("ns", "a", "", 0),
			changedAPI(wsStatus("ns", "a", "", 1)),
			wsStatus("ns", "a", "", 2),
		},
		want: []string{
			"workspace ns/a  ready=0 changed",
			"workspace ns/a  ready=1 changed",
			"workspace ns/a  ready=2",
		},
		wantCoalesced: 1,
	}, {
		name:          "WorkspaceByUID",
		sends:         []observation.Observation{wsStatus("ns", "a", "u1", 0), wsStatus("ns", "a", "u1", 1)},
		want:          []string{"workspace ns/a u1 ready=1"},
		wantCoalesced: 1,
	}, {
		name:          "NodeByName",
		sends:         []observation.Observation{node("n1", "1"), node("n2", "1"), node("n1", "2"), node("n1", "3")},
		want:          []string{"node n1 3", "node n2 1"},
		wantCoalesced: 2,
	}, {
		name:          "PodByNamespaceAndName",
		sends:         []observation.Observation{pod("ns", "p", "n1"), pod("ns", "p", "n2")},
		want:          []string{"pod ns/p n2"},
		wantCoalesced: 1,
	}, {
		name:  "ClaimDecisionsAreNeverMerged",
		sends: []observation.Observation{claim("ns", "c", "u", "Denied"), claim("ns", "c", "u", "Granted")},
		want:  []string{"claim ns/c u Denied", "claim ns/c u Granted"},
	}, {
		name:  "DeletionsAreNeverMerged",
		sends: []observation.Observation{wsDeleted("ns", "a", "u1"), wsDeleted("ns", "a", "u1")},
		want:  []string{"deleted ns/a u1", "deleted ns/a u1"},
	}, {
		name: "StatusAfterADeletionIsAppended",
		sends: []observation.Observation{
			wsStatus("ns", "a", "", 0),
			wsDeleted("ns", "a", ""),
			wsStatus("ns", "a", "", 1),
			wsStatus("ns", "a", "", 2),
		},
		want:          []string{"workspace ns/a  ready=0", "deleted ns/a ", "workspace ns/a  ready=2"},
		wantCoalesced: 1,
	}, {
		name: "RecreatedWorkspace",
		sends: []observation.Observation{
			wsStatus("ns", "a", "u1", 1),
			wsDeleted("ns", "a", "u1"),
			wsStatus("ns", "a", "u2", 0),
			wsStatus("ns", "a", "u2", 1),
		},
		want:          []string{"workspace ns/a u1 ready=1", "deleted ns/a u1", "workspace ns/a u2 ready=1"},
		wantCoalesced: 1,
	}, {
		// The deletion names another UID than the status: merged by name,
		// the status would move before a deletion the reporter applies by
		// name.
		name: "NoMergeAcrossADeletionOfAnotherUID",
		sends: []observation.Observation{
			wsStatus("ns", "a", "u2", 0),
			wsDeleted("ns", "a", "u1"),
			wsStatus("ns", "a", "u2", 1),
		},
		want: []string{"workspace ns/a u2 ready=0", "deleted ns/a u1", "workspace ns/a u2 ready=1"},
	}, {
		name: "DeletionOfAnotherWorkspaceIsNoBarrier",
		sends: []observation.Observation{
			wsStatus("ns", "a", "", 0),
			wsDeleted("ns", "b", ""),
			wsStatus("ns", "a", "", 1),
		},
		want:          []string{"workspace ns/a  ready=1", "deleted ns/b "},
		wantCoalesced: 1,
	}, {
		// a is evicted, so its next status is appended; c, still queued,
		// is replaced in place.
		name: "EvictionKeepsTheIndexInStep",
		opts: Options{QueueSize: 2},
		sends: []observation.Observation{
			wsStatus("ns", "a", "", 0),
			wsStatus("ns", "b", "", 0),
			wsStatus("ns", "c", "", 0),
			wsStatus("ns", "a", "", 1),
			wsStatus("ns", "c", "", 1),
		},
		want:          []string{"workspace ns/c  ready=1", "workspace ns/a  ready=1"},
		wantCoalesced: 1,
		wantDropped:   2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New("http://127.0.0.1:1", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.sends {
				c.Send(o)
			}
			raws, size := queuedNow(c)
			if diff := cmp.Diff(tc.want, describe(t, raws)); diff != "" {
				t.Errorf("queued (-want, +got):\n%s", diff)
			}
			if got := c.PendingBytes(); got != size {
				t.Errorf("PendingBytes() = %d, want %d, the size of what is queued", got, size)
			}
			if got := c.Coalesced(); got != tc.wantCoalesced {
				t.Errorf("Coalesced() = %d, want %d", got, tc.wantCoalesced)
			}
			if got := c.Dropped(); got != tc.wantDropped {
				t.Errorf("Dropped() = %d, want %d", got, tc.wantDropped)
			}
		})
	}
}

// TestCoalescedMetric checks the counter under the name the hook server
// exports.
func TestCoalescedMetric(t *testing.T) {
	c, err := New("http://127.0.0.1:1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collectors()...)
	for ready := range int32(3) {
		c.Send(wsStatus("ns", "a", "", ready))
	}
	c.Send(wsStatus("ns", "b", "", 1))
	want := `
# HELP formspec_hooks_reporter_handoff_coalesced_total Observations that replaced a queued, not yet posted observation of the same object on its way to the reporter sidecar.
# TYPE formspec_hooks_reporter_handoff_coalesced_total counter
formspec_hooks_reporter_handoff_coalesced_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "formspec_hooks_reporter_handoff_coalesced_total"); err != nil {
		t.Error(err)
	}
}

// batchSidecar is a fake reporter that sends each batch it takes, described,
// on the returned channel; each POST first waits for gate to yield (a
// closed channel lets every POST through).
func batchSidecar(t *testing.T, gate <-chan struct{}, entered chan<- struct{}) (*httptest.Server, chan []string) {
	got := make(chan []string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b struct {
			Observations []json.RawMessage `json:"observations"`
		}
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			t.Errorf("cannot decode batch: %v", err)
		}
		if entered != nil {
			entered <- struct{}{}
		}
		<-gate
		raws := make([][]byte, len(b.Observations))
		for i, o := range b.Observations {
			raws[i] = o
		}
		got <- describe(t, raws)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func receiveBatch(t *testing.T, got chan []string) []string {
	t.Helper()
	select {
	case b := <-got:
		return b
	case <-time.After(20 * time.Second):
		t.Fatal("gave up waiting for a batch")
		return nil
	}
}

// TestInFlightIsNotReplaced shows a status sent while the queued status of
// the same object is being posted appended, not put in its place, where
// the ack would drop it unposted.
func TestInFlightIsNotReplaced(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	srv, got := batchSidecar(t, release, entered)
	c := running(t, srv.URL, Options{Linger: -1})
	c.Send(wsStatus("ns", "a", "", 0))
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the sidecar got no POST")
	}
	c.Send(wsStatus("ns", "a", "", 1))
	c.Send(wsStatus("ns", "a", "", 2))
	raws, _ := queuedNow(c)
	want := []string{"workspace ns/a  ready=0", "workspace ns/a  ready=2"}
	if diff := cmp.Diff(want, describe(t, raws)); diff != "" {
		t.Errorf("queued while posting (-want, +got):\n%s", diff)
	}
	close(release)
	var posted []string
	for len(posted) < 2 {
		posted = append(posted, receiveBatch(t, got)...)
	}
	if diff := cmp.Diff(want, posted); diff != "" {
		t.Errorf("posted (-want, +got):\n%s", diff)
	}
	// Acknowledged, the object is no longer queued: its next status is
	// queued and posted on its own.
	c.Send(wsStatus("ns", "a", "", 1))
	if diff := cmp.Diff([]string{"workspace ns/a  ready=1"}, receiveBatch(t, got)); diff != "" {
		t.Errorf("posted after the ack (-want, +got):\n%s", diff)
	}
	if got := c.Coalesced(); got != 1 {
		t.Errorf("Coalesced() = %d, want 1", got)
	}
}

// TestFailedBatchIsReplaceable shows a batch the sidecar did not take
// replaceable again once its POST is over: it is no longer in flight.
func TestFailedBatchIsReplaceable(t *testing.T) {
	c := running(t, closedURL(t), Options{Linger: -1, RetryDelay: time.Hour})
	c.Send(wsStatus("ns", "a", "", 0))
	waitPosted(t, c, "error")
	testsync.WaitFor(t, "the failed POST is over", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.posting == 0
	})
	c.Send(wsStatus("ns", "a", "", 1))
	raws, _ := queuedNow(c)
	if diff := cmp.Diff([]string{"workspace ns/a  ready=1"}, describe(t, raws)); diff != "" {
		t.Errorf("queued after the failed POST (-want, +got):\n%s", diff)
	}
}

// TestLinger shows Run gathering observations into one POST while it
// lingers, posting a whole batch without waiting out the linger, and
// posting the rest at once when stopped.
func TestLinger(t *testing.T) {
	one, err := json.Marshal(status(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{name: "FullByCount", opts: Options{Linger: time.Hour, BatchSize: 5}},
		{name: "FullByBytes", opts: Options{Linger: time.Hour, BatchBytes: 5 * len(one)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open := make(chan struct{})
			close(open)
			srv, got := batchSidecar(t, open, nil)
			c, err := New(srv.URL, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				_ = c.Run(ctx)
			}()
			for i := 1; i <= 5; i++ {
				c.Send(status(i))
			}
			want := []string{"workspace ns/ws-1  ready=0", "workspace ns/ws-2  ready=0", "workspace ns/ws-3  ready=0", "workspace ns/ws-4  ready=0", "workspace ns/ws-5  ready=0"}
			if diff := cmp.Diff(want, receiveBatch(t, got)); diff != "" {
				t.Errorf("first POST (-want, +got):\n%s", diff)
			}
			// Stopping while that POST is unanswered would post it again.
			testsync.WaitFor(t, "the first POST is acknowledged", func() bool { return c.Pending() == 0 })
			c.Send(status(6))
			c.Send(status(7))
			cancel()
			select {
			case <-stopped:
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return on stop")
			}
			if diff := cmp.Diff([]string{"workspace ns/ws-6  ready=0", "workspace ns/ws-7  ready=0"}, receiveBatch(t, got)); diff != "" {
				t.Errorf("POST on stop (-want, +got):\n%s", diff)
			}
			if n := len(got); n != 0 {
				t.Errorf("%d more POSTs, want none", n)
			}
		})
	}
}

// TestLingerUrgent shows a deletion and a new claim decision ending the
// linger at once, taking the states queued before them along: no later
// sync repeats a deletion, and the reporter announces a decision, so
// neither is left to wait in a queue a restart loses.
func TestLingerUrgent(t *testing.T) {
	cases := map[string]struct {
		reason string
		urgent observation.Observation
		want   []string
	}{
		"Deletion": {
			reason: "a deletion is told once, by the finalize hook",
			urgent: wsDeleted("ns", "gone", "u1"),
			want:   []string{"workspace ns/ws-1  ready=0", "deleted ns/gone u1"},
		},
		"ClaimDecision": {
			reason: "a claim decision becomes an Event",
			urgent: claim("ns", "c", "u2", "Granted"),
			want:   []string{"workspace ns/ws-1  ready=0", "claim ns/c u2 Granted"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			open := make(chan struct{})
			close(open)
			srv, got := batchSidecar(t, open, nil)
			// A linger of an hour would never post the state alone.
			c := running(t, srv.URL, Options{Linger: time.Hour})
			c.Send(status(1))
			c.Send(tc.urgent)
			if diff := cmp.Diff(tc.want, receiveBatch(t, got)); diff != "" {
				t.Errorf("%s: posted (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLingerRepeatedClaim shows a claim decision that its status already
// recorded (a resync's) waiting out the linger like a state, and going
// along with the next observation that does not wait.
func TestLingerRepeatedClaim(t *testing.T) {
	open := make(chan struct{})
	close(open)
	srv, got := batchSidecar(t, open, nil)
	c, err := New(srv.URL, Options{Linger: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	repeat := claim("ns", "c", "u2", "Granted")
	repeat.Claim.Repeat = true
	c.Send(status(1))
	c.Send(repeat)
	if c.ready() {
		t.Error("a repeated claim decision ends the linger; want it to wait with the states")
	}
	c.Send(claim("ns", "d", "u3", "Denied"))
	if !c.ready() {
		t.Error("a claim decision that changed waits out the linger; want it posted at once")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = c.Run(ctx) }()
	want := []string{"workspace ns/ws-1  ready=0", "claim ns/c u2 Granted", "claim ns/d u3 Denied"}
	if diff := cmp.Diff(want, receiveBatch(t, got)); diff != "" {
		t.Errorf("posted (-want, +got):\n%s", diff)
	}
}

// TestSendWakesRunOnlyWhenItMust shows which Sends wake Run: the first
// observation of an empty queue, which Run waits for, and one that makes
// a lingering queue ready; a state added to a queue that is lingering
// anyway does not, since Run would only find that it has to go on waiting.
func TestSendWakesRunOnlyWhenItMust(t *testing.T) {
	c, err := New("http://127.0.0.1:1", Options{Linger: time.Hour, BatchSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	woken := func() bool {
		select {
		case <-c.waiting:
			return true
		default:
			return false
		}
	}
	steps := []struct {
		what string
		send observation.Observation
		wake bool
	}{
		{"the first state of an empty queue", status(1), true},
		{"a second state while lingering", status(2), false},
		{"a newer state of a queued workspace", wsStatus("ns", "ws-2", "", 1), false},
		{"a repeated claim decision", func() observation.Observation {
			o := claim("ns", "c", "u1", "Granted")
			o.Claim.Repeat = true
			return o
		}(), false},
		{"the state that fills the batch", status(3), true},
		{"one more state of a full batch", status(4), true},
	}
	for _, s := range steps {
		c.Send(s.send)
		if got := woken(); got != s.wake {
			t.Errorf("after %s: Run woken %v, want %v", s.what, got, s.wake)
		}
	}
	c.ack(c.seq)
	c.Send(status(5))
	if !woken() {
		t.Error("the first state after the queue drained does not wake Run")
	}
	c.Send(wsDeleted("ns", "gone", "u2"))
	if !woken() {
		t.Error("a deletion does not wake a lingering Run")
	}
}

// TestLingerOff shows a negative Linger posting a lone observation without
// waiting for more (a linger of an hour would never post it).
func TestLingerOff(t *testing.T) {
	open := make(chan struct{})
	close(open)
	srv, got := batchSidecar(t, open, nil)
	c := running(t, srv.URL, Options{Linger: -1})
	c.Send(status(1))
	if diff := cmp.Diff([]string{"workspace ns/ws-1  ready=0"}, receiveBatch(t, got)); diff != "" {
		t.Errorf("posted (-want, +got):\n%s", diff)
	}
}

// TestLingerDefault shows which Linger a Client uses.
func TestLingerDefault(t *testing.T) {
	for _, tc := range []struct {
		set, want time.Duration
	}{
		{set: 0, want: Defaults.Linger},
		{set: 10 * time.Millisecond, want: 10 * time.Millisecond},
		{set: -1, want: -1},
	} {
		c, err := New("http://127.0.0.1:1", Options{Linger: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		if c.opts.Linger != tc.want {
			t.Errorf("Linger %v: got %v, want %v", tc.set, c.opts.Linger, tc.want)
		}
	}
}

// BenchmarkSend measures Send with the sidecar down: into a full queue of
// distinct objects (each Send evicts the head), and for one object synced
// over and over (each Send replaces the queued status).
func BenchmarkSend(b *testing.B) {
	distinct := make([]observation.Observation, 4096)
	for i := range distinct {
		distinct[i] = status(i)
	}
	for name, next := range map[string]func(i int) observation.Observation{
		"FullQueue":  func(i int) observation.Observation { return distinct[i%len(distinct)] },
		"SameObject": func(int) observation.Observation { return distinct[0] },
	} {
		b.Run(name, func(b *testing.B) {
			c, err := New("http://127.0.0.1:1", Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.Send(next(i))
				i++
			}
		})
	}
}
