package helm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	promqlengine "github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/template"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/tsdb/chunks"
	"github.com/prometheus/prometheus/util/annotations"
)

// TestAlertsFire evaluates the chart's alerts (as its PrometheusRule
// renders them for the release namespace formspec-system) with Prometheus'
// own engine over series that tell a story: which of them fire, after
// their "for", at the end of it. A fresh install with the reporter and no
// Workspace has nothing wrong; an install whose hook pods are all gone
// has, although none of the alerts that read the hook servers' own
// metrics can say so.
func TestAlertsFire(t *testing.T) {
	const ns = `namespace="formspec-system"`
	// Series are sampled every 30 s for 20 minutes; a series that ends
	// goes stale five minutes after its last sample, as in Prometheus.
	buildInfo := func(pod string, samples string) string {
		return fmt.Sprintf("formspec_hooks_build_info{%s,pod=%q,version=\"0.2.0\"} %s\n", ns, pod, samples)
	}
	requests := func(pod, hook, samples string) string {
		return fmt.Sprintf("formspec_hooks_requests_total{%s,pod=%q,hook=%q,code=\"200\"} %s\n", ns, pod, hook, samples)
	}
	cases := map[string]struct {
		reason string
		series string
		want   []string
	}{
		"FreshInstallWithoutWorkspaces": {
			reason: "Two hook pods, the reporter installed, no Workspace yet: Metacontroller syncs the nodes every 15 s, and no alert fires.",
			series: buildInfo("a", "1x40") + buildInfo("b", "1x40") +
				requests("a", "nodes-sync", "0+2x40") + requests("b", "nodes-sync", "0+2x40"),
		},
		"Steady": {
			reason: "Workspaces and nodes synced: nothing fires.",
			series: buildInfo("a", "1x40") + requests("a", "nodes-sync", "0+2x40") + requests("a", "workspace-sync", "0+10x40"),
		},
		"MetacontrollerStopped": {
			reason: "The hook pods run and nothing calls them any more.",
			series: buildInfo("a", "1x40") + requests("a", "nodes-sync", "0+2x10 20x30") + requests("a", "workspace-sync", "0+10x10 100x30"),
			want:   []string{"FormspecHookTrafficStopped"},
		},
		"BrokenFromTheStart": {
			reason: "The hook pods run and were never called: the build_info term makes that a stop too.",
			series: buildInfo("a", "1x40"),
			want:   []string{"FormspecHookTrafficStopped"},
		},
		"EveryHookPodGone": {
			reason: "The hook pods' series end at minute 5: every alert that reads them is silent, and FormspecHooksAbsent fires.",
			series: buildInfo("a", "1x10") + requests("a", "nodes-sync", "0+2x10") + requests("a", "workspace-sync", "0+10x10"),
			want:   []string{"FormspecHooksAbsent"},
		},
		"OtherNamespace": {
			reason: "A hook server of another install does not hide that this one is gone.",
			series: strings.ReplaceAll(buildInfo("a", "1x40")+requests("a", "nodes-sync", "0+2x40"), ns, `namespace="other"`),
			want:   []string{"FormspecHooksAbsent"},
		},
	}
	rules := alertRules(t)
	hookGroup := slices.DeleteFunc(slices.Clone(rules), func(r rulefmt.Rule) bool {
		return !strings.HasPrefix(r.Alert, "FormspecHook")
	})
	if len(hookGroup) < 2 {
		t.Fatalf("only %d FormspecHook* alerts in the rendered rules", len(hookGroup))
	}
	end := 20 * time.Minute
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			store := loadSeries(t, tc.series)
			engine := promqlengine.NewEngine(promqlengine.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
			var got []string
			for _, r := range hookGroup {
				if firing(t, engine, store, r, end) {
					got = append(got, r.Alert)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nalerts firing at minute %d: -want, +got:\n%s", tc.reason, int(end.Minutes()), diff)
			}
		})
	}
}

// loadSeries makes an in-memory storage of series written as in
// Prometheus' test scripts ("name{labels} 0+2x40": a sample every 30 s
// from the epoch on, here 41 of them counting up by 2).
func loadSeries(t *testing.T, series string) storage.Queryable {
	t.Helper()
	var all []storage.Series
	for line := range strings.Lines(series) {
		lbls, values, err := promql.ParseSeriesDesc(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("series %q: %v", line, err)
		}
		var samples chunks.SampleSlice
		for i, v := range values {
			if !v.Omitted {
				samples = append(samples, floatSample{t: int64(i) * 30_000, f: v.Value})
			}
		}
		all = append(all, storage.NewListSeries(lbls, samples))
	}
	return &storage.MockQueryable{MockQuerier: &storage.MockQuerier{
		SelectMockFunction: func(_ bool, _ *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
			var out []storage.Series
			for _, s := range all {
				if matchesAll(s.Labels(), matchers) {
					out = append(out, s)
				}
			}
			slices.SortFunc(out, func(a, b storage.Series) int { return labels.Compare(a.Labels(), b.Labels()) })
			return &seriesSet{series: out, i: -1}
		},
	}}
}

