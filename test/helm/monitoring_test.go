package helm

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/internal/testkit/binaries"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// monitoring turns on both monitoring objects and the fleet view, so that
// its PrometheusRule has every alert of files/prometheus-rules.yaml.
var monitoring = release{name: "formspec-hooks", namespace: "formspec-system",
	values: required + "serviceMonitor: {enabled: true}\nprometheusRule: {enabled: true}\nkubeStateMetrics: {enabled: true}"}

// withoutFleet turns on the PrometheusRule alone: it must leave out the
// alerts on kube-state-metrics' series, which nothing makes.
var withoutFleet = release{name: "formspec-hooks", namespace: "formspec-system", values: required + "prometheusRule: {enabled: true}"}

// monitoringObjects renders r and returns its ServiceMonitor and
// PrometheusRule (nil when absent) and its Services.
func monitoringObjects(t *testing.T, r release) (serviceMonitor, prometheusRule controlplane.Object, services []controlplane.Object) {
	t.Helper()
	for _, obj := range render(t, r).objects {
		switch obj["kind"] {
		case "ServiceMonitor":
			serviceMonitor = obj
		case "PrometheusRule":
			prometheusRule = obj
		case "Service":
			services = append(services, obj)
		}
	}
	return serviceMonitor, prometheusRule, services
}

// TestMonitoringObjects checks that the ServiceMonitor and PrometheusRule
// are off by default, one value each turns them on, the ServiceMonitor
// selects the metrics Service alone (never the hook Service Metacontroller
// calls) and scrapes ports it has, and the PrometheusRule carries
// files/prometheus-rules.yaml unchanged, leaving out the fleet group unless
// kubeStateMetrics.enabled.
func TestMonitoringObjects(t *testing.T) {
	sm, pr, _ := monitoringObjects(t, releases["Defaults"])
	if sm != nil || pr != nil {
		t.Errorf("the defaults render a ServiceMonitor (%v) or PrometheusRule (%v); both must be off", sm != nil, pr != nil)
	}
	sm, pr, services := monitoringObjects(t, monitoring)
	if sm == nil || pr == nil {
		t.Fatalf("serviceMonitor.enabled and prometheusRule.enabled render ServiceMonitor %v, PrometheusRule %v; want both", sm != nil, pr != nil)
	}
	// A ServiceMonitor selects Services in its namespace by their labels.
	matchLabels, _ := get(sm, "spec.selector.matchLabels").(map[string]any)
	var selected []string
	var svc controlplane.Object
	for _, s := range services {
		labels, _ := get(s, "metadata.labels").(map[string]any)
		match := len(matchLabels) > 0 && get(s, "metadata.namespace") == get(sm, "metadata.namespace")
		for k, v := range matchLabels {
			match = match && labels[k] == v
		}
		if match {
			selected = append(selected, str(get(s, "metadata.name")))
			svc = s
		}
	}
	if diff := cmp.Diff([]string{"formspec-hooks-metrics"}, selected); diff != "" {
		t.Fatalf("Services the ServiceMonitor selects (labels %v): -want, +got:\n%s", matchLabels, diff)
	}
	var servicePorts, scraped []string
	for _, p := range get(svc, "spec.ports").([]any) {
		servicePorts = append(servicePorts, get(p, "name").(string))
	}
	for _, e := range get(sm, "spec.endpoints").([]any) {
		scraped = append(scraped, get(e, "port").(string))
	}
	for _, p := range scraped {
		if !slices.Contains(servicePorts, p) {
			t.Errorf("the ServiceMonitor scrapes port %q, which the metrics Service (ports %v) does not have", p, servicePorts)
		}
	}
	if diff := cmp.Diff([]string{"metrics", "reporter-metrics"}, scraped); diff != "" {
		t.Errorf("ServiceMonitor ports: -want, +got:\n%s", diff)
	}
	var file map[string]any
	if err := yaml.Unmarshal(readChartFile(t, "files/prometheus-rules.yaml"), &file); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(file, pr["spec"]); diff != "" {
		t.Errorf("PrometheusRule spec differs from files/prometheus-rules.yaml: -want, +got:\n%s", diff)
	}
	_, pr, _ = monitoringObjects(t, withoutFleet)
	var groups []string
	for _, g := range get(pr, "spec.groups").([]any) {
		groups = append(groups, str(get(g, "name")))
	}
	if diff := cmp.Diff([]string{"formspec-hooks", "formspec-reporter"}, groups); diff != "" {
		t.Errorf("PrometheusRule groups without kubeStateMetrics.enabled: -want, +got:\n%s", diff)
	}
}

