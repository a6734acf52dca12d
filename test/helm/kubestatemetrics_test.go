package helm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/testkit/testsync"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// EnvKSMBin names the environment variable holding the directory with the
// kube-state-metrics binary test/ksm-binaries.sh builds (make test sets it).
const EnvKSMBin = "FORMSPEC_KSM_BIN"

// fleetMetricPrefix starts the name of every series kube-state-metrics
// makes with the chart's files/kube-state-metrics.yaml.
const fleetMetricPrefix = "kube_formspec_"

// fleet turns the fleet view on, for a kube-state-metrics running as
// observability/kube-state-metrics rather than the default (so that the
// test sees the values followed).
var fleet = release{name: "formspec-hooks", namespace: "formspec-system",
	values: required + "kubeStateMetrics: {enabled: true, serviceAccount: {name: kube-state-metrics, namespace: observability}}"}

// fleetObjects renders r and returns the objects of the fleet view: the
// ConfigMap holding the config (the chart's only ConfigMap) and the
// ClusterRole and ClusterRoleBinding for kube-state-metrics, in that
// order; nil when none is rendered. Rendering some but not all fails the
// test.
func fleetObjects(t *testing.T, r release) []controlplane.Object {
	t.Helper()
	var configMap, role, binding controlplane.Object
	for _, obj := range render(t, r).objects {
		switch identity(obj) {
		case "ClusterRole/formspec-kube-state-metrics":
			role = obj
		case "ClusterRoleBinding/formspec-kube-state-metrics":
			binding = obj
		}
		if obj["kind"] == "ConfigMap" {
			configMap = obj
		}
	}
	switch {
	case configMap == nil && role == nil && binding == nil:
		return nil
	case configMap == nil || role == nil || binding == nil:
		t.Fatalf("release %s renders ConfigMap %v, ClusterRole %v, ClusterRoleBinding %v: all or none", r.name, configMap != nil, role != nil, binding != nil)
	}
	return []controlplane.Object{configMap, role, binding}
}

// TestKubeStateMetricsObjects checks that the fleet view is off by
// default, and that kubeStateMetrics.enabled renders the ConfigMap holding
// files/kube-state-metrics.yaml as it is, in the namespace of the service
// account the ClusterRoleBinding binds, and NOTES.txt names both, with the
// defaults the values document and with others.
func TestKubeStateMetricsObjects(t *testing.T) {
	if objs := fleetObjects(t, releases["Defaults"]); objs != nil {
		t.Fatalf("the defaults render the fleet view's objects: %v", objs)
	}
	file := string(readChartFile(t, "files/kube-state-metrics.yaml"))
	tests := map[string]struct {
		reason    string
		release   release
		configMap string
		account   map[string]any
		notes     string
	}{
		"Defaults": {
			reason:    "kube-prometheus-stack installed as the release kube-prometheus-stack in monitoring.",
			release:   release{name: "formspec-hooks", namespace: "formspec-system", values: required + "kubeStateMetrics: {enabled: true}"},
			configMap: "ConfigMap/monitoring/formspec-kube-state-metrics",
			account:   map[string]any{"kind": "ServiceAccount", "name": "kube-prometheus-stack-kube-state-metrics", "namespace": "monitoring"},
			notes:     "in ConfigMap monitoring/formspec-kube-state-metrics (key config.yaml), and monitoring/kube-prometheus-stack-kube-state-metrics may\nlist and watch them.",
		},
		"OtherInstall": {
			reason: "Another service account, namespace and ConfigMap name.",
			release: release{name: "fs", namespace: "platform",
				values: required + "kubeStateMetrics: {enabled: true, configMapName: fleet-config, serviceAccount: {name: kube-state-metrics, namespace: observability}}"},
			configMap: "ConfigMap/observability/fleet-config",
			account:   map[string]any{"kind": "ServiceAccount", "name": "kube-state-metrics", "namespace": "observability"},
			notes:     "in ConfigMap observability/fleet-config (key config.yaml), and observability/kube-state-metrics may\nlist and watch them.",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := fleetObjects(t, tc.release)
			if objs == nil {
				t.Fatalf("%s: kubeStateMetrics.enabled renders no ConfigMap, ClusterRole or ClusterRoleBinding", tc.reason)
			}
			configMap, binding := objs[0], objs[2]
			if id := identity(configMap); id != tc.configMap {
				t.Errorf("%s: ConfigMap %s, want %s", tc.reason, id, tc.configMap)
			}
			if diff := cmp.Diff(map[string]any{"config.yaml": file}, configMap["data"]); diff != "" {
				t.Errorf("%s: the ConfigMap's data is not files/kube-state-metrics.yaml under config.yaml: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff([]any{tc.account}, binding["subjects"]); diff != "" {
				t.Errorf("%s: ClusterRoleBinding subjects: -want, +got:\n%s", tc.reason, diff)
			}
			if got := get(binding, "roleRef.name"); got != "formspec-kube-state-metrics" {
				t.Errorf("%s: the ClusterRoleBinding binds %v", tc.reason, got)
			}
			if notes := render(t, tc.release).notes; !strings.Contains(notes, tc.notes) {
				t.Errorf("%s: NOTES.txt does not say %q:\n%s", tc.reason, tc.notes, notes)
			}
		})
	}
}

