package docs

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// demoPorts are the Makefile variables of `make run`'s six ports.
var demoPorts = []string{"HOOKS_PORT", "METRICS_PORT", "REPORTER_PORT", "REPORTER_METRICS_PORT", "CC_PORT", "CC_ADMIN_PORT"}

// TestMakeRunPorts runs `make run` with each of its six ports set to a
// free one and checks that every process listens where the variables say
// and reaches the others there: a fixture posted to the hook port reaches
// Cluster Control through the reporter. Cluster Control's admin API answers
// only to the token make run wrote for it.
func TestMakeRunPorts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building and running the demo")
	}
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Skip("make not found: .ci/run runs make test, so CI has it; skipping the demo's ports")
	}
	bin := t.TempDir()
	// Build first, so that the ports below are free for the seconds make
	// run takes to start rather than for a whole build.
	build := exec.Command(makeBin, "--no-print-directory", "build", "BIN="+bin)
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	url := func(port map[string]string, v, path string) string { return "http://127.0.0.1:" + port[v] + path }
	// The admin API takes the token make run writes next to the binaries.
	adminToken := filepath.Join(bin, "clustercontrol-admin.token")
	getWith := func(u, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return 0, err.Error()
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	get := func(u string) (int, string) { return getWith(u, "") }
	getAdmin := func(port map[string]string, path string) (int, string) {
		token, err := os.ReadFile(adminToken)
		if err != nil {
			return 0, err.Error()
		}
		return getWith(url(port, "CC_ADMIN_PORT", path), string(token))
	}
	ready := func(port map[string]string) bool {
		a, _ := get(url(port, "METRICS_PORT", "/readyz"))
		b, _ := get(url(port, "REPORTER_METRICS_PORT", "/readyz"))
		c, _ := getAdmin(port, "/admin/state")
		return a == http.StatusOK && b == http.StatusOK && c == http.StatusOK
	}
	// A port that was free when picked is an ephemeral one, which an
	// outgoing connection of a test running alongside can take before
	// make run binds it: a run that stops on "address already in use" is
	// tried again on other ports.
	const attempts = 3
	var port map[string]string
	for attempt := 1; ; attempt++ {
		var logs string
		port, logs = startMakeRun(t, makeBin, bin, ready)
		if logs == "" {
			break
		}
		if attempt == attempts || !strings.Contains(logs, "address already in use") {
			t.Fatalf("make run stopped before its three processes were ready:\n%s", logs)
		}
		t.Logf("make run could not bind a port it was given, trying other ports:\n%s", logs)
	}

	body, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "workspace", "sync", "steady-ready", "request.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Post(url(port, "HOOKS_PORT", "/v1/workspace/sync"), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST a fixture to HOOKS_PORT: %s", resp.Status)
	}
	if code, _ := get(url(port, "CC_PORT", "/v1/deploy-status")); code != http.StatusOK {
		t.Errorf("GET /v1/deploy-status on CC_PORT: %d", code)
	}
	if resp, err := client.Post(url(port, "REPORTER_PORT", "/v1/observations"), "application/json", strings.NewReader(`{"observations":[]}`)); err != nil || resp.StatusCode/100 != 2 {
		t.Errorf("POST /v1/observations on REPORTER_PORT: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	testsync.WaitWithin(t, time.Minute, "Cluster Control, on CC_PORT, to hear of the workspace posted to HOOKS_PORT through REPORTER_PORT", func() bool {
		_, state := getAdmin(port, "/admin/state")
		return strings.Contains(state, `"team-a/acme"`)
	})
	// The admin API decides what the reporter writes onto Workspaces:
	// without the token it answers nothing.
	if code, _ := get(url(port, "CC_ADMIN_PORT", "/admin/state")); code != http.StatusUnauthorized {
		t.Errorf("GET /admin/state on CC_ADMIN_PORT without the token: %d, want 401", code)
	}
	if info, err := os.Stat(adminToken); err != nil {
		t.Error(err)
	} else if info.Mode().Perm() != 0o600 {
		t.Errorf("the admin token file %s has mode %v, want 0600: only you may use the admin API", adminToken, info.Mode().Perm())
	}
}

// TestDemoPortsDocumented checks that the Makefile's demo port variables
// are the six the README names, each with its default.
func TestDemoPortsDocumented(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := []byte(strings.Join(strings.Fields(string(raw)), " "))
	var inMakefile, inReadme []string
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+_PORT) +\?= (\d+)$`).FindAllStringSubmatch(string(mk), -1) {
		inMakefile = append(inMakefile, m[1])
		if bytes.Contains(readme, []byte("`"+m[1]+"` ("+m[2]+")")) {
			inReadme = append(inReadme, m[1])
		}
	}
	if diff := cmp.Diff(demoPorts, inMakefile); diff != "" {
		t.Errorf("port variables of the Makefile: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(inMakefile, inReadme); diff != "" {
		t.Errorf("port variables the README documents as `NAME` (default): -want (the Makefile's), +got:\n%s", diff)
	}
}

// startMakeRun starts `make run` with the binaries in bin and each of its
// six ports set to a free one, and waits until ready holds for them. It
// returns the ports and, if make run stopped first, its output (else "").
// A run that is ready is stopped when the test ends.
func startMakeRun(t *testing.T, makeBin, bin string, ready func(port map[string]string) bool) (map[string]string, string) {
	t.Helper()
	port := map[string]string{}
	args := []string{"--no-print-directory", "run", "BIN=" + bin}
	free := controlplane.FreePorts(t, len(demoPorts))
	for i, v := range demoPorts {
		p := strconv.Itoa(free[i])
		port[v] = p
		args = append(args, v+"="+p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, makeBin, args...)
	cmd.Dir = "../.."
	// make passes SIGTERM on to the recipe, whose EXIT trap stops all
	// three; its own process group lets the cleanup reach a straggler.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var logs testsync.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-exited
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cancel()
	}
	var stopped bool
	testsync.WaitWithin(t, 3*time.Minute, "the three processes of make run to be ready", func() bool {
		select {
		case <-exited:
			stopped = true
			return true
		default:
		}
		return ready(port)
	})
	if stopped {
		stop()
		return port, logs.String()
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("make run:\n%s", logs.String())
		}
	})
	return port, ""
}
