package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/formspec/formspec-hooks/internal/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// What TestScale reads at the start and end of each phase: the processes'
// CPU and memory from /proc, the API server's request counters, the hooks'
// request counters, and the traffic Cluster Control received. A phase's
// figures are the difference of two samples.

// clockTicks is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procUsage is one process's CPU seconds so far and its memory now.
type procUsage struct {
	cpu float64
	// rss and peak are VmRSS and VmHWM, in bytes.
	rss, peak int64
}

// readProc reads a process's usage from /proc.
func readProc(pid int) (procUsage, error) {
	var u procUsage
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return u, err
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing parenthesis. utime and stime are fields 14 and
	// 15, the 12th and 13th after it.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("/proc/%d/stat: cannot read utime and stime", pid)
	}
	u.cpu = (utime + stime) / clockTicks
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return u, err
	}
	for line := range strings.Lines(string(status)) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return u, fmt.Errorf("/proc/%d/status: %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			u.rss = kb << 10
		} else {
			u.peak = kb << 10
		}
	}
	return u, nil
}

// apiKey is how apiserver_request_total is summed: by verb (POST, PUT,
// PATCH, APPLY, DELETE, GET, LIST, WATCH...), resource and subresource.
type apiKey struct {
	verb, resource, subresource string
}

func (k apiKey) String() string {
	if k.subresource != "" {
		return k.verb + " " + k.resource + "/" + k.subresource
	}
	return k.verb + " " + k.resource
}