// TestKubeStateMetrics runs kube-state-metrics v2.15.0 with the chart's
// config against a real API server holding Workspaces, ResourceClaims and
// Datastores in every state the config tells apart, authorized only by
// the chart's ClusterRole, and checks every series it exposes, label for
// label and value for value. Skips without the control-plane binaries or
// the kube-state-metrics binary.
func TestKubeStateMetrics(t *testing.T) {
	scrape, url := startKubeStateMetrics(t)
	want := []string{
		`kube_formspec_datastore_info{datastore="cache",driver="redis",namespace="data"} 1`,
		`kube_formspec_datastore_info{datastore="orders",driver="postgres",namespace="data"} 1`,
		`kube_formspec_datastore_status_condition{condition="Denied",datastore="cache",namespace="data",reason="SecretNotLabeled"} 1`,
		`kube_formspec_datastore_status_condition{condition="Denied",datastore="orders",namespace="data",reason="Validated"} 0`,
		`kube_formspec_datastore_status_condition{condition="Validated",datastore="cache",namespace="data",reason="SecretNotLabeled"} 0`,
		`kube_formspec_datastore_status_condition{condition="Validated",datastore="orders",namespace="data",reason="Validated"} 1`,

		// A claim's Datastore namespace is a label only when the claim
		// names one; pending has no status yet, so no conditions.
		`kube_formspec_resourceclaim_info{datastore="cache",namespace="team-a",permission="read",resourceclaim="broken-cache",workspace="broken"} 1`,
		`kube_formspec_resourceclaim_info{datastore="orders",datastore_namespace="data",namespace="team-a",permission="readwrite",resourceclaim="ready-orders",workspace="ready"} 1`,
		`kube_formspec_resourceclaim_info{datastore="orders",datastore_namespace="data",namespace="team-b",permission="read",resourceclaim="pending",workspace="new"} 1`,
		`kube_formspec_resourceclaim_status_condition{condition="CredentialsExposed",namespace="team-a",reason="LastAppliedAnnotation",resourceclaim="ready-orders",workspace="ready"} 1`,
		`kube_formspec_resourceclaim_status_condition{condition="Denied",namespace="team-a",reason="Granted",resourceclaim="ready-orders",workspace="ready"} 0`,
		`kube_formspec_resourceclaim_status_condition{condition="Denied",namespace="team-a",reason="InvalidSignature",resourceclaim="broken-cache",workspace="broken"} 1`,
		`kube_formspec_resourceclaim_status_condition{condition="Ready",namespace="team-a",reason="Granted",resourceclaim="ready-orders",workspace="ready"} 1`,
		`kube_formspec_resourceclaim_status_condition{condition="Ready",namespace="team-a",reason="InvalidSignature",resourceclaim="broken-cache",workspace="broken"} 0`,

		// environment is a label only when the spec sets it.
		`kube_formspec_workspace_info{cluster_class="gone",namespace="team-b",workspace="orphan"} 1`,
		`kube_formspec_workspace_info{cluster_class="standard",environment="production",namespace="team-a",workspace="ready"} 1`,
		`kube_formspec_workspace_info{cluster_class="standard",environment="staging",namespace="team-a",workspace="rolling"} 1`,
		`kube_formspec_workspace_info{cluster_class="standard",namespace="team-a",workspace="broken"} 1`,
		`kube_formspec_workspace_info{cluster_class="standard",namespace="team-b",workspace="new"} 1`,
		`kube_formspec_workspace_info{cluster_class="sleepy",namespace="team-b",workspace="asleep"} 1`,

		`kube_formspec_workspace_status_condition{condition="Degraded",namespace="team-a",reason="AsExpected",workspace="ready"} 0`,
		`kube_formspec_workspace_status_condition{condition="Degraded",namespace="team-a",reason="AsExpected",workspace="rolling"} 0`,
		`kube_formspec_workspace_status_condition{condition="Degraded",namespace="team-a",reason="ReplicaFailure",workspace="broken"} 1`,
		`kube_formspec_workspace_status_condition{condition="Degraded",namespace="team-b",reason="AsExpected",workspace="asleep"} 0`,
		`kube_formspec_workspace_status_condition{condition="Degraded",namespace="team-b",reason="ClusterClassNotFound",workspace="orphan"} 1`,
		`kube_formspec_workspace_status_condition{condition="Progressing",namespace="team-a",reason="RollingOut",workspace="broken"} 1`,
		`kube_formspec_workspace_status_condition{condition="Progressing",namespace="team-a",reason="RollingOut",workspace="rolling"} 1`,
		`kube_formspec_workspace_status_condition{condition="Progressing",namespace="team-a",reason="RolloutComplete",workspace="ready"} 0`,
		`kube_formspec_workspace_status_condition{condition="Progressing",namespace="team-b",reason="RolloutComplete",workspace="asleep"} 0`,
		`kube_formspec_workspace_status_condition{condition="Progressing",namespace="team-b",reason="RolloutComplete",workspace="orphan"} 0`,
		`kube_formspec_workspace_status_condition{condition="Ready",namespace="team-a",reason="ReplicasAvailable",workspace="ready"} 1`,
		`kube_formspec_workspace_status_condition{condition="Ready",namespace="team-a",reason="ReplicasUnavailable",workspace="broken"} 0`,
		`kube_formspec_workspace_status_condition{condition="Ready",namespace="team-a",reason="ReplicasUnavailable",workspace="rolling"} 0`,
		`kube_formspec_workspace_status_condition{condition="Ready",namespace="team-b",reason="ReplicasAvailable",workspace="asleep"} 1`,
		`kube_formspec_workspace_status_condition{condition="Ready",namespace="team-b",reason="ReplicasAvailable",workspace="orphan"} 1`,

		// new has no status: 0 replicas, and no phase or conditions.
		`kube_formspec_workspace_status_replicas{namespace="team-a",workspace="broken"} 1`,
		`kube_formspec_workspace_status_replicas{namespace="team-a",workspace="ready"} 2`,
		`kube_formspec_workspace_status_replicas{namespace="team-a",workspace="rolling"} 3`,
		`kube_formspec_workspace_status_replicas{namespace="team-b",workspace="asleep"} 0`,
		`kube_formspec_workspace_status_replicas{namespace="team-b",workspace="new"} 0`,
		`kube_formspec_workspace_status_replicas{namespace="team-b",workspace="orphan"} 1`,
		`kube_formspec_workspace_status_replicas_ready{namespace="team-a",workspace="broken"} 0`,
		`kube_formspec_workspace_status_replicas_ready{namespace="team-a",workspace="ready"} 2`,
		`kube_formspec_workspace_status_replicas_ready{namespace="team-a",workspace="rolling"} 1`,
		`kube_formspec_workspace_status_replicas_ready{namespace="team-b",workspace="asleep"} 0`,
		`kube_formspec_workspace_status_replicas_ready{namespace="team-b",workspace="new"} 0`,
		`kube_formspec_workspace_status_replicas_ready{namespace="team-b",workspace="orphan"} 1`,
	}
	want = append(want, phases("team-a", "broken", v1alpha1.PhaseDegraded)...)
	want = append(want, phases("team-a", "ready", v1alpha1.PhaseReady)...)
	want = append(want, phases("team-a", "rolling", v1alpha1.PhaseProgressing)...)
	want = append(want, phases("team-b", "asleep", v1alpha1.PhaseIdle)...)
	want = append(want, phases("team-b", "orphan", v1alpha1.PhaseDegraded)...)
	sort.Strings(want)

	// Every status was written before kube-state-metrics started, so
	// every object it lists is final.
	var got []string
	for _, s := range scrape() {
		got = append(got, s.String())
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kube-state-metrics' fleet series: -want, +got:\n%s", diff)
	}

	// docs/install.md tells to scrape OpenMetrics: the info and stateset
	// families fail a scrape in the classic text format, which
	// kube-state-metrics also answers when protobuf is asked for first (as
	// Prometheus does with scrape_native_histograms).
	client := &http.Client{Timeout: 5 * time.Second}
	for name, accept := range map[string]string{
		"classic text":   "text/plain;version=0.0.4",
		"protobuf first": "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6," + prometheusAccept,
	} {
		if _, err := scrapeFleet(client, url, accept); err == nil || !strings.Contains(err.Error(), "invalid metric type") {
			t.Errorf("a scrape asking for %s: %v, want Prometheus' parser to refuse an info or stateset type", name, err)
		}
	}
}

