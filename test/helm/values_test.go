package helm

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/internal/reporter"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// production sets, at once, every value a production install needs beyond
// the defaults (the Production release; valueCases checks each alone).
const production = `imagePullSecrets: [{name: regcred}]
nodeSelector: {node-role.kubernetes.io/platform: ""}
tolerations: [{key: dedicated, operator: Equal, value: platform, effect: NoSchedule}]
affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64, arm64]}]}]}}}
topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]
priorityClassName: platform-critical
podAnnotations: {example.com/owner: platform-team}
podLabels: {example.com/team: platform}
logging: {level: debug, format: text}
extraArgs: [--max-inflight=128]
reporter: {extraArgs: [--node-health-interval=30s]}
serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}}
prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}
`

// productionHookArgs are the hook server's flags in the Production release.
func productionHookArgs() []any {
	args := secureArgs("tokens")
	args[slices.Index(args, any("--log-level=info"))] = "--log-level=debug"
	args[slices.Index(args, any("--log-format=json"))] = "--log-format=text"
	return append(args, "--max-inflight=128")
}

// reporterArgs are the reporter's flags with the given log settings, then
// extra.
func reporterArgs(level, format string, extra ...any) []any {
	return append([]any{
		"--listen=127.0.0.1:8181", "--metrics-listen=:9091", "--health-listen=:8182", "--cluster-control-url=$(CONTROL_CLUSTER_URL)",
		"--token-file=/var/run/formspec/cluster-control/token",
		"--tombstone-file=/var/lib/formspec-reporter/tombstones.json",
		"--log-level=" + level, "--log-format=" + format,
	}, extra...)
}

// hookPods selects the hook pods of the release formspec-hooks.
var hookPods = map[string]any{"matchLabels": map[string]any{
	"app.kubernetes.io/instance": "formspec-hooks", "app.kubernetes.io/name": "formspec-hooks",
}}

// An expect is one field of one rendered object: the first of kind, at a
// dotted path where "containers[hooks]" is the list element named hooks.
// A want map must be contained in the field (other keys may be there);
// anything else must be equal. A nil want means the field is absent.
type expect struct {
	kind string
	path string
	want any
}

