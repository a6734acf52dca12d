package wake

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

var shop = types.NamespacedName{Namespace: "team-a", Name: "shop"}

// wakeObs is an observation of team-a/shop in a wake-on-request class.
func wakeObs(idle bool, info observation.WakeInfo) *observation.WorkspaceStatus {
	phase := v1alpha1.PhaseReady
	if idle {
		phase = v1alpha1.PhaseIdle
	}
	return &observation.WorkspaceStatus{Namespace: shop.Namespace, Name: shop.Name, UID: "u-1", Phase: phase, Idle: idle,
		ClusterClass: "on-demand", Class: &observation.ClassInfo{Name: "on-demand", Wake: &info}}
}

// poll is one poll of the interceptors in a TestWakeDecide case.
type poll struct {
	at      time.Duration
	held    int
	count   int64
	partial bool
	// unlisted leaves the workspace's route out of the interceptors' queues.
	unlisted  bool
	directive string
	// ready, when set, is observed as the workspace's ready pods before
	// the poll.
	ready *int32
	// observe, when set, is observed before the poll.
	observe *observation.WorkspaceStatus
}

func ready(n int32) *int32 { return &n }

func TestWakeDecide(t *testing.T) {
	info := observation.WakeInfo{IdleAfterSeconds: 60, TimeoutSeconds: 30, MaxHeldRequests: 5}
	noIdle := info
	noIdle.IdleAfterSeconds = 0
	cases := map[string]struct {
		reason string
		first  *observation.WorkspaceStatus
		// lost fails every idle and keeps overflow writes from the
		// observations, as writes the API server did not take.
		lost  bool
		polls []poll
		want  []string
	}{
		"WakeAndColdStart": {
			reason: "A held request wakes the idle workspace; the cold start runs to the poll that sees it answered.",
			first:  wakeObs(true, info),
			polls:  []poll{{at: time.Second, held: 1, count: 1}, {at: 2 * time.Second, held: 1, count: 1}, {at: 3500 * time.Millisecond, held: 0, count: 1}},
			want:   []string{"1s wake shop held=1", "3.5s cold_start shop took=2.5s"},
		},
		"AwakeIsLeftAlone": {
			reason: "Requests for a workspace that is not idle are the interceptor's business only.",
			first:  wakeObs(false, noIdle),
			polls:  []poll{{at: time.Second, held: 3, count: 3}, {at: 2 * time.Second, held: 0, count: 3}},
		},
		"IdleDirectiveWins": {
			reason: "Cluster Control's idle directive keeps the workspace idle, held requests or not.",
			first:  wakeObs(true, info),
			polls:  []poll{{at: time.Second, held: 2, directive: ccapi.ActionIdle}},
		},
		"OverflowAndBack": {
			reason: "Reaching maxHeldRequests while waking refuses further requests until a pod is ready.",
			first:  wakeObs(true, info),
			polls: []poll{
				{at: time.Second, held: 2}, {at: 2 * time.Second, held: 5}, {at: 3 * time.Second, held: 7},
				{at: 4 * time.Second, held: 3, ready: ready(1)},
			},
			want: []string{"1s wake shop held=2", "2s overflow_on shop held=5", "4s overflow_off shop held=3", "4s cold_start shop took=3s"},
		},
		"OverflowWithoutOwnWake": {
			reason: "The cap holds for a workspace without a ready pod whoever woke it.",
			first:  wakeObs(false, noIdle),
			polls:  []poll{{at: time.Second, held: 5}, {at: 2 * time.Second, held: 4}, {at: 3 * time.Second, held: 2}},
			want:   []string{"1s overflow_on shop held=5", "3s overflow_off shop held=2"},
		},
		"LeftoverOverflowIsTakenAway": {
			reason: "An annotation a dead reporter left is taken away, so that an idle workspace holds requests again.",
			first: func() *observation.WorkspaceStatus {
				o := wakeObs(true, info)
				o.WakeOverflow = true
				return o
			}(),
			polls: []poll{{at: time.Second}, {at: 2 * time.Second}, {at: 3 * time.Second, held: 1}},
			want:  []string{"1s overflow_off shop held=0", "3s wake shop held=1"},
		},
		"LostOverflowWriteIsRetried": {
			reason: "While the observation does not show the cap, it is written again after wakeRetry, not at every poll.",
			first:  wakeObs(false, noIdle),
			lost:   true,
			polls:  []poll{{at: time.Second, held: 6}, {at: 2 * time.Second, held: 6}, {at: 11 * time.Second, held: 6}},
			want:   []string{"1s overflow_on shop held=6", "11s overflow_on shop held=6"},
		},
		"ReadyWorkspaceHasNoCap": {
			reason: "With a ready pod the interceptor forwards at once: many requests in flight are no overflow.",
			first:  wakeObs(false, noIdle),
			polls:  []poll{{at: time.Second, held: 9, ready: ready(1)}},
		},
		"PartialPollEndsNothing": {
			reason: "What a partial poll lacks is not a request let go: the wake goes on to the next complete poll.",
			first:  wakeObs(true, info),
			polls:  []poll{{at: time.Second, held: 2}, {at: 2 * time.Second, partial: true}, {at: 3 * time.Second}},
			want:   []string{"1s wake shop held=2", "3s cold_start shop took=2s"},
		},
		"ForwardedRequestsEndTheWake": {
			reason: "A request still counted long after the timeout, with a pod ready, was forwarded: the cold start ends when the pod was seen ready.",
			first:  wakeObs(true, info),
			polls:  []poll{{at: time.Second, held: 1}, {at: 3 * time.Second, held: 1, ready: ready(1)}, {at: 35 * time.Second, held: 1}, {at: 41 * time.Second, held: 1}},
			want:   []string{"1s wake shop held=1", "41s cold_start shop took=2s"},
		},
		"NoPodLongPastTimeout": {
			reason: "Still counted past the timeout and no pod ever ready: the wake timed out.",
			first:  wakeObs(true, info),
			polls:  []poll{{at: time.Second, held: 1}, {at: 35 * time.Second, held: 1}, {at: 41 * time.Second, held: 1}},
			want:   []string{"1s wake shop held=1", "41s wake_timeout shop took=40s"},
		},
		"UnlistedRouteIsNotIdled": {
			reason: "A workspace no interceptor has a route for could not be woken again: it is never idled.",
			first:  wakeObs(false, info),
			polls:  []poll{{at: 61 * time.Second, unlisted: true}, {at: 200 * time.Second, unlisted: true}},
		},
		"FailedIdleWaitsToRetry": {
			reason: "An idle that cannot be written is tried again after wakeRetry, not at every poll.",
			first:  wakeObs(false, info),
			lost:   true,
			polls:  []poll{{at: 61 * time.Second}, {at: 62 * time.Second}, {at: 71 * time.Second}},
			want:   []string{"61s idle shop held=0", "71s idle shop held=0"},
		},
		"HalfStillHeld": {
			reason: "A client giving up does not end the wake: more than half the peak is still held.",
			first:  wakeObs(true, info),
			polls:  []poll{{at: time.Second, held: 4}, {at: 2 * time.Second, held: 3}, {at: 3 * time.Second, held: 0}},
			want:   []string{"1s wake shop held=4", "3s cold_start shop took=2s"},
		},
		"Timeout": {
			reason: "Held past the class's wake timeout, the requests got 504s: the wake timed out.",
			first:  wakeObs(true, info),
			polls:  []poll{{at: time.Second, held: 1}, {at: 31 * time.Second, held: 1}, {at: 32 * time.Second, held: 0}},
			want:   []string{"1s wake shop held=1", "32s wake_timeout shop took=31s"},
		},
		"IdleAfterInactivity": {
			reason: "No request for idleAfterSeconds, every interceptor answering: idled, once.",
			first:  wakeObs(false, info),
			polls:  []poll{{at: 30 * time.Second, count: 4}, {at: 61 * time.Second, count: 4}, {at: 95 * time.Second, count: 4}, {at: 200 * time.Second, count: 4}},
			want:   []string{"61s idle shop held=0"},
		},
		"IdleWakeIdle": {
			reason: "Idled for inactivity, woken by a request, idled again after another idleAfterSeconds.",
			first:  wakeObs(false, info),
			polls: []poll{
				{at: 61 * time.Second}, {at: 70 * time.Second, held: 1, count: 1}, {at: 72 * time.Second, count: 1},
				{at: 100 * time.Second, count: 1}, {at: 131 * time.Second, count: 1},
			},
			want: []string{"61s idle shop held=0", "70s wake shop held=1", "72s cold_start shop took=2s", "131s idle shop held=0"},
		},
		"ActivityPostponesIdle": {
			reason: "A request between polls moves the count, which counts as activity.",
			first:  wakeObs(false, info),
			polls:  []poll{{at: 10 * time.Second, count: 4}, {at: 50 * time.Second, count: 5}, {at: 100 * time.Second, count: 5}, {at: 111 * time.Second, count: 5}},
			want:   []string{"111s idle shop held=0"},
		},
		"PartialPollPostponesIdle": {
			reason: "An interceptor that did not answer might be serving the workspace: nothing is idled for idleAfterSeconds after.",
			first:  wakeObs(false, info),
			polls:  []poll{{at: 10 * time.Second}, {at: 70 * time.Second, partial: true}, {at: 100 * time.Second}, {at: 131 * time.Second}},
			want:   []string{"131s idle shop held=0"},
		},
		"PartialPollStillWakes": {
			reason: "A held request seen by the interceptors that answered is enough to wake.",
			first:  wakeObs(true, info),
			polls:  []poll{{at: time.Second, held: 1, partial: true}},
			want:   []string{"1s wake shop held=1"},
		},
		"DirectivePreventsIdle": {
			reason: "While Cluster Control holds a directive for it, the reporter does not idle the workspace.",
			first:  wakeObs(false, info),
			polls:  []poll{{at: 10 * time.Second}, {at: 90 * time.Second, directive: ccapi.ActionWake}},
		},
		"NoIdleAfter": {
			reason: "Without idleAfterSeconds the workspace is never idled.",
			first:  wakeObs(false, noIdle),
			polls:  []poll{{at: time.Hour}},
		},
		"ClassLosesFeature": {
			reason: "A class without the feature is forgotten: held requests no longer wake it.",
			first:  wakeObs(true, info),
			polls: []poll{{at: time.Second, held: 1, observe: &observation.WorkspaceStatus{Namespace: shop.Namespace, Name: shop.Name,
				Idle: true, Class: &observation.ClassInfo{Name: "on-demand"}}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			w := NewWaker(10, start, func(string) {})
			w.Observe(tc.first, start)
			// cur is the workspace as the hook last showed it.
			cur := *tc.first
			var got []string
			for _, p := range tc.polls {
				now := start.Add(p.at)
				if p.ready != nil {
					cur.ReadyReplicas = *p.ready
					w.Observe(&cur, now)
				}
				if p.observe != nil {
					w.Observe(p.observe, now)
				}
				snap := Snapshot{routes: map[string]RouteCount{routeKey(shop): {Concurrency: p.held, RequestCount: p.count}}, Interceptors: 2, Answered: 2}
				if p.unlisted {
					snap.routes = map[string]RouteCount{}
				}
				if p.partial {
					snap.Answered = 1
				}
				for _, s := range w.Decide(snap, now, func(types.NamespacedName) string { return p.directive }) {
					line := fmt.Sprintf("%gs %s %s", p.at.Seconds(), s.Action, s.Name.Name)
					if s.Action == ColdStart || s.Action == WakeTimeout {
						line += fmt.Sprintf(" took=%gs", s.Took.Seconds())
					} else {
						line += fmt.Sprintf(" held=%d", s.Held)
					}
					got = append(got, line)
					switch {
					case s.Action == Wake:
						w.Woken(s.Name)
					case s.Action == Idle && tc.lost:
						w.IdleFailed(s.Name, now)
					case s.Action == Idle:
						w.Idled(s.Name)
					case (s.Action == OverflowOn || s.Action == OverflowOff) && !tc.lost:
						cur.WakeOverflow = s.Action == OverflowOn
						w.Observe(&cur, now)
					}
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestPollAsksEachReplicaOnce resolves the admin host to a replica's IPv4
// and IPv6 addresses, as a dual-stack headless Service does: the replica
// is asked once, so its held requests count once.
func TestPollAsksEachReplicaOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"team-a/shop":{"Concurrency":2,"RequestCount":7}}`))
	}))
	t.Cleanup(srv.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPoller("http://interceptor-admin.keda:"+port, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.lookup = func(context.Context, string) ([]string, error) { return []string{"::1", "127.0.0.1"}, nil }
	snap, err := p.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := Snapshot{routes: map[string]RouteCount{"team-a/shop": {Concurrency: 2, RequestCount: 7}}, Interceptors: 1, Answered: 1}
	if diff := cmp.Diff(want, snap, cmp.AllowUnexported(Snapshot{})); diff != "" {
		t.Errorf("-want, +got:\n%s", diff)
	}
}

func TestOneFamily(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     []string
		want   []string
	}{
		"DualStack": {reason: "IPv4 wins when both are there.", in: []string{"fd00::5", "10.0.0.5", "fd00::6", "10.0.0.6"}, want: []string{"10.0.0.5", "10.0.0.6"}},
		"IPv6Only":  {reason: "An IPv6-only cluster keeps its addresses.", in: []string{"fd00::5"}, want: []string{"fd00::5"}},
		"IPv4Only":  {reason: "Nothing to drop.", in: []string{"10.0.0.5"}, want: []string{"10.0.0.5"}},
		"NoAnswers": {reason: "An empty lookup stays empty.", in: nil, want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, oneFamily(tc.in)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