// write reports whether the verb changes something.
func (k apiKey) write() bool {
	switch k.verb {
	case "POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// parseMetrics parses the Prometheus text format.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// value is a counter's or gauge's value.
func value(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return m.GetGauge().GetValue()
}

// sum adds up every series of a metric family.
func sum(families map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	for _, m := range families[name].GetMetric() {
		total += value(m)
	}
	return total
}

// first returns the value of a metric family without labels, or 0.
func first(families map[string]*dto.MetricFamily, name string) float64 {
	if f := families[name]; f != nil && len(f.GetMetric()) > 0 {
		return value(f.GetMetric()[0])
	}
	return 0
}

// scrapeURL reads a metrics endpoint served on plain HTTP.
func scrapeURL(u string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(u)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	return parseMetrics(resp.Body)
}

// apiServerSample reads the API server's request counters and CPU.
func apiServerSample(c *controlplane.Client) (map[apiKey]float64, float64, error) {
	raw, err := c.Do(http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, 0, err
	}
	families, err := parseMetrics(bytes.NewReader(raw))
	if err != nil {
		return nil, 0, fmt.Errorf("cannot parse the API server's metrics: %w", err)
	}
	out := map[apiKey]float64{}
	if f := families["apiserver_request_total"]; f != nil {
		for _, m := range f.GetMetric() {
			l := labelsOf(m)
			out[apiKey{verb: l["verb"], resource: l["resource"], subresource: l["subresource"]}] += value(m)
		}
	}
	return out, first(families, "process_cpu_seconds_total"), nil
}

// hookRequests sums formspec_hooks_requests_total by hook.
func hookRequests(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	if f := families["formspec_hooks_requests_total"]; f != nil {
		for _, m := range f.GetMetric() {
			out[labelsOf(m)["hook"]] += value(m)
		}
	}
	return out
}

// hookBytes sums the request bodies formspec_hooks_request_size_bytes
// observed, over every hook.
func hookBytes(families map[string]*dto.MetricFamily) float64 {
	total := 0.0
	for _, m := range families["formspec_hooks_request_size_bytes"].GetMetric() {
		total += m.GetHistogram().GetSampleSum()
	}
	return total
}

// mcHooks is what Metacontroller counts of its calls to the hooks, all
// controllers and hooks summed: the calls, the seconds they took, and the
// TLS handshakes they needed. Its client keeps two idle connections per
// hook, so calls from more workers than that at once open new ones.
type mcHooks struct {
	calls, seconds, handshakes float64
}

func mcHookCalls(families map[string]*dto.MetricFamily) mcHooks {
	var h mcHooks
	for _, hook := range []string{"sync", "customize", "finalize"} {
		if f := families["metacontroller_"+hook+"_request_duration_histogram_seconds"]; f != nil {
			for _, m := range f.GetMetric() {
				h.calls += float64(m.GetHistogram().GetSampleCount())
				h.seconds += m.GetHistogram().GetSampleSum()
			}
		}
		if f := families["metacontroller_"+hook+"_tls_duration_histogram_seconds"]; f != nil {
			for _, m := range f.GetMetric() {
				if labelsOf(m)["event"] == "tls_handshake_done" {
					h.handshakes += float64(m.GetHistogram().GetSampleCount())
				}
			}
		}
	}
	return h
}

// traffic is what Cluster Control received on one path.
type traffic struct {
	requests, bytes float64
	// largest is the largest body so far.
	largest float64
}

// countingClusterControl is the reference Cluster Control with a count of
// the requests and body bytes it received, by path.
type countingClusterControl struct {
	addr   string
	server *clustercontrol.Server
	mu     sync.Mutex
	seen   map[string]traffic
}

// startCountingClusterControl serves the reference Cluster Control on a
// free loopback port until the test ends.
func startCountingClusterControl(t interface {
	Fatal(...any)
	Cleanup(func())
}) *countingClusterControl {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cc := &countingClusterControl{addr: ln.Addr().String(), server: clustercontrol.New(clustercontrol.Options{}), seen: map[string]traffic{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = httpserve.Serve(ctx, ln, cc.count(cc.server.Handler()), httpserve.Config{})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return cc
}

func (cc *countingClusterControl) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
		cc.mu.Lock()
		defer cc.mu.Unlock()
		tr := cc.seen[r.URL.Path]
		tr.requests++
		tr.bytes += float64(len(body))
		tr.largest = max(tr.largest, float64(len(body)))
		cc.seen[r.URL.Path] = tr
	})
}

func (cc *countingClusterControl) traffic() map[string]traffic {
	if cc == nil {
		return nil
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return maps.Clone(cc.seen)
}

// nodeReportWorkspaces is how many workspaces the latest node-health
// report counts over all nodes.
func (cc *countingClusterControl) nodeReportWorkspaces() int {
	reports := cc.server.NodeReports()
	if len(reports) == 0 {
		return 0
	}
	n := 0
	for _, node := range reports[len(reports)-1].Nodes {
		n += node.WorkspaceCount
	}
	return n
}

// sample is everything TestScale reads at one moment.
type sample struct {
	at time.Time
	// procs is by process: "hooks", "metacontroller", "reporter".
	procs map[string]procUsage
	// hooks are the hook server's requests by hook; hookBytes the bytes
	// of their bodies, all hooks summed.
	hooks     map[string]float64
	hookBytes float64
	// api are the API server's requests, writes counts the test's own.
	api, writes  map[apiKey]float64
	apiServerCPU float64
	cc           map[string]traffic
	// handoffs are the hook server's POSTs of observations to the
	// reporter.
	handoffs float64
	// mc is what Metacontroller counts of its hook calls.
	mc mcHooks
	// reporterHeap is the reporter's Go heap in use, in bytes;
	// reporterDropped the observations it dropped at one of its bounds.
	reporterHeap, reporterDropped float64
	// summaryWrites are the reporter's patches of claims summaries, every
	// result; the API server counts them among the others' writes too.
	summaryWrites float64
}

// delta is what happened between two samples.
type delta struct {
	seconds   float64
	cpu       map[string]float64
	hooks     map[string]float64
	hookBytes float64
	// api are the API server's requests less the test's own.
	api          map[apiKey]float64
	apiServerCPU float64
	cc           map[string]traffic
	handoffs     float64
	mc           mcHooks
	// summaryWrites are the reporter's patches of claims summaries.
	summaryWrites float64
}

func (s sample) since(prev sample) delta {
	d := delta{seconds: s.at.Sub(prev.at).Seconds(), cpu: map[string]float64{}, hooks: map[string]float64{},
		api: map[apiKey]float64{}, apiServerCPU: s.apiServerCPU - prev.apiServerCPU, cc: map[string]traffic{},
		handoffs: s.handoffs - prev.handoffs, hookBytes: s.hookBytes - prev.hookBytes, summaryWrites: s.summaryWrites - prev.summaryWrites,
		mc: mcHooks{calls: s.mc.calls - prev.mc.calls, seconds: s.mc.seconds - prev.mc.seconds, handshakes: s.mc.handshakes - prev.mc.handshakes}}
	for k, v := range s.procs {
		d.cpu[k] = v.cpu - prev.procs[k].cpu
	}
	for k, v := range s.hooks {
		d.hooks[k] = v - prev.hooks[k]
	}
	for k, v := range s.api {
		if n := v - prev.api[k] - (s.writes[k] - prev.writes[k]); n > 0 {
			d.api[k] = n
		}
	}
	for k, v := range s.cc {
		p := prev.cc[k]
		d.cc[k] = traffic{requests: v.requests - p.requests, bytes: v.bytes - p.bytes, largest: v.largest}
	}
	return d
}

// hookCalls is every hook request served.
func (d delta) hookCalls() float64 {
	n := 0.0
	for _, v := range d.hooks {
		n += v
	}
	return n
}

// writes sums the API writes of the others, optionally only of resources
// matching keep.
func (d delta) writes(keep func(apiKey) bool) float64 {
	n := 0.0
	for k, v := range d.api {
		if k.write() && (keep == nil || keep(k)) {
			n += v
		}
	}
	return n
}

// events counts the Events written: core Events (Metacontroller) and
// events.k8s.io Events (the reporter) share the resource name.
func (d delta) events() float64 {
	return d.writes(func(k apiKey) bool { return k.resource == "events" })
}
