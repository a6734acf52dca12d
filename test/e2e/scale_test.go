package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// Environment variables of TestScale (make scale sets them).
const (
	// EnvScale turns TestScale on: the fleet sizes to run, e.g.
	// FORMSPEC_E2E_SCALE="1000 3000 10000".
	EnvScale = "FORMSPEC_E2E_SCALE"
	// EnvScaleQPS is Metacontroller's --client-go-qps (default 50; the
	// burst is twice it). At 50 Metacontroller's client rate sets the pace
	// and the API server keeps up on one CPU of this 2-core machine, as on
	// a cluster whose control plane has machines of its own; at 300 the
	// CPU each run shares with its API server and etcd is the limit, and
	// the time to converge is the sum of the CPU every process spent.
	EnvScaleQPS = "FORMSPEC_E2E_SCALE_QPS"
	// EnvScaleSteady is how long the steady state is measured (a Go
	// duration; default the workspace controller's resync period, and at
	// least two minutes).
	EnvScaleSteady = "FORMSPEC_E2E_SCALE_STEADY"
	// EnvScaleResync replaces the workspace controller's
	// resyncPeriodSeconds, to measure another period than the shipped one.
	EnvScaleResync = "FORMSPEC_E2E_SCALE_RESYNC"
	// EnvScaleCPUs is "shared" to run the two hooks' fleets one after
	// the other on every CPU, instead of at the same time on a CPU each
	// (the default, given two CPUs). "hooks-apart" runs them at the same
	// time with both hook servers (and the reporter) on the second CPU
	// and everything else of both fleets on the first, so that each hook
	// server's CPU per call is measured on a CPU nothing busy shares.
	EnvScaleCPUs = "FORMSPEC_E2E_SCALE_CPUS"
	// EnvScaleTrivialAnswer is "hooks" to have the trivial hook answer a
	// Workspace sync with the hook server's objects (its first-sync
	// fixture's children and status, see test/e2e/trivialhook) rather
	// than with its constant, smaller ones, so that the two fleets apply
	// the same objects and differ only by their hook's own work.
	// "hooks-with-claims" has it also grant every ResourceClaim as the
	// hook server does (the granted-v2 fixture's status and credentials
	// Secret), and ask for what the hooks' claim customize asks for, so
	// that both fleets also write each claim's status and Secret.
	EnvScaleTrivialAnswer = "FORMSPEC_E2E_SCALE_TRIVIAL_ANSWER"
	// EnvScaleRounds is how many times each size runs both hooks
	// (default 1), alternating which goes first; the figures printed are
	// the medians of the rounds.
	EnvScaleRounds = "FORMSPEC_E2E_SCALE_ROUNDS"
	// EnvScaleProfile names a directory for CPU profiles of the hook
	// server and Metacontroller over the first profileFor of each
	// convergence, and of the hook server in the steady state.
	EnvScaleProfile = "FORMSPEC_E2E_SCALE_PROFILE"
	// EnvScaleReporterMemory is the reporter's GOMEMLIMIT (e.g. 128MiB),
	// as the installs set it from the sidecar's memory limit, so that it
	// derives its bounds from it and its heap is measured under it.
	// Unset: no limit, today's default bounds.
	EnvScaleReporterMemory = "FORMSPEC_E2E_SCALE_REPORTER_MEMORY"
)

// profileFor is the length of the converge profile EnvScaleProfile asks
// for; the steady one covers the window, up to the profiler's limit.
const profileFor = 20 * time.Second

// scaleTimeout bounds each phase of a run: a guard against a hang, not a
// performance assertion.
const scaleTimeout = 60 * time.Minute

// Knobs of a run that are not worth a variable.
const (
	// scaleWriters is how many writes the test makes at once.
	scaleWriters = 16
	// progressEvery is how often a waiting run says where it is.
	progressEvery = 15 * time.Second
	// probeEvery is how often the steady state changes one workspace's
	// spec to time how long the change waits behind the resync.
	probeEvery = 5 * time.Second
	// injectedWithin bounds the wait for every claim's credentials after
	// the workspaces have converged.
	injectedWithin = 10 * time.Minute
	// drainWithin bounds the wait for Metacontroller to finish the fleet's
	// syncs before the steady state is measured.
	drainWithin = 10 * time.Minute
	// queueEvery is how often the steady state samples Metacontroller's
	// workspace queue.
	queueEvery = 5 * time.Second
)

