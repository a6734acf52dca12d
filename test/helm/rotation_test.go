package helm

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// notAfterAnnotation is where the chart notes when its generated
// certificate expires, since a template cannot read a certificate.
const notAfterAnnotation = "formspec.dev/certificate-not-after"

// generatedRelease is what one render of the Defaults release (with extra
// values) in cluster generated: the serving Secret as rendered, its data
// decoded, and the CA bundle each controller is given inline.
type generatedRelease struct {
	secret  controlplane.Object
	data    map[string]string
	bundles map[string]string
}

func renderGenerated(t *testing.T, values string, cluster engine.ClientProvider) generatedRelease {
	t.Helper()
	r := releases["Defaults"]
	r.values += values
	out := renderIn(t, r, cluster)
	g := generatedRelease{data: map[string]string{}, bundles: map[string]string{}}
	for _, obj := range out.objects {
		switch obj["kind"] {
		case "Secret":
			if get(obj, "metadata.name") == "formspec-hooks-tls" {
				g.secret = obj
			}
		case "CompositeController", "DecoratorController":
			g.bundles[identity(obj)] = fmt.Sprint(get(obj, "spec.endpointConfigs").([]any)[0].(map[string]any)["caBundle"].(map[string]any)["inline"])
		}
	}
	if g.secret == nil {
		t.Fatal("the serving Secret formspec-hooks-tls is not rendered")
	}
	for k, v := range g.secret["data"].(map[string]any) {
		b, err := base64.StdEncoding.DecodeString(str(v))
		if err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
		g.data[k] = string(b)
	}
	return g
}

// inCluster is the rendered Secret as the cluster holds it, its
// annotation set to notAfter ("" removes it, as on a Secret made before
// renewal existed).
func (g generatedRelease) inCluster(t *testing.T, notAfter string) cluster {
	t.Helper()
	raw, err := yaml.Marshal(g.secret)
	if err != nil {
		t.Fatal(err)
	}
	var obj controlplane.Object
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		t.Fatal(err)
	}
	md := obj["metadata"].(map[string]any)
	annotations, _ := md["annotations"].(map[string]any)
	annotations = maps.Clone(annotations)
	if annotations == nil {
		annotations = map[string]any{}
	}
	delete(annotations, notAfterAnnotation)
	if notAfter != "" {
		annotations[notAfterAnnotation] = notAfter
	}
	md["annotations"] = annotations
	return newCluster(t, obj)
}

// certificates parses every certificate of a PEM bundle, in order.
func certificates(t *testing.T, bundle string) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	rest := []byte(bundle)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// verifies reports whether the serving certificate of g verifies against
// bundle for the host Metacontroller dials.
func verifies(t *testing.T, g generatedRelease, bundle string) bool {
	t.Helper()
	roots := x509.NewCertPool()
	for _, c := range certificates(t, bundle) {
		roots.AddCert(c)
	}
	leaf := certificates(t, g.data["tls.crt"])[0]
	_, err := leaf.Verify(x509.VerifyOptions{DNSName: "formspec-hooks.formspec-system", Roots: roots})
	return err == nil
}

// serials are the serial numbers of the bundle's certificates, in order.
func serials(t *testing.T, bundle string) []string {
	t.Helper()
	var out []string
	for _, c := range certificates(t, bundle) {
		out = append(out, c.SerialNumber.String())
	}
	return out
}

