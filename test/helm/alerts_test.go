package helm

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestAlertsTable checks that the table under "Alerts" in
// docs/troubleshooting.md lists every alert once, in the row that links to
// the section its runbook_url names: the table is where a person paged at
// night looks first.
func TestAlertsTable(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## Alerts\n")
	if !ok {
		t.Fatal("docs/troubleshooting.md has no section \"Alerts\"")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	row := regexp.MustCompile(`(?m)^\| (.+) \| \[[^]]+\]\(#([^)]+)\) \|$`)
	name := regexp.MustCompile("`(Formspec[A-Za-z]+)`")
	inTable := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			if _, dup := inTable[n[1]]; dup {
				t.Errorf("the Alerts table lists %s twice", n[1])
			}
			inTable[n[1]] = m[2]
		}
	}
	want, got := map[string]string{}, map[string]string{}
	for _, r := range alertRules(t) {
		_, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "docs/troubleshooting.md#")
		want[r.Alert] = anchor
		got[r.Alert] = inTable[r.Alert]
	}
	for n, anchor := range inTable {
		if _, ok := want[n]; !ok {
			got[n] = anchor
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("alert -> section of its runbook_url (want) and of its row in the Alerts table (got): -want, +got:\n%s", diff)
	}
}

// TestTrafficStoppedWindow checks that FormspecHookTrafficStopped looks
// for workspace and node syncs over twice the workspace controller's
// resyncPeriodSeconds, in the series the hook server labels those
// controllers' sync hooks with, so that a change to a controller the
// alert does not follow fails here. The hook server labels a hook with its
// path after /v1/, slashes made dashes (internal/server's HookRoute).
func TestTrafficStoppedWindow(t *testing.T) {
	// controller is the part of a controller file the alert follows.
	type controller struct {
		Spec struct {
			ResyncPeriodSeconds int `json:"resyncPeriodSeconds"`
			Hooks               struct {
				Sync struct {
					Webhook struct {
						Path string `json:"path"`
					} `json:"webhook"`
				} `json:"sync"`
			} `json:"hooks"`
		} `json:"spec"`
	}
	read := func(name string) controller {
		raw, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "compositecontrollers", name))
		if err != nil {
			t.Fatal(err)
		}
		var c controller
		if err := yaml.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	workspaces, nodes := read("workspace.yaml"), read("node-health.yaml")
	hook := func(path string) string { return strings.ReplaceAll(strings.TrimPrefix(path, "/v1/"), "/", "-") }
	want := []window{{
		Metric: "formspec_hooks_requests_total",
		Hook:   hook(workspaces.Spec.Hooks.Sync.Webhook.Path) + "|" + hook(nodes.Spec.Hooks.Sync.Webhook.Path),
		Range:  2 * time.Duration(workspaces.Spec.ResyncPeriodSeconds) * time.Second,
	}}
	if want[0].Range == 0 || want[0].Hook == "" {
		t.Fatalf("compositecontrollers/workspace.yaml: no resyncPeriodSeconds or sync path in %+v", workspaces)
	}
	if diff := cmp.Diff(want, windows(t, trafficStopped(t, alertRules(t)))); diff != "" {
		t.Errorf("the ranges FormspecHookTrafficStopped reads: -want, +got:\n%s", diff)
	}
}

// window is a range an alert reads: the metric, its hook label (a value or
// a regular expression), the range.
type window struct {
	Metric, Hook string
	Range        time.Duration
}

// trafficStopped is the rule FormspecHookTrafficStopped among rules.
func trafficStopped(t *testing.T, rules []rulefmt.Rule) rulefmt.Rule {
	t.Helper()
	i := slices.IndexFunc(rules, func(r rulefmt.Rule) bool { return r.Alert == "FormspecHookTrafficStopped" })
	if i < 0 {
		t.Fatal("no alert FormspecHookTrafficStopped")
	}
	return rules[i]
}

// windows lists the ranges the rule's expression reads.
func windows(t *testing.T, rule rulefmt.Rule) []window {
	t.Helper()
	expr, err := promql.ParseExpr(rule.Expr)
	if err != nil {
		t.Fatal(err)
	}
	var got []window
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		m, ok := n.(*parser.MatrixSelector)
		if !ok {
			return nil
		}
		vs := m.VectorSelector.(*parser.VectorSelector)
		w := window{Metric: vs.Name, Range: m.Range}
		for _, l := range vs.LabelMatchers {
			if l.Name == "hook" && (l.Type == labels.MatchEqual || l.Type == labels.MatchRegexp) {
				w.Hook = l.Value
			}
		}
		got = append(got, w)
		return nil
	})
	return got
}

// TestResyncPeriodValue checks that workspaceResyncPeriodSeconds sets the
// workspace controller's resyncPeriodSeconds and that
// FormspecHookTrafficStopped follows it: its window and its for are twice
// the period, and its description says so; the defaults render the 60 s
// and 2 minutes of compositecontrollers/ and files/prometheus-rules.yaml.
func TestResyncPeriodValue(t *testing.T) {
	cases := map[string]struct {
		values string
		period float64
		window time.Duration
		says   string
	}{
		"Default": {values: "", period: 60, window: 2 * time.Minute, says: "in 2 minutes, twice"},
		"Raised":  {values: "workspaceResyncPeriodSeconds: 300\n", period: 300, window: 10 * time.Minute, says: "in 10 minutes, twice"},
		"Odd":     {values: "workspaceResyncPeriodSeconds: 90\n", period: 90, window: 3 * time.Minute, says: "in 3 minutes, twice"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := monitoring
			r.values += "\n" + tc.values
			var period any
			for _, obj := range render(t, r).objects {
				if obj["kind"] == "CompositeController" && get(obj, "metadata.name") == "formspec-workspace" {
					period = get(obj, "spec.resyncPeriodSeconds")
				}
			}
			if period != tc.period {
				t.Errorf("formspec-workspace resyncPeriodSeconds = %v, want %v", period, tc.period)
			}
			rule := trafficStopped(t, rulesOf(t, r))
			var ranges []time.Duration
			for _, w := range windows(t, rule) {
				ranges = append(ranges, w.Range)
			}
			if diff := cmp.Diff([]time.Duration{tc.window}, ranges); diff != "" {
				t.Errorf("the ranges FormspecHookTrafficStopped reads: -want, +got:\n%s", diff)
			}
			if got := time.Duration(rule.For); got != tc.window {
				t.Errorf("FormspecHookTrafficStopped for: %v, want %v", got, tc.window)
			}
			if d := rule.Annotations["description"]; !strings.Contains(d, tc.says) {
				t.Errorf("FormspecHookTrafficStopped's description %q does not say %q", d, tc.says)
			}
		})
	}
}
