package helm

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// install is a rendered release sorted by what TestWiring looks at.
type install struct {
	// service is the one Metacontroller calls (its ports target the
	// container port named hooks); metricsService is the other.
	deployment, service, metricsService, networkPolicy controlplane.Object
	controllers                                        []controlplane.Object
	// secrets are the rendered Secrets' data (base64), by name.
	secrets map[string]map[string]any
	// issued are the dnsNames of the rendered Certificates, by secretName.
	issued map[string][]string
}

func sortInstall(t *testing.T, objs []controlplane.Object) install {
	t.Helper()
	in := install{secrets: map[string]map[string]any{}, issued: map[string][]string{}}
	for _, obj := range objs {
		switch obj["kind"] {
		case "Deployment":
			in.deployment = obj
		case "Service":
			switch {
			case strings.Contains(str(get(obj, "spec.ports")), "targetPort: hooks"):
				if in.service != nil {
					t.Fatalf("two Services target the port named hooks: %s and %s", identity(in.service), identity(obj))
				}
				in.service = obj
			case in.metricsService == nil:
				in.metricsService = obj
			default:
				t.Fatalf("three Services: %s, %s and %s", identity(in.service), identity(in.metricsService), identity(obj))
			}
		case "NetworkPolicy":
			in.networkPolicy = obj
		case "CompositeController", "DecoratorController":
			in.controllers = append(in.controllers, obj)
		case "Secret":
			data, _ := obj["data"].(map[string]any)
			in.secrets[str(get(obj, "metadata.name"))] = data
		case "Certificate":
			names, _ := get(obj, "spec.dnsNames").([]any)
			var dns []string
			for _, n := range names {
				dns = append(dns, str(n))
			}
			in.issued[str(get(obj, "spec.secretName"))] = dns
		}
	}
	// Five controllers, or three without the reporter (TestRender says
	// which).
	if in.deployment == nil || in.service == nil || in.metricsService == nil || (len(in.controllers) != 5 && len(in.controllers) != 3) {
		t.Fatalf("the release lacks the Deployment, the hook or metrics Service or some of the controllers")
	}
	return in
}

