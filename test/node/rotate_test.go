package node

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// rotationFleetSize is how many workspaces keep syncing through the
// rotations: two of each class shape.
const rotationFleetSize = 8

// TestRotation installs the chart with its generated certificate and
// token through Helm's library, runs Metacontroller in its pod and a fleet
// of workspaces that keep syncing, and rotates, as docs/security.md
// ("Rotating") says, first the token, then the generated CA and
// certificate (a renewal, forced by raising renewBeforeDays past the time
// left). Neither may fail a hook call (but for a sync in flight that the
// recreation of its controller cancels, done again at once), disturb a
// workspace or restart Metacontroller: its pod keeps its UID and restart
// count, and its controllers are recreated, not the process. At the end the old token is
// refused and the hook pods serve a certificate of the new CA.
func TestRotation(t *testing.T) {
	mcBin := os.Getenv(EnvMetacontrollerBin)
	if mcBin == "" {
		t.Skip(EnvMetacontrollerBin + " not set: rotation without restarting Metacontroller needs Metacontroller; see docs/testing.md")
	}
	RequirePrerequisites(t)
	repo, tag, _ := strings.Cut(hooksImage(t), ":")
	chart := filepath.Join(controlplane.RepoRoot(t), chartDir)
	// Valid two days, renewed within one: an upgrade that asks for renewal
	// within two renews it now.
	values := fmt.Sprintf("defaultVersion: %s\nimage:\n  repository: %s\n  tag: %s\n  pullPolicy: Never\n", WorkspaceVersion, repo, tag) +
		plainHTTPClusterControl + "tls:\n  generated:\n    validityDays: 2\n    renewBeforeDays: 1\n"
	f := startFleetOf(t, rotationFleetSize, mcBin, nil, chart, values)
	before := f.c.pod(t, "metacontroller", "metacontroller-0")
	figs := &figures{}
	t.Cleanup(func() { t.Logf("figures:\n%s", figs) })

	t.Run("Token", func(t *testing.T) { rotateToken(t, f, figs.row("Token")) })
	f.tm.Phase("token rotated")
	t.Run("GeneratedCertificate", func(t *testing.T) { renewGeneratedCertificate(t, f, figs.row("GeneratedCertificate")) })
	f.tm.Phase("generated CA and certificate renewed")

	after := f.c.pod(t, "metacontroller", "metacontroller-0")
	restarts := func(p corev1.Pod) int32 { return containerStatus(p, "metacontroller").RestartCount }
	if after.UID != before.UID || restarts(after) != restarts(before) {
		t.Errorf("Metacontroller was restarted: pod UID %s, %d restarts before; %s, %d after", before.UID, restarts(before), after.UID, restarts(after))
	}
}

// rotateToken rotates the hook token as docs/security.md does for the
// chart's Secret: the server accepts the old and the new token (kept
// under a new key, next), every replica has read both, a helm upgrade
// points the controllers at next (a spec change: Metacontroller recreates
// each controller, which reads the key afresh), and once a resync has gone
// by the old token is removed. No hook call may fail on the way (see
// cancelledByRecreation), which a Metacontroller still sending the old
// token would after the removal.
func rotateToken(t *testing.T, f *fleet, figs *figures) {
	secret := hooksName + "-token"
	old := strings.TrimSpace(string(f.c.secretValue(t, hooksNamespace, secret, "token")))
	next := rand.Text()
	w := f.open(t)
	var switched time.Duration
	var recreations [][2]time.Time
	touched, _ := f.driveDuring(func() {
		f.c.kubectl(t, "-n", hooksNamespace, "patch", "secret", secret, "-p",
			fmt.Sprintf(`{"stringData":{"tokens":"%s\n%s","next":"%s"}}`, old, next, next))
		f.c.waitTokenCount(t, 2)
		since := time.Now()
		generations := f.c.controllerGenerations(t)
		f.helm.upgrade(t, f.chart, "authToken.clientKey=next")
		f.c.waitControllersRestarted(t, generations, since)
		switched = time.Since(since)
		recreations = append(recreations, [2]time.Time{since, time.Now()})
		f.settle()
		f.c.kubectl(t, "-n", hooksNamespace, "patch", "secret", secret, "--type=json", "-p",
			fmt.Sprintf(`[{"op":"replace","path":"/data/tokens","value":"%s"},{"op":"remove","path":"/data/token"}]`, base64.StdEncoding.EncodeToString([]byte(next))))
		f.c.waitTokenCount(t, 1)
		f.settle()
	})
	figs.add("controllers recreated with the new token %.1f s after the upgrade began", switched.Seconds())
	allow, cancelled := cancelledByRecreation(recreations)
	f.reportUndisturbed(t, figs, w, touched, allow)
	figs.add("%d syncs in flight were cancelled by the recreation of their controller, and done again", *cancelled)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.c.secretValue(t, hooksNamespace, hooksName+"-tls", "ca.crt"))
	for _, tc := range []struct {
		name, token string
		want        int
	}{{"the old token", old, http.StatusUnauthorized}, {"the new token", next, http.StatusOK}} {
		if got := f.c.hookStatus(t, pool, tc.token); got != tc.want {
			t.Errorf("a hook call with %s: status %d, want %d", tc.name, got, tc.want)
		}
	}
}