// The two hook servers of a run.
const (
	variantHooks   = "formspec-hooks"
	variantTrivial = "trivial"
)

// TestScale is a benchmark, not a check: it prints figures and asserts
// none of them. For each fleet size of FORMSPEC_E2E_SCALE it runs the
// fleet (scale_fleet_test.go) twice, side by side, each time on a fresh
// control plane under the real Metacontroller at a raised client QPS with
// server-side apply and the controller definitions of compositecontrollers/
// unchanged: once with the hook server and its reporter beside the
// reference Cluster Control, once with a trivial hook (test/e2e/trivialhook)
// in the hook server's place. Each run creates the fleet and waits until
// every Workspace has its children and a status for its generation
// (converge), then plays the Deployment controller and the kubelet for
// every workspace (fleet), then measures an idle fleet, where only the
// resyncs run, while it changes one workspace's spec every few seconds to
// time how long a change waits (steady). It prints, per size, the figures
// of both runs and their ratios, and at the end how each grows with N.
//
//	FORMSPEC_E2E_SCALE="1000 3000 10000" METACONTROLLER_BIN=... go test ./test/e2e -run TestScale -v -timeout 0
func TestScale(t *testing.T) {
	var sizes []int
	for _, f := range strings.FieldsFunc(os.Getenv(EnvScale), func(r rune) bool { return r == ' ' || r == ',' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: %q is not a number of Workspaces", EnvScale, os.Getenv(EnvScale), f)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) == 0 {
		t.Skip(EnvScale + " is not set to fleet sizes (e.g. \"1000 3000 10000\"): skipping the scale benchmark; see docs/testing.md")
	}
	opts := scaleOptions{qps: 50, rounds: 1, profile: os.Getenv(EnvScaleProfile), reporterMemory: os.Getenv(EnvScaleReporterMemory)}
	opts.rounds = positiveEnv(t, EnvScaleRounds, opts.rounds)
	opts.qps = positiveEnv(t, EnvScaleQPS, opts.qps)
	opts.resync = positiveEnv(t, EnvScaleResync, opts.resync)
	if v := os.Getenv(EnvScaleSteady); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q is not a positive duration", EnvScaleSteady, v)
		}
		opts.steady = d
	}
	if os.Getenv(controlplane.EnvBinDir) == "" {
		// Where startEnv would look, set here: a parallel subtest may not
		// set the environment.
		if home, err := os.UserHomeDir(); err == nil {
			t.Setenv(controlplane.EnvBinDir, filepath.Join(home, ".cache", "formspec-hooks", "k8s-"+k8sVersion))
		}
	}
	switch v := os.Getenv(EnvScaleCPUs); v {
	case "", "hooks-apart":
		if cpus, err := usableCPUs(); err == nil && len(cpus) >= 2 {
			opts.cpus, opts.hooksApart = cpus[:2], v == "hooks-apart"
		}
	case "shared":
	default:
		t.Fatalf("%s=%q: want shared or hooks-apart, or nothing", EnvScaleCPUs, v)
	}
	switch v := os.Getenv(EnvScaleTrivialAnswer); v {
	case "":
	case "hooks", "hooks-with-claims":
		opts.trivialAnswer = filepath.Join(controlplane.RepoRoot(t), "fixtures", "workspace", "sync", "first-sync", "response.json")
		if v == "hooks-with-claims" {
			opts.trivialClaimAnswer = filepath.Join(controlplane.RepoRoot(t), "fixtures", "resourceclaim", "sync", "granted-v2", "response.json")
		}
	default:
		t.Fatalf("%s=%q: want hooks, hooks-with-claims, or nothing", EnvScaleTrivialAnswer, v)
	}
	var all []scaleResult
	for _, n := range sizes {
		var mu sync.Mutex
		runs := map[string][]scaleResult{}
		record := func(r scaleResult) {
			mu.Lock()
			defer mu.Unlock()
			runs[r.variant] = append(runs[r.variant], r)
		}
		for round := range opts.rounds {
			order := []string{variantHooks, variantTrivial}
			if round%2 == 1 {
				// Swapped, so that neither always has the first CPU (which
				// takes more interrupts) or, one after the other, always
				// goes first while the machine's load drifts.
				slices.Reverse(order)
			}
			if opts.cpus == nil {
				for _, variant := range order {
					t.Run(fmt.Sprintf("N=%d/round-%d/%s", n, round+1, variant), func(t *testing.T) {
						record(runScale(t, n, variant, opts, -1))
					})
				}
				continue
			}
			t.Run(fmt.Sprintf("N=%d/round-%d", n, round+1), func(t *testing.T) {
				for i, variant := range order {
					t.Run(variant, func(t *testing.T) {
						t.Parallel()
						record(runScale(t, n, variant, opts, opts.cpus[i]))
					})
				}
			})
		}
		if len(runs[variantHooks]) > 0 && len(runs[variantHooks]) == len(runs[variantTrivial]) {
			printScale(os.Stdout, opts, runs[variantHooks], runs[variantTrivial])
			all = append(all, runs[variantHooks]...)
			all = append(all, runs[variantTrivial]...)
		}
	}
	printGrowth(os.Stdout, all)
}

