package reporter

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
	"github.com/formspec/formspec-hooks/internal/reporter/wake"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"k8s.io/apimachinery/pkg/types"
)

// fakeInterceptor serves GET /queue like the add-on's admin API.
type fakeInterceptor struct {
	mu     sync.Mutex
	counts map[string]wake.RouteCount
}

func (f *fakeInterceptor) set(key string, held int, count int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts[key] = wake.RouteCount{Concurrency: held, RequestCount: count}
}

func (f *fakeInterceptor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != wake.QueuePath {
		http.NotFound(w, r)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(f.counts)
}

// TestWakeOnRequest runs the wake loop against a fake interceptor, a fake
// API and the reference Cluster Control: a held request removes
// formspec.dev/idle, records a Woken Event for the request, reports the
// wake with its reason, and its cold start is observed once the request
// is answered.
func TestWakeOnRequest(t *testing.T) {
	cc, url := startCC(t, clustercontrol.Options{})
	fi := &fakeInterceptor{counts: map[string]wake.RouteCount{}}
	srv := httptest.NewServer(fi)
	t.Cleanup(srv.Close)
	fc := newFakeCluster(t, "team-a/shop")
	if _, err := fc.dyn.Resource(kube.WorkspacesResource).Namespace("team-a").Patch(context.Background(), "shop", types.MergePatchType,
		kube.AnnotationPatch(v1alpha1.AnnotationIdle, "true"), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig(url)
	cfg.Kube = fc.clients()
	cfg.InterceptorAdminURL = srv.URL
	cfg.InterceptorPollInterval = 5 * time.Millisecond
	r := newReporter(t, cfg)
	mustObserve(t, r, observation.Observation{Workspace: &observation.WorkspaceStatus{Namespace: "team-a", Name: "shop", UID: "u-1",
		Phase: v1alpha1.PhaseIdle, Idle: true, ClusterClass: "on-demand",
		Class: &observation.ClassInfo{Name: "on-demand", Wake: &observation.WakeInfo{TimeoutSeconds: 60, MaxHeldRequests: 10}}}})
	runLoops(t, r.runWorkspaceSender, r.runWake, func(ctx context.Context) {
		if err := r.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
			t.Error(err)
		}
		<-ctx.Done()
		r.broadcaster.Shutdown()
	})

	fi.set("team-a/shop", 1, 1)
	testsync.WaitFor(t, "the workspace to be woken", func() bool {
		_, idle := fc.annotations(t, "team-a/shop")[v1alpha1.AnnotationIdle]
		return !idle
	})
	testsync.WaitFor(t, "the wake reported with its reason", func() bool {
		for _, a := range cc.AutoScales() {
			if a.Name == "shop" && a.Action == ccapi.AutoScaleWake && a.Reason == ccapi.ReasonRequest {
				return true
			}
		}
		return false
	})
	testsync.WaitFor(t, "a Woken Event for the request", func() bool {
		for _, e := range fc.eventList(t) {
			if e.Reason == "Woken" && e.Action == "Request" && e.Regarding.Name == "shop" && strings.Contains(e.Note, "held by the interceptor") {
				return true
			}
		}
		return false
	})
	fi.set("team-a/shop", 0, 1)
	testsync.WaitFor(t, "the cold start observed", func() bool { return histogramCount(t, r, "answered") == 1 })
}

// histogramCount is how many cold starts of a result the reporter observed.
func histogramCount(t *testing.T, r *Reporter, result string) uint64 {
	t.Helper()
	families, err := r.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "formspec_reporter_wake_cold_start_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}
