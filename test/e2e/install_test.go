package e2e

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// The end-to-end tests install what `kubectl apply -k deploy/` installs,
// playing the parts nothing runs here: cert-manager issues the serving
// certificate its Certificate asks for, the user creates the token Secret
// as docs/security.md says, the kubelet mounts the Secrets where the hook
// server's flags read them, and a CONNECT proxy stands in for cluster DNS
// and the Service. The controllers are applied exactly as written;
// Metacontroller resolves their endpointConfigs itself, dials the Service
// name, and checks the certificate against it.

// install is what the tests read from deploy/ and compositecontrollers/.
type install struct {
	// deployment, service and certificate are the hook server's objects.
	deployment, service, certificate controlplane.Object
	// controllers are the controller definitions, unchanged.
	controllers []controlplane.Object
	// secrets are the Secrets the install needs but does not contain.
	secrets []controlplane.Object
	// policies are the install's admission policies and their bindings,
	// unchanged.
	policies []controlplane.Object
}

// readInstall reads the objects of the documented install that the
// end-to-end tests use, and makes the Secrets it expects to find: the
// serving Secret as cert-manager would issue it (signed by caCert/caKey)
// and the token Secret holding token.
func readInstall(t *testing.T, root string, ca *testCA, token string) install {
	t.Helper()
	var in install
	for _, dir := range []string{"deploy/hooks", "deploy/tls", "compositecontrollers"} {
		for _, f := range globYAML(t, filepath.Join(root, dir)) {
			objs, err := controlplane.ReadYAMLFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range objs {
				switch obj["kind"] {
				case "Deployment":
					in.deployment = obj
				case "Service":
					// The one Metacontroller calls, not the metrics Service.
					if targetsHooks(obj) {
						if in.service != nil {
							t.Fatalf("two Services target the port named hooks: %s and %s",
								str(field(in.service, "metadata", "name")), str(field(obj, "metadata", "name")))
						}
						in.service = obj
					}
				case "Certificate":
					if isCA, _ := field(obj, "spec", "isCA").(bool); !isCA {
						in.certificate = obj
					}
				case "CompositeController", "DecoratorController":
					in.controllers = append(in.controllers, obj)
				case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
					in.policies = append(in.policies, obj)
				}
			}
		}
	}
	if in.deployment == nil || in.service == nil || in.certificate == nil || len(in.controllers) == 0 {
		t.Fatal("deploy/ lacks the hook Deployment, Service or serving Certificate, or compositecontrollers/ is empty")
	}

	ns := str(field(in.certificate, "metadata", "namespace"))
	var dnsNames []string
	for _, n := range field(in.certificate, "spec", "dnsNames").([]any) {
		dnsNames = append(dnsNames, str(n))
	}
	certPEM, keyPEM := ca.issue(t, dnsNames)
	in.secrets = append(in.secrets, secret(ns, str(field(in.certificate, "spec", "secretName")), "kubernetes.io/tls", map[string]string{
		"tls.crt": certPEM, "tls.key": keyPEM, "ca.crt": ca.certPEM,
	}))
	tokenSecret, _ := mountedSecret(t, in.deployment, flagValue(t, in.deployment, "auth-token-file"))
	// As docs/security.md creates it: what the server accepts and what
	// Metacontroller sends.
	in.secrets = append(in.secrets, secret(ns, tokenSecret, "Opaque", map[string]string{"tokens": token, "token": token}))
	return in
}

// targetsHooks is whether one of the Service's ports targets the container
// port named hooks.
func targetsHooks(svc controlplane.Object) bool {
	ports, _ := field(svc, "spec", "ports").([]any)
	for _, p := range ports {
		if field(p, "targetPort") == "hooks" {
			return true
		}
	}
	return false
}

