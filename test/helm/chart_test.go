// Package helm tests the Helm chart in deploy/helm/formspec-hooks without a
// helm binary: it renders the chart with the Helm Go library (as `helm
// template` would), lints it, checks that the defaults render what `kubectl
// apply -k deploy/` installs, and, when FORMSPEC_K8S_BIN names the
// control-plane binaries, has a real kube-apiserver dry-run every rendered
// object. It is a module of its own so that Helm's dependencies stay out of
// the main go.mod.
package helm

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// kubeVersion is the Kubernetes version the chart is rendered for: the one
// test/k8s.mk builds the control plane at.
const kubeVersion = "v1.37.2"

// A release is where a chart is installed and with which values (YAML, as
// given to helm install -f).
type release struct {
	name      string
	namespace string
	values    string
}

// tlsAndToken turns on both options of docs/security.md.
const tlsAndToken = `
tls:
  secretName: formspec-hooks-tls
authToken:
  secretName: formspec-hooks-token
`

// releases are the installs every test renders: the documented one, one
// with TLS and a token under another name and namespace (so that names
// visibly follow the release), a token alone, and one with the optional
// objects off.
var releases = map[string]release{
	"Defaults":    {name: "formspec-hooks", namespace: "formspec-system"},
	"TLSAndToken": {name: "fs", namespace: "platform", values: tlsAndToken},
	"TokenOnly":   {name: "formspec-hooks", namespace: "formspec-system", values: "authToken: {secretName: hook-token, serverKey: all-tokens, clientKey: current}"},
	"Minimal":     {name: "formspec-hooks", namespace: "hooks", values: "networkPolicy: {enabled: false}\npodDisruptionBudget: {enabled: false}\nreplicas: 1"},
}

// repoRoot is the directory of the main module's go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(data), "module github.com/formspec/formspec-hooks\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("cannot find the repository root (go.mod of github.com/formspec/formspec-hooks)")
		}
		dir = parent
	}
}

func chartDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deploy", "helm", "formspec-hooks")
}