// positiveEnv is the positive whole number the environment variable name
// holds, or def when it is not set.
func positiveEnv(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q is not a positive whole number", name, v)
	}
	return n
}

// scaleOptions are a TestScale's settings.
type scaleOptions struct {
	qps int
	// steady is the length of the steady-state window; 0 for the default.
	steady time.Duration
	// resync replaces the workspace controller's period when not 0.
	resync int
	// rounds is how many times each size runs.
	rounds int
	// cpus are the two CPUs the runs of a round use at the same time, one
	// each; nil runs them one after the other on every CPU.
	cpus []int
	// hooksApart puts both hook servers and the reporter on cpus[1] and
	// the rest of both runs on cpus[0] (EnvScaleCPUs).
	hooksApart bool
	// profile is where CPU profiles of the hook server go, if anywhere.
	profile string
	// trivialAnswer is the hook server's answer the trivial hook answers
	// like (its --answer-like), if any (EnvScaleTrivialAnswer).
	trivialAnswer string
	// trivialClaimAnswer is the hook server's claim grant the trivial
	// hook grants every claim like (its --claim-answer-like), if any.
	trivialClaimAnswer string
	// reporterMemory is the reporter's GOMEMLIMIT, if any
	// (EnvScaleReporterMemory).
	reporterMemory string
}

// scaleResult is what one run measured.
type scaleResult struct {
	n       int
	variant string
	resync  int
	// created is how long creating the fleet took, converged how long
	// until every workspace had converged, injected until every claim's
	// credentials were injected (0 if that did not happen in time, or for
	// the trivial hook, which injects none), all from the first create.
	created, converged, injected time.Duration
	// fleetTook is how long the fleet phase took.
	fleetTook time.Duration
	// converge, fleet and steady are the phases.
	converge, fleet, steady delta
	// peak is each process's VmHWM at the end.
	peak map[string]int64
	// reporterHeap is the reporter's heap in use after converging and at
	// the end (with the fleet's pods known too).
	reporterHeap, reporterHeapEnd float64
	// reporterDropped is how many observations the reporter dropped at
	// one of its bounds (--max-workspaces, --max-pods, ...) by the end.
	reporterDropped float64
	// nodeReportWorkspaces is what the last node-health report counted.
	nodeReportWorkspaces int
	probes               []time.Duration
	probesWaiting        int
	// undrained is the workspace queue's depth when it did not drain
	// before the steady state (0 when it did); queueMax and queueMean are
	// its largest and mean depth in the steady state.
	undrained, queueMax, queueMean float64
}