// TestMonitoringWithoutReporter checks that with reporter.enabled false
// nothing watches or alerts on the reporter that is not there: the
// ServiceMonitor scrapes the hook server alone, and the PrometheusRule is
// files/prometheus-rules.yaml without its formspec-reporter group (and the
// fleet group, kube-state-metrics being off too), so no
// alert reads a metric only the reporter or the hand-off to it exports.
func TestMonitoringWithoutReporter(t *testing.T) {
	sm, pr, _ := monitoringObjects(t, releases["NoReporter"])
	if sm == nil || pr == nil {
		t.Fatalf("the NoReporter release renders ServiceMonitor %v, PrometheusRule %v; want both", sm != nil, pr != nil)
	}
	var scraped []string
	for _, e := range get(sm, "spec.endpoints").([]any) {
		scraped = append(scraped, get(e, "port").(string))
	}
	if diff := cmp.Diff([]string{"metrics"}, scraped); diff != "" {
		t.Errorf("ServiceMonitor ports: -want, +got:\n%s", diff)
	}
	var file struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := yaml.Unmarshal(readChartFile(t, "files/prometheus-rules.yaml"), &file); err != nil {
		t.Fatal(err)
	}
	var want []any
	for _, g := range file.Groups {
		if g["name"] != "formspec-reporter" && g["name"] != "formspec-fleet" {
			want = append(want, g)
		}
	}
	if len(want) == len(file.Groups) {
		t.Fatal("files/prometheus-rules.yaml has no group named formspec-reporter")
	}
	if diff := cmp.Diff(want, get(pr, "spec.groups")); diff != "" {
		t.Errorf("PrometheusRule groups without the reporter: -want, +got:\n%s", diff)
	}
	rules, _ := yaml.Marshal(pr["spec"])
	for _, metric := range []string{"formspec_reporter_", "formspec_hooks_reporter_handoff_"} {
		if strings.Contains(string(rules), metric) {
			t.Errorf("an alert still reads %s* without the reporter", metric)
		}
	}
}

func readChartFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// promql parses PromQL as Prometheus does.
var promql = parser.NewParser(parser.Options{})

// alertRules parses the rendered PrometheusRule's spec with Prometheus' own
// rule parser, which also checks every expression and annotation template.
func alertRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	return rulesOf(t, monitoring)
}

// rulesOf is the rules of the PrometheusRule r renders.
func rulesOf(t *testing.T, r release) []rulefmt.Rule {
	t.Helper()
	_, pr, _ := monitoringObjects(t, r)
	spec, err := yaml.Marshal(pr["spec"])
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if groups == nil {
		t.FailNow()
	}
	var rules []rulefmt.Rule
	for _, g := range groups.Groups {
		rules = append(rules, g.Rules...)
	}
	return rules
}

// TestAlertRules checks the rules parse, that each alert says how bad it is
// and links to a section of docs/troubleshooting.md that exists, and that
// the alerts the docs promise are there.
func TestAlertRules(t *testing.T) {
	rules := alertRules(t)
	doc, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := markdownAnchors(string(doc))
	var names []string
	for _, r := range rules {
		names = append(names, r.Alert)
		if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
		}
		_, anchor, ok := strings.Cut(r.Annotations["runbook_url"], "docs/troubleshooting.md#")
		if !ok || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q is not a section of docs/troubleshooting.md (%v)", r.Alert, r.Annotations["runbook_url"], slices.Sorted(maps.Keys(anchors)))
		}
	}
	sort.Strings(names)
	want := []string{
		"FormspecCertificateExpiresSoon", "FormspecClaimsDenied", "FormspecClusterControlUnreachable", "FormspecCredentialsFileBroken", "FormspecDatastoreNotValidated",
		"FormspecHookAuthFailures", "FormspecHookErrors", "FormspecHookPanics", "FormspecHookSlow", "FormspecHookTLSHandshakeErrors",
		"FormspecHookThrottled", "FormspecHookTrafficStopped", "FormspecHooksAbsent",
		"FormspecReporterBacklog", "FormspecReporterCredentialsFileBroken", "FormspecReporterDirectivesRefused", "FormspecReporterDirectivesWaiting",
		"FormspecReporterDropping", "FormspecReporterHandoffDropping",
		"FormspecResourceClaimDenied", "FormspecWorkspacesDegraded",
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("alerts: -want, +got:\n%s", diff)
	}
}