// phases are the phase series of a Workspace in phase current: one per
// phase, 1 for current.
func phases(namespace, workspace, current string) []string {
	var out []string
	for _, p := range []string{
		v1alpha1.PhasePending, v1alpha1.PhaseProgressing, v1alpha1.PhaseReady,
		v1alpha1.PhaseIdle, v1alpha1.PhaseDegraded, v1alpha1.PhaseTerminating,
	} {
		v := 0
		if p == current {
			v = 1
		}
		out = append(out, fmt.Sprintf(`kube_formspec_workspace_status_phase{namespace=%q,phase=%q,workspace=%q} %d`, namespace, p, workspace, v))
	}
	return out
}

// fleetSeries is one series kube-state-metrics exposes, without the
// customresource_group, _version and _kind labels every one carries.
type fleetSeries struct {
	name   string
	labels map[string]string
	value  float64
}

// String is the series in the exposition format, labels sorted.
func (s fleetSeries) String() string {
	var labels []string
	for _, k := range slices.Sorted(maps.Keys(s.labels)) {
		labels = append(labels, fmt.Sprintf("%s=%q", k, s.labels[k]))
	}
	return s.name + "{" + strings.Join(labels, ",") + "} " + strconv.FormatFloat(s.value, 'g', -1, 64)
}