// TestGeneratedRenewal renders the Defaults release as helm upgrade does
// against a cluster holding its generated Secret: while the certificate
// has more than tls.generated.renewBeforeDays left it is kept; within
// them, or with no expiry noted (a Secret from before renewal), a new CA
// and certificate are generated, and every controller is given, in its
// spec, the new CA followed by the old one, so that the replicas still
// serving the old certificate and those serving the new one are both
// trusted, and the spec change makes Metacontroller take the bundle up.
// The next renewal drops the oldest CA.
func TestGeneratedRenewal(t *testing.T) {
	first := renderGenerated(t, "", nil)
	leaf := certificates(t, first.data["tls.crt"])[0]
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got != 365*24*time.Hour {
		t.Errorf("the generated certificate is valid %v, want 365 days", got)
	}
	annotations, _ := get(first.secret, "metadata.annotations").(map[string]any)
	noted, err := time.Parse(time.RFC3339, fmt.Sprint(annotations[notAfterAnnotation]))
	if err != nil {
		t.Fatalf("the Secret's %s: %v", notAfterAnnotation, err)
	}
	if d := noted.Sub(leaf.NotAfter); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("%s says %v, the certificate expires at %v", notAfterAnnotation, noted, leaf.NotAfter)
	}
	for id, b := range first.bundles {
		if b != first.data["ca.crt"] {
			t.Errorf("%s trusts another bundle than the Secret's ca.crt", id)
		}
	}

	day := 24 * time.Hour
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	kept := renderGenerated(t, "", first.inCluster(t, at(31*day)))
	if diff := cmp.Diff(first.data, kept.data); diff != "" {
		t.Errorf("31 days before expiry (renewBeforeDays 30) the upgrade changed the Secret: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(first.bundles, kept.bundles); diff != "" {
		t.Errorf("31 days before expiry the controllers' bundles changed (Metacontroller would recreate them): -want, +got:\n%s", diff)
	}

	for name, tc := range map[string]struct {
		reason, values, notAfter string
	}{
		"WithinRenewBefore": {reason: "29 days before expiry the default renews.", notAfter: at(29 * day)},
		"RenewBeforeRaised": {reason: "A larger renewBeforeDays renews earlier.", values: "tls: {generated: {renewBeforeDays: 100}}", notAfter: at(99 * day)},
		"Expired":           {reason: "An expired certificate is renewed.", notAfter: at(-day)},
		"NoExpiryNoted":     {reason: "A Secret from a chart that did not renew (ten years, no annotation) is renewed by the first upgrade."},
	} {
		t.Run(name, func(t *testing.T) {
			renewed := renderGenerated(t, tc.values, first.inCluster(t, tc.notAfter))
			if renewed.data["tls.crt"] == first.data["tls.crt"] || renewed.data["tls.key"] == first.data["tls.key"] {
				t.Fatalf("%s\nthe certificate was not renewed", tc.reason)
			}
			bundle := renewed.data["ca.crt"]
			if got, want := serials(t, bundle)[1:], serials(t, first.data["ca.crt"]); !cmp.Equal(got, want) {
				t.Errorf("%s\nthe bundle's CAs after the new one are %v, want the old CA %v", tc.reason, got, want)
			}
			if !verifies(t, renewed, bundle) || !verifies(t, first, bundle) {
				t.Errorf("%s\nthe bundle does not trust both the new certificate and the one still served until the kubelet updates the files", tc.reason)
			}
			if verifies(t, renewed, first.data["ca.crt"]) {
				t.Errorf("%s\nthe new certificate verifies against the old CA: no new CA", tc.reason)
			}
			for id, b := range renewed.bundles {
				if b != bundle {
					t.Errorf("%s\n%s is not given the new bundle in its spec", tc.reason, id)
				}
			}

			again := renderGenerated(t, tc.values, renewed.inCluster(t, at(-day)))
			if got, want := serials(t, again.data["ca.crt"])[1:], serials(t, bundle)[:1]; !cmp.Equal(got, want) {
				t.Errorf("%s\nthe next renewal's bundle after its new CA is %v, want only the CA it replaces %v", tc.reason, got, want)
			}
		})
	}

}

// TestStableUnderTemplate renders releases twice as `helm template` does,
// with no cluster to look Secrets up in, as GitOps tools render: with the
// serving and token Secrets named (made by cert-manager or by hand), and
// with cert-manager, the two renders are the same, so such a tool sees
// nothing to sync; with tls.caBundle the controllers trust that bundle,
// given in their spec. The chart's own generated material is new on every
// render, which is why the docs send GitOps users to those values.
func TestStableUnderTemplate(t *testing.T) {
	const bundle = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	existing := releases["ExistingSecrets"]
	withBundle := existing
	withBundle.values += "\ntls: {secretName: formspec-hooks-tls, caBundle: " + `"` + strings.ReplaceAll(bundle, "\n", `\n`) + `"` + "}"
	for name, tc := range map[string]struct {
		reason string
		r      release
		stable bool
	}{
		"ExistingSecrets":           {reason: "Named Secrets: nothing generated.", r: existing, stable: true},
		"ExistingSecretsWithBundle": {reason: "Named Secrets and a CA bundle by value.", r: withBundle, stable: true},
		"CertManager":               {reason: "cert-manager issues in the cluster; the token Secret is named.", r: releases["CertManager"], stable: true},
		"Defaults":                  {reason: "Generated material differs on every render without lookup.", r: releases["Defaults"]},
	} {
		t.Run(name, func(t *testing.T) {
			one, two := render(t, tc.r), render(t, tc.r)
			same := cmp.Equal(one.objects, two.objects)
			if same != tc.stable {
				t.Errorf("%s\ntwo renders equal: %v, want %v:\n%s", tc.reason, same, tc.stable, cmp.Diff(one.objects, two.objects))
			}
		})
	}
	for _, ctl := range sortInstall(t, render(t, withBundle).objects).controllers {
		want := map[string]any{"inline": bundle}
		if diff := cmp.Diff(want, get(ctl, "spec.endpointConfigs").([]any)[0].(map[string]any)["caBundle"]); diff != "" {
			t.Errorf("%s with tls.caBundle: caBundle -want, +got:\n%s", identity(ctl), diff)
		}
	}
}
