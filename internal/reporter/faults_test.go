package reporter

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/state"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOutageDeliversLatestStateOnly takes Cluster Control down, feeds many
// updates per workspace, and brings it back: each workspace's latest state
// must arrive last, the updates must have been coalesced rather than queued,
// and what the reporter holds must not have grown with their number.
func TestOutageDeliversLatestStateOnly(t *testing.T) {
	const workspaces, updates = 5, 40
	cc, url := startCC(t, clustercontrol.Options{})
	cc.SetDown(true)
	r := newReporter(t, fastConfig(url))
	runLoops(t, r.runWorkspaceSender)

	for u := range updates {
		for w := range workspaces {
			if err := r.Observe(wsObs("team-a", fmt.Sprintf("ws-%d", w), "Progressing", int32(u), "")); err != nil {
				t.Fatal(err)
			}
		}
		if u == 0 {
			// Make sure the sender is failing against the outage before
			// piling up the rest.
			testsync.WaitFor(t, "a failed send", func() bool {
				return testutil.ToFloat64(r.m.sends.WithLabelValues(endpointWorkspaceStatus, "network_error")) > 0
			})
		}
	}
	wantHeld := state.Counts{Workspaces: workspaces, Pending: workspaces}
	got := r.st.Counts()
	if got.Workspaces != wantHeld.Workspaces || got.Pending != wantHeld.Pending || got.Queue > workspaces {
		t.Fatalf("state during outage: got %v, want %d workspaces, %d pending, queue <= %d", got, workspaces, workspaces, workspaces)
	}

	cc.SetDown(false)
	testsync.WaitFor(t, "every workspace delivered", func() bool { return r.st.Counts().Pending == 0 })

	// Each workspace's last report carries its latest state, and the 40
	// updates of each were coalesced: besides the latest, at most one
	// report taken during the outage may land (a request already under way
	// when the outage begins or ends can be recorded while its answer is
	// cut; the reporter then rightly sends the newer state again).
	want := map[string]int32{}
	for w := range workspaces {
		want[fmt.Sprintf("team-a/ws-%d", w)] = updates - 1
	}
	last, sent := map[string]int32{}, map[string]int{}
	for _, rep := range cc.WorkspaceReports() {
		k := rep.Namespace + "/" + rep.Name
		last[k] = rep.Status.ReadyReplicas
		sent[k]++
	}
	if diff := cmp.Diff(want, last); diff != "" {
		t.Errorf("last delivered readyReplicas per workspace (-want, +got):\n%s", diff)
	}
	for k, n := range sent {
		if n > 2 {
			t.Errorf("workspace %s was reported %d times for %d updates: the outage did not coalesce them", k, n, updates)
		}
	}
}

// TestRetryAndDropPolicy pins what the workspace sender does with each kind
// of failure, by the order of Cluster Control's answers and the reporter's
// sleeps. The clock is fake: sleeps return at once and are only recorded.
func TestRetryAndDropPolicy(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason      string
		fault       clustercontrol.Fault
		want        []string
		wantDropped float64
	}{
		"RetryAfterSeconds": {
			reason: "429 with Retry-After in seconds waits at least that long before the next attempt",
			fault:  clustercontrol.Fault{Status: http.StatusTooManyRequests, RetryAfter: "7", Times: 1},
			want:   []string{"POST /v1/workspace-status 429", "sleep 7s", "POST /v1/workspace-status 200"},
		},
		"RetryAfterDate": {
			reason: "429 with Retry-After as an HTTP date waits until that date",
			fault:  clustercontrol.Fault{Status: http.StatusTooManyRequests, RetryAfter: now.Add(90 * time.Second).Format(http.TimeFormat), Times: 1},
			want:   []string{"POST /v1/workspace-status 429", "sleep 1m30s", "POST /v1/workspace-status 200"},
		},
		"ServerErrorBacksOffExponentially": {
			reason: "5xx without Retry-After is retried after a backoff that doubles per failure",
			fault:  clustercontrol.Fault{Status: http.StatusInternalServerError, Times: 3},
			want: []string{
				"POST /v1/workspace-status 500", "sleep 100ms",
				"POST /v1/workspace-status 500", "sleep 200ms",
				"POST /v1/workspace-status 500", "sleep 400ms",
				"POST /v1/workspace-status 200",
			},
		},
		"BadRequestIsDropped": {
			reason:      "400 is not retried; the report is dropped and counted",
			fault:       clustercontrol.Fault{Status: http.StatusBadRequest, Times: 1},
			want:        []string{"POST /v1/workspace-status 400"},
			wantDropped: 1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			log := &eventLog{}
			cc := clustercontrol.New(clustercontrol.Options{Now: func() time.Time { return now }})
			cc.SetFault(ccapi.PathWorkspaceStatus, tc.fault)
			hs := httptest.NewServer(logged(cc.Handler(), log))
			defer hs.Close()

			cfg := fastConfig(hs.URL)
			cfg.BackoffBase, cfg.BackoffMax = 100*time.Millisecond, time.Second
			cfg.now = func() time.Time { return now }
			// With the jitter pinned to its top, the backoff is exactly the
			// exponential step, which makes it visible in the log.
			cfg.rand = func() float64 { return 1 }
			cfg.sleep = func(ctx context.Context, d time.Duration) error {
				log.add("sleep %v", d)
				return ctx.Err()
			}
			r := newReporter(t, cfg)
			if err := r.Observe(wsObs("team-a", "shop", "Ready", 2, "")); err != nil {
				t.Fatal(err)
			}
			runLoops(t, r.runWorkspaceSender)
			testsync.WaitFor(t, "the report to be settled", func() bool {
				ev := log.get()
				return r.st.Counts().Pending == 0 && len(ev) > 0 && ev[len(ev)-1][:4] == "POST"
			})

			if diff := cmp.Diff(tc.want, log.get()); diff != "" {
				t.Errorf("%s\nevents (-want, +got):\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantDropped, testutil.ToFloat64(r.m.dropped.WithLabelValues(state.DropRejected, ""))); diff != "" {
				t.Errorf("%s\ndropped{reason=rejected} (-want, +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSlowWorkspaceStatusDoesNotStallNodeHealth holds every workspace-status
// request open and checks that node-health reports keep coming meanwhile.
func TestSlowWorkspaceStatusDoesNotStallNodeHealth(t *testing.T) {
	cc, url := startCC(t, clustercontrol.Options{})
	cc.SetFault(ccapi.PathWorkspaceStatus, clustercontrol.Fault{Delay: time.Hour})
	r := newReporter(t, fastConfig(url))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	if err := r.Observe(observation.Observation{Node: readyNode("node-a")}); err != nil {
		t.Fatal(err)
	}
	if err := r.Observe(wsObs("team-a", "shop", "Ready", 2, "")); err != nil {
		t.Fatal(err)
	}
	testsync.WaitFor(t, "a stalled workspace-status request", func() bool { return cc.Stalled() == 1 })
	before := len(cc.NodeReports())
	testsync.WaitFor(t, "node-health reports while workspace-status is stalled", func() bool {
		return len(cc.NodeReports()) >= before+3
	})
	if got := cc.Stalled(); got != 1 {
		t.Fatalf("workspace-status request finished early (stalled = %d): the test did not overlap the two", got)
	}
	if got := len(cc.WorkspaceReports()); got != 0 {
		t.Fatalf("a workspace report was accepted while stalled: %d", got)
	}

	cc.ClearFaults()
	testsync.WaitFor(t, "the stalled workspace report to land", func() bool { return len(cc.WorkspaceReports()) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
		}},
	}
}