// valueCases set one value each (with what every install must give), and
// say where it must land. TestValues renders each as `helm template` does;
// TestAPIServer dry-runs every object each renders.
var valueCases = map[string]struct {
	reason string
	values string
	want   []expect
}{
	"ImageTagDefault": {
		reason: "Without image.tag both containers run the chart's appVersion: the release the chart belongs to.",
		values: required,
		want: []expect{
			{"Deployment", "spec.template.spec.containers[hooks].image", "ghcr.io/formspec/formspec-hooks:" + appVersion},
			{"Deployment", "spec.template.spec.containers[reporter].image", "ghcr.io/formspec/formspec-hooks:" + appVersion},
		},
	},
	"ImageTag": {
		reason: "image.tag and image.repository set both containers' image.",
		values: required + "image: {repository: registry.example.com/formspec-hooks, tag: 0.1.0-rc.1}",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[hooks].image", "registry.example.com/formspec-hooks:0.1.0-rc.1"},
			{"Deployment", "spec.template.spec.containers[reporter].image", "registry.example.com/formspec-hooks:0.1.0-rc.1"},
		},
	},
	"ImageDigest": {
		reason: "image.digest pins both containers' image by digest beside the tag, as a release's packaged chart does.",
		values: required + "image: {digest: sha256:" + strings.Repeat("ab", 32) + "}",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[hooks].image", "ghcr.io/formspec/formspec-hooks:" + appVersion + "@sha256:" + strings.Repeat("ab", 32)},
			{"Deployment", "spec.template.spec.containers[reporter].image", "ghcr.io/formspec/formspec-hooks:" + appVersion + "@sha256:" + strings.Repeat("ab", 32)},
		},
	},
	"ImagePullSecrets": {
		reason: "imagePullSecrets go to the pod spec as given.",
		values: required + "imagePullSecrets: [{name: regcred}]",
		want:   []expect{{"Deployment", "spec.template.spec.imagePullSecrets", []any{map[string]any{"name": "regcred"}}}},
	},
	"NodeSelector": {
		reason: "nodeSelector goes to the pod spec as given.",
		values: required + "nodeSelector: {kubernetes.io/os: linux, pool: platform}",
		want:   []expect{{"Deployment", "spec.template.spec.nodeSelector", map[string]any{"kubernetes.io/os": "linux", "pool": "platform"}}},
	},
	"Tolerations": {
		reason: "tolerations go to the pod spec as given.",
		values: required + "tolerations: [{key: dedicated, operator: Equal, value: platform, effect: NoSchedule}]",
		want: []expect{{"Deployment", "spec.template.spec.tolerations", []any{
			map[string]any{"key": "dedicated", "operator": "Equal", "value": "platform", "effect": "NoSchedule"},
		}}},
	},
	"Affinity": {
		reason: "affinity goes to the pod spec as given.",
		values: required + "affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/name: formspec-hooks}}}]}}",
		want: []expect{{"Deployment", "spec.template.spec.affinity", map[string]any{"podAntiAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution": []any{map[string]any{
				"topologyKey":   "kubernetes.io/hostname",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "formspec-hooks"}},
			}},
		}}}},
	},
	"TopologySpreadConstraints": {
		reason: "A constraint without a labelSelector gets one selecting the release's hook pods.",
		values: required + "topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]",
		want: []expect{{"Deployment", "spec.template.spec.topologySpreadConstraints", []any{map[string]any{
			"maxSkew": float64(1), "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": hookPods,
		}}}},
	},
	"TopologySpreadConstraintsOwnSelector": {
		reason: "A constraint with its own labelSelector keeps it.",
		values: required + "topologySpreadConstraints: [{maxSkew: 2, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {team: a}}}]",
		want: []expect{{"Deployment", "spec.template.spec.topologySpreadConstraints", []any{map[string]any{
			"maxSkew": float64(2), "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
			"labelSelector": map[string]any{"matchLabels": map[string]any{"team": "a"}},
		}}}},
	},
	"NoTopologySpreadConstraints": {
		reason: "An empty list leaves the field out.",
		values: required + "topologySpreadConstraints: []",
		want:   []expect{{"Deployment", "spec.template.spec.topologySpreadConstraints", nil}},
	},
	"PriorityClassName": {
		reason: "priorityClassName goes to the pod spec.",
		values: required + "priorityClassName: platform-critical",
		want:   []expect{{"Deployment", "spec.template.spec.priorityClassName", "platform-critical"}},
	},
	"PodAnnotations": {
		reason: "podAnnotations annotate the pod template, not the Deployment.",
		values: required + "podAnnotations: {example.com/owner: platform-team}",
		want: []expect{
			{"Deployment", "spec.template.metadata.annotations", map[string]any{"example.com/owner": "platform-team"}},
			{"Deployment", "metadata.annotations", nil},
		},
	},
	"PodLabels": {
		reason: "podLabels label the pod template; one the Deployment selects on keeps the chart's value, so the selector still matches.",
		values: required + "podLabels: {example.com/team: platform, app.kubernetes.io/name: other}",
		want: []expect{{"Deployment", "spec.template.metadata.labels", map[string]any{
			"example.com/team": "platform", "app.kubernetes.io/name": "formspec-hooks", "app.kubernetes.io/instance": "formspec-hooks",
		}}},
	},
	"ExtraArgs": {
		reason: "extraArgs come last on the hook server's command line, so that they override the chart's flags.",
		values: required + "extraArgs: [--max-inflight=128, --log-level=warn]",
		want:   []expect{{"Deployment", "spec.template.spec.containers[hooks].args", append(secureArgs("tokens"), "--max-inflight=128", "--log-level=warn")}},
	},
	"ClaimsAcceptV1Grants": {
		reason: "claims.acceptV1Grants passes --accept-v1-grants, before extraArgs; off by default (every other case).",
		values: required + "claims: {acceptV1Grants: true}",
		want:   []expect{{"Deployment", "spec.template.spec.containers[hooks].args", append(secureArgs("tokens"), "--accept-v1-grants")}},
	},
	"ClaimsRelated": {
		reason: "claims.workspaceClaims related relates the claims even with the reporter, which then writes no summary; summary with it is the default (every other case).",
		values: required + "claims: {workspaceClaims: related}",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[hooks].args", func() []any {
				args := secureArgs("tokens")
				args[slices.Index(args, any("--workspace-claims=summary"))] = "--workspace-claims=related"
				return args
			}()},
			{"Deployment", "spec.template.spec.containers[reporter].args", reporterArgs("info", "json", "--write-claims-summary=false")},
		},
	},
	"ReporterExtraArgs": {
		reason: "reporter.extraArgs come last on the reporter's command line.",
		values: required + "reporter: {extraArgs: [--node-health-interval=30s]}",
		want:   []expect{{"Deployment", "spec.template.spec.containers[reporter].args", reporterArgs("info", "json", "--node-health-interval=30s")}},
	},
	"RestartBudgetRaised": {
		reason: "A planned fleet-wide rollout raises reporter.restartBudget: both values reach the reporter's flags, before extraArgs; the idle budget stays the reporter's default.",
		values: required + "reporter: {restartBudget: {share: 1, minInterval: 1m}, extraArgs: [--node-health-interval=30s]}",
		want: []expect{{"Deployment", "spec.template.spec.containers[reporter].args",
			reporterArgs("info", "json", "--restart-budget-share=1", "--restart-min-interval=1m", "--node-health-interval=30s")}},
	},
	"IdleBudget": {
		reason: "reporter.idleBudget reaches the reporter's idle flags; a value left at its default passes no flag.",
		values: required + "reporter: {idleBudget: {share: 0.25}}",
		want:   []expect{{"Deployment", "spec.template.spec.containers[reporter].args", reporterArgs("info", "json", "--idle-budget-share=0.25")}},
	},
	"ReporterHTTPSByDefault": {
		reason: "The reporter calls Cluster Control over https by default, while workspaces keep the address they had (changing it would roll every workspace).",
		values: required,
		want: []expect{
			{"Deployment", "spec.template.spec.containers[reporter].env[CONTROL_CLUSTER_URL].value", "https://formspec-ctl.formspec-system:7070"},
			{"Deployment", "spec.template.spec.containers[hooks].env[CONTROL_CLUSTER_URL].value", "http://formspec-ctl.formspec-system:7070"},
			{"Deployment", "spec.template.spec.containers[reporter].args", reporterArgs("info", "json")},
		},
	},
	"ReporterHTTPSFromControlClusterURL": {
		reason: "An empty reporter.clusterControlURL is controlClusterURL over https, so an install that moved Cluster Control keeps reporting to it.",
		values: required + "controlClusterURL: http://cc.corp.example:8080",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[reporter].env[CONTROL_CLUSTER_URL].value", "https://cc.corp.example:8080"},
			{"Deployment", "spec.template.spec.containers[hooks].env[CONTROL_CLUSTER_URL].value", "http://cc.corp.example:8080"},
		},
	},
	"ReporterInsecureHTTP": {
		reason: "reporter.insecureHTTP passes --insecure-http, before extraArgs, and lets a plain http:// clusterControlURL through.",
		values: required + "reporter: {clusterControlURL: http://cc.corp.example:7070, insecureHTTP: true}",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[reporter].args", reporterArgs("info", "json", "--insecure-http")},
			{"Deployment", "spec.template.spec.containers[reporter].env[CONTROL_CLUSTER_URL].value", "http://cc.corp.example:7070"},
		},
	},
	"ReporterLoopbackHTTP": {
		reason: "Plain HTTP on the loopback (a Cluster Control in the pod) crosses no network and needs no insecureHTTP.",
		values: required + "reporter: {clusterControlURL: http://127.0.0.1:8480}",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[reporter].args", reporterArgs("info", "json")},
			{"Deployment", "spec.template.spec.containers[reporter].env[CONTROL_CLUSTER_URL].value", "http://127.0.0.1:8480"},
		},
	},
	"ReporterCAConfigMap": {
		reason: "reporter.caConfigMapName mounts the ConfigMap's ca.crt into the reporter alone and passes --ca-file.",
		values: required + "reporter: {caConfigMapName: cluster-control-ca}",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[reporter].args", reporterArgs("info", "json", "--ca-file=/var/run/formspec/cluster-control-ca/ca.crt")},
			{"Deployment", "spec.template.spec.containers[reporter].volumeMounts[cluster-control-ca]", map[string]any{"mountPath": "/var/run/formspec/cluster-control-ca", "readOnly": true}},
			{"Deployment", "spec.template.spec.containers[hooks].volumeMounts[cluster-control-ca]", nil},
			{"Deployment", "spec.template.spec.volumes[cluster-control-ca].configMap", map[string]any{"name": "cluster-control-ca", "items": []any{map[string]any{"key": "ca.crt", "path": "ca.crt"}}}},
		},
	},
	"Logging": {
		reason: "logging.level and logging.format set both containers' flags.",
		values: required + "logging: {level: debug, format: text}",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[hooks].args", productionHookArgs()[:len(productionHookArgs())-1]},
			{"Deployment", "spec.template.spec.containers[reporter].args", reporterArgs("debug", "text")},
		},
	},
	"ServiceMonitorLabels": {
		reason: "serviceMonitor.labels are added to the chart's labels (kube-prometheus-stack selects by release).",
		values: required + "serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}}",
		want: []expect{{"ServiceMonitor", "metadata.labels", map[string]any{
			"release": "kube-prometheus-stack", "app.kubernetes.io/name": "formspec-hooks", "app.kubernetes.io/instance": "formspec-hooks",
		}}},
	},
	"PrometheusRuleLabels": {
		reason: "prometheusRule.labels are added to the chart's labels.",
		values: required + "prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack, role: alert-rules}}",
		want: []expect{{"PrometheusRule", "metadata.labels", map[string]any{
			"release": "kube-prometheus-stack", "role": "alert-rules", "app.kubernetes.io/name": "formspec-hooks",
		}}},
	},
	"ResourceImageTag": {
		reason: "A tag in resourceImage is the workspaces' default version: no defaultVersion is needed and none is passed.",
		values: "resourceImage: registry.example.com/formspec-resource:2.0.1",
		want: []expect{{"Deployment", "spec.template.spec.containers[hooks].args", []any{
			"serve", "--listen=:8443", "--metrics-listen=:9090", "--health-listen=:8081", "--resource-image=registry.example.com/formspec-resource:2.0.1",
			"--cluster-control-url=$(CONTROL_CLUSTER_URL)", "--reporter-url=http://127.0.0.1:8181", "--workspace-claims=summary", "--log-level=info", "--log-format=json",
			"--tls-cert-file=/var/run/formspec/tls/tls.crt", "--tls-key-file=/var/run/formspec/tls/tls.key", "--auth-token-file=/var/run/formspec/token/tokens",
		}}},
	},
	"MetricsFromMonitoring": {
		reason: "By default the metrics ports admit the namespace monitoring alone, where kube-prometheus-stack's Prometheus runs; the hook port Metacontroller's.",
		values: required,
		want:   []expect{{"NetworkPolicy", "spec.ingress", networkPolicyRules(namespacePeer(monitoringNamespace))}},
	},
	"MetricsFromPrometheusPods": {
		reason: "networkPolicy.metricsFrom replaces the default: here Prometheus' pods in their namespace, and nothing else.",
		values: required + "networkPolicy: {metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: observability}}, podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}}]}",
		want: []expect{{"NetworkPolicy", "spec.ingress", networkPolicyRules([]any{map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "observability"}},
			"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "prometheus"}},
		}})}},
	},
	"MetricsFromAnyNamespace": {
		reason: "networkPolicy.metricsFrom [] widens the metrics rule to every namespace, as before the default narrowed it; the hook port stays Metacontroller's.",
		values: required + "networkPolicy: {metricsFrom: []}",
		want:   []expect{{"NetworkPolicy", "spec.ingress", networkPolicyRules(nil)}},
	},
	"ReporterDisabled": {
		reason: "reporter.enabled false: one container, no service account, and the hook server hands off nothing (TestNoReporter checks the rest).",
		values: required + "reporter: {enabled: false}",
		want: []expect{
			{"Deployment", "spec.template.spec.containers[reporter]", nil},
			{"Deployment", "spec.template.spec.serviceAccountName", nil},
			{"Deployment", "spec.template.spec.containers[hooks].args", noReporterSummary().HookArgs},
		},
	},
}