// secret is a Secret object with data encoded.
func secret(namespace, name, typ string, data map[string]string) controlplane.Object {
	enc := map[string]any{}
	for k, v := range data {
		enc[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	return controlplane.Object{
		"apiVersion": "v1", "kind": "Secret", "type": typ,
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"data":     enc,
	}
}

// field returns the value at a path of nested maps, or nil.
func field(obj any, path ...string) any {
	for _, k := range path {
		m, ok := obj.(map[string]any)
		if !ok {
			return nil
		}
		obj = m[k]
	}
	return obj
}

func str(v any) string { s, _ := v.(string); return s }

// hookContainer is the Deployment's container named hooks.
func hookContainer(t *testing.T, dep controlplane.Object) map[string]any {
	t.Helper()
	containers, _ := field(dep, "spec", "template", "spec", "containers").([]any)
	for _, c := range containers {
		if c, ok := c.(map[string]any); ok && c["name"] == "hooks" {
			return c
		}
	}
	t.Fatal("the Deployment has no container named hooks")
	return nil
}

// flagValue is the value of the hook container's --name=value.
func flagValue(t *testing.T, dep controlplane.Object, name string) string {
	t.Helper()
	args, _ := hookContainer(t, dep)["args"].([]any)
	for _, a := range args {
		if v, ok := strings.CutPrefix(str(a), "--"+name+"="); ok {
			return v
		}
	}
	t.Fatalf("the hook container has no --%s", name)
	return ""
}

// mountedSecret is the Secret and key the kubelet puts at file in the
// hook container: the Secret volume mounted at the file's directory, and
// the file's name.
func mountedSecret(t *testing.T, dep controlplane.Object, file string) (name, key string) {
	t.Helper()
	dir, key := path.Split(file)
	mounts, _ := hookContainer(t, dep)["volumeMounts"].([]any)
	for _, m := range mounts {
		if str(field(m, "mountPath")) != strings.TrimSuffix(dir, "/") {
			continue
		}
		vols, _ := field(dep, "spec", "template", "spec", "volumes").([]any)
		for _, v := range vols {
			if field(v, "name") == field(m, "name") {
				if name := str(field(v, "secret", "secretName")); name != "" {
					return name, key
				}
			}
		}
	}
	t.Fatalf("no Secret volume is mounted where the hook server reads %s", file)
	return "", ""
}

// serverFileNames are the hook server's flags that name a mounted file.
var serverFileNames = []string{"tls-cert-file", "tls-key-file", "auth-token-file"}

// serverFiles plays the kubelet for the hook server's TLS and token
// flags: it reads each file's Secret key from the cluster, writes it under
// dir, and returns where, by flag name (serverFileNames).
func serverFiles(t *testing.T, c *controlplane.Client, dep controlplane.Object, dir string) map[string]string {
	t.Helper()
	ns := str(field(dep, "metadata", "namespace"))
	files := map[string]string{}
	for _, name := range serverFileNames {
		file := flagValue(t, dep, name)
		secretName, key := mountedSecret(t, dep, file)
		obj, err := c.Get("v1", "Secret", ns, secretName)
		if err != nil {
			t.Fatalf("--%s reads Secret %s/%s: %v", name, ns, secretName, err)
		}
		data, err := base64.StdEncoding.DecodeString(str(field(obj, "data", key)))
		if err != nil || len(data) == 0 {
			t.Fatalf("--%s reads key %s of Secret %s/%s, which is missing or empty (%v)", name, key, ns, secretName, err)
		}
		local := filepath.Join(dir, filepath.FromSlash(file))
		if err := os.MkdirAll(filepath.Dir(local), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local, data, 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = local
	}
	return files
}

// serviceHost is the host:port Metacontroller dials for the hook Service's
// first port: <name>.<namespace>:<port>.
func serviceHost(svc controlplane.Object) string {
	ports, _ := field(svc, "spec", "ports").([]any)
	var port string
	if len(ports) > 0 {
		port = fmt.Sprint(field(ports[0], "port"))
	}
	return str(field(svc, "metadata", "name")) + "." + str(field(svc, "metadata", "namespace")) + ":" + port
}

// testCA is a private CA standing in for the install's cert-manager CA
// issuer.
type testCA struct {
	ca      *controlplane.CA
	certPEM string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca, err := controlplane.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{ca: ca, certPEM: string(ca.CertPEM)}
}

// issue signs a serving certificate for dnsNames, as cert-manager would
// for the Certificate (digital signature, server auth).
func (ca *testCA) issue(t *testing.T, dnsNames []string) (certPEM, keyPEM string) {
	t.Helper()
	c, k, err := ca.ca.IssueServing(dnsNames[0], dnsNames, nil)
	if err != nil {
		t.Fatal(err)
	}
	return string(c), string(k)
}

// serviceProxy is an HTTP CONNECT proxy that stands in for cluster DNS and
// the hook Service: Metacontroller, given it as HTTPS_PROXY, tunnels to
// the Service's name and port, and the proxy connects the tunnel to the
// hook server on loopback. TLS runs end to end through the tunnel, so
// Metacontroller checks the certificate against the Service name. Any
// other target is refused.
type serviceProxy struct {
	routes map[string]string
	ln     net.Listener
	mu     sync.Mutex
	// refused lists the targets the proxy would not connect.
	refused []string
}

func startServiceProxy(t *testing.T, routes map[string]string) *serviceProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &serviceProxy{routes: routes, ln: ln}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

// URL is the proxy's address for HTTPS_PROXY.
func (p *serviceProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *serviceProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	backend, ok := p.routes[r.Host]
	if r.Method != http.MethodConnect || !ok {
		p.mu.Lock()
		p.refused = append(p.refused, r.Method+" "+r.Host)
		p.mu.Unlock()
		http.Error(w, "the test proxy only tunnels to the hook Service", http.StatusForbidden)
		return
	}
	up, err := net.Dial("tcp", backend)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "cannot hijack", http.StatusInternalServerError)
		return
	}
	down, rw, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	_, _ = io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n")
	// Bytes the client sent right after CONNECT sit in the buffer.
	if n := rw.Reader.Buffered(); n > 0 {
		buf, _ := rw.Reader.Peek(n)
		_, _ = up.Write(buf)
	}
	go func() { _, _ = io.Copy(up, down); _ = up.Close() }()
	go func() { _, _ = io.Copy(down, up); _ = down.Close() }()
}

// Refused lists what the proxy refused so far.
func (p *serviceProxy) Refused() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refused...)
}

// hookCounters scrapes the hook server's request and decision counters:
// "requests <hook> <code>" and "decisions" (all decisions summed).
func (e *env) hookCounters() (map[string]float64, error) {
	families, err := scrapeURL(e.hookMetrics + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("cannot read the hook server's metrics: %w", err)
	}
	out := map[string]float64{"decisions": sum(families, "formspec_hooks_decisions_total")}
	for _, m := range families["formspec_hooks_requests_total"].GetMetric() {
		labels := labelsOf(m)
		out["requests "+labels["hook"]+" "+labels["code"]] = value(m)
	}
	return out, nil
}
