package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGrantWalkthrough runs the README's "Granting a workspace access to a
// datastore" steps through the real commands: keygen, a Datastore and its
// Secret, sign, and render showing the credentials injected. It also shows
// that a tampered claim is not injected and that no secret value reaches
// the output.
func TestGrantWalkthrough(t *testing.T) {
	dir := t.TempDir()
	cmd := func(stdin string, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr); code != 0 {
			t.Fatalf("formspec-hooks %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	pub := strings.TrimSpace(cmd("", "claim", "keygen", "--out", filepath.Join(dir, "owner.key")))
	secret := write("secret.yaml", `apiVersion: v1
kind: Secret
metadata:
  name: orders-db-endpoint
  namespace: team-a
  labels:
    formspec.dev/datastore: orders-db
stringData:
  host: orders-db.team-a.svc.cluster.local
  port: "5432"
  database: orders
  username: orders_app
  password: walkthrough-secret-value
`)
	datastore := write("datastore.yaml", `apiVersion: formspec.dev/v1alpha1
kind: Datastore
metadata:
  name: orders-db
  namespace: team-a
spec:
  driver: postgres
  endpointSecretRef:
    name: orders-db-endpoint
  allowedTenants:
    - team-a/shop
  ownerPublicKey: "`+pub+`"
`)
	claim := write("claim.yaml", `apiVersion: formspec.dev/v1alpha1
kind: ResourceClaim
metadata:
  name: shop-orders
  namespace: team-a
spec:
  datastore:
    name: orders-db
  workspace: shop
  permission: readwrite
  grantedBy: data-team@example.com
`)
	workspace := write("workspace.yaml", `apiVersion: formspec.dev/v1alpha1
kind: ClusterClass
metadata:
  name: standard
spec:
  scaling:
    minReplicas: 1
---
apiVersion: formspec.dev/v1alpha1
kind: Workspace
metadata:
  name: shop
  namespace: team-a
spec:
  clusterClass: standard
  datastores:
    - name: orders-db
      envPrefix: ORDERS_
`)
	signed := write("claim.signed.yaml", cmd("", "claim", "sign", "--key", filepath.Join(dir, "owner.key"), claim))

	out := cmd("", "render", "--default-version", "1.8.2", "-f", workspace, "-f", datastore, "-f", secret, "-f", signed)
	for _, want := range []string{"name: shop-orders-credentials", "prefix: ORDERS_", "mountPath: /bindings/shop-orders", "state: Injected"} {
		if !strings.Contains(out, want) {
			t.Errorf("render of a signed claim: want %q in the output:\n%s", want, out)
		}
	}
	if strings.Contains(out, "walkthrough-secret-value") {
		t.Errorf("render printed a secret value")
	}

	tampered := write("claim.tampered.yaml", strings.Replace(readFile(t, signed), "permission: readwrite", "permission: admin", 1))
	out = cmd("", "render", "--default-version", "1.8.2", "-f", workspace, "-f", datastore, "-f", secret, "-f", tampered)
	if strings.Contains(out, "shop-orders-credentials") || !strings.Contains(out, "state: Denied") {
		t.Errorf("render of a tampered claim: want no credentials and state Denied:\n%s", out)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
