package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/formspec/formspec-hooks/hooks/reporter"
)

// TestClaimDecisionEvents posts real resourceclaim requests, whose related
// Secrets carry credentials, through the hook server, the hand-off and the
// reporter into a fake API: the decisions arrive as Events on the claim,
// and no Event carries a credential value, the credentials hash or any
// signature.
func TestClaimDecisionEvents(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube := fake.NewClientset()
	rep, err := reporter.New(reporter.Config{
		ClusterControlURL: "http://127.0.0.1:1",
		Reporter:          "reporter-0",
		Kube:              &reporter.KubeClients{Events: kube.EventsV1()},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := routerWithReporter(ctx, t, rep)

	// Every string that must not reach an Event: the Secrets' values, the
	// claims' signatures and the credentials hashes the hook computes.
	var secrets []string
	for _, c := range []string{"denied-stranger-key", "granted-v2"} {
		body, err := os.ReadFile(filepath.Join(fixturesDir, "resourceclaim", "sync", c, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		// Created and decided now, so a reporter seeing the claim for the
		// first time announces it.
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatal(err)
		}
		obj := req["object"].(map[string]any)
		delete(obj, "status")
		obj["metadata"].(map[string]any)["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
		secrets = append(secrets, obj["spec"].(map[string]any)["signature"].(string))
		for _, byName := range req["related"].(map[string]any) {
			for _, rel := range byName.(map[string]any) {
				data, _ := rel.(map[string]any)["data"].(map[string]any)
				for _, v := range data {
					raw, err := base64.StdEncoding.DecodeString(v.(string))
					if err != nil {
						t.Fatal(err)
					}
					secrets = append(secrets, v.(string), string(raw))
				}
			}
		}
		body, _ = json.Marshal(req)
		rec := post(h, "/v1/resourceclaim/sync", body, nil)
		var resp struct {
			Status struct {
				CredentialsHash string `json:"credentialsHash"`
			} `json:"status"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Status.CredentialsHash != "" {
			secrets = append(secrets, resp.Status.CredentialsHash, strings.TrimPrefix(resp.Status.CredentialsHash, "sha256:"))
		}
	}

	var reasons []string
	waitUntil(t, "an Event for each decision", func() bool {
		l, err := kube.EventsV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reasons = nil
		for _, ev := range l.Items {
			reasons = append(reasons, ev.Regarding.Kind+" "+ev.Type+" "+ev.Reason)
			raw, _ := json.Marshal(ev)
			for _, s := range secrets {
				if len(s) >= 8 && strings.Contains(string(raw), s) {
					t.Fatalf("Event %s carries secret material %q: %s", ev.Name, s, raw)
				}
			}
		}
		return len(reasons) == 2
	})
	want := map[string]bool{"ResourceClaim Warning ClaimDenied": true, "ResourceClaim Normal ClaimGranted": true}
	for _, r := range reasons {
		if !want[r] {
			t.Errorf("unexpected Event %q (all: %v)", r, reasons)
		}
	}
}
