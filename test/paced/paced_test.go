package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with a space and a parenthesis, as /proc prints it.
	stat := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 500 0 0 0 123 45 0 0 20 0 7 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1680 * time.Millisecond; got != want {
		t.Errorf("CPU = %v, want %v (utime 123 + stime 45 ticks)", got, want)
	}
	for _, bad := range []string{"", "4242 (x) S 1 2", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 x 0"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q) = nil error", bad)
		}
	}
}

func TestPlan(t *testing.T) {
	c, err := loadCalls("../../fixtures")
	if err != nil {
		t.Fatal(err)
	}
	p := plan(c, 25, "")
	if len(p) != 25 {
		t.Fatalf("%d workspaces planned, want 25", len(p))
	}
	// Workspaces 0, 10 and 20 have a claim: 25*2 + 3*3 calls.
	if n := countCalls(p); n != 59 {
		t.Errorf("%d calls, want 59", n)
	}
	seen := map[string]bool{}
	for i, ws := range p {
		sync := ws[1]
		if sync.path != "/v1/workspace/sync" {
			t.Fatalf("workspace %d: second call is %s", i, sync.path)
		}
		name := fmt.Sprintf(`"acme-%05d"`, i)
		if !bytes.Contains(sync.body, []byte(name)) || bytes.Contains(sync.body, []byte(fixtureName)) || bytes.Contains(sync.body, []byte(fixtureUID)) {
			t.Errorf("workspace %d: sync body not renamed to %s with a uid of its own", i, name)
		}
		if seen[string(sync.body)] {
			t.Errorf("workspace %d: same body as another workspace", i)
		}
		seen[string(sync.body)] = true
		if got, want := len(ws), 2; i%claimEvery == 0 && got != 5 || i%claimEvery != 0 && got != want {
			t.Errorf("workspace %d: %d calls", i, got)
		}
	}
	claims := plan(c, 25, "resourceclaim")
	if len(claims) != 3 || countCalls(claims) != 9 {
		t.Errorf("-only resourceclaim: %d workspaces, %d calls, want 3 and 9", len(claims), countCalls(claims))
	}
	if len(plan(c, 25, "nothing")) != 0 {
		t.Error("-only nothing planned calls")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

// envServe makes the test binary a stand-in server (TestMain), started
// with the flags paced gives the real ones: hooks on TLS (--listen,
// --tls-cert-file, --tls-key-file) that answer {} to a call with the
// token and, given --reporter-url as the hook server is, hand one
// observation to it after each sync; and a readyz on --metrics-listen.
const envServe = "PACED_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(envServe) != "" {
		flags := map[string]string{}
		for i, a := range os.Args[1:] {
			if strings.HasPrefix(a, "--") && i+2 < len(os.Args) {
				flags[a] = os.Args[i+2]
			}
		}
		go func() {
			_ = http.ListenAndServe(flags["--metrics-listen"], http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		}()
		err := http.ListenAndServeTLS(flags["--listen"], flags["--tls-cert-file"], flags["--tls-key-file"], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Read the whole request before answering, as the real
			// servers do. A server that answers first and closes (the
			// client asks for no keep-alive) can reset the connection
			// while the client still writes a large body: the client
			// then sees "broken pipe", not the answer.
			_, _ = io.Copy(io.Discard, r.Body)
			if r.Header.Get("Authorization") != "Bearer "+token || r.Method != http.MethodPost {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			if reporter := flags["--reporter-url"]; reporter != "" && strings.HasSuffix(r.URL.Path, "/sync") {
				if resp, err := http.Post(reporter+"/v1/observations", "application/json", strings.NewReader("[]")); err == nil {
					_ = resp.Body.Close()
				}
			}
			_, _ = w.Write([]byte("{}"))
		}))
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestMeasure runs one round against two stand-in servers: every planned
// call is posted to each, at the pace asked for, and the hand-offs and
// connections are counted.
func TestMeasure(t *testing.T) {
	c, err := loadCalls("../../fixtures")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	var started atomic.Int32
	t.Setenv(envServe, "1")
	standIn := func(name string) serverSpec {
		hooks := e.hooksCommand(os.Args[0])
		return serverSpec{name: name, command: func(listen, metrics string) *exec.Cmd {
			started.Add(1)
			return hooks(listen, metrics)
		}}
	}
	p := plan(c, 21, "")
	start := time.Now()
	ms, handoffs, err := e.measure(context.Background(), []serverSpec{standIn("a"), standIn("b")}, p, options{rate: 100, idle: 0})
	if err != nil {
		t.Fatal(err)
	}
	if started.Load() != 2 || len(ms) != 2 {
		t.Fatalf("%d servers started, %d measured; want 2", started.Load(), len(ms))
	}
	for i, m := range ms {
		if m.calls != countCalls(p) || m.failed != 0 {
			t.Errorf("server %d: %d calls, %d failed; want %d and none", i, m.calls, m.failed, countCalls(p))
		}
		// The 21 workspaces' ticks are 10 ms apart.
		if m.elapsed < 200*time.Millisecond {
			t.Errorf("server %d: the round took %v: not paced at 100 workspaces a second", i, m.elapsed)
		}
		// With no idle connection kept, each call opens its own, and the
		// warm-up's are not counted. (With idle connections, a fast server
		// may answer the whole round on the warm-up's one.)
		if m.first <= 0 {
			t.Errorf("server %d: the first calls took %v", i, m.first)
		}
		if m.handshakes != int64(countCalls(p)) || m.cpu < 0 {
			t.Errorf("server %d: %d handshakes, CPU %v; want %d handshakes", i, m.handshakes, m.cpu, countCalls(p))
		}
	}
	// 21 workspaces, 3 with a claim: 21 workspace syncs and 6 claim syncs
	// for each stand-in, the warm-up's syncs before the count was reset.
	if handoffs != 2*27 {
		t.Errorf("%d hand-off POSTs counted, want %d", handoffs, 2*27)
	}
	if time.Since(start) < 2*flushFor {
		t.Errorf("the round took %v, less than its two waits for the hand-off", time.Since(start))
	}
}

// TestRun runs the command with stand-ins for the three servers: every
// round measures each, and the summary sets each beside the trivial hook
// and the second build beside the first.
func TestRun(t *testing.T) {
	t.Setenv(envServe, "1")
	self := os.Args[0]
	var out bytes.Buffer
	err := run([]string{"-hooks", self, "-trivial", self, "-also", self, "-fixtures", "../../fixtures",
		"-workspaces", "10", "-rate", "100", "-rounds", "2"}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"10 workspaces with calls to post, at 100 a second, 23 calls a round",
		"round 1  formspec-hooks     23 calls", "round 1  trivial            23 calls", "round 1  also               23 calls",
		"round 2  formspec-hooks", "round 2  trivial", "round 2  also",
		// Only the two hook servers hand off: 10 workspace and 2 claim
		// syncs each.
		"round 1  hand-off POSTs from the hook servers: 24",
		"against the trivial hook", "also against formspec-hooks",
		// Workspace 0 has a claim: its five calls are each server's first.
		"first 5 calls", "first calls (ms)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if err := run([]string{"-hooks", self}, &out); err == nil || !strings.Contains(err.Error(), "-trivial") {
		t.Errorf("without -trivial: %v, want an error naming it", err)
	}
}