// markdownAnchors returns the GitHub anchors of a Markdown file's headings.
func markdownAnchors(doc string) map[string]bool {
	anchors := map[string]bool{}
	drop := regexp.MustCompile("[^a-z0-9 _-]")
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		anchors[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return anchors
}

// selector is one metric a query reads, with the labels it matches on.
type selector struct {
	where  string
	metric string
	labels []string
}

// selectors returns the metrics expr reads.
func selectors(t *testing.T, where, expr string) []selector {
	t.Helper()
	node, err := promql.ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return nil
	}
	var out []selector
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := selector{where: where, metric: vs.Name}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel {
				s.labels = append(s.labels, m.Name)
			}
		}
		out = append(out, s)
		return nil
	})
	return out
}

// dashboardSelectors returns the metrics the Grafana dashboard's queries
// read, with Grafana's variables replaced by values PromQL accepts.
func dashboardSelectors(t *testing.T) []selector {
	t.Helper()
	var dash struct {
		Panels []struct {
			Type    string
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name       string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(readChartFile(t, "files/grafana-dashboard.json"), &dash); err != nil {
		t.Fatalf("files/grafana-dashboard.json: %v", err)
	}
	vars := strings.NewReplacer("$__rate_interval", "5m", "$namespace", "formspec-system")
	var out []selector
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue // a row only groups the panels below it
		}
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			out = append(out, selectors(t, "dashboard panel "+p.Title, vars.Replace(target.Expr))...)
		}
	}
	label := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`)
	for _, v := range dash.Templating.List {
		if m := label.FindStringSubmatch(v.Definition); m != nil {
			out = append(out, selector{where: "dashboard variable " + v.Name, metric: m[1]})
		}
	}
	return out
}

// TestMetricNamesExist checks that every metric an alert or the dashboard
// reads is one that really exists, with the labels the query matches on.
// The hook server's and the reporter's: it builds the three binaries, runs
// the hook server with its reporter against the reference Cluster Control,
// posts fixtures so that the request, decision and reporting series exist,
// and scrapes both /metrics endpoints. The fleet's (kube_formspec_*):
// kube-state-metrics with the chart's config against a real API server
// holding Workspaces, claims and Datastores (startKubeStateMetrics).
func TestMetricNamesExist(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building and running the binaries")
	}
	var all, servers, fleet []selector
	for _, r := range alertRules(t) {
		all = append(all, selectors(t, "alert "+r.Alert, r.Expr)...)
	}
	all = append(all, dashboardSelectors(t)...)
	for _, s := range all {
		if strings.HasPrefix(s.metric, fleetMetricPrefix) {
			fleet = append(fleet, s)
		} else {
			servers = append(servers, s)
		}
	}

	t.Run("HookServerAndReporter", func(t *testing.T) {
		// The series appear as the work posted reaches the reporter, the
		// sidecar and Cluster Control, which takes a few reporting
		// intervals; scrape until nothing is missing, and report what
		// still is at the deadline.
		checkMetrics(t, servers, "the hook server and the reporter", runServers(t))
	})
	t.Run("KubeStateMetrics", func(t *testing.T) {
		if len(fleet) == 0 {
			t.Fatalf("no alert or dashboard panel reads a %s* series", fleetMetricPrefix)
		}
		// kube-state-metrics has the series once its informers synced.
		scrape, _ := startKubeStateMetrics(t)
		checkMetrics(t, fleet, "kube-state-metrics", func() map[string]map[string]bool {
			exported := map[string]map[string]bool{}
			for _, s := range scrape() {
				if exported[s.name] == nil {
					exported[s.name] = map[string]bool{}
				}
				for l := range s.labels {
					exported[s.name][l] = true
				}
			}
			return exported
		})
	})
}

// checkMetrics scrapes until every selector in want reads an exported
// metric with the labels it matches on, and reports what is missing after
// 30 seconds.
func checkMetrics(t *testing.T, want []selector, source string, scrape func() map[string]map[string]bool) {
	t.Helper()
	var problems []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		problems = missingMetrics(want, source, scrape())
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// missingMetrics says which selectors read a metric, or match on a label,
// that exported does not have; source names what exported them.
func missingMetrics(want []selector, source string, exported map[string]map[string]bool) []string {
	var problems []string
	for _, s := range want {
		labels, ok := exported[s.metric]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s reads %s, which %s does not export", s.where, s.metric, source))
			continue
		}
		for _, l := range s.labels {
			if !labels[l] {
				problems = append(problems, fmt.Sprintf("%s matches %s on label %q, which it does not have (%v)", s.where, s.metric, l, slices.Sorted(maps.Keys(labels))))
			}
		}
	}
	return problems
}

// runServers runs the hook server, the reporter and the reference Cluster
// Control, makes them do some work, and returns a function that scrapes
// both /metrics endpoints: every exported metric with its label names, and
// Prometheus' own target labels (namespace, pod), as a ServiceMonitor
// scrape adds them.
func runServers(t *testing.T) func() map[string]map[string]bool {
	t.Helper()
	root := controlplane.RepoRoot(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/...")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ports := freePorts(t, 6)
	cc, ccAdmin, rep, repMetrics, hooks, hooksMetrics := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]
	// With token files and TLS, as installed, so that the credentials file
	// and certificate expiry metrics exist.
	files := t.TempDir()
	tokens, certFile, keyFile := filepath.Join(files, "tokens"), filepath.Join(files, "tls.crt"), filepath.Join(files, "tls.key")
	ca, err := controlplane.NewCA("formspec-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing("formspec-hooks", nil, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string][]byte{tokens: []byte("metrics-test-token\n"), certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	binaries.Start(t, filepath.Join(bin, "formspec-clustercontrol"), "--listen", cc, "--admin-listen", ccAdmin, "--admin-token-file", tokens)
	binaries.Start(t, filepath.Join(bin, "formspec-reporter"), "--cluster-control-url", "http://"+cc, "--listen", rep, "--metrics-listen", repMetrics,
		"--node-health-interval", "1s", "--deploy-status-interval", "1s", "--token-file", tokens)
	binaries.Start(t, filepath.Join(bin, "formspec-hooks"), "serve", "--listen", hooks, "--metrics-listen", hooksMetrics,
		"--reporter-url", "http://"+rep, "--cluster-control-url", "http://cluster-control.test:7070", "--default-version", "1.8.2", "--shutdown-delay", "0s",
		"--auth-token-file", tokens, "--tls-cert-file", certFile, "--tls-key-file", keyFile)
	client := &http.Client{Timeout: 5 * time.Second}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	hookClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}
	testsync.WaitWithin(t, 90*time.Second, "the hook server and the reporter to be ready", func() bool {
		return get200(client, "http://"+hooksMetrics+"/readyz") && get200(client, "http://"+repMetrics+"/readyz")
	})
	for _, fixture := range []string{"workspace/sync/steady-ready", "resourceclaim/sync/denied-expired", "nodes/sync/ready-node", "pods/sync/running-pod"} {
		body, err := os.ReadFile(filepath.Join(root, "fixtures", fixture, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		hook, _, _ := strings.Cut(fixture, "/sync/")
		req, err := http.NewRequest(http.MethodPost, "https://"+hooks+"/v1/"+hook+"/sync", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer metrics-test-token")
		resp, err := hookClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s", fixture, resp.Status)
		}
	}
	return func() map[string]map[string]bool {
		exported := map[string]map[string]bool{}
		for _, url := range []string{"http://" + hooksMetrics + "/metrics", "http://" + repMetrics + "/metrics"} {
			if err := scrape(client, url, exported); err != nil {
				t.Logf("scrape: %v", err)
			}
		}
		for _, labels := range exported {
			labels["namespace"], labels["pod"] = true, true
		}
		return exported
	}
}

// scrape adds the metrics of a Prometheus text exposition, with their
// label names, to into.
func scrape(client *http.Client, url string, into map[string]map[string]bool) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	labelName := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 {
			continue
		}
		name, labels := line[:end], ""
		if line[end] == '{' {
			labels = line[end+1:]
		}
		if into[name] == nil {
			into[name] = map[string]bool{}
		}
		if labels != "" {
			labels, _, _ = strings.Cut(labels, "}")
			for _, m := range labelName.FindAllStringSubmatch(labels, -1) {
				into[name][m[1]] = true
			}
		}
	}
	return sc.Err()
}

func get200(client *http.Client, url string) bool {
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freePorts returns n distinct free loopback addresses
// (controlplane.FreePorts holds each open until all are picked).
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for _, p := range controlplane.FreePorts(t, n) {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return addrs
}
