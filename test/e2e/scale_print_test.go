package e2e

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// printScale prints one size's runs side by side: for each figure the
// median over the rounds of each hook, and the median of the rounds'
// ratios of the hooks' figure to the trivial hook's, where both have one.
func printScale(out io.Writer, opts scaleOptions, hs, tvs []scaleResult) {
	h, f := hs[0], newFleet(hs[0].n)
	placement := "one after the other, on every CPU"
	switch {
	case opts.hooksApart:
		placement = fmt.Sprintf("at the same time, both hook servers and the reporter on CPU %d and the rest of both on CPU %d", opts.cpus[1], opts.cpus[0])
	case opts.cpus != nil:
		placement = fmt.Sprintf("at the same time, each on a CPU of its own (CPUs %d and %d, swapped every round)", opts.cpus[0], opts.cpus[1])
	}
	fmt.Fprintf(out, "\n== N=%d Workspaces (%d with a claim, %d namespaces, %d nodes): %s and a trivial hook, side by side in one run, %s\n",
		h.n, f.claims(), f.namespaces(), f.nodes(), variantHooks, placement)
	fmt.Fprintf(out, "   Metacontroller --client-go-qps %d --client-go-burst %d, server-side apply; workspace resync %d s; steady state over %.0f s; median of %d round(s)\n",
		opts.qps, 2*opts.qps, h.resync, h.steady.seconds, len(hs))
	if opts.trivialAnswer != "" {
		fmt.Fprintf(out, "   the trivial hook answers a Workspace sync with the hook server's objects (%s=%s)\n", EnvScaleTrivialAnswer, os.Getenv(EnvScaleTrivialAnswer))
	}
	if opts.trivialClaimAnswer != "" {
		fmt.Fprint(out, "   and grants every claim as the hook server does, with its status and credentials Secret\n")
	}
	if opts.reporterMemory != "" {
		fmt.Fprintf(out, "   the reporter runs with GOMEMLIMIT=%s (%s), its bounds derived from it\n", opts.reporterMemory, EnvScaleReporterMemory)
	}
	if h.steady.seconds < float64(h.resync) {
		fmt.Fprintf(out, "   the steady state is shorter than the workspace resync: its figures per minute hold one resync of the fleet or none, by chance, not its cost\n")
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\t%s\t%s\tratio\t\n", labelWidth, "", variantHooks, variantTrivial)
	row := func(label, format string, get func(scaleResult) float64) {
		var a, b, ratios []float64
		for i := range hs {
			x, y := get(hs[i]), get(tvs[i])
			a, b = append(a, x), append(b, y)
			if x != 0 && y != 0 {
				ratios = append(ratios, x/y)
			}
		}
		ratio := ""
		if len(ratios) == len(hs) {
			ratio = fmt.Sprintf("%.2f", median(ratios))
		}
		fmt.Fprintf(tw, "%-*s\t%s\t%s\t%s\t\n", labelWidth, label, cell(format, median(a)), cell(format, median(b)), ratio)
	}
	section := func(title string) { fmt.Fprintf(tw, "%-*s\t\t\t\t\n", labelWidth, title) }
	perMin := func(d delta, v float64) float64 { return v / d.seconds * 60 }
	mib := func(v float64) float64 { return v / (1 << 20) }

	section("converge (every Workspace's children created, status written)")
	row("  time to converge (s)", "%.1f", func(r scaleResult) float64 { return r.converged.Seconds() })
	row("  the test's creates took (s)", "%.1f", func(r scaleResult) float64 { return r.created.Seconds() })
	row("  every claim's credentials injected (s)", "%.1f", func(r scaleResult) float64 { return r.injected.Seconds() })
	row("  hook calls", "%.0f", func(r scaleResult) float64 { return r.converge.hookCalls() })
	row("  hook CPU (s)", "%.2f", func(r scaleResult) float64 { return r.converge.cpu["hooks"] })
	row("  hook CPU per call (ms)", "%.3f", func(r scaleResult) float64 { return perCall(r.converge) })
	row("  hook request body, mean (KiB)", "%.1f", func(r scaleResult) float64 { return bodyPerCall(r.converge) })
	row("  hook CPU per MiB of requests (ms)", "%.1f", func(r scaleResult) float64 { return perMiB(r.converge) })
	row("  hand-off POSTs to the reporter", "%.0f", func(r scaleResult) float64 { return r.converge.handoffs })
	row("  Metacontroller's hook call, mean (ms)", "%.2f", func(r scaleResult) float64 { return r.converge.mc.mean() })
	row("  Metacontroller's TLS handshakes with the hooks", "%.0f", func(r scaleResult) float64 { return r.converge.mc.handshakes })
	row("  Metacontroller's TLS handshakes per 1,000 hook calls", "%.1f", func(r scaleResult) float64 { return handshakesPer1000(r.converge) })
	row("  Metacontroller CPU (s)", "%.1f", func(r scaleResult) float64 { return r.converge.cpu["metacontroller"] })
	row("  Metacontroller CPU per workspace (ms)", "%.2f", mcPerWorkspace)
	row("  API server CPU (s)", "%.1f", func(r scaleResult) float64 { return r.converge.apiServerCPU })
	row("  etcd CPU (s)", "%.1f", func(r scaleResult) float64 { return r.converge.cpu["etcd"] })
	row("  hook CPU, % of API server + etcd + Metacontroller + hooks", "%.2f", func(r scaleResult) float64 { return hookShare(r.converge) })
	row("  reporter CPU (s)", "%.2f", func(r scaleResult) float64 { return r.converge.cpu["reporter"] })
	row("  the test's own CPU (s)", "%.1f", func(r scaleResult) float64 { return r.converge.cpu["test"] })
	row("  API writes per workspace", "%.2f", func(r scaleResult) float64 { return r.converge.writes(nil) / float64(r.n) })
	row("  of which the reporter's claims summaries", "%.2f", func(r scaleResult) float64 { return r.converge.summaryWrites / float64(r.n) })
	row("  Events per second", "%.1f", func(r scaleResult) float64 { return r.converge.events() / r.converge.seconds })
	row("  workspace-status reports per second", "%.1f", func(r scaleResult) float64 { return ccRate(r.converge, "workspace-status") })
	row("  workspace-status mean body (B)", "%.0f", func(r scaleResult) float64 { return ccMean(r.converge, "workspace-status") })
	section("fleet (the test rolls out every Deployment and binds a pod per workspace)")
	row("  until Metacontroller is idle (s)", "%.1f", func(r scaleResult) float64 { return r.fleetTook.Seconds() })
	row("  hook calls", "%.0f", func(r scaleResult) float64 { return r.fleet.hookCalls() })
	row("  hook CPU per call (ms)", "%.3f", func(r scaleResult) float64 { return perCall(r.fleet) })
	row("  hook request body, mean (KiB)", "%.1f", func(r scaleResult) float64 { return bodyPerCall(r.fleet) })
	row("  hook CPU per MiB of requests (ms)", "%.1f", func(r scaleResult) float64 { return perMiB(r.fleet) })
	row("  Metacontroller's TLS handshakes with the hooks", "%.0f", func(r scaleResult) float64 { return r.fleet.mc.handshakes })
	row("  Metacontroller's TLS handshakes per 1,000 hook calls", "%.1f", func(r scaleResult) float64 { return handshakesPer1000(r.fleet) })
	row("  API writes per workspace", "%.2f", func(r scaleResult) float64 { return r.fleet.writes(nil) / float64(r.n) })
	row("  of which the reporter's claims summaries", "%.2f", func(r scaleResult) float64 { return r.fleet.summaryWrites / float64(r.n) })
	row("  Events per second", "%.1f", func(r scaleResult) float64 { return r.fleet.events() / r.fleet.seconds })
	section("steady state, per minute (resyncs, node reports, one spec change per 5 s)")
	row("  hook calls", "%.0f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.hookCalls()) })
	row("  hook CPU (s)", "%.2f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.cpu["hooks"]) })
	row("  hook CPU per call (ms)", "%.3f", func(r scaleResult) float64 { return perCall(r.steady) })
	row("  hook request body, mean (KiB)", "%.1f", func(r scaleResult) float64 { return bodyPerCall(r.steady) })
	row("  hook CPU per MiB of requests (ms)", "%.1f", func(r scaleResult) float64 { return perMiB(r.steady) })
	row("  hand-off POSTs to the reporter", "%.0f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.handoffs) })
	row("  Metacontroller's hook call, mean (ms)", "%.2f", func(r scaleResult) float64 { return r.steady.mc.mean() })
	row("  Metacontroller's TLS handshakes with the hooks", "%.1f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.mc.handshakes) })
	row("  Metacontroller's TLS handshakes per 1,000 hook calls", "%.1f", func(r scaleResult) float64 { return handshakesPer1000(r.steady) })
	row("  Metacontroller CPU (s)", "%.2f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.cpu["metacontroller"]) })
	row("  API server CPU (s)", "%.2f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.apiServerCPU) })
	row("  etcd CPU (s)", "%.2f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.cpu["etcd"]) })
	row("  hook CPU, % of API server + etcd + Metacontroller + hooks", "%.2f", func(r scaleResult) float64 { return hookShare(r.steady) })
	row("  reporter CPU (s)", "%.2f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.cpu["reporter"]) })
	row("  API requests, all verbs", "%.0f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.requests()) })
	row("  API writes", "%.0f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.writes(nil)) })
	row("  of which the reporter's claims summaries", "%.0f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.summaryWrites) })
	row("  Events", "%.1f", func(r scaleResult) float64 { return perMin(r.steady, r.steady.events()) })
	row("  node-health reports", "%.1f", func(r scaleResult) float64 { return ccRate(r.steady, "node-health") * 60 })
	row("  node-health mean body (KiB)", "%.1f", func(r scaleResult) float64 { return ccMean(r.steady, "node-health") / 1024 })
	row("  node-health largest body (KiB)", "%.1f", func(r scaleResult) float64 { return ccLargest(r.steady, "node-health") / 1024 })
	row("  workspace-status reports", "%.1f", func(r scaleResult) float64 { return ccRate(r.steady, "workspace-status") * 60 })
	row("  Metacontroller's workspace queue, mean depth", "%.0f", func(r scaleResult) float64 { return r.queueMean })
	row("  Metacontroller's workspace queue, largest depth", "%.0f", func(r scaleResult) float64 { return r.queueMax })
	row("  a spec change's status, median (s)", "%.2f", func(r scaleResult) float64 { return quantile(r.probes, 0.5).Seconds() })
	row("  a spec change's status, slowest (s)", "%.2f", func(r scaleResult) float64 { return quantile(r.probes, 1).Seconds() })
	section("memory")
	row("  hook server peak RSS (MiB)", "%.1f", func(r scaleResult) float64 { return mib(float64(r.peak["hooks"])) })
	row("  Metacontroller peak RSS (MiB)", "%.1f", func(r scaleResult) float64 { return mib(float64(r.peak["metacontroller"])) })
	row("  reporter peak RSS (MiB)", "%.1f", func(r scaleResult) float64 { return mib(float64(r.peak["reporter"])) })
	row("  reporter heap in use, converged (MiB)", "%.2f", func(r scaleResult) float64 { return mib(r.reporterHeap) })
	row("  reporter heap in use, with pods (MiB)", "%.2f", func(r scaleResult) float64 { return mib(r.reporterHeapEnd) })
	_ = tw.Flush()
	for i := range hs {
		if hs[i].undrained > 0 || tvs[i].undrained > 0 {
			fmt.Fprintf(out, "   round %d: Metacontroller's workspace queue had not drained %v after the fleet started: %s %.0f, %s %.0f queued\n",
				i+1, drainWithin, variantHooks, hs[i].undrained, variantTrivial, tvs[i].undrained)
		}
		if hs[i].reporterDropped > 0 {
			fmt.Fprintf(out, "   round %d: the reporter dropped %.0f observations at its bounds (formspec_reporter_dropped_observations_total)\n", i+1, hs[i].reporterDropped)
		}
		if hs[i].probesWaiting > 0 || tvs[i].probesWaiting > 0 {
			fmt.Fprintf(out, "   round %d: spec changes still waiting for their status at the end: %s %d, %s %d\n",
				i+1, variantHooks, hs[i].probesWaiting, variantTrivial, tvs[i].probesWaiting)
		}
	}
	for _, r := range []scaleResult{hs[0], tvs[0]} {
		fmt.Fprintf(out, "   API writes per workspace while converging, %s (round 1): %s\n", r.variant, byKind(r.converge, r.n, apiKey.write))
	}
	for _, r := range []scaleResult{hs[0], tvs[0]} {
		fmt.Fprintf(out, "   hook calls while converging, %s (round 1): %s\n", r.variant, callsByHook(r.converge, 1))
	}
	for _, r := range []scaleResult{hs[0], tvs[0]} {
		fmt.Fprintf(out, "   hook calls per minute in the steady state, %s (round 1): %s\n", r.variant, callsByHook(r.steady, 60/r.steady.seconds))
	}
	for i := range hs {
		if note := customizeSkew(hs[i], tvs[i]); note != "" {
			fmt.Fprintf(out, "   round %d: %s\n", i+1, note)
		}
	}
	for _, r := range []scaleResult{hs[0], tvs[0]} {
		minutes := r.steady.seconds / 60
		fmt.Fprintf(out, "   API requests per workspace per minute in the steady state, %s (round 1): %s\n", r.variant,
			byKind(r.steady, int(float64(r.n)*minutes), func(apiKey) bool { return true }))
	}
}

// customizeSkew says, for each customize hook, when the two steady states
// differ in how often Metacontroller called it by more than a hundredth
// of the fleet a minute and twice over, and why that matters; "" when
// none does. Metacontroller keeps each parent generation's customize
// answer for 20 minutes, so the expiries that fall in a window depend on
// when each fleet converged and how long its run has lasted, not on the
// hooks, and a customize call costs a hook less than a sync: per-call and
// per-minute figures then compare different mixes of calls.
func customizeSkew(h, tv scaleResult) string {
	hooks := map[string]float64{}
	maps.Copy(hooks, h.steady.hooks)
	maps.Copy(hooks, tv.steady.hooks)
	var differ []string
	for _, hook := range slices.Sorted(maps.Keys(hooks)) {
		if !strings.HasSuffix(hook, "-customize") {
			continue
		}
		a := h.steady.hooks[hook] / h.steady.seconds * 60
		b := tv.steady.hooks[hook] / tv.steady.seconds * 60
		if lo, hi := min(a, b), max(a, b); hi-lo > float64(h.n)/100 && hi > 2*lo {
			differ = append(differ, fmt.Sprintf("%s %s %.0f and %s %.0f", hook, variantHooks, a, variantTrivial, b))
		}
	}
	if len(differ) == 0 {
		return ""
	}
	return "customize calls a minute in the steady state differ (" + strings.Join(differ, "; ") + "): " +
		"Metacontroller's customize cache (20 minutes per parent generation) expired for more of one fleet within the window, " +
		"so the steady figures per call and per minute compare different mixes of calls"
}

// callsByHook lists d's hook calls by hook, each times scale, leaving out
// those that round to none.
func callsByHook(d delta, scale float64) string {
	var calls []string
	for _, hook := range slices.Sorted(maps.Keys(d.hooks)) {
		if v := d.hooks[hook] * scale; v >= 0.5 {
			calls = append(calls, fmt.Sprintf("%s %.0f", hook, v))
		}
	}
	return strings.Join(calls, ", ")
}

// printGrowth prints how the figures grow with N: the medians over the
// rounds of the hooks' runs, with the trivial hook's convergence beside.
func printGrowth(out io.Writer, all []scaleResult) {
	byN := map[int]map[string][]scaleResult{}
	for _, r := range all {
		if byN[r.n] == nil {
			byN[r.n] = map[string][]scaleResult{}
		}
		byN[r.n][r.variant] = append(byN[r.n][r.variant], r)
	}
	sizes := slices.Sorted(maps.Keys(byN))
	if len(sizes) == 0 {
		return
	}
	fmt.Fprintf(out, "\n== Growth with N (%s, medians; the trivial hook's beside)\n", variantHooks)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "N\tconverge (s)\ttrivial (s)\tratio\ts per 1,000\tMC CPU (s)\ttrivial (s)\tratio\tMC CPU/ws (ms)\thook CPU share (%)\thandshakes/1,000 calls\thook CPU/call (ms)\ttrivial (ms)\twrites/ws\treporter heap (MiB)\tB/ws since previous N\tnode report (KiB)\tsteady hook CPU (s/min)\t")
	prevN, prevHeap := 0, 0.0
	for _, n := range sizes {
		hs, tvs := byN[n][variantHooks], byN[n][variantTrivial]
		m := func(rs []scaleResult, get func(scaleResult) float64) float64 {
			var v []float64
			for _, r := range rs {
				v = append(v, get(r))
			}
			return median(v)
		}
		conv := func(r scaleResult) float64 { return r.converged.Seconds() }
		heap := m(hs, func(r scaleResult) float64 { return r.reporterHeapEnd })
		slope := ""
		if prevN > 0 {
			slope = fmt.Sprintf("%.0f", (heap-prevHeap)/float64(n-prevN))
		}
		mc := func(r scaleResult) float64 { return r.converge.cpu["metacontroller"] }
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%s\t%.2f\t%.1f\t%.1f\t%s\t%.2f\t%.2f\t%.1f\t%.3f\t%.3f\t%.2f\t%.1f\t%s\t%.1f\t%.2f\t\n", n,
			m(hs, conv), m(tvs, conv), ratio(m(hs, conv), m(tvs, conv)), m(hs, conv)/float64(n)*1000,
			m(hs, mc), m(tvs, mc), ratio(m(hs, mc), m(tvs, mc)), m(hs, mcPerWorkspace),
			m(hs, func(r scaleResult) float64 { return hookShare(r.converge) }),
			m(hs, func(r scaleResult) float64 { return handshakesPer1000(r.converge) }),
			m(hs, func(r scaleResult) float64 { return perCall(r.converge) }), m(tvs, func(r scaleResult) float64 { return perCall(r.converge) }),
			m(hs, func(r scaleResult) float64 { return r.converge.writes(nil) / float64(n) }), heap/(1<<20), slope,
			m(hs, func(r scaleResult) float64 { return ccLargest(r.steady, "node-health") })/1024,
			m(hs, func(r scaleResult) float64 { return r.steady.cpu["hooks"] / r.steady.seconds * 60 }))
		prevN, prevHeap = n, heap
	}
	_ = tw.Flush()
}

// median is the median of v (the mean of the middle two for an even
// count), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// labelWidth pads the first column, which tabwriter would align right
// like the figures.
const labelWidth = 76

func cell(format string, v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// handshakesPer1000 is Metacontroller's TLS handshakes with the hooks
// per 1,000 calls the hook server answered.
func handshakesPer1000(d delta) float64 {
	if d.hookCalls() == 0 {
		return 0
	}
	return d.mc.handshakes / d.hookCalls() * 1000
}

// hookShare is the hook server's CPU as a percentage of the control
// plane's: the API server, etcd, Metacontroller and the hook server.
func hookShare(d delta) float64 {
	all := d.apiServerCPU + d.cpu["etcd"] + d.cpu["metacontroller"] + d.cpu["hooks"]
	if all == 0 {
		return 0
	}
	return d.cpu["hooks"] / all * 100
}

// mcPerWorkspace is Metacontroller's CPU converging per Workspace, in
// milliseconds.
func mcPerWorkspace(r scaleResult) float64 {
	return r.converge.cpu["metacontroller"] / float64(r.n) * 1000
}

// perCall is the hook process's CPU per hook call, in milliseconds.
func perCall(d delta) float64 {
	if d.hookCalls() == 0 {
		return 0
	}
	return d.cpu["hooks"] / d.hookCalls() * 1000
}

// bodyPerCall is the mean hook request body, in KiB.
func bodyPerCall(d delta) float64 {
	if d.hookCalls() == 0 {
		return 0
	}
	return d.hookBytes / d.hookCalls() / 1024
}

// perMiB is the hook process's CPU per MiB of request bodies it read, in
// milliseconds: what a call costs for the bytes Metacontroller sends it,
// which depend on the children each hook answered before.
func perMiB(d delta) float64 {
	if d.hookBytes == 0 {
		return 0
	}
	return d.cpu["hooks"] / (d.hookBytes / (1 << 20)) * 1000
}

// mean is the mean hook call in milliseconds.
func (h mcHooks) mean() float64 {
	if h.calls == 0 {
		return 0
	}
	return h.seconds / h.calls * 1000
}

// requests sums every API request of the others.
func (d delta) requests() float64 {
	n := 0.0
	for _, v := range d.api {
		n += v
	}
	return n
}

func ccTraffic(d delta, name string) traffic {
	for path, short := range ccNames {
		if short == name {
			return d.cc[path]
		}
	}
	return traffic{}
}

func ccRate(d delta, name string) float64 { return ccTraffic(d, name).requests / d.seconds }

func ccMean(d delta, name string) float64 {
	tr := ccTraffic(d, name)
	if tr.requests == 0 {
		return 0
	}
	return tr.bytes / tr.requests
}

func ccLargest(d delta, name string) float64 { return ccTraffic(d, name).largest }

// quantile is the q-quantile of sorted durations (1 for the largest).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// byKind lists the API requests that keep selects, per n, by verb and
// resource, largest first, leaving out those below one per hundred.
func byKind(d delta, n int, keep func(apiKey) bool) string {
	type kv struct {
		k apiKey
		v float64
	}
	var list []kv
	for k, v := range d.api {
		if keep(k) && v/float64(n) >= 0.01 {
			list = append(list, kv{k, v / float64(n)})
		}
	}
	slices.SortFunc(list, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), strings.Compare(a.k.String(), b.k.String())) })
	var parts []string
	for _, e := range list {
		parts = append(parts, fmt.Sprintf("%s %.2f", e.k, e.v))
	}
	return strings.Join(parts, ", ")
}

// TestCustomizeSkew shows when the scale output warns that the two
// steady states saw different numbers of customize calls: with the
// figures of a 10,000-workspace run, where one fleet's cached answers
// expired within the window and the other's did not, and not for a
// difference within a hundredth of the fleet a minute or within twice.
func TestCustomizeSkew(t *testing.T) {
	// A rate of 0 leaves the hook out, as a side that never called it.
	result := func(n int, customizePerMin float64) scaleResult {
		hooks := map[string]float64{"workspace-sync": 2000 * 5}
		if customizePerMin > 0 {
			hooks["workspace-customize"] = customizePerMin * 5
		}
		return scaleResult{n: n, steady: delta{seconds: 300, hooks: hooks}}
	}
	for _, tc := range []struct {
		name           string
		hooks, trivial float64
		n              int
		want           string
	}{
		{"ExpiredOnOneSide", 12, 790, 10000, "customize calls a minute in the steady state differ (workspace-customize formspec-hooks 12 and trivial 790)"},
		{"ExpiredOnTheOther", 790, 12, 10000, "(workspace-customize formspec-hooks 790 and trivial 12)"},
		{"NeverCalledOnOneSide", 0, 195, 10000, "(workspace-customize formspec-hooks 0 and trivial 195)"},
		{"WithinAHundredthOfTheFleet", 5, 95, 10000, ""},
		{"WithinTwice", 400, 790, 10000, ""},
		{"Same", 12, 12, 1000, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := customizeSkew(result(tc.n, tc.hooks), result(tc.n, tc.trivial))
			switch {
			case tc.want == "" && got != "":
				t.Errorf("warned %q, want no warning", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("warned %q, want it to say %q", got, tc.want)
			}
		})
	}
}
