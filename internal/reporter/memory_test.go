package reporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/fleetlimits"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkMemory fills a reporter, through its localhost API, with the
// default number of workspaces (a ~1.8 KiB status each), tombstones and
// claims while Cluster Control is unreachable, so every report stays
// pending, and reports the heap and the process's resident memory. Run it
// under the sidecar's limit, as docs/reporter.md does:
//
//	GOMEMLIMIT=128MiB go test ./internal/reporter -run '^$' -bench Memory -benchtime 1x
//
// FORMSPEC_REPORTER_WORKSPACES overrides the number of workspaces;
// FORMSPEC_REPORTER_FLEET=1 fills tombstones and claims in the ratios of
// the bounds derived from the memory limit (fleetlimits.ForWorkspaces)
// instead, to check that a reporter filled to its derived bounds fits its
// limit.
func BenchmarkMemory(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("FORMSPEC_REPORTER_WORKSPACES")); err == nil {
		n = v
	}
	tombstones, claims := 5000, 20000
	if os.Getenv("FORMSPEC_REPORTER_FLEET") != "" {
		l := fleetlimits.ForWorkspaces(n)
		tombstones, claims = l.Tombstones, l.Claims
	}
	for range b.N {
		cfg := fastConfig("http://127.0.0.1:1")
		cfg.MaxWorkspaces, cfg.MaxTombstones, cfg.MaxClaims = n, tombstones, claims
		r, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		h := r.LocalHandler()
		post := func(obs []observation.Observation) {
			body, err := json.Marshal(observation.Batch{Observations: obs})
			if err != nil {
				b.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, observation.PathObservations, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNoContent {
				b.Fatalf("POST answered %d", rec.Code)
			}
		}
		var batch []observation.Observation
		flush := func() {
			if len(batch) == 128 {
				post(batch)
				batch = batch[:0]
			}
		}
		size := 0
		for i := range n {
			o := bigWorkspace(i)
			if i == 0 {
				raw, _ := json.Marshal(o)
				size = len(raw)
			}
			batch = append(batch, o)
			flush()
		}
		for i := range tombstones {
			batch = append(batch, observation.Observation{WorkspaceDeleted: &observation.WorkspaceRef{Namespace: "gone", Name: fmt.Sprintf("ws-%05d", i)}})
			flush()
		}
		for i := range claims {
			batch = append(batch, observation.Observation{Claim: &observation.ClaimDecision{Namespace: fmt.Sprintf("team-%04d", i%1000),
				Name: fmt.Sprintf("claim-%05d", i), Granted: true, Reason: "Verified", CredentialsVersion: "0123456789abcdef"}})
			flush()
		}
		if len(batch) > 0 {
			post(batch)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		c := r.st.Counts()
		if c.Pending != n+tombstones {
			b.Fatalf("pending %d, want %d (%v)", c.Pending, n+tombstones, c)
		}
		b.ReportMetric(float64(size), "B/status")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "MiB-heap")
		b.ReportMetric(rssMiB(b), "MiB-rss")
		runtime.KeepAlive(r)
	}
}

// rssMiB reads the process's resident set size from /proc.
func rssMiB(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// bigWorkspace is a workspace observation of about 1.8 KiB, shaped like a
// running workspace with three conditions and four datastores.
func bigWorkspace(i int) observation.Observation {
	at := metav1.NewTime(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var ds []v1alpha1.WorkspaceDatastoreStatus
	for _, d := range []string{"orders", "users", "sessions", "analytics"} {
		ds = append(ds, v1alpha1.WorkspaceDatastoreStatus{Name: d, Claim: fmt.Sprintf("ws-%05d-%s", i, d), State: "Injected",
			SecretName: fmt.Sprintf("ws-%05d-%s-credentials", i, d)})
	}
	return observation.Observation{Workspace: &observation.WorkspaceStatus{
		Namespace: fmt.Sprintf("team-%04d", i%1000), Name: fmt.Sprintf("ws-%05d", i), UID: "6b1f8a52-3c4d-4e5f-8a9b-0c1d2e3f4a5b",
		ClusterClass: "standard", ObservedGeneration: 12, Phase: "Ready",
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: "True", ObservedGeneration: 12, LastTransitionTime: at, Reason: "ReplicasAvailable", Message: "2 of 2 replicas are available and serving traffic through the workspace's Service on its ClusterIP port, behind the pod disruption budget"},
			{Type: "Progressing", Status: "False", ObservedGeneration: 12, LastTransitionTime: at, Reason: "RolloutComplete", Message: "every replica runs the current pod template, including its configuration, its credentials and the artifact binary Cluster Control asked for"},
			{Type: "Degraded", Status: "False", ObservedGeneration: 12, LastTransitionTime: at, Reason: "AsExpected", Message: "all datastores the workspace expects have verified claims and their credentials are injected into every pod of the Deployment"},
		},
		Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2, ArtifactHash: "sha256:9b2c4f0e1d2c3b4a5968778695a4b3c2d1e0f9e8d7c6b5a4",
		Datastores: ds, WantedArtifactHash: "sha256:9b2c4f0e1d2c3b4a5968778695a4b3c2d1e0f9e8d7c6b5a4",
		Class: &observation.ClassInfo{Name: "standard", MaxWorkspaces: 500},
	}}
}