func matchesAll(l labels.Labels, matchers []*labels.Matcher) bool {
	for _, m := range matchers {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

// seriesSet walks a slice of series.
type seriesSet struct {
	series []storage.Series
	i      int
}

func (s *seriesSet) Next() bool                      { s.i++; return s.i < len(s.series) }
func (s *seriesSet) At() storage.Series              { return s.series[s.i] }
func (*seriesSet) Err() error                        { return nil }
func (*seriesSet) Warnings() annotations.Annotations { return nil }

// floatSample is one float sample.
type floatSample struct {
	t int64
	f float64
}

func (s floatSample) T() int64                    { return s.t }
func (floatSample) ST() int64                     { return 0 }
func (s floatSample) F() float64                  { return s.f }
func (floatSample) H() *histogram.Histogram       { return nil }
func (floatSample) FH() *histogram.FloatHistogram { return nil }
func (floatSample) Type() chunkenc.ValueType      { return chunkenc.ValFloat }
func (s floatSample) Copy() chunks.Sample         { return s }

// firing reports whether rule r fires at end: its expression returns a
// sample at every 30 s step of the "for" before end (at end alone when it
// has none), as Prometheus' rule manager would have seen it.
func firing(t *testing.T, engine promqlengine.QueryEngine, store storage.Queryable, r rulefmt.Rule, end time.Duration) bool {
	t.Helper()
	start := end - time.Duration(r.For)
	// loadSeries starts the series at the Unix epoch.
	epoch := time.Unix(0, 0).UTC()
	q, err := engine.NewRangeQuery(context.Background(), store, nil, r.Expr, epoch.Add(start), epoch.Add(end), 30*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", r.Alert, err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatalf("%s: %v", r.Alert, res.Err)
	}
	m, err := res.Matrix()
	if err != nil {
		t.Fatalf("%s: %v", r.Alert, err)
	}
	steps := int(time.Duration(r.For)/(30*time.Second)) + 1
	for _, s := range m {
		if len(s.Floats) == steps {
			return true
		}
	}
	return false
}

// TestHooksAbsentNamespace checks that the chart points FormspecHooksAbsent
// at its own release namespace: absent() of another namespace's series
// would fire for ever, or never.
func TestHooksAbsentNamespace(t *testing.T) {
	r := monitoring
	r.namespace = "platform-hooks"
	for _, rule := range rulesOf(t, r) {
		if rule.Alert != "FormspecHooksAbsent" {
			continue
		}
		if want := `absent(formspec_hooks_build_info{namespace="platform-hooks"})`; strings.TrimSpace(rule.Expr) != want {
			t.Errorf("FormspecHooksAbsent in release namespace %s: expr %q, want %q", r.namespace, rule.Expr, want)
		}
		return
	}
	t.Fatal("no alert FormspecHooksAbsent")
}

// TestReporterDroppingNamesTheBound checks that FormspecReporterDropping
// fires once per bound a reporter drops at, and that its description, as
// Prometheus expands it, names the bound and the formspec_reporter_limit
// series to read; a drop that is not at a bound says no bound.
func TestReporterDroppingNamesTheBound(t *testing.T) {
	const ns = `namespace="formspec-system",pod="a"`
	series := "formspec_reporter_dropped_observations_total{" + ns + `,reason="workspace_limit",bound="workspaces"} 0+5x40` + "\n" +
		"formspec_reporter_dropped_observations_total{" + ns + `,reason="directive_limit",bound="workspaces"} 0x40` + "\n" +
		"formspec_reporter_dropped_observations_total{" + ns + `,reason="claim_limit",bound="claims"} 0+1x40` + "\n" +
		"formspec_reporter_dropped_observations_total{" + ns + `,reason="invalid"} 0+1x40` + "\n"
	var rule rulefmt.Rule
	for _, r := range alertRules(t) {
		if r.Alert == "FormspecReporterDropping" {
			rule = r
		}
	}
	if rule.Expr == "" {
		t.Fatal("no FormspecReporterDropping rule rendered")
	}
	engine := promqlengine.NewEngine(promqlengine.EngineOpts{MaxSamples: 1_000_000, Timeout: time.Minute, LookbackDelta: 5 * time.Minute})
	at := time.Unix(0, 0).UTC().Add(20 * time.Minute)
	q, err := engine.NewInstantQuery(context.Background(), loadSeries(t, series), nil, rule.Expr, at)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	res := q.Exec(context.Background())
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	vec, err := res.Vector()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range vec {
		lbls := s.Metric.Map()
		defs := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}"
		desc, err := template.NewTemplateExpander(context.Background(), defs+rule.Annotations["description"], "description",
			template.AlertTemplateData(lbls, nil, "", s), model.Time(at.UnixMilli()), nil, nil, nil).Expand()
		if err != nil {
			t.Fatalf("description of %v: %v", lbls, err)
		}
		got[lbls["reason"]+"/"+lbls["bound"]] = desc
	}
	wantIn := map[string][]string{
		"workspace_limit/workspaces": {"at its workspaces bound", `formspec_reporter_limit{bound="workspaces"}`, "reporter.expectedWorkspaces"},
		"claim_limit/claims":         {"at its claims bound", `formspec_reporter_limit{bound="claims"}`},
		"invalid/":                   {"with reason invalid."},
	}
	if diff := cmp.Diff(len(wantIn), len(got)); diff != "" {
		t.Errorf("alerts firing (a directive_limit that stopped does not): %v", got)
	}
	for k, parts := range wantIn {
		for _, p := range parts {
			if !strings.Contains(got[k], p) {
				t.Errorf("FormspecReporterDropping for %s does not say %q:\n%s", k, p, got[k])
			}
		}
	}
	if strings.Contains(got["invalid/"], "bound") {
		t.Errorf("a drop at no bound names one:\n%s", got["invalid/"])
	}
}
