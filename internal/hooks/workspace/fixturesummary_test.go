package workspace_test

import (
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
)

// summaryCases are the sync cases of summary mode (the server's default):
// the claims reach the hook as the reporter's summary on the Workspace,
// annotation formspec.dev/claims, and related claims are ignored.
func summaryCases() []fixture {
	var fs []fixture
	add := func(name string, req obj) { fs = append(fs, fixture{hook: "sync", name: name, request: req}) }
	stores := obj{"datastores": []obj{{"name": "orders-db", "envPrefix": "ORDERS_"}}}
	ordersDB := v1alpha1.DatastoreClaimRef{Name: "orders-db", Namespace: ns}
	summary := func(c claimsummary.Claim) map[string]string {
		return map[string]string{claimsummary.Annotation: claimsummary.Encode(claimsummary.Summary{Claims: []claimsummary.Claim{c}})}
	}
	ready := summary(claimsummary.Claim{Name: "acme-orders-db", Datastore: ordersDB, State: claimsummary.StateReady,
		SecretName: "acme-orders-db-credentials", CredentialsHash: "sha256:3d5f0c7a9b1e2d4c6f8a0b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e"})
	injectedStatus := func() obj {
		st := readyStatus(3, 1)
		st["datastores"] = []obj{{"name": "orders-db", "claim": "acme-orders-db", "state": "Injected", "secretName": "acme-orders-db-credentials"}}
		return st
	}
	// statusWith is injectedStatus with the conditions a previous sync of
	// the case's kind wrote, so that no condition changes and the golden
	// response does not depend on the clock.
	statusWith := func(phase string, progressing, degraded obj) obj {
		st := wsStatus(3, phase, 1, 1, 1, cond("Ready", "True", "ReplicasAvailable", "ready"), progressing, degraded)
		st["datastores"] = injectedStatus()["datastores"]
		return st
	}
	asExpected := cond("Degraded", "False", "AsExpected", "no problems observed")
	rolledOut := cond("Progressing", "False", "RolloutComplete", "done")

	// The summary names a ready claim, and the pods already mount it: steady.
	// A denied claim that came related (an install that used to relate
	// claims) is ignored.
	{
		p := parent("standard", 3, ready, stores, injectedStatus())
		rel := related(class(standard))
		rel["ResourceClaim.formspec.dev/v1alpha1"] = obj{ns + "/acme-orders-db": claim("acme-orders-db", "orders-db", "", false)}
		add("summary-ready", request(p, children(running(p, standard, 1)...), rel, false))
	}
	// The summary says the claim is denied: the credentials go, Degraded.
	{
		p := parent("standard", 3, summary(claimsummary.Claim{Name: "acme-orders-db", Datastore: ordersDB, State: claimsummary.StateDenied}), stores,
			statusWith("Degraded", rolledOut, cond("Degraded", "True", "DatastoreNotInjected", "denied")))
		kids := running(parent("standard", 3, ready, stores, nil), standard, 1)
		add("summary-denied", request(p, children(kids...), related(class(standard)), false))
	}
	// The summary says the claim is not verified yet: Progressing,
	// WaitingForCredentials.
	{
		p := parent("standard", 3, summary(claimsummary.Claim{Name: "acme-orders-db", Datastore: ordersDB, State: claimsummary.StatePending}), stores,
			statusWith("Progressing", cond("Progressing", "True", "WaitingForCredentials", "waiting"), asExpected))
		kids := running(parent("standard", 3, nil, nil, nil), standard, 1)
		add("summary-pending", request(p, children(kids...), related(class(standard)), false))
	}
	// No summary yet on a running workspace with a claim injected (right
	// after an upgrade from a version that related claims): the children
	// stay exactly as they are, so nothing rolls, and the status stays as
	// it was, datastores and phase: Ready.
	{
		p := parent("standard", 3, nil, stores, injectedStatus())
		kids := running(parent("standard", 3, ready, stores, nil), standard, 1)
		rel := related(class(standard))
		rel["ResourceClaim.formspec.dev/v1alpha1"] = obj{ns + "/acme-orders-db": claim("acme-orders-db", "orders-db", "", true)}
		add("summary-absent-running", request(p, children(kids...), rel, false))
	}
	// No summary yet, and the spec changed since the last sync: the change
	// waits for the summary (observedGeneration stays), Progressing,
	// WaitingForClaimsSummary; the children are kept as they are.
	{
		st := statusWith("Progressing", cond("Progressing", "True", "WaitingForClaimsSummary", "waiting"), asExpected)
		p := parent("standard", 4, nil, stores, st)
		kids := running(parent("standard", 3, ready, stores, nil), standard, 1)
		add("summary-absent-spec-changed", request(p, children(kids...), related(class(standard)), false))
	}
	// No summary yet on a new workspace: rendered as if its claim were
	// not verified yet, without credentials.
	{
		p := parent("standard", 1, nil, stores, nil)
		add("summary-absent-first-sync", request(p, obj{}, related(class(standard)), false))
	}
	// A summary that does not parse (a Ready claim naming another claim's
	// Secret): Degraded, InvalidClaimsSummary, the children kept as they
	// are, never half-used.
	{
		forged := map[string]string{claimsummary.Annotation: `{"claims":[{"name":"acme-orders-db","datastore":{"name":"orders-db","namespace":"team-a"},"state":"Ready","secretName":"billing-db-credentials","credentialsHash":"sha256:1"}]}`}
		p := parent("standard", 3, forged, stores, statusWith("Degraded", rolledOut, cond("Degraded", "True", "InvalidClaimsSummary", "invalid")))
		kids := running(parent("standard", 3, ready, stores, nil), standard, 1)
		add("summary-invalid", request(p, children(kids...), related(class(standard)), false))
	}
	return fs
}