// networkPolicyRules are the NetworkPolicy's two ingress rules of a
// release with the reporter, the metrics rule admitting metricsFrom (nil:
// no from, every source).
func networkPolicyRules(metricsFrom []any) []any {
	metrics := map[string]any{"ports": []any{
		map[string]any{"port": "metrics", "protocol": "TCP"},
		map[string]any{"port": "rep-metrics", "protocol": "TCP"},
	}}
	if metricsFrom != nil {
		metrics["from"] = metricsFrom
	}
	return []any{
		map[string]any{"from": namespacePeer("metacontroller"), "ports": []any{map[string]any{"port": "hooks", "protocol": "TCP"}}},
		metrics,
	}
}

// appVersion is the chart's appVersion.
var appVersion = func() string {
	chrt, err := loader.Load("../../deploy/helm/formspec-hooks")
	if err != nil {
		return "?"
	}
	return chrt.Metadata.AppVersion
}()

// valueRelease is the release of a value case.
func valueRelease(values string) release {
	return release{name: "formspec-hooks", namespace: "formspec-system", values: values}
}

func TestValues(t *testing.T) {
	for name, tc := range valueCases {
		t.Run(name, func(t *testing.T) {
			objs := render(t, valueRelease(tc.values)).objects
			for _, e := range tc.want {
				var obj controlplane.Object
				for _, o := range objs {
					if o["kind"] == e.kind {
						obj = o
						break
					}
				}
				if obj == nil {
					t.Fatalf("%s\nno %s rendered", tc.reason, e.kind)
				}
				got := pick(obj, e.path)
				if m, ok := e.want.(map[string]any); ok {
					gotMap, _ := got.(map[string]any)
					got = subset(gotMap, slices.Collect(maps.Keys(m)))
				}
				if diff := cmp.Diff(e.want, got); diff != "" {
					t.Errorf("%s\n%s %s: -want, +got:\n%s", tc.reason, e.kind, e.path, diff)
				}
			}
		})
	}
}