// startKubeStateMetrics starts a control plane with the chart's CRDs, the
// fleet objects of fleetObjects(fleet) applied and kube-state-metrics'
// service account, creates the Workspaces, ResourceClaims and Datastores
// of TestKubeStateMetrics with their statuses, and runs kube-state-metrics
// as that service account with the config read back from the applied
// ConfigMap. It returns once kube-state-metrics exposes every object, with
// a function scraping its fleet series. It skips when a binary is missing.
func startKubeStateMetrics(t *testing.T) (scrape func() []fleetSeries, url string) {
	t.Helper()
	dir := os.Getenv(EnvKSMBin)
	if dir == "" {
		t.Skipf("%s is not set: build kube-state-metrics with 'make ksm-binaries' (or test/ksm-binaries.sh) and set %s to its directory, or run 'make test'", EnvKSMBin, EnvKSMBin)
	}
	ksm := filepath.Join(dir, "kube-state-metrics")
	if _, err := os.Stat(ksm); err != nil {
		t.Skipf("%s=%s has no kube-state-metrics: build it with 'make ksm-binaries' (or test/ksm-binaries.sh)", EnvKSMBin, dir)
	}
	cp := controlplane.Start(t, controlplane.WithoutControllerManager())
	c := cp.Client()
	crds, err := filepath.Glob(filepath.Join(chartDir(t), "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in the chart's crds/ (%v)", err)
	}
	if err := c.InstallCRDs(crds...); err != nil {
		t.Fatalf("cannot install the chart's CRDs: %v", err)
	}

	objs := fleetObjects(t, fleet)
	if objs == nil {
		t.Fatal("the fleet release renders no ConfigMap, ClusterRole or ClusterRoleBinding")
	}
	subjects, _ := objs[2]["subjects"].([]any)
	if len(subjects) != 1 {
		t.Fatalf("the ClusterRoleBinding has subjects %v, want one service account", subjects)
	}
	ns, account := str(get(subjects[0], "namespace")), str(get(subjects[0], "name"))
	for _, n := range []string{ns, "team-a", "team-b", "data"} {
		ensureNamespace(t, c, n)
	}
	create(t, c, controlplane.Object{"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": account, "namespace": ns}})
	for _, obj := range objs {
		if _, err := c.Apply(obj, "formspec-helm-test"); err != nil {
			t.Fatalf("cannot apply %s: %v", identity(obj), err)
		}
	}
	createFleet(t, c)

	// What the kubelet would mount: the ConfigMap as the API server holds it.
	configMap, err := c.Get("v1", "ConfigMap", ns, str(get(objs[0], "metadata.name")))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	config := filepath.Join(work, "config.yaml")
	data, _ := configMap["data"].(map[string]any)
	text, ok := data["config.yaml"].(string)
	if !ok {
		t.Fatalf("the ConfigMap %s holds no config.yaml", identity(configMap))
	}
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	token, err := c.ServiceAccountToken(ns, account)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig, token); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 2)
	listen, telemetry := ports[0], ports[1]
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatal(err)
	}
	telemetryHost, telemetryPort, err := net.SplitHostPort(telemetry)
	if err != nil {
		t.Fatal(err)
	}
	controlplane.StartProcess(t, controlplane.ProcessConfig{Dir: work, LogLines: 80}, ksm,
		"--kubeconfig="+kubeconfig,
		"--custom-resource-state-only",
		"--custom-resource-state-config-file="+config,
		"--host="+host, "--port="+port,
		"--telemetry-host="+telemetryHost, "--telemetry-port="+telemetryPort,
	)

	client := &http.Client{Timeout: 5 * time.Second}
	var lastErr error
	t.Cleanup(func() {
		if t.Failed() && lastErr != nil {
			t.Logf("the last scrape of kube-state-metrics failed: %v", lastErr)
		}
	})
	url = "http://" + listen + "/metrics"
	scrape = func() []fleetSeries {
		var out []fleetSeries
		out, lastErr = scrapeFleet(client, url, prometheusAccept)
		return out
	}
	// The series of an object appear once kube-state-metrics has found the
	// CRDs (it polls every 3 s) and listed the object, status included.
	testsync.WaitWithin(t, 90*time.Second, "kube-state-metrics to list every Workspace, ResourceClaim and Datastore", func() bool {
		count := map[string]int{}
		for _, s := range scrape() {
			if strings.HasSuffix(s.name, "_info") {
				count[s.name]++
			}
		}
		return count["kube_formspec_workspace_info"] == 6 && count["kube_formspec_resourceclaim_info"] == 3 && count["kube_formspec_datastore_info"] == 2
	})
	return scrape, url
}