// renewGeneratedCertificate renews the chart's generated CA and
// certificate with a helm upgrade, as docs/security.md says to within
// renewBeforeDays of expiry: the Secret gets a new certificate of a new
// CA, the controllers' spec the new CA followed by the old one, and the
// hook pods serve the new certificate once the kubelet has updated their
// files. No hook call may fail meanwhile (see cancelledByRecreation):
// until then the pods serve the old certificate, which the bundle still
// trusts.
func renewGeneratedCertificate(t *testing.T, f *fleet, figs *figures) {
	secret := hooksName + "-tls"
	oldCert := f.c.secretValue(t, hooksNamespace, secret, "tls.crt")
	oldCA := f.c.secretValue(t, hooksNamespace, secret, "ca.crt")
	w := f.open(t)
	var served time.Duration
	var recreations [][2]time.Time
	touched, _ := f.driveDuring(func() {
		since := time.Now()
		generations := f.c.controllerGenerations(t)
		f.helm.upgrade(t, f.chart, "tls.generated.validityDays=3", "tls.generated.renewBeforeDays=2")
		newCert := f.c.secretValue(t, hooksNamespace, secret, "tls.crt")
		bundle := f.c.secretValue(t, hooksNamespace, secret, "ca.crt")
		if bytes.Equal(newCert, oldCert) {
			t.Fatal("the upgrade did not renew the certificate")
		}
		if !bytes.HasSuffix(bundle, oldCA) || bytes.Equal(bundle, oldCA) {
			t.Errorf("the new bundle does not hold a new CA followed by the old one:\n%s", bundle)
		}
		f.c.waitControllersRestarted(t, generations, since)
		recreations = append(recreations, [2]time.Time{since, time.Now()})
		f.c.waitServing(t, newCert)
		served = time.Since(since)
		f.settle()
	})
	figs.add("every hook pod served the new certificate %.1f s after the upgrade began", served.Seconds())
	allow, cancelled := cancelledByRecreation(recreations)
	f.reportUndisturbed(t, figs, w, touched, allow)
	figs.add("%d syncs in flight were cancelled by the recreation of their controller, and done again", *cancelled)
}

// cancelledByRecreation accepts the one failure recreating a controller
// causes: Metacontroller stops the old controller by cancelling its
// context, so a sync in flight then ends "context canceled", is logged as
// failed, and the new controller syncs the object again. Only within the
// windows (from the spec change until every controller was started
// again, a second either side for the log's whole seconds). It counts
// what it accepted.
func cancelledByRecreation(windows [][2]time.Time) (func(failedCall) bool, *int) {
	n := new(int)
	return func(fc failedCall) bool {
		if !strings.Contains(fc.msg, "context canceled") {
			return false
		}
		for _, w := range windows {
			if !fc.at.Before(w[0].Add(-time.Second)) && !fc.at.After(w[1].Add(time.Second)) {
				*n++
				return true
			}
		}
		return false
	}, n
}

// waitTokenCount waits until every hook pod's server holds n tokens
// (formspec_hooks_auth_tokens), read as docs/security.md reads it:
// through the API server's proxy to each pod's metrics port. Should the
// proxy fail, it says so and reads the pod from the node instead, so that
// the rotation is still checked.
func (c *Cluster) waitTokenCount(t *testing.T, n int) {
	t.Helper()
	c.waitFor(t, fmt.Sprintf("%d tokens read by every hook pod", n), func() (bool, string) {
		var counts []string
		ok := true
		for _, p := range c.hookPods(t) {
			raw, err := c.Client().Do("GET", "/api/v1/namespaces/"+hooksNamespace+"/pods/"+p.Name+":9090/proxy/metrics", nil)
			if err != nil {
				t.Logf("the API server's proxy to pod %s: %v; reading it from the node", p.Name, err)
				body, err := get("http://" + net.JoinHostPort(p.Status.PodIP, "9090") + "/metrics")
				if err != nil {
					return false, err.Error()
				}
				raw = []byte(body)
			}
			got := metricValue(string(raw), "formspec_hooks_auth_tokens")
			counts = append(counts, fmt.Sprintf("%s: %v", p.Name, got))
			ok = ok && got == float64(n)
		}
		return ok, strings.Join(counts, ", ")
	}, hooksNamespace)
}