// pick returns the field at path (see expect), or nil.
func pick(v any, path string) any {
	for _, seg := range strings.Split(path, ".") {
		key, name, list := strings.Cut(strings.TrimSuffix(seg, "]"), "[")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[key]
		if !list {
			continue
		}
		items, _ := v.([]any)
		v = nil
		for _, item := range items {
			if get(item, "name") == name {
				v = item
			}
		}
	}
	return v
}

// subset is m restricted to keys; a missing key stays missing.
func subset(m map[string]any, keys []string) map[string]any {
	if m == nil {
		return nil
	}
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestSchema checks that values.schema.json makes Helm refuse an unknown or
// wrongly typed value with a message naming it, as `helm install --set`
// would give them (parsed by Helm's own --set parser), and that a missing
// defaultVersion stops the install with a message saying what to set.
func TestSchema(t *testing.T) {
	cases := map[string]struct {
		reason string
		set    string
		want   string
	}{
		"UnknownTopLevel":   {reason: "A typo is refused, not ignored.", set: "replicass=3", want: "additional properties 'replicass' not allowed"},
		"WrongType":         {reason: "A number must be a number.", set: "replicas=two", want: "at '/replicas': got string, want integer"},
		"NoReplicas":        {reason: "Zero replicas would fail every hook call.", set: "replicas=0", want: "at '/replicas': minimum: got 0, want 1"},
		"UnknownNested":     {reason: "Unknown keys are refused below the top level too.", set: "reporter.enable=false", want: "at '/reporter': additional properties 'enable' not allowed"},
		"WrongBool":         {reason: "A switch is a boolean.", set: "reporter.enabled=maybe", want: "at '/reporter/enabled': got string, want boolean"},
		"LogLevel":          {reason: "Log levels are the binaries' four.", set: "logging.level=loud", want: "at '/logging/level'"},
		"LogFormat":         {reason: "Log formats are the binaries' two.", set: "logging.format=xml", want: "at '/logging/format'"},
		"PullPolicy":        {reason: "Kubernetes' pull policies only.", set: "image.pullPolicy=Sometimes", want: "at '/image/pullPolicy'"},
		"ExtraArgNotFlag":   {reason: "extraArgs are flags; the commands take no arguments.", set: "extraArgs={serve}", want: "at '/extraArgs/0'"},
		"ExtraArgsString":   {reason: "extraArgs is a list.", set: "extraArgs=--pprof", want: "at '/extraArgs': got string, want array"},
		"LabelsMap":         {reason: "Monitor labels are a map of strings.", set: "serviceMonitor.labels=release", want: "at '/serviceMonitor/labels': got string, want object"},
		"PullSecretsShape":  {reason: "A pull secret is {name: ...}.", set: "imagePullSecrets[0].secret=regcred", want: "at '/imagePullSecrets/0'"},
		"MetricsPeerTypo":   {reason: "A misspelled NetworkPolicy peer is refused by the chart, not dropped by the API server.", set: "networkPolicy.metricsFrom[0].namespaceSelecter.matchLabels.team=obs", want: "at '/networkPolicy/metricsFrom/0'"},
		"ImageDigest":       {reason: "The workspaces' image cannot be a digest: the hooks add the version as its tag.", set: "resourceImage=r/img@sha256:abc", want: "at '/resourceImage'"},
		"ResyncTooShort":    {reason: "A resync under 30 s is the whole fleet's syncs every few seconds.", set: "workspaceResyncPeriodSeconds=10", want: "at '/workspaceResyncPeriodSeconds': minimum: got 10, want 30"},
		"ResyncOdd":         {reason: "Twice the period must be whole minutes, the alert's window.", set: "workspaceResyncPeriodSeconds=45", want: "at '/workspaceResyncPeriodSeconds': multipleOf"},
		"ControlURLUser":    {reason: "A password in the workspaces' Cluster Control address would be in every pod spec; the hooks refuse it at start.", set: "controlClusterURL=https://ccuser:pw@cc.example", want: "at '/controlClusterURL'"},
		"ReporterURLUser":   {reason: "The reporter refuses a password in its Cluster Control address; the chart says so before the pod crash-loops.", set: "reporter.clusterControlURL=https://ccuser:pw@cc.example/v1", want: "at '/reporter/clusterControlURL'"},
		"BudgetShareZero":   {reason: "A share of nothing would write no directive ever.", set: "reporter.restartBudget.share=0", want: "at '/reporter/restartBudget/share'"},
		"BudgetShareAll":    {reason: "A share is at most the whole fleet.", set: "reporter.idleBudget.share=1.5", want: "at '/reporter/idleBudget/share'"},
		"BudgetInterval":    {reason: "The least interval is a Go duration, as the flag takes it.", set: "reporter.restartBudget.minInterval=ten", want: "at '/reporter/restartBudget/minInterval'"},
		"ControlURLQuery":   {reason: "A token in the workspaces' Cluster Control address would be in every pod spec; the hooks refuse a query at start.", set: "controlClusterURL=https://cc.example/?token=t0k", want: "at '/controlClusterURL'"},
		"ReporterURLHash":   {reason: "The reporter refuses a fragment like a query.", set: "reporter.clusterControlURL=https://cc.example/#t0k", want: "at '/reporter/clusterControlURL'"},
		"ReporterHTTP":      {reason: "The reporter refuses to send its token over plain HTTP off the loopback without insecureHTTP; the chart says so before the pod crash-loops.", set: "reporter.clusterControlURL=http://cc.example:7070", want: "reporter.clusterControlURL is plain http:// off the loopback"},
		"ReporterCAName":    {reason: "A ConfigMap name is a DNS subdomain.", set: "reporter.caConfigMapName=Corp_CA", want: "at '/reporter/caConfigMapName'"},
		"NoDefaultVersion":  {reason: "Without defaultVersion or a tag in resourceImage the chart stops, as the server would.", set: "defaultVersion=", want: "defaultVersion is required: the formahub/formspec-resource tag that Workspaces without spec.version run"},
		"RenewEveryUpgrade": {reason: "A renewal window as long as the validity would renew on every upgrade.", set: "tls.generated.renewBeforeDays=365", want: "tls.generated.renewBeforeDays (365) must be less than tls.generated.validityDays (365)"},
		"CABundleNotPEM":    {reason: "tls.caBundle is PEM; a file name or base64 would leave Metacontroller trusting nothing.", set: "tls.caBundle=ca.crt", want: "at '/tls/caBundle'"},
		"ImageDigestShape":  {reason: "The hooks' image digest is a sha256 one, or nothing.", set: "image.digest=abc123", want: "at '/image/digest'"},
	}
	chrt, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(required))
			if err != nil {
				t.Fatal(err)
			}
			if err := strvals.ParseInto(tc.set, vals); err != nil {
				t.Fatalf("--set %s: %v", tc.set, err)
			}
			err = renderErr(t, chrt, vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s\nhelm template --set %s: got error %v, want one containing %q", tc.reason, tc.set, err, tc.want)
			}
		})
	}
}