// flag is the value of the hook container's --name=value, or "".
func flag(args []any, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(str(a), "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// mountedSecret is the Secret and key behind a file path of the hook
// container: the volume mounted at the file's directory, and the file's
// name.
func mountedSecret(t *testing.T, dep, container controlplane.Object, file string) (secret, key string) {
	t.Helper()
	dir, key := path.Split(file)
	mounts, _ := get(container, "volumeMounts").([]any)
	var volume string
	for _, m := range mounts {
		if str(get(m, "mountPath")) == strings.TrimSuffix(dir, "/") {
			volume = str(get(m, "name"))
		}
	}
	vols, _ := get(dep, "spec.template.spec.volumes").([]any)
	for _, v := range vols {
		if volume != "" && str(get(v, "name")) == volume {
			if get(v, "secret.optional") == true {
				t.Errorf("volume %s behind %s is optional: the server would start without it", volume, file)
			}
			return str(get(v, "secret.secretName")), key
		}
	}
	t.Fatalf("no Secret volume is mounted where the hook server reads %s", file)
	return "", ""
}

// TestWiring checks, for every release, that the pieces the hook traffic
// passes through agree with each other: the hook server's --listen port is
// the container port named hooks, which the Service and the NetworkPolicy
// use; every webhook calls the Service's port, over https exactly when the
// server serves TLS; the endpointConfigs entry matches the host and port
// Metacontroller builds from the webhook; the CA Metacontroller trusts and
// the token it sends come from the Secrets the server reads its
// certificate and tokens from; and each such Secret is rendered with the
// keys used, issued by a rendered Certificate for the host Metacontroller
// dials, or named in the values.
func TestWiring(t *testing.T) {
	for name, r := range releases {
		t.Run(name, func(t *testing.T) {
			in := sortInstall(t, render(t, r).objects)
			c := hookContainer(in.deployment).(map[string]any)
			args, _ := get(c, "args").([]any)

			_, listenPort, _ := strings.Cut(flag(args, "listen"), ":")
			var hooksPort string
			ports, _ := get(c, "ports").([]any)
			for _, p := range ports {
				if str(get(p, "name")) == "hooks" {
					hooksPort = str(get(p, "containerPort"))
				}
			}
			if hooksPort == "" || hooksPort != listenPort {
				t.Errorf("--listen port %q, container port named hooks %q", listenPort, hooksPort)
			}
			svcPort, _ := get(in.service, "spec.ports").([]any)
			if len(svcPort) != 1 || str(get(svcPort[0], "targetPort")) != "hooks" {
				t.Fatalf("the hook Service has other ports than the one targeting the port named hooks: %v", svcPort)
			}
			checkMetricsService(t, in, r.reporterEnabled())
			if in.networkPolicy != nil {
				checkNetworkPolicy(t, r, in)
			}

			fullname := str(get(in.deployment, "metadata.name"))
			serving := flag(args, "tls-cert-file") != ""
			scheme := map[bool]string{true: "https", false: "http"}[serving]
			host := fmt.Sprintf("%s.%s:%s", fullname, r.namespace, str(get(svcPort[0], "port")))

			// Where the server reads its material, and what Metacontroller
			// must be told to match.
			want := map[string]any{"host": host}
			if serving {
				secret, key := mountedSecret(t, in.deployment, c, flag(args, "tls-cert-file"))
				keySecret, _ := mountedSecret(t, in.deployment, c, flag(args, "tls-key-file"))
				if keySecret != secret {
					t.Errorf("the certificate comes from Secret %s, its key from %s", secret, keySecret)
				}
				checkSource(t, r, in, secret, key, "tls.key", "ca.crt")
				if dns, ok := in.issued[secret]; ok && !slices.Contains(dns, strings.TrimSuffix(host, ":443")) {
					t.Errorf("the Certificate for Secret %s is for %v, not for the host of %s, which Metacontroller dials", secret, dns, host)
				}
				want["caBundle"] = map[string]any{"secretRef": map[string]any{"name": secret, "namespace": r.namespace, "key": "ca.crt"}}
				if data, ok := in.secrets[secret]; ok {
					// Generated by the chart: the bundle is in the spec, so
					// that a renewal's new CA is a spec change.
					ca, err := base64.StdEncoding.DecodeString(str(data["ca.crt"]))
					if err != nil {
						t.Fatal(err)
					}
					want["caBundle"] = map[string]any{"inline": string(ca)}
				}
			}
			if file := flag(args, "auth-token-file"); file != "" {
				secret, key := mountedSecret(t, in.deployment, c, file)
				clientKey := "token"
				if strings.Contains(r.values, "clientKey:") {
					clientKey = "current"
				}
				checkSource(t, r, in, secret, key, clientKey)
				want["authorization"] = map[string]any{"secretRef": map[string]any{"name": secret, "namespace": r.namespace, "key": clientKey}}
			}
			for _, ctl := range in.controllers {
				id := identity(ctl)
				hooks, _ := get(ctl, "spec.hooks").(map[string]any)
				for _, h := range slices.Sorted(maps.Keys(hooks)) {
					if u := webhookURL(hooks[h]); !strings.HasPrefix(u, scheme+"://"+host+"/") {
						t.Errorf("%s hook %s calls %s, want %s://%s/...", id, h, u, scheme, host)
					}
				}
				ec := get(ctl, "spec.endpointConfigs")
				if len(want) == 1 {
					if ec != nil {
						t.Errorf("%s has endpointConfigs though the server wants neither TLS nor a token: %v", id, ec)
					}
					continue
				}
				if diff := cmp.Diff([]any{want}, ec); diff != "" {
					t.Errorf("%s endpointConfigs: -want, +got:\n%s", id, diff)
				}
			}
		})
	}
}

// containerPorts are the named container ports of the Deployment's pods,
// each with the container it belongs to.
func containerPorts(dep controlplane.Object) map[string]string {
	out := map[string]string{}
	containers, _ := get(dep, "spec.template.spec.containers").([]any)
	for _, c := range containers {
		ports, _ := get(c, "ports").([]any)
		for _, p := range ports {
			out[str(get(p, "name"))] = str(get(c, "name"))
		}
	}
	return out
}

// sortedFields are the values of key in each element of a list of
// objects, sorted.
func sortedFields(list any, key string) []string {
	items, _ := list.([]any)
	var out []string
	for _, e := range items {
		out = append(out, str(get(e, key)))
	}
	sort.Strings(out)
	return out
}

// targetPorts are the target ports of a Service, sorted.
func targetPorts(svc controlplane.Object) []string {
	return sortedFields(get(svc, "spec.ports"), "targetPort")
}

// checkMetricsService checks the metrics Service: it selects the hook
// pods, exactly as the hook Service does, and exposes the hook server's
// metrics port and the reporter's (when it runs), never the hook port.
func checkMetricsService(t *testing.T, in install, reporter bool) {
	t.Helper()
	if diff := cmp.Diff(get(in.service, "spec.selector"), get(in.metricsService, "spec.selector")); diff != "" {
		t.Errorf("the metrics Service selects other pods than the hook Service: -want, +got:\n%s", diff)
	}
	owners := containerPorts(in.deployment)
	var got []string
	for _, p := range targetPorts(in.metricsService) {
		got = append(got, owners[p]+"/"+p)
	}
	want := []string{"hooks/metrics"}
	if reporter {
		want = append(want, "reporter/rep-metrics")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics Service ports as <container>/<port>: -want, +got:\n%s", diff)
	}
}

// checkNetworkPolicy checks the NetworkPolicy's two rules: the port named
// hooks admits Metacontroller's namespace and nothing else, and the
// metrics Service's ports admit networkPolicy.metricsFrom (by default
// monitoringNamespace alone).
func checkNetworkPolicy(t *testing.T, r release, in install) {
	t.Helper()
	rules, _ := get(in.networkPolicy, "spec.ingress").([]any)
	if len(rules) != 2 {
		t.Fatalf("the NetworkPolicy has %d ingress rules, want 2 (hooks, metrics): %v", len(rules), rules)
	}
	ports := func(rule any) []string { return sortedFields(get(rule, "ports"), "port") }
	// No release in releases moves Metacontroller.
	if diff := cmp.Diff(namespacePeer("metacontroller"), get(rules[0], "from")); diff != "" {
		t.Errorf("the hook rule admits: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"hooks"}, ports(rules[0])); diff != "" {
		t.Errorf("the hook rule's ports: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(targetPorts(in.metricsService), ports(rules[1])); diff != "" {
		t.Errorf("the metrics rule's ports are not the metrics Service's: -want, +got:\n%s", diff)
	}
	var wantFrom any = namespacePeer(monitoringNamespace)
	if strings.Contains(r.values, "metricsFrom") {
		wantFrom = namespacePeer(otherMonitoringNamespace)
	}
	if diff := cmp.Diff(wantFrom, get(rules[1], "from")); diff != "" {
		t.Errorf("the metrics rule admits: -want, +got:\n%s", diff)
	}
}

// namespacePeer is a NetworkPolicy's from admitting one namespace.
func namespacePeer(namespace string) []any {
	return []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": namespace}}}}
}

// checkSource checks that Secret name is rendered with keys, issued by a
// rendered Certificate, or named in the release's values (the user's).
func checkSource(t *testing.T, r release, in install, name string, keys ...string) {
	t.Helper()
	switch data, ok := in.secrets[name]; {
	case ok:
		for _, k := range keys {
			if data[k] == nil {
				t.Errorf("rendered Secret %s has no key %s (keys %v)", name, k, slices.Sorted(maps.Keys(data)))
			}
		}
	case in.issued[name] != nil:
	case strings.Contains(r.values, "secretName: "+name):
	default:
		t.Errorf("Secret %s is neither rendered, nor issued by a Certificate, nor named in the values", name)
	}
}

// generated renders the Defaults release in cluster and returns its two
// generated Secrets' data, decoded.
func generated(t *testing.T, cluster engine.ClientProvider) (tlsData, tokenData map[string]string, objs []controlplane.Object) {
	t.Helper()
	out := renderIn(t, releases["Defaults"], cluster)
	in := sortInstall(t, out.objects)
	decode := func(name string) map[string]string {
		data, ok := in.secrets[name]
		if !ok {
			t.Fatalf("Secret %s is not rendered", name)
		}
		m := map[string]string{}
		for k, v := range data {
			b, err := base64.StdEncoding.DecodeString(str(v))
			if err != nil {
				t.Fatalf("Secret %s key %s is not base64: %v", name, k, err)
			}
			m[k] = string(b)
		}
		return m
	}
	for _, obj := range out.objects {
		if obj["kind"] == "Secret" {
			objs = append(objs, obj)
		}
	}
	return decode("formspec-hooks-tls"), decode("formspec-hooks-token"), objs
}

// TestGeneratedMaterial checks what the chart generates by default: a
// serving certificate whose key matches it and that verifies, against the
// CA given to Metacontroller, for the exact host Metacontroller dials
// (<service>.<namespace>) and the Service's other names; a token of 256
// bits that Metacontroller sends and the server accepts; and fresh values
// on every first install.
func TestGeneratedMaterial(t *testing.T) {
	tlsData, tokenData, _ := generated(t, nil)
	if _, err := tls.X509KeyPair([]byte(tlsData["tls.crt"]), []byte(tlsData["tls.key"])); err != nil {
		t.Errorf("tls.key does not match tls.crt: %v", err)
	}
	block, _ := pem.Decode([]byte(tlsData["tls.crt"]))
	if block == nil {
		t.Fatal("tls.crt is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatalf("tls.crt: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(tlsData["ca.crt"])) {
		t.Fatal("ca.crt holds no certificate")
	}
	for _, host := range []string{"formspec-hooks.formspec-system", "formspec-hooks.formspec-system.svc", "formspec-hooks.formspec-system.svc.cluster.local"} {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the serving certificate does not verify for %s against ca.crt: %v", host, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: "formspec-hooks.other", Roots: roots}); err == nil {
		t.Error("the serving certificate verifies for a name that is not the Service's")
	}

	token := tokenData["token"]
	if tokenData["tokens"] != token {
		t.Errorf("the server accepts %q, Metacontroller sends %q", tokenData["tokens"], token)
	}
	if len(token) != 43 || strings.Trim(token, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		t.Errorf("the token is %d characters, want 43 letters and digits (256 bits)", len(token))
	}

	again, againToken, _ := generated(t, nil)
	if again["ca.crt"] == tlsData["ca.crt"] || again["tls.key"] == tlsData["tls.key"] || againToken["token"] == token {
		t.Error("two first installs got the same CA, key or token")
	}
}

// cluster answers lookup from a fake API holding objs (Secrets only).
type cluster struct{ client dynamic.Interface }

func newCluster(t *testing.T, objs ...controlplane.Object) cluster {
	t.Helper()
	var uobjs []runtime.Object
	for _, obj := range objs {
		uobjs = append(uobjs, &unstructured.Unstructured{Object: obj})
	}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	return cluster{client: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{secrets: "SecretList"}, uobjs...)}
}

func (c cluster) GetClientFor(apiVersion, kind string) (dynamic.NamespaceableResourceInterface, bool, error) {
	if apiVersion != "v1" || kind != "Secret" {
		return nil, false, fmt.Errorf("the fake cluster serves v1 Secrets only, not %s %s", apiVersion, kind)
	}
	return c.client.Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"}), true, nil
}

// TestUpgradeKeepsGeneratedSecrets renders the Defaults release again, as
// `helm upgrade` does, against a cluster holding what the first install
// created: the generated certificate, CA and token come back unchanged.
// A Secret that lost a key is generated anew rather than rendered broken.
func TestUpgradeKeepsGeneratedSecrets(t *testing.T) {
	firstTLS, firstToken, objs := generated(t, nil)

	tlsData, tokenData, _ := generated(t, newCluster(t, objs...))
	if diff := cmp.Diff(firstTLS, tlsData); diff != "" {
		t.Errorf("upgrade changed the TLS Secret: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(firstToken, tokenData); diff != "" {
		t.Errorf("upgrade changed the token Secret: -want, +got:\n%s", diff)
	}

	var broken []controlplane.Object
	for _, obj := range objs {
		obj = maps.Clone(obj)
		data := maps.Clone(obj["data"].(map[string]any))
		delete(data, "ca.crt")
		delete(data, "token")
		obj["data"] = data
		broken = append(broken, obj)
	}
	tlsData, tokenData, _ = generated(t, newCluster(t, broken...))
	if tlsData["ca.crt"] == "" || tlsData["tls.crt"] == firstTLS["tls.crt"] {
		t.Error("a TLS Secret without ca.crt was not generated anew")
	}
	if tokenData["token"] == "" || tokenData["token"] == firstToken["token"] {
		t.Error("a token Secret without token was not generated anew")
	}
}