// rendered is a chart rendered for one release.
type rendered struct {
	objects []controlplane.Object // in file order, then document order
	notes   string
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// render renders the chart's templates for r as `helm install` would,
// refusing a chart whose kubeVersion excludes kubeVersion. Every document
// must be strict YAML (no duplicate keys) and a Kubernetes object.
func render(t testing.TB, r release) rendered {
	t.Helper()
	chrt, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("cannot load the chart: %v", err)
	}
	vals, err := chartutil.ReadValues([]byte(r.values))
	if err != nil {
		t.Fatalf("bad test values: %v", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: kubeVersion, Major: "1", Minor: "37"}
	if c := chrt.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, kubeVersion) {
		t.Fatalf("the chart's kubeVersion %q excludes %s", c, kubeVersion)
	}
	opts := chartutil.ReleaseOptions{Name: r.name, Namespace: r.namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(chrt, vals, opts, caps)
	if err != nil {
		t.Fatalf("cannot compute the render values: %v", err)
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		t.Fatalf("cannot render: %v", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var out rendered
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			out.notes = files[name]
			continue
		}
		for i, doc := range docSeparator.Split(files[name], -1) {
			var obj controlplane.Object
			if err := yaml.UnmarshalStrict([]byte(doc), &obj); err != nil {
				t.Fatalf("%s document %d is not strict YAML: %v\n%s", name, i+1, err, doc)
			}
			if obj == nil {
				continue // only comments or whitespace
			}
			if id := identity(obj); obj["apiVersion"] == nil || strings.HasPrefix(id, "/") || strings.HasSuffix(id, "/") {
				t.Fatalf("%s document %d is not a Kubernetes object (apiVersion, kind, metadata.name):\n%s", name, i+1, doc)
			}
			out.objects = append(out.objects, obj)
		}
	}
	return out
}

// identity is "Kind/name" or "Kind/namespace/name".
func identity(obj controlplane.Object) string {
	kind, _ := obj["kind"].(string)
	md, _ := obj["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	if ns == "" {
		return kind + "/" + name
	}
	return kind + "/" + ns + "/" + name
}

// get returns the value at a dotted path of maps, or nil.
func get(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// summary is what TestRender checks of a rendered release: which objects,
// where every hook points, what Metacontroller is told about the
// endpoint, and how the hook server is started and exposed.
type summary struct {
	Objects []string
	// Webhooks are "<controller> <hook>: <protocol>://<service>.<namespace>:<port><path>".
	Webhooks []string
	// EndpointConfigs are each controller's spec.endpointConfigs, keyed by
	// controller; controllers without any are absent.
	EndpointConfigs map[string]any
	HookArgs        []any
	HookMounts      any
	Volumes         []any
	ServicePorts    any
	BindingSubjects any
}

func summarize(objs []controlplane.Object) summary {
	var s summary
	for _, obj := range objs {
		id := identity(obj)
		s.Objects = append(s.Objects, id)
		md, _ := obj["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		switch obj["kind"] {
		case "CompositeController", "DecoratorController":
			hooks, _ := get(obj, "spec.hooks").(map[string]any)
			for hook := range hooks {
				svc := get(hooks[hook], "webhook.service")
				protocol, _ := get(svc, "protocol").(string)
				if protocol == "" {
					protocol = "http"
				}
				s.Webhooks = append(s.Webhooks, name+" "+hook+": "+protocol+"://"+
					str(get(svc, "name"))+"."+str(get(svc, "namespace"))+":"+str(get(svc, "port"))+
					str(get(hooks[hook], "webhook.path")))
			}
			if ec := get(obj, "spec.endpointConfigs"); ec != nil {
				if s.EndpointConfigs == nil {
					s.EndpointConfigs = map[string]any{}
				}
				s.EndpointConfigs[name] = ec
			}
		case "Deployment":
			containers, _ := get(obj, "spec.template.spec.containers").([]any)
			for _, c := range containers {
				if get(c, "name") == "hooks" {
					s.HookArgs, _ = get(c, "args").([]any)
					s.HookMounts = get(c, "volumeMounts")
				}
			}
			vols, _ := get(obj, "spec.template.spec.volumes").([]any)
			for _, v := range vols {
				s.Volumes = append(s.Volumes, get(v, "name").(string)+"="+str(get(v, "secret.secretName")))
			}
		case "Service":
			s.ServicePorts = get(obj, "spec.ports")
		case "ClusterRoleBinding":
			// The reporter's binding is fixed (deploy/reporter); this
			// summary follows Metacontroller's, which values change.
			if get(obj, "metadata.name") == "formspec-metacontroller" {
				s.BindingSubjects = obj["subjects"]
			}
		}
	}
	sort.Strings(s.Objects)
	sort.Strings(s.Webhooks)
	return s
}

// str formats a decoded JSON scalar (numbers are float64) for a summary.
func str(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// webhooks lists the nine hooks of the five controllers with their URLs
// built by url(path).
func webhooks(url func(path string) string) []string {
	hooks := []string{
		"formspec-datastore customize: /v1/datastore/customize",
		"formspec-datastore sync: /v1/datastore/sync",
		"formspec-node-health sync: /v1/nodes/sync",
		"formspec-resourceclaim customize: /v1/resourceclaim/customize",
		"formspec-resourceclaim sync: /v1/resourceclaim/sync",
		"formspec-workspace customize: /v1/workspace/customize",
		"formspec-workspace finalize: /v1/workspace/finalize",
		"formspec-workspace sync: /v1/workspace/sync",
		"formspec-workspace-pods sync: /v1/pods/sync",
	}
	for i, h := range hooks {
		prefix, path, _ := strings.Cut(h, ": ")
		hooks[i] = prefix + ": " + url(path)
	}
	return hooks
}

// objects lists the objects the chart renders, namespaced ones under
// fullname in namespace.
func objects(namespace, fullname string, networkPolicy, pdb bool) []string {
	objs := []string{
		"ClusterRole/formspec-edit",
		"ClusterRole/formspec-metacontroller",
		"ClusterRole/formspec-reporter",
		"ClusterRole/formspec-view",
		"ClusterRoleBinding/formspec-metacontroller",
		"ClusterRoleBinding/formspec-reporter",
		"CompositeController/formspec-workspace",
		"DecoratorController/formspec-datastore",
		"DecoratorController/formspec-node-health",
		"DecoratorController/formspec-resourceclaim",
		"DecoratorController/formspec-workspace-pods",
		"Deployment/" + namespace + "/" + fullname,
		"Service/" + namespace + "/" + fullname,
		"ServiceAccount/" + namespace + "/" + fullname,
		"ServiceAccount/" + namespace + "/formspec-reporter",
		"ValidatingAdmissionPolicy/formspec-reporter-workspace-annotations",
		"ValidatingAdmissionPolicyBinding/formspec-reporter-workspace-annotations",
	}
	if networkPolicy {
		objs = append(objs, "NetworkPolicy/"+namespace+"/"+fullname)
	}
	if pdb {
		objs = append(objs, "PodDisruptionBudget/"+namespace+"/"+fullname)
	}
	sort.Strings(objs)
	return objs
}

// everyController gives each of the five controllers the same value.
func everyController(v any) map[string]any {
	return map[string]any{
		"formspec-datastore": v, "formspec-node-health": v, "formspec-resourceclaim": v,
		"formspec-workspace": v, "formspec-workspace-pods": v,
	}
}

// baseArgs are the hook server's flags with the default values, listening
// on listen.
func baseArgs(listen string) []any {
	return []any{
		"serve", "--listen=" + listen, "--metrics-listen=:9090",
		"--resource-image=formahub/formspec-resource", "--default-version=latest",
		"--control-cluster-url=$(CONTROL_CLUSTER_URL)", "--reporter-url=http://127.0.0.1:8181",
		"--log-format=json",
	}
}

func servicePorts(name string, port float64) []any {
	return []any{
		map[string]any{"name": name, "port": port, "targetPort": "hooks", "protocol": "TCP"},
		map[string]any{"name": "metrics", "port": float64(9090), "targetPort": "metrics", "protocol": "TCP"},
	}
}

var defaultSubjects = []any{map[string]any{"kind": "ServiceAccount", "name": "metacontroller", "namespace": "metacontroller"}}

func TestRender(t *testing.T) {
	cases := map[string]struct {
		reason string
		want   summary
		// notes must appear in NOTES.txt.
		notes []string
	}{
		"Defaults": {
			reason: "The documented install: plain HTTP on port 80 of the formspec-hooks Service, no endpointConfigs.",
			want: summary{
				Objects:         objects("formspec-system", "formspec-hooks", true, true),
				Webhooks:        webhooks(func(p string) string { return "http://formspec-hooks.formspec-system:80" + p }),
				HookArgs:        baseArgs(":8080"),
				Volumes:         []any{"cluster-control-token=formspec-cluster-control-token"},
				ServicePorts:    servicePorts("http", 80),
				BindingSubjects: defaultSubjects,
			},
			notes: []string{"WARNING: hook traffic is plain HTTP", "deployment/formspec-hooks"},
		},
		"TLSAndToken": {
			reason: "With TLS and a token, names follow the release, the server gets both files, the Service serves 443 and every controller calls https with the CA and token from the Secrets.",
			want: summary{
				Objects:  objects("platform", "fs-formspec-hooks", true, true),
				Webhooks: webhooks(func(p string) string { return "https://fs-formspec-hooks.platform:443" + p }),
				EndpointConfigs: everyController([]any{map[string]any{
					"host": "fs-formspec-hooks.platform:443",
					"caBundle": map[string]any{"secretRef": map[string]any{
						"name": "formspec-hooks-tls", "namespace": "platform", "key": "ca.crt"}},
					"authorization": map[string]any{"secretRef": map[string]any{
						"name": "formspec-hooks-token", "namespace": "platform", "key": "token"}},
				}}),
				HookArgs: append(baseArgs(":8443"),
					"--tls-cert-file=/var/run/formspec/tls/tls.crt",
					"--tls-key-file=/var/run/formspec/tls/tls.key",
					"--auth-token-file=/var/run/formspec/token/tokens"),
				HookMounts: []any{
					map[string]any{"name": "tls", "mountPath": "/var/run/formspec/tls", "readOnly": true},
					map[string]any{"name": "token", "mountPath": "/var/run/formspec/token", "readOnly": true},
				},
				Volumes: []any{
					"cluster-control-token=formspec-cluster-control-token",
					"tls=formspec-hooks-tls",
					"token=formspec-hooks-token",
				},
				ServicePorts:    servicePorts("https", 443),
				BindingSubjects: defaultSubjects,
			},
			notes: []string{"served over TLS from Secret formspec-hooks-tls", "bearer token in Secret formspec-hooks-token"},
		},
		"TokenOnly": {
			reason: "A token without TLS keeps plain HTTP on port 80 and configures only authorization for that host.",
			want: summary{
				Objects:  objects("formspec-system", "formspec-hooks", true, true),
				Webhooks: webhooks(func(p string) string { return "http://formspec-hooks.formspec-system:80" + p }),
				EndpointConfigs: everyController([]any{map[string]any{
					"host": "formspec-hooks.formspec-system:80",
					"authorization": map[string]any{"secretRef": map[string]any{
						"name": "hook-token", "namespace": "formspec-system", "key": "current"}},
				}}),
				HookArgs:   append(baseArgs(":8080"), "--auth-token-file=/var/run/formspec/token/all-tokens"),
				HookMounts: []any{map[string]any{"name": "token", "mountPath": "/var/run/formspec/token", "readOnly": true}},
				Volumes: []any{
					"cluster-control-token=formspec-cluster-control-token",
					"token=hook-token",
				},
				ServicePorts:    servicePorts("http", 80),
				BindingSubjects: defaultSubjects,
			},
			notes: []string{"WARNING: hook traffic is plain HTTP"},
		},
		"Minimal": {
			reason: "networkPolicy.enabled and podDisruptionBudget.enabled false leave those objects out.",
			want: summary{
				Objects:         objects("hooks", "formspec-hooks", false, false),
				Webhooks:        webhooks(func(p string) string { return "http://formspec-hooks.hooks:80" + p }),
				HookArgs:        baseArgs(":8080"),
				Volumes:         []any{"cluster-control-token=formspec-cluster-control-token"},
				ServicePorts:    servicePorts("http", 80),
				BindingSubjects: defaultSubjects,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, ok := releases[name]
			if !ok {
				t.Fatalf("no release %q", name)
			}
			out := render(t, r)
			if diff := cmp.Diff(tc.want, summarize(out.objects)); diff != "" {
				t.Errorf("%s\nrender(%s): -want, +got:\n%s", tc.reason, name, diff)
			}
			for _, n := range tc.notes {
				if !strings.Contains(out.notes, n) {
					t.Errorf("%s\nNOTES.txt does not say %q:\n%s", tc.reason, n, out.notes)
				}
			}
		})
	}
}

// helmLabels are the labels the chart adds to what deploy/ has.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// withoutHelmLabels deletes helmLabels from every map in v, in place.
func withoutHelmLabels(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range helmLabels {
			delete(v, k)
		}
		for _, e := range v {
			withoutHelmLabels(e)
		}
	case []any:
		for _, e := range v {
			withoutHelmLabels(e)
		}
	}
}

// kustomizeFiles lists the files a kustomization's resources name,
// following directories to their kustomization.yaml.
func kustomizeFiles(t *testing.T, dir string) []string {
	t.Helper()
	docs, err := controlplane.ReadYAMLFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, d := range docs {
		resources, _ := d["resources"].([]any)
		for _, r := range resources {
			path := filepath.Join(dir, r.(string))
			if fi, err := os.Stat(path); err == nil && fi.IsDir() {
				files = append(files, kustomizeFiles(t, path)...)
			} else {
				files = append(files, path)
			}
		}
	}
	return files
}

// TestMatchesKustomize pins the promise in values.yaml: with the defaults,
// released as formspec-hooks in formspec-system, the chart renders exactly
// the objects of `kubectl apply -k deploy/` but for Helm's labels, the
// Namespace (the release namespace, --create-namespace) and the CRDs
// (crds/, see TestCRDsMatchDeploy).
func TestMatchesKustomize(t *testing.T) {
	want := map[string]controlplane.Object{}
	for _, f := range kustomizeFiles(t, filepath.Join(repoRoot(t), "deploy")) {
		objs, err := controlplane.ReadYAMLFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range objs {
			if k := obj["kind"]; k == "Namespace" || k == "CustomResourceDefinition" {
				continue
			}
			want[identity(obj)] = obj
		}
	}
	got := map[string]controlplane.Object{}
	for _, obj := range render(t, releases["Defaults"]).objects {
		withoutHelmLabels(obj)
		got[identity(obj)] = obj
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the default release differs from kubectl apply -k deploy/ (beyond Helm's labels): -want (deploy/), +got (chart):\n%s", diff)
	}
}

// TestCRDsMatchDeploy checks that the chart's crds/ is a byte-identical
// copy of deploy/crds (`make helm-crds` copies them).
func TestCRDsMatchDeploy(t *testing.T) {
	read := func(dir string) map[string]string {
		files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, f := range files {
			if filepath.Base(f) == "kustomization.yaml" {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(f)] = string(data)
		}
		return out
	}
	want := read(filepath.Join(repoRoot(t), "deploy", "crds"))
	if len(want) != 4 {
		t.Errorf("deploy/crds has %d CRDs, want 4", len(want))
	}
	if diff := cmp.Diff(want, read(filepath.Join(chartDir(t), "crds"))); diff != "" {
		t.Errorf("the chart's crds/ is not deploy/crds; run make helm-crds: -want (deploy/crds), +got (chart):\n%s", diff)
	}
}

// TestLint runs helm lint's checks (Chart.yaml, values, templates) for each
// release; anything above INFO (such as "icon is recommended") fails.
func TestLint(t *testing.T) {
	for name, r := range releases {
		t.Run(name, func(t *testing.T) {
			vals, err := chartutil.ReadValues([]byte(r.values))
			if err != nil {
				t.Fatal(err)
			}
			kv, err := chartutil.ParseKubeVersion(kubeVersion)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			for _, m := range lint.AllWithKubeVersion(chartDir(t), vals, r.namespace, kv).Messages {
				if m.Severity > support.InfoSev {
					buf.WriteString(m.Error() + "\n")
				}
			}
			if buf.Len() > 0 {
				t.Errorf("helm lint with the %s values:\n%s", name, buf.String())
			}
		})
	}
}