// controllerGenerations are the metadata.generation of the install's
// Metacontroller controllers, by name.
func (c *Cluster) controllerGenerations(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, kind := range []string{"compositecontrollers", "decoratorcontrollers"} {
		var list struct {
			Items []map[string]any `json:"items"`
		}
		c.getJSON(t, "/apis/metacontroller.k8s.io/v1alpha1/"+kind, &list)
		for _, item := range list.Items {
			out[stringField(item, "metadata", "name")] = intField(item, "metadata", "generation")
		}
	}
	if len(out) == 0 {
		t.Fatal("no Metacontroller controllers installed")
	}
	return out
}

// waitControllersRestarted waits until every controller of before has a
// new spec (generation) and Metacontroller has recreated it since (a
// Started Event on it from since on), and fails on a CreateError Event
// since then.
func (c *Cluster) waitControllersRestarted(t *testing.T, before map[string]int64, since time.Time) {
	t.Helper()
	since = since.Truncate(time.Second)
	c.waitFor(t, "Metacontroller recreated every controller with its new spec", func() (bool, string) {
		now := c.controllerGenerations(t)
		var list corev1.EventList
		c.getJSON(t, "/api/v1/events?fieldSelector="+url.QueryEscape("involvedObject.apiVersion=metacontroller.k8s.io/v1alpha1"), &list)
		started := map[string]bool{}
		for _, e := range list.Items {
			if e.LastTimestamp.Time.Before(since) {
				continue
			}
			switch e.Reason {
			case "Started":
				started[e.InvolvedObject.Name] = true
			case "CreateError":
				t.Errorf("controller %s: %s", e.InvolvedObject.Name, e.Message)
			}
		}
		var waiting []string
		for name, gen := range before {
			if now[name] == gen || !started[name] {
				waiting = append(waiting, fmt.Sprintf("%s (generation %d, then %d, started %v)", name, gen, now[name], started[name]))
			}
		}
		slices.Sort(waiting)
		return len(waiting) == 0, strings.Join(waiting, ", ")
	}, "")
}

// waitServing waits until every hook pod serves cert (PEM).
func (c *Cluster) waitServing(t *testing.T, cert []byte) {
	t.Helper()
	want := certificateDER(t, cert)
	c.waitFor(t, "every hook pod serving the new certificate", func() (bool, string) {
		var stale []string
		for _, p := range c.hookPods(t) {
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort(p.Status.PodIP, "8443"),
				&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // only compares the certificate served
			if err != nil {
				stale = append(stale, p.Name+": "+err.Error())
				continue
			}
			served := conn.ConnectionState().PeerCertificates[0].Raw
			_ = conn.Close()
			if !bytes.Equal(served, want) {
				stale = append(stale, p.Name)
			}
		}
		return len(stale) == 0, "still serving another certificate: " + strings.Join(stale, ", ")
	}, hooksNamespace)
}

// certificateDER is the first certificate of a PEM bundle.
func certificateDER(t *testing.T, pemBytes []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatal("no certificate in the PEM")
	}
	return block.Bytes
}

// hookStatus POSTs a workspace sync fixture to the hook Service over TLS,
// trusting pool, with token, and returns the status.
func (c *Cluster) hookStatus(t *testing.T, pool *x509.CertPool, token string) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, ServerName: hooksName + "." + hooksNamespace + ".svc", MinVersion: tls.VersionTLS12,
	}}}
	requests, _ := filepath.Glob(filepath.Join(controlplane.RepoRoot(t), "fixtures", "workspace", "sync", "*", "request.json"))
	if len(requests) == 0 {
		t.Fatal("no workspace sync fixture")
	}
	body, err := os.ReadFile(requests[0])
	if err != nil {
		t.Fatal(err)
	}
	status, _, err := post(client, "https://"+c.serviceIP(t, hooksNamespace, hooksName)+"/v1/workspace/sync", token, body)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	return status
}