// TestValuesDocumented checks that every value values.schema.json knows
// is in values.yaml, where its comment says what it does. (The other way
// round is helm lint's: it validates values.yaml against the schema, which
// refuses unknown keys.)
func TestValuesDocumented(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal(readChartFile(t, "values.schema.json"), &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(readChartFile(t, "values.yaml"), &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	var missing []string
	undocumented(schema, values, "", &missing)
	// global is Helm's own; values.yaml has no reason to set it.
	missing = slices.DeleteFunc(missing, func(k string) bool { return k == "global" })
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("values.schema.json knows values that values.yaml does not set: %v", missing)
	}
}

// undocumented adds to out the dotted names of the schema's properties
// that values lacks, descending into objects values sets and the schema
// lists key by key.
func undocumented(schema, values map[string]any, prefix string, out *[]string) {
	props, _ := schema["properties"].(map[string]any)
	for k, p := range props {
		v, ok := values[k]
		if !ok {
			*out = append(*out, prefix+k)
			continue
		}
		sub, _ := p.(map[string]any)
		if m, isMap := v.(map[string]any); isMap && len(m) > 0 && sub["additionalProperties"] == false {
			undocumented(sub, m, prefix+k+".", out)
		}
	}
}

// renderErr renders chrt with vals as `helm template` does (schema
// validation included) and returns what stops it.
func renderErr(t *testing.T, chrt *chart.Chart, vals chartutil.Values) error {
	t.Helper()
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: kubeVersion, Major: "1", Minor: "37"}
	opts := chartutil.ReleaseOptions{Name: "formspec-hooks", Namespace: "formspec-system", Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(chrt, vals, opts, caps)
	if err != nil {
		return err
	}
	_, err = engine.Render(chrt, top)
	return err
}

// TestReporterBackoffWithinHalfTheResync checks that, whatever the
// workspace resync, the reporter's longest retry wait is at most half of
// it: the last wait of a Cluster Control outage ends at most that long
// after Cluster Control is back, and docs/reliability.md promises the
// states held through the outage within one resync. The kustomize install
// ships the default resync and no --backoff-max.
func TestReporterBackoffWithinHalfTheResync(t *testing.T) {
	installs := map[string]func(t *testing.T) []controlplane.Object{
		"Kustomize": func(t *testing.T) []controlplane.Object { return kustomizeBuild(t, "deploy") },
	}
	for _, resync := range []int{30, 60, 90, 300, 3600} {
		installs[fmt.Sprintf("Resync%d", resync)] = func(t *testing.T) []controlplane.Object {
			return render(t, valueRelease(required+fmt.Sprintf("workspaceResyncPeriodSeconds: %d\n", resync))).objects
		}
	}
	for name, objects := range installs {
		t.Run(name, func(t *testing.T) {
			var resync time.Duration
			var args []any
			for _, obj := range objects(t) {
				switch {
				case obj["kind"] == "CompositeController" && get(obj, "metadata.name") == "formspec-workspace":
					s, _ := get(obj, "spec.resyncPeriodSeconds").(float64)
					resync = time.Duration(s) * time.Second
				case obj["kind"] == "Deployment":
					args = asItems(pick(obj, "spec.template.spec.containers[reporter].args"))
				}
			}
			if resync == 0 || args == nil {
				t.Fatalf("no workspace controller resync (%v) or no reporter args (%v)", resync, args)
			}
			backoff := reporter.Defaults.BackoffMax
			for _, a := range args { // the last one wins, as with Go's flag package
				if v, ok := strings.CutPrefix(str(a), "--backoff-max="); ok {
					d, err := time.ParseDuration(v)
					if err != nil {
						t.Fatalf("--backoff-max=%s: %v", v, err)
					}
					backoff = d
				}
			}
			if backoff > resync/2 {
				t.Errorf("the reporter waits up to %v between retries, more than half the workspace resync (%v)", backoff, resync)
			}
		})
	}
}

// TestBudgetDefaultsAreTheReporters checks that values.yaml shows the
// reporter's own budget defaults, which the deployment template leaves
// out of the command line: a default changed on one side only would make
// the chart pass, or leave out, the wrong value.
func TestBudgetDefaultsAreTheReporters(t *testing.T) {
	chrt, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := chrt.Values["reporter"].(map[string]any)
	for key, want := range map[string]reporter.Budget{"restartBudget": reporter.Defaults.RestartBudget, "idleBudget": reporter.Defaults.IdleBudget} {
		b, _ := rep[key].(map[string]any)
		interval, err := time.ParseDuration(fmt.Sprint(b["minInterval"]))
		if err != nil {
			t.Fatalf("reporter.%s.minInterval: %v", key, err)
		}
		got := reporter.Budget{Share: toFloat(b["share"]), MinInterval: interval}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("reporter.%s in values.yaml against reporter.Defaults (-want, +got):\n%s", key, diff)
		}
	}
	for _, a := range asItems(pick(deploymentOf(t, render(t, valueRelease(required)).objects), "spec.template.spec.containers[reporter].args")) {
		if strings.Contains(str(a), "-budget-") || strings.Contains(str(a), "-min-interval") {
			t.Errorf("the default budget passes %s; the reporter's defaults need no flag (and deploy/ passes none)", a)
		}
	}
}

func toFloat(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return -1
}

func deploymentOf(t *testing.T, objects []controlplane.Object) controlplane.Object {
	t.Helper()
	for _, obj := range objects {
		if obj["kind"] == "Deployment" {
			return obj
		}
	}
	t.Fatal("no Deployment")
	return nil
}
