package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// testRefused checks that Metacontroller gets no answer from the hooks
// when what the install gives it is wrong: Metacontroller is restarted
// after break (it reads the endpointConfigs Secrets only when it starts a
// controller), a new Workspace is created, and Metacontroller must record
// a Warning Event on it whose message says wantEvent, while the hook
// server's counters show that no hook handler ran: no hook request got
// any status but allowed (a 401 where the request reached the server), and
// no decision was made. fix then undoes break; the next start of
// Metacontroller reads it. The Metacontroller this case starts is t's, so
// it stops when t ends: the caller restarts it, from its own test, for
// what follows.
func testRefused(t *testing.T, e *env, ns, wantEvent string, allowed []string, breakIt, fix func(t *testing.T)) {
	const className = "e2e-refused"
	var before map[string]float64
	e.restartMetacontroller(t, func() {
		breakIt(t)
		var err error
		if before, err = e.hookCounters(); err != nil {
			t.Fatal(err)
		}
	})
	e.namespace(t, ns)
	e.apply(t, clusterClass(className, v1alpha1.Scaling{MinReplicas: ptr.To[int32](1)}))
	e.apply(t, newWorkspace(ns, "refused", className))

	e.eventually(t, "Warning Event from Metacontroller on Workspace "+ns+"/refused saying "+wantEvent, func() error {
		events, err := e.events(ns, "refused")
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range events {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Message, wantEvent) {
				return nil
			}
			seen = append(seen, ev.Reason+": "+ev.Message)
		}
		return fmt.Errorf("events: %q", seen)
	})

	after, err := e.hookCounters()
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if after[k] != before[k] {
			changed = append(changed, k)
		}
	}
	for _, k := range changed {
		_, code, _ := strings.Cut(strings.TrimPrefix(k, "requests "), " ")
		if !slices.Contains(allowed, code) {
			t.Errorf("the hook server counted %q (%v -> %v): a hook ran for a caller it should have refused", k, before[k], after[k])
		}
	}
	if len(allowed) > 0 && len(changed) == 0 {
		t.Errorf("the hook server counted no refused request; counters %v", after)
	}
	if refused := e.proxy.Refused(); len(refused) > 0 {
		t.Errorf("Metacontroller called past the hook Service: %v", refused)
	}
	fix(t)
}

// testWrongToken: a token the server does not accept gets a 401 from the
// server's token check for every hook, and no hook runs.
func testWrongToken(t *testing.T, e *env) {
	s := e.install.secrets[1]
	ns, name := str(field(s, "metadata", "namespace")), objName(s)
	setToken := func(token string) func(t *testing.T) {
		return func(t *testing.T) {
			e.patch(t, "v1", "Secret", ns, name, "", map[string]any{"data": map[string]any{"token": base64.StdEncoding.EncodeToString([]byte(token))}})
		}
	}
	good := field(s, "data", "token")
	testRefused(t, e, "e2e-wrong-token", "401", []string{"401"}, setToken("not-the-"+randomToken(t)), func(t *testing.T) {
		e.patch(t, "v1", "Secret", ns, name, "", map[string]any{"data": map[string]any{"token": good}})
	})
}

// testWrongCA: a CA that did not sign the server's certificate fails the
// TLS handshake in Metacontroller, before any request reaches the server.
func testWrongCA(t *testing.T, e *env) {
	s := e.install.secrets[0]
	ns, name := str(field(s, "metadata", "namespace")), objName(s)
	good := field(s, "data", "ca.crt")
	other := newTestCA(t, "not-the-formspec-hooks-ca")
	testRefused(t, e, "e2e-wrong-ca", "certificate signed by unknown authority", nil, func(t *testing.T) {
		e.patch(t, "v1", "Secret", ns, name, "", map[string]any{"data": map[string]any{"ca.crt": base64.StdEncoding.EncodeToString([]byte(other.certPEM))}})
	}, func(t *testing.T) {
		e.patch(t, "v1", "Secret", ns, name, "", map[string]any{"data": map[string]any{"ca.crt": good}})
	})
}

// events lists the Events about the object named name in namespace.
func (e *env) events(namespace, name string) ([]corev1.Event, error) {
	data, err := e.c.Do("GET", "/api/v1/namespaces/"+namespace+"/events", nil)
	if err != nil {
		return nil, err
	}
	var list corev1.EventList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out, nil
}

// TestServiceProxy checks the stand-in for cluster DNS and the Service on
// its own: a client that trusts the test CA reaches a TLS server through
// it by the Service name the certificate is issued for, and a request for
// any other name is refused and recorded. It needs no binaries.
func TestServiceProxy(t *testing.T) {
	ca := newTestCA(t, "test-ca")
	certPEM, keyPEM := ca.issue(t, []string{"formspec-hooks.formspec-system"})
	pair, err := tls.X509KeyPair([]byte(certPEM), []byte(keyPEM))
	if err != nil {
		t.Fatal(err)
	}
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hook "+r.URL.Path)
	}))
	backend.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	backend.StartTLS()
	defer backend.Close()

	svc := controlplane.Object{"metadata": map[string]any{"name": "formspec-hooks", "namespace": "formspec-system"},
		"spec": map[string]any{"ports": []any{map[string]any{"name": "https", "port": float64(443)}}}}
	proxy := startServiceProxy(t, map[string]string{serviceHost(svc): backend.Listener.Addr().String()})
	proxyURL, err := url.Parse(proxy.URL())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(ca.certPEM))
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: &tls.Config{RootCAs: roots}}}

	resp, err := client.Get("https://formspec-hooks.formspec-system:443/v1/nodes/sync")
	if err != nil {
		t.Fatalf("through the proxy to the Service name: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if diff := cmp.Diff("hook /v1/nodes/sync", string(body)); diff != "" {
		t.Errorf("answer: -want, +got:\n%s", diff)
	}
	if _, err := client.Get("https://elsewhere.formspec-system:443/"); err == nil {
		t.Error("the proxy tunnelled to a name that is not the Service's")
	}
	if diff := cmp.Diff([]string{"CONNECT elsewhere.formspec-system:443"}, proxy.Refused()); diff != "" {
		t.Errorf("refused: -want, +got:\n%s", diff)
	}
}