// runScale runs one fleet of n workspaces with one hook server and
// measures it; cpu, unless negative, is the CPU every process of its
// environment is kept on.
func runScale(t *testing.T, n int, variant string, opts scaleOptions, cpu int) scaleResult {
	res := scaleResult{n: n, variant: variant, peak: map[string]int64{}}
	f := newFleet(n)
	logf := func(format string, args ...any) {
		t.Logf("N=%d %s: "+format, append([]any{n, variant}, args...)...)
	}

	cfg := envConfig{
		// Production logging: the e2e tests' debug logs would weigh on
		// the hook server and Metacontroller at this size.
		hookArgs: []string{"--log-level=info"},
		mcArgs: []string{
			"--client-go-qps=" + strconv.Itoa(opts.qps),
			"--client-go-burst=" + strconv.Itoa(2*opts.qps),
			"--zap-log-level=info",
		},
		editController: func(t *testing.T, obj controlplane.Object) {
			if objName(obj) != "formspec-workspace" {
				return
			}
			if opts.resync > 0 {
				field(obj, "spec").(map[string]any)["resyncPeriodSeconds"] = opts.resync
			}
			res.resync = int(asInt(field(obj, "spec", "resyncPeriodSeconds")))
		},
	}
	if variant == variantTrivial {
		cfg.startHooks = func(t *testing.T, e *env, listen, metricsListen, certFile, keyFile string) *controlplane.Process {
			return startTrivialHook(t, e, listen, metricsListen, certFile, keyFile, opts.trivialAnswer, opts.trivialClaimAnswer)
		}
	}
	var mcPprof string
	if opts.profile != "" {
		cfg.hookArgs = append(cfg.hookArgs, "--pprof")
		mcPprof = "127.0.0.1:" + strconv.Itoa(controlplane.FreePorts(t, 1)[0])
		cfg.mcArgs = append(cfg.mcArgs, "--pprof-address="+mcPprof)
	}
	e := startEnvWith(t, cfg)
	steady := opts.steady
	if steady == 0 {
		steady = max(2*time.Minute, time.Duration(res.resync)*time.Second)
	}

	procs := map[string]*controlplane.Process{"hooks": e.hooks, "metacontroller": e.mc}
	var cc *countingClusterControl
	var reporterMetrics string
	if variant == variantHooks {
		cc = startCountingClusterControl(t)
		port := controlplane.FreePorts(t, 1)[0]
		reporterMetrics = "http://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
		ri := e.installReporter(t)
		if opts.reporterMemory != "" {
			ri.env = []string{"GOMEMLIMIT=" + opts.reporterMemory}
		}
		procs["reporter"] = ri.start(t, e, cc.addr, port, "--log-level=info")
	}

	if cpu >= 0 {
		pids, err := processesMentioning(e.cp.Dir)
		if err != nil {
			t.Fatal(err)
		}
		var hookPids []int
		for name, p := range procs {
			if opts.hooksApart && name != "metacontroller" {
				hookPids = append(hookPids, p.Pid())
				continue
			}
			pids = append(pids, p.Pid())
		}
		if opts.hooksApart {
			cpu = opts.cpus[0]
			if err := pinProcesses(opts.cpus[1], hookPids...); err != nil {
				t.Fatal(err)
			}
			logf("%d hook processes kept on CPU %d, with the other run's", len(hookPids), opts.cpus[1])
		}
		if err := pinProcesses(cpu, pids...); err != nil {
			t.Fatal(err)
		}
		logf("%d processes kept on CPU %d", len(pids), cpu)
	}

	restCfg := &rest.Config{Host: e.cp.URL, BearerToken: e.cp.Token, TLSClientConfig: rest.TLSClientConfig{CAData: e.cp.CACert},
		// No client-side throttle: the test's writes should wait only on
		// the API server.
		QPS: -1}
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := metadata.NewForConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{dyn: dyn, count: map[apiKey]float64{}}
	ctx := t.Context()
	tr, err := startTracker(ctx, f, dyn, meta)
	if err != nil {
		t.Fatal(err)
	}

	take := func() sample {
		t.Helper()
		s := sample{at: time.Now(), procs: map[string]procUsage{}, writes: w.writes(), cc: cc.traffic()}
		pids := map[string]int{"test": os.Getpid(), "etcd": e.cp.EtcdPid()}
		for name, p := range procs {
			pids[name] = p.Pid()
		}
		for name, pid := range pids {
			u, err := readProc(pid)
			if err != nil {
				t.Fatalf("cannot read the usage of %s: %v", name, err)
			}
			s.procs[name] = u
		}
		families, err := scrapeURL(e.hookMetrics + "/metrics")
		if err != nil {
			t.Fatalf("cannot read the hook server's metrics: %v", err)
		}
		s.hooks, s.hookBytes = hookRequests(families), hookBytes(families)
		s.handoffs = sum(families, "formspec_hooks_reporter_handoff_batches_total")
		if families, err = scrapeURL(e.mcMetrics + "/metrics"); err != nil {
			t.Fatalf("cannot read Metacontroller's metrics: %v", err)
		}
		s.mc = mcHookCalls(families)
		if s.api, s.apiServerCPU, err = apiServerSample(e.c); err != nil {
			t.Fatalf("cannot read the API server's metrics: %v", err)
		}
		if reporterMetrics != "" {
			families, err := scrapeURL(reporterMetrics)
			if err != nil {
				t.Fatalf("cannot read the reporter's metrics: %v", err)
			}
			s.reporterHeap = first(families, "go_memstats_heap_inuse_bytes")
			s.reporterDropped = sum(families, "formspec_reporter_dropped_observations_total")
			s.summaryWrites = sum(families, "formspec_reporter_claims_summary_writes_total")
		}
		return s
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// wait polls done, saying where the run is every progressEvery.
	wait := func(what string, within time.Duration, done func(progress) bool) bool {
		t.Helper()
		start, last := time.Now(), time.Now()
		for {
			p := tr.progress()
			if done(p) {
				return true
			}
			select {
			case <-e.mc.Done():
				t.Fatalf("Metacontroller exited while waiting for %s", what)
			case <-e.hooks.Done():
				t.Fatalf("the hook server exited while waiting for %s", what)
			default:
			}
			if time.Since(start) > within {
				logf("no %s within %v: %v", what, within, p)
				return false
			}
			if time.Since(last) >= progressEvery {
				last = time.Now()
				logf("%s, %.0fs: %v", what, time.Since(start).Seconds(), p)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// The fleet's setting: classes, nodes, namespaces, Datastores.
	for _, c := range f.classes {
		must(w.create(ctx, gvrClusterClass, c.class))
	}
	since := time.Now()
	must(parallel(f.nodes(), scaleWriters, func(k int) error {
		if err := w.create(ctx, gvrNodes, f.node(k)); err != nil {
			return err
		}
		return w.applyStatus(ctx, gvrNodes, nodeStatus(f.nodeName(k), since))
	}))
	must(parallel(f.namespaces(), scaleWriters, func(k int) error {
		ns := f.namespace(k * wsPerNamespace)
		if err := w.create(ctx, gvrNamespaces, namespaceObject(ns)); err != nil {
			return err
		}
		ds, sec := f.datastore(ns)
		if err := w.create(ctx, gvrSecrets, sec); err != nil {
			return err
		}
		return w.create(ctx, gvrDatastores, ds)
	}))
	// Let the setting's own syncs (nodes, Datastores) pass first.
	if idle, _ := e.mcIdle(t, time.Minute); !idle {
		logf("Metacontroller still busy with the setting after a minute; measuring anyway")
	}

	// Converge.
	s0 := take()
	grantedAt := time.Now().Add(-time.Minute)
	logf("creating %d Workspaces (%d with a claim) in %d namespaces, %d nodes", n, f.claims(), f.namespaces(), f.nodes())
	if opts.profile != "" {
		go saveProfile(t, e.hookMetrics, filepath.Join(opts.profile, fmt.Sprintf("%s-converge-%d.pprof", variant, n)), profileFor)
		go saveProfile(t, "http://"+mcPprof, filepath.Join(opts.profile, fmt.Sprintf("%s-metacontroller-converge-%d.pprof", variant, n)), profileFor)
	}
	must(parallel(n, scaleWriters, func(i int) error {
		if f.hasClaim(i) {
			if err := w.create(ctx, gvrResourceClaim, f.claim(i, grantedAt)); err != nil {
				return err
			}
		}
		return w.create(ctx, gvrWorkspaces, f.workspace(i))
	}))
	res.created = time.Since(s0.at)
	if !wait("convergence", scaleTimeout, func(p progress) bool { return p.converged(f) }) {
		t.Fatalf("not converged within %v", scaleTimeout)
	}
	res.converged = time.Since(s0.at)
	s1 := take()
	res.converge, res.reporterHeap = s1.since(s0), s1.reporterHeap
	logf("converged in %.1fs (created in %.1fs)", res.converged.Seconds(), res.created.Seconds())
	if variant == variantHooks && wait("credentials", injectedWithin, func(p progress) bool { return p.injected >= f.claims() }) {
		res.injected = time.Since(s0.at)
	}

	// The fleet runs: every Deployment rolled out, one pod per workspace.
	fleetStart := take()
	must(parallel(n, scaleWriters, func(i int) error {
		if err := e.rollOut(ctx, w, types.NamespacedName{Namespace: f.namespace(i), Name: f.name(i)}); err != nil {
			return err
		}
		return w.create(ctx, gvrPods, f.pod(i))
	}))
	if variant == variantHooks {
		wait("Ready", scaleTimeout, func(p progress) bool { return p.ready >= n })
		wait("node report", 2*time.Minute, func(progress) bool { return cc.nodeReportWorkspaces() >= n })
	}
	// When the resync re-queues the fleet faster than Metacontroller syncs
	// it, its queue never drains: that is a finding, not a failure.
	if idle, depth := e.mcIdle(t, drainWithin); !idle {
		res.undrained = depth
		logf("Metacontroller's queues did not drain within %v: %.0f Workspaces still queued; measuring the steady state anyway", drainWithin, depth)
	}
	s2 := take()
	res.fleet, res.fleetTook = s2.since(fleetStart), s2.at.Sub(fleetStart.at)
	logf("fleet running after %.1fs; measuring the steady state for %v", res.fleetTook.Seconds(), steady)

	// Steady: nothing changes but one workspace's spec every probeEvery.
	if opts.profile != "" {
		go saveProfile(t, e.hookMetrics, filepath.Join(opts.profile, fmt.Sprintf("%s-steady-%d.pprof", variant, n)), min(steady, 50*time.Second))
	}
	var depths []float64
	nextProbe, nextQueue := time.Now(), time.Now()
	for i, end := 0, time.Now().Add(steady); time.Now().Before(end); {
		if time.Now().After(nextQueue) {
			_, depth := e.mcQueues(t)
			depths = append(depths, depth)
			nextQueue = nextQueue.Add(queueEvery)
		}
		if time.Now().After(nextProbe) {
			k := (i * 7919) % n
			key := types.NamespacedName{Namespace: f.namespace(k), Name: f.name(k)}
			start := time.Now()
			gen, err := w.mergePatch(ctx, gvrWorkspaces, key, []byte(`{"spec":{"owner":"probe-`+strconv.Itoa(i)+`"}}`))
			must(err)
			tr.startProbe(key.String(), gen, start)
			nextProbe = nextProbe.Add(probeEvery)
			i++
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, d := range depths {
		res.queueMax = max(res.queueMax, d)
		res.queueMean += d / float64(len(depths))
	}
	s3 := take()
	res.steady = s3.since(s2)
	res.probes, res.probesWaiting = tr.probeLatencies()
	res.reporterHeapEnd, res.reporterDropped = s3.reporterHeap, s3.reporterDropped
	for name, u := range s3.procs {
		res.peak[name] = u.peak
	}
	if cc != nil {
		res.nodeReportWorkspaces = cc.nodeReportWorkspaces()
	}
	return res
}

// saveProfile writes a CPU profile over d, from the /debug/pprof of the
// process served at base, to path.
func saveProfile(t *testing.T, base, path string, d time.Duration) {
	resp, err := http.Get(base + "/debug/pprof/profile?seconds=" + strconv.Itoa(int(d.Seconds())))
	if err != nil {
		t.Errorf("cannot profile %s: %v", base, err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, raw, 0o644)
	}
	if err != nil {
		t.Errorf("cannot save the profile of %s: %v", base, err)
	}
}

// namespaceObject is a Namespace as a typed object.
func namespaceObject(name string) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		return int64(x)
	case int:
		return int64(x)
	}
	return 0
}

// rollOut plays the Deployment controller for the Deployment of key: its
// status says every replica of its generation is updated and ready.
func (e *env) rollOut(ctx context.Context, w *writer, key types.NamespacedName) error {
	dep, err := w.dyn.Resource(gvrDeployments).Namespace(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	w.counted("GET", gvrDeployments.Resource, "")
	if err != nil {
		return fmt.Errorf("cannot read Deployment %s: %w", key, err)
	}
	replicas, ok, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas")
	if !ok {
		replicas = 1
	}
	return w.applyStatus(ctx, gvrDeployments, map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": dep.GetName(), "namespace": dep.GetNamespace()},
		"status": map[string]any{
			"observedGeneration": dep.GetGeneration(), "replicas": replicas, "updatedReplicas": replicas,
			"readyReplicas": replicas, "availableReplicas": replicas,
		},
	})
}

// mcIdle waits until every work queue of Metacontroller has been empty
// for two seconds, and reports whether that happened within d, and the
// workspace controller's queue depth when it did not.
func (e *env) mcIdle(t *testing.T, d time.Duration) (bool, float64) {
	t.Helper()
	deadline := time.Now().Add(d)
	var emptySince time.Time
	for {
		total, workspaces := e.mcQueues(t)
		switch {
		case total > 0:
			emptySince = time.Time{}
		case emptySince.IsZero():
			emptySince = time.Now()
		case time.Since(emptySince) >= 2*time.Second:
			return true, 0
		}
		if time.Now().After(deadline) {
			return false, workspaces
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// mcQueues reads the depth of Metacontroller's work queues: all of them,
// and the workspace controller's.
func (e *env) mcQueues(t *testing.T) (total, workspaces float64) {
	t.Helper()
	families, err := scrapeURL(e.mcMetrics + "/metrics")
	if err != nil {
		t.Fatalf("cannot read Metacontroller's metrics: %v", err)
	}
	fam := families["workqueue_depth"]
	if fam == nil {
		t.Fatal("Metacontroller's metrics have no workqueue_depth")
	}
	for _, m := range fam.GetMetric() {
		total += value(m)
		if labelsOf(m)["name"] == "CompositeController-formspec-workspace" {
			workspaces += value(m)
		}
	}
	return total, workspaces
}

// startTrivialHook builds test/e2e/trivialhook and runs it in the hook
// server's place, answering like the hook server's answer in answerLike
// if that is set, and granting claims like claimLike if that is.
func startTrivialHook(t *testing.T, e *env, listen, metricsListen, certFile, keyFile, answerLike, claimLike string) *controlplane.Process {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("cannot find the go command to build the trivial hook: %v", err)
	}
	bin := filepath.Join(e.dir, "trivialhook")
	cmd := exec.Command(goBin, "build", "-o", bin, "./test/e2e/trivialhook")
	cmd.Dir = controlplane.RepoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./test/e2e/trivialhook: %v\n%s", err, out)
	}
	var pdb, hpa string
	for _, c := range scaleClasses() {
		switch c.extra {
		case "PodDisruptionBudget":
			pdb = c.class.Name
		case "HorizontalPodAutoscaler":
			hpa = c.class.Name
		}
	}
	args := []string{"--listen=" + listen, "--metrics-listen=" + metricsListen, "--tls-cert-file=" + certFile, "--tls-key-file=" + keyFile,
		"--pdb-class=" + pdb, "--hpa-class=" + hpa}
	if answerLike != "" {
		args = append(args, "--answer-like="+answerLike)
	}
	if claimLike != "" {
		args = append(args, "--claim-answer-like="+claimLike)
	}
	p := controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: e.dir}, bin, args...)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := p.WaitReady(ctx, func() bool { return httpOK("http://" + metricsListen + "/readyz") }); err != nil {
		t.Fatalf("the trivial hook did not become ready: %v", err)
	}
	return p
}

// The Cluster Control paths, short.
var ccNames = map[string]string{ccapi.PathNodeHealth: "node-health", ccapi.PathWorkspaceStatus: "workspace-status", ccapi.PathDeployStatus: "deploy-status"}