// prometheusAccept is the Accept header of a Prometheus scrape with the
// default scrape_protocols: OpenMetrics first, then the classic text
// format. kube-state-metrics answers OpenMetrics, the only text format its
// info and stateset families parse in.
const prometheusAccept = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4," +
	"text/plain;version=1.0.0;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"

// scrapeFleet scrapes a kube-state-metrics /metrics as Prometheus does
// (an Accept header, Prometheus' parser for the content type answered) and
// returns the fleet series, or an error for a series whose
// customresource_* labels are not those of the formspec.dev kind its
// name says.
func scrapeFleet(client *http.Client, url, accept string) ([]fleetSeries, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser, err := textparse.New(body, resp.Header.Get("Content-Type"), nil, textparse.ParserOptions{})
	if parser == nil {
		return nil, fmt.Errorf("GET %s: no parser for Content-Type %q: %v", url, resp.Header.Get("Content-Type"), err)
	}
	kinds := map[string]string{"workspace": "Workspace", "resourceclaim": "ResourceClaim", "datastore": "Datastore"}
	var out []fleetSeries
	for {
		entry, err := parser.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("GET %s: %w", url, err)
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, _, value := parser.Series()
		var lset labels.Labels
		parser.Labels(&lset)
		name := lset.Get(model.MetricNameLabel)
		if !strings.HasPrefix(name, fleetMetricPrefix) {
			continue
		}
		s := fleetSeries{name: name, labels: map[string]string{}, value: value}
		gvk := map[string]string{}
		lset.Range(func(l labels.Label) {
			switch k, ok := strings.CutPrefix(l.Name, "customresource_"); {
			case l.Name == model.MetricNameLabel:
			case ok:
				gvk[k] = l.Value
			default:
				s.labels[l.Name] = l.Value
			}
		})
		kind, _, _ := strings.Cut(strings.TrimPrefix(name, fleetMetricPrefix), "_")
		if want := map[string]string{"group": v1alpha1.Group, "version": v1alpha1.Version, "kind": kinds[kind]}; !maps.Equal(want, gvk) {
			return nil, fmt.Errorf("%s: customresource labels %v, want %v", s, gvk, want)
		}
		out = append(out, s)
	}
}

