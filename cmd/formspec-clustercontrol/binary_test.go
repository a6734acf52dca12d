package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/clustercontrol"
)

// built is the binary, built once per test binary: the tests below are
// about what the command does as people run it.
var built struct {
	once sync.Once
	path string
	err  error
}

func buildBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building the binary")
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "formspec-clustercontrol-test-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, program)
		if out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.path != "" {
		_ = os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}

// process is the binary running on ports of its choosing.
type process struct {
	api, admin string
	pid        int
}

// start runs the binary with args and --log-format json on ports the
// kernel picks, and reads where it listens from its starting line.
func start(t *testing.T, args ...string) process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, buildBinary(t), append([]string{"--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(stderr)
	var log []string
	for lines.Scan() {
		log = append(log, lines.Text())
		var line struct{ Msg, Listen, Admin string }
		if json.Unmarshal(lines.Bytes(), &line) == nil && line.Msg == "reference cluster control starting" {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return process{api: "http://" + line.Listen, admin: "http://" + line.Admin, pid: cmd.Process.Pid}
		}
	}
	t.Fatalf("%s did not start:\n%s", program, strings.Join(log, "\n"))
	return process{}
}

// tokenFile writes tokens in the project's token-file format.
func tokenFile(t *testing.T, tokens ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(strings.Join(tokens, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// call sends one request and returns its status and body.
func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdminAPINeedsToken runs the binary and calls its admin API, which
// sets the directives a reporter writes onto Workspaces, with no token, a
// wrong one, the API's own (which is not an admin token) and the right
// one: only the last gets through.
func TestAdminAPINeedsToken(t *testing.T) {
	p := start(t, "--auth-token-file", tokenFile(t, "reporter-token"), "--admin-token-file", tokenFile(t, "old-admin-token", "admin-token"))
	directive := `{"namespace":"team-a","name":"shop","artifactHash":"sha256:new"}`
	type answer struct {
		Request string
		Status  int
	}
	var got []answer
	for _, tc := range []struct{ method, path, token, body string }{
		{"GET", "/admin/state", "", ""},
		{"PUT", "/admin/directives", "", directive},
		{"PUT", "/admin/directives", "nope", directive},
		{"PUT", "/admin/directives", "reporter-token", directive},
		{"DELETE", "/admin/faults", "", ""},
		{"PUT", "/admin/directives", "admin-token", directive},
		{"GET", "/admin/state", "old-admin-token", ""},
	} {
		code, _ := call(t, tc.method, p.admin+tc.path, tc.token, tc.body)
		token := tc.token
		if token == "" {
			token = "(no token)"
		}
		got = append(got, answer{tc.method + " " + tc.path + " " + token, code})
	}
	want := []answer{
		{"GET /admin/state (no token)", 401},
		{"PUT /admin/directives (no token)", 401},
		{"PUT /admin/directives nope", 401},
		{"PUT /admin/directives reporter-token", 401},
		{"DELETE /admin/faults (no token)", 401},
		{"PUT /admin/directives admin-token", 204},
		{"GET /admin/state old-admin-token", 200},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("admin API answers: -want, +got:\n%s", diff)
	}
	// Only the authorized directive was taken.
	if code, body := call(t, "GET", p.api+ccapi.PathDeployStatus, "reporter-token", ""); code != 200 || strings.Count(body, `"name":"shop"`) != 1 {
		t.Errorf("deploy-status: %d %s, want the one directive", code, body)
	}
}

// bigNodeReport is a node-health report of about size bytes: nodes with
// many labels, as a large cluster's reporter could send.
func bigNodeReport(t *testing.T, size int) []byte {
	t.Helper()
	rep := ccapi.NodeHealthReport{Reporter: "burst", SentAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	labels := map[string]string{}
	for i := range 16 {
		labels[fmt.Sprintf("formspec.dev/label-%02d", i)] = strings.Repeat("v", 40)
	}
	node := func(i int) ccapi.NodeHealth {
		return ccapi.NodeHealth{Name: fmt.Sprintf("pool-a-%05d", i), Health: ccapi.HealthHealthy, Labels: labels,
			Conditions: []ccapi.NodeCondition{{Type: "Ready", Status: "True", Reason: "KubeletReady"}}}
	}
	one, err := json.Marshal(node(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := range size / (len(one) + 1) {
		rep.Nodes = append(rep.Nodes, node(i))
	}
	body, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// outsideGoHeap is what the process's resident set may hold beside the Go
// runtime's memory limit: the binary's pages (about 10 MiB), thread
// stacks, and what the collector has yet to give back of a soft limit
// (runs here peaked 8 to 23 MiB over it).
const outsideGoHeap = 48 << 20

// peakRSS is the process's VmHWM, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc to read the peak resident set from: %v", err)
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// TestNodeHealthBurstStaysWithinBudget posts what the issue that capped the
// server by bytes measured, 30 node-health reports of 14.7 MB (then 667 MiB
// resident, for good), to the binary with its default budget, two at a
// time: the bytes it keeps stay within --max-stored-bytes, the newest
// report is among them, and the process's resident set peaks within the
// memory limit it sets itself (Server.MemoryLimit: what it keeps and the
// body in flight) and what the runtime holds beside it.
func TestNodeHealthBurstStaysWithinBudget(t *testing.T) {
	p := start(t, "--admin-token-file", tokenFile(t, "admin-token"))
	body := bigNodeReport(t, 14_700_000)
	const posts, together = 30, 2
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range together {
		wg.Go(func() {
			for range posts / together {
				code, msg := call(t, "POST", p.api+ccapi.PathNodeHealth, "", string(body))
				mu.Lock()
				codes[code]++
				mu.Unlock()
				if code != 200 {
					t.Errorf("POST %d bytes: %d %s", len(body), code, msg)
				}
			}
		})
	}
	wg.Wait()
	peak := peakRSS(t, p.pid)
	code, raw := call(t, "GET", p.admin+"/admin/state", "admin-token", "")
	var st clustercontrol.AdminState
	if err := json.Unmarshal([]byte(raw), &st); code != 200 || err != nil {
		t.Fatalf("GET /admin/state: %d %v %.200s", code, err, raw)
	}
	t.Logf("%d posts of %d bytes, %d at a time: answers %v; stored %.1f MiB of %.1f MiB; peak RSS %.1f MiB",
		posts, len(body), together, codes, float64(st.Stored.Bytes)/(1<<20), float64(st.Stored.MaxBytes)/(1<<20), float64(peak)/(1<<20))
	if st.Stored.MaxBytes <= 0 || st.Stored.Bytes > st.Stored.MaxBytes {
		t.Errorf("stored %d bytes, want at most the budget, %d", st.Stored.Bytes, st.Stored.MaxBytes)
	}
	if st.LastNodeHealth == nil || len(st.LastNodeHealth.Nodes) == 0 {
		t.Errorf("the newest node-health report is not kept")
	}
	if limit := clustercontrol.New(clustercontrol.Options{}).MemoryLimit() + outsideGoHeap; peak > limit {
		t.Errorf("peak resident set %.1f MiB, want at most %.1f MiB", float64(peak)/(1<<20), float64(limit)/(1<<20))
	}
}