// createFleet creates the Workspaces, ResourceClaims and Datastores of
// TestKubeStateMetrics and writes their statuses through the status
// subresource, as the hooks (through Metacontroller) would.
func createFleet(t *testing.T, c *controlplane.Client) {
	t.Helper()
	type state struct {
		status metav1.ConditionStatus
		reason string
	}
	conditions := func(types []string, states ...state) []metav1.Condition {
		var out []metav1.Condition
		for i, s := range states {
			out = append(out, metav1.Condition{Type: types[i], Status: s.status, Reason: s.reason,
				Message: "written by the test", LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
		}
		return out
	}
	wsConditions := []string{v1alpha1.ConditionReady, v1alpha1.ConditionProgressing, v1alpha1.ConditionDegraded}
	yes, no := metav1.ConditionTrue, metav1.ConditionFalse
	workspaces := []struct {
		namespace, name, class, environment string
		status                              *v1alpha1.WorkspaceStatus
	}{
		{"team-a", "ready", "standard", "production", &v1alpha1.WorkspaceStatus{Phase: v1alpha1.PhaseReady, Replicas: 2, ReadyReplicas: 2, UpdatedReplicas: 2,
			Conditions: conditions(wsConditions, state{yes, v1alpha1.ReasonReplicasAvailable}, state{no, v1alpha1.ReasonRolloutComplete}, state{no, v1alpha1.ReasonAsExpected})}},
		{"team-a", "rolling", "standard", "staging", &v1alpha1.WorkspaceStatus{Phase: v1alpha1.PhaseProgressing, Replicas: 3, ReadyReplicas: 1, UpdatedReplicas: 1,
			Conditions: conditions(wsConditions, state{no, v1alpha1.ReasonReplicasUnavailable}, state{yes, v1alpha1.ReasonRollingOut}, state{no, v1alpha1.ReasonAsExpected})}},
		{"team-a", "broken", "standard", "", &v1alpha1.WorkspaceStatus{Phase: v1alpha1.PhaseDegraded, Replicas: 1, ReadyReplicas: 0,
			Conditions: conditions(wsConditions, state{no, v1alpha1.ReasonReplicasUnavailable}, state{yes, v1alpha1.ReasonRollingOut}, state{yes, v1alpha1.ReasonReplicaFailure})}},
		{"team-b", "orphan", "gone", "", &v1alpha1.WorkspaceStatus{Phase: v1alpha1.PhaseDegraded, Replicas: 1, ReadyReplicas: 1, UpdatedReplicas: 1,
			Conditions: conditions(wsConditions, state{yes, v1alpha1.ReasonReplicasAvailable}, state{no, v1alpha1.ReasonRolloutComplete}, state{yes, v1alpha1.ReasonClusterClassNotFound})}},
		{"team-b", "asleep", "sleepy", "", &v1alpha1.WorkspaceStatus{Phase: v1alpha1.PhaseIdle,
			Conditions: conditions(wsConditions, state{yes, v1alpha1.ReasonReplicasAvailable}, state{no, v1alpha1.ReasonRolloutComplete}, state{no, v1alpha1.ReasonAsExpected})}},
		{"team-b", "new", "standard", "", nil},
	}
	for _, w := range workspaces {
		ws := v1alpha1.Workspace{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Workspace"},
			ObjectMeta: metav1.ObjectMeta{Namespace: w.namespace, Name: w.name},
			Spec:       v1alpha1.WorkspaceSpec{ClusterClass: w.class, Environment: w.environment},
		}
		if w.status != nil {
			ws.Status = *w.status
		}
		createWithStatus(t, c, ws, w.status != nil)
	}

	claimConditions := []string{v1alpha1.ConditionReady, v1alpha1.ConditionDenied, v1alpha1.ConditionCredentialsExposed}
	claims := []struct {
		namespace, name, workspace string
		datastore                  v1alpha1.DatastoreClaimRef
		permission                 string
		status                     *v1alpha1.ResourceClaimStatus
	}{
		{"team-a", "ready-orders", "ready", v1alpha1.DatastoreClaimRef{Name: "orders", Namespace: "data"}, v1alpha1.PermissionReadWrite,
			&v1alpha1.ResourceClaimStatus{Binding: &v1alpha1.Binding{Name: "ready-orders-credentials"},
				Conditions: conditions(claimConditions, state{yes, v1alpha1.ReasonGranted}, state{no, v1alpha1.ReasonGranted}, state{yes, v1alpha1.ReasonLastAppliedAnnotation})}},
		{"team-a", "broken-cache", "broken", v1alpha1.DatastoreClaimRef{Name: "cache"}, v1alpha1.PermissionRead,
			&v1alpha1.ResourceClaimStatus{
				Conditions: conditions(claimConditions, state{no, v1alpha1.ReasonInvalidSignature}, state{yes, v1alpha1.ReasonInvalidSignature})}},
		{"team-b", "pending", "new", v1alpha1.DatastoreClaimRef{Name: "orders", Namespace: "data"}, v1alpha1.PermissionRead, nil},
	}
	for _, cl := range claims {
		claim := v1alpha1.ResourceClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "ResourceClaim"},
			ObjectMeta: metav1.ObjectMeta{Namespace: cl.namespace, Name: cl.name},
			Spec: v1alpha1.ResourceClaimSpec{Datastore: cl.datastore, Workspace: cl.workspace, Permission: cl.permission,
				GrantedBy: "owner@example.com", GrantedAt: "2026-01-01T00:00:00Z",
				// Nobody verifies it here: any 64 bytes, base64.
				Signature: strings.Repeat("A", 86) + "=="},
		}
		if cl.status != nil {
			claim.Status = *cl.status
		}
		createWithStatus(t, c, claim, cl.status != nil)
	}

	dsConditions := []string{v1alpha1.ConditionValidated, v1alpha1.ConditionDenied}
	datastores := []struct {
		name, driver string
		status       v1alpha1.DatastoreStatus
	}{
		{"orders", v1alpha1.DriverPostgres, v1alpha1.DatastoreStatus{Endpoint: "orders.data:5432",
			Conditions: conditions(dsConditions, state{yes, v1alpha1.ReasonValidated}, state{no, v1alpha1.ReasonValidated})}},
		{"cache", v1alpha1.DriverRedis, v1alpha1.DatastoreStatus{
			Conditions: conditions(dsConditions, state{no, v1alpha1.ReasonSecretNotLabeled}, state{yes, v1alpha1.ReasonSecretNotLabeled})}},
	}
	for _, d := range datastores {
		createWithStatus(t, c, v1alpha1.Datastore{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.APIVersion, Kind: "Datastore"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "data", Name: d.name},
			Spec: v1alpha1.DatastoreSpec{Driver: d.driver, EndpointSecretRef: v1alpha1.SecretRef{Name: d.name + "-endpoint"},
				AllowedTenants: []string{"team-a/*", "team-b/*"}, OwnerPublicKey: strings.Repeat("ab", 32)},
			Status: d.status,
		}, true)
	}
}

// createWithStatus creates obj (a typed formspec.dev object) and, when
// withStatus, writes its status through the status subresource, which a
// create ignores.
func createWithStatus(t *testing.T, c *controlplane.Client, obj any, withStatus bool) {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var o controlplane.Object
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	status := o["status"]
	delete(o, "status")
	create(t, c, o)
	if !withStatus {
		return
	}
	if _, err := c.ApplyStatus(controlplane.Object{
		"apiVersion": o["apiVersion"], "kind": o["kind"],
		"metadata": map[string]any{"name": get(o, "metadata.name"), "namespace": get(o, "metadata.namespace")},
		"status":   status,
	}, "formspec-helm-test"); err != nil {
		t.Fatalf("cannot write the status of %s: %v", identity(o), err)
	}
}

// create creates obj, failing the test when the API server refuses it.
func create(t *testing.T, c *controlplane.Client, obj controlplane.Object) controlplane.Object {
	t.Helper()
	created, err := c.Create(obj)
	if err != nil {
		t.Fatalf("cannot create %s: %v", identity(obj), err)
	}
	return created
}
