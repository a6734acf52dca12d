package workspace_test

import "fmt"

var (
	standard = classSpec{name: "standard", min: 1, max: 1}
	premium  = classSpec{name: "premium", min: 2, max: 2, nodeType: "premium"}
	autoCls  = classSpec{name: "elastic", min: 2, max: 6, auto: true, nodeType: "general"}
	sleepy   = classSpec{name: "hobby", min: 1, max: 1, zero: true}
)

// readyStatus is the status a previous sync wrote for a healthy workspace.
func readyStatus(gen, replicas int) obj {
	return wsStatus(gen, "Ready", replicas, replicas, replicas,
		cond("Ready", "True", "ReplicasAvailable", "ready"),
		cond("Progressing", "False", "RolloutComplete", "done"),
		cond("Degraded", "False", "AsExpected", "no problems observed"))
}

// running returns the observed children of a workspace that has been
// synced before with p and cls, all replicas ready.
func running(p obj, cls classSpec, replicas int) []obj {
	d := desiredFor(p, related(class(cls)))
	var out []obj
	out = append(out, observe(d["ConfigMap"], 1101, nil))
	out = append(out, observe(d["Deployment"], 1102, deploymentStatus(1, replicas, replicas, replicas, replicas, nil)))
	out = append(out, observe(d["Service"], 1103, nil))
	if hpa := d["HorizontalPodAutoscaler"]; hpa != nil {
		out = append(out, observe(hpa, 1104, obj{"currentReplicas": replicas, "desiredReplicas": replicas,
			"currentMetrics": []obj{{"type": "Resource", "resource": obj{"name": "cpu", "current": obj{"averageUtilization": 41, "averageValue": "102m"}}}},
			"conditions": []obj{
				{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "message": "recommended size matches current size", "lastTransitionTime": childTime},
				{"type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization (percentage of request)", "lastTransitionTime": childTime},
			}}))
	}
	if pdb := d["PodDisruptionBudget"]; pdb != nil {
		out = append(out, observe(pdb, 1105, obj{"observedGeneration": 1, "currentHealthy": replicas, "desiredHealthy": replicas - 1, "disruptionsAllowed": 1, "expectedPods": replicas,
			"conditions": []obj{{"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods", "message": "", "observedGeneration": 1, "lastTransitionTime": childTime}}}))
	}
	return out
}

func find(objs []obj, kind string) obj {
	for _, o := range objs {
		if o["kind"] == kind {
			return o
		}
	}
	return nil
}

func without(objs []obj, kind string) []obj {
	var out []obj
	for _, o := range objs {
		if o["kind"] != kind {
			out = append(out, o)
		}
	}
	return out
}

func cases() []fixture {
	var fs []fixture
	add := func(hook, name string, req obj) { fs = append(fs, fixture{hook: hook, name: name, request: req}) }

	// A brand-new workspace: nothing observed yet, no status.
	{
		p := parent("standard", 1, nil, nil, nil)
		add("sync", "first-sync", request(p, obj{}, related(class(standard)), false))
	}
	// Everything observed and ready; the previous status already says so.
	{
		p := parent("standard", 1, nil, nil, readyStatus(1, 1))
		add("sync", "steady-ready", request(p, children(running(p, standard, 1)...), related(class(standard)), false))
	}
	// A new pod template is rolling out: one of two updated.
	{
		p := parent("premium", 2, nil, obj{"version": "1.9.0"}, wsStatus(2, "Progressing", 3, 2, 1,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "True", "RollingOut", "rolling"),
			cond("Degraded", "False", "AsExpected", "no problems observed")))
		kids := running(parent("premium", 1, nil, nil, nil), premium, 2)
		dep := find(kids, "Deployment")
		dep["metadata"].(obj)["generation"] = 2
		dep["status"] = deploymentStatus(2, 3, 1, 2, 2, obj{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": `ReplicaSet "acme-7c4d9f6b8" is progressing.`, "lastUpdateTime": "2026-01-10T10:00:05Z", "lastTransitionTime": childTime})
		add("sync", "rollout-in-progress", request(p, children(kids...), related(class(premium)), false))
	}
	// The rollout is stuck past its deadline.
	{
		p := parent("standard", 2, nil, obj{"version": "1.9.0-broken"}, wsStatus(2, "Degraded", 2, 1, 1,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "False", "ProgressDeadlineExceeded", "stuck"),
			cond("Degraded", "True", "ProgressDeadlineExceeded", "stuck")))
		kids := running(parent("standard", 1, nil, nil, nil), standard, 1)
		dep := find(kids, "Deployment")
		dep["metadata"].(obj)["generation"] = 2
		dep["status"] = deploymentStatus(2, 2, 1, 1, 1, obj{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": `ReplicaSet "acme-5b8c7d9f4" has timed out progressing.`, "lastUpdateTime": "2026-01-10T10:10:00Z", "lastTransitionTime": "2026-01-10T10:10:00Z"})
		add("sync", "progress-deadline-exceeded", request(p, children(kids...), related(class(standard)), false))
	}
	// Idle on a class that allows scale to zero; the Deployment is already down.
	{
		idle := map[string]string{"formspec.dev/idle": "true"}
		p := parent("hobby", 1, idle, nil, wsStatus(1, "Idle", 0, 0, 0,
			cond("Ready", "False", "ScaledToZero", "idle"),
			cond("Progressing", "False", "RolloutComplete", "done"),
			cond("Degraded", "False", "AsExpected", "no problems observed")))
		kids := running(p, sleepy, 0)
		add("sync", "idle-scale-to-zero", request(p, children(kids...), related(class(sleepy)), false))
	}
	// Idle asked for, but the class does not allow scale to zero.
	{
		idle := map[string]string{"formspec.dev/idle": "true"}
		p := parent("standard", 1, idle, nil, readyStatus(1, 1))
		add("sync", "idle-without-scale-to-zero", request(p, children(running(p, standard, 1)...), related(class(standard)), false))
	}
	// First sync of an auto-scaling workspace: HPA, PDB and spreading.
	{
		p := parent("elastic", 1, nil, nil, nil)
		add("sync", "auto-scaling-first-sync", request(p, obj{}, related(class(autoCls)), false))
	}
	// A running workspace of a fixed class whose class just gained
	// auto-scaling: the three running pods must stay.
	{
		before := classSpec{name: "elastic", min: 3, max: 3, nodeType: "general"}
		p := parent("elastic", 1, nil, nil, readyStatus(1, 3))
		kids := running(p, before, 3)
		add("sync", "auto-scaling-class-gained", request(p, children(kids...), related(class(autoCls)), false))
	}
	// The HPA has scaled the Deployment to five.
	{
		p := parent("elastic", 1, nil, nil, readyStatus(1, 5))
		kids := running(p, autoCls, 5)
		dep := find(kids, "Deployment")
		dep["spec"].(obj)["replicas"] = 5
		dep["metadata"].(obj)["generation"] = 2
		dep["status"] = deploymentStatus(2, 5, 5, 5, 5, nil)
		find(kids, "HorizontalPodAutoscaler")["status"].(obj)["desiredReplicas"] = 5
		add("sync", "auto-scaling-hpa-scaled", request(p, children(kids...), related(class(autoCls)), false))
	}
	// A fixed class with two replicas: PDB and anti-affinity, node type.
	{
		p := parent("premium", 1, nil, nil, readyStatus(1, 2))
		add("sync", "min-replicas-two", request(p, children(running(p, premium, 2)...), related(class(premium)), false))
	}
	// The workspace brings its own affinity and other pod settings.
	{
		pod := obj{
			"affinity":                  obj{"nodeAffinity": obj{"requiredDuringSchedulingIgnoredDuringExecution": obj{"nodeSelectorTerms": []obj{{"matchExpressions": []obj{{"key": "topology.kubernetes.io/zone", "operator": "In", "values": []string{"ap-southeast-3a"}}}}}}}},
			"nodeSelector":              obj{"disktype": "ssd"},
			"tolerations":               []obj{{"key": "dedicated", "operator": "Equal", "value": "formspec", "effect": "NoSchedule"}},
			"annotations":               obj{"prometheus.io/scrape": "true"},
			"labels":                    obj{"team": "forms"},
			"priorityClassName":         "workspace-high",
			"imagePullSecrets":          []obj{{"name": "registry-creds"}},
			"containerSecurityContext":  obj{"runAsUser": 10001},
			"extraEnv":                  []obj{{"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.observability:4317"}},
			"topologySpreadConstraints": []obj{{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": obj{"matchLabels": obj{"formspec.dev/workspace": wsName}}}},
		}
		p := parent("premium", 1, nil, obj{"pod": pod}, readyStatus(1, 2))
		add("sync", "user-affinity-override", request(p, children(running(p, premium, 2)...), related(class(premium)), false))
	}
	// The class was deleted: children stay exactly as last applied.
	{
		p := parent("premium", 1, nil, nil, wsStatus(1, "Degraded", 2, 2, 2,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "False", "RolloutComplete", "done"),
			cond("Degraded", "True", "ClusterClassNotFound", "missing")))
		add("sync", "cluster-class-missing", request(p, children(running(p, premium, 2)...), related(), false))
	}
	// The class of an auto-scaling workspace was deleted after the HPA
	// scaled it to five: the children stay, at the replica count running.
	{
		p := parent("elastic", 1, nil, nil, wsStatus(1, "Degraded", 5, 5, 5,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "False", "RolloutComplete", "done"),
			cond("Degraded", "True", "ClusterClassNotFound", "missing")))
		kids := running(p, autoCls, 5)
		dep := find(kids, "Deployment")
		dep["spec"].(obj)["replicas"] = 5
		dep["metadata"].(obj)["generation"] = 2
		dep["status"] = deploymentStatus(2, 5, 5, 5, 5, nil)
		add("sync", "cluster-class-missing-under-hpa", request(p, children(kids...), related(), false))
	}
	// A new artifact binary: the annotation changes on the workspace.
	{
		old := map[string]string{"formspec.dev/artifact-binary-hash": "sha256:1f0c9a"}
		st := readyStatus(1, 1)
		st["artifactHash"] = "sha256:1f0c9a"
		p := parent("standard", 1, map[string]string{"formspec.dev/artifact-binary-hash": "sha256:7be41d"}, nil, st)
		kids := running(parent("standard", 1, old, nil, nil), standard, 1)
		add("sync", "artifact-hash-change", request(p, children(kids...), related(class(standard)), false))
	}
	// The new binary is rolling out: the template Metacontroller applied
	// carries it and one of two pods runs it. status.artifactHash stays
	// the hash every pod runs, so the restart is not consumed yet.
	{
		wanted := map[string]string{"formspec.dev/artifact-binary-hash": "sha256:7be41d"}
		st := wsStatus(1, "Progressing", 3, 2, 1,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "True", "RollingOut", "rolling"),
			cond("Degraded", "False", "AsExpected", "no problems observed"))
		st["artifactHash"] = "sha256:1f0c9a"
		p := parent("premium", 1, wanted, nil, st)
		kids := running(p, premium, 2)
		dep := find(kids, "Deployment")
		dep["metadata"].(obj)["generation"] = 2
		dep["status"] = deploymentStatus(2, 3, 1, 2, 2, obj{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": `ReplicaSet "acme-58d7c9f4b6" is progressing.`, "lastUpdateTime": "2026-01-10T10:00:05Z", "lastTransitionTime": childTime})
		add("sync", "artifact-hash-rolling", request(p, children(kids...), related(class(premium)), false))
	}

	// Finalize, first step: HPA and pods still there.
	{
		p := parent("elastic", 1, nil, nil, readyStatus(1, 3))
		p["metadata"].(obj)["deletionTimestamp"] = "2026-01-11T08:00:00Z"
		p["metadata"].(obj)["deletionGracePeriodSeconds"] = 0
		kids := running(p, autoCls, 3)
		find(kids, "Deployment")["spec"].(obj)["replicas"] = 3
		add("finalize", "scale-down", request(p, children(kids...), related(class(autoCls)), true))
	}
	// Finalize after the first step: the HPA gone, the Deployment scaled
	// to zero and its controller caught up.
	scaledDown := func() (obj, []obj) {
		p := parent("elastic", 1, nil, nil, wsStatus(1, "Terminating", 0, 0, 0,
			cond("Ready", "False", "ScaledToZero", "idle"),
			cond("Progressing", "False", "RolloutComplete", "done"),
			cond("Degraded", "False", "AsExpected", "no problems observed")))
		p["metadata"].(obj)["deletionTimestamp"] = "2026-01-11T08:00:00Z"
		p["metadata"].(obj)["deletionGracePeriodSeconds"] = 0
		kids := without(running(p, autoCls, 0), "HorizontalPodAutoscaler")
		dep := find(kids, "Deployment")
		dep["spec"].(obj)["replicas"] = 0
		dep["metadata"].(obj)["generation"] = 2
		dep["status"] = deploymentStatus(2, 0, 0, 0, 0, nil)
		return p, kids
	}
	// Finalize, second step: scaled to zero, no pods left.
	{
		p, kids := scaledDown()
		add("finalize", "remove-rest", request(p, children(kids...), related(class(autoCls)), true))
	}
	// Finalize, between the steps: scaled to zero, but a pod is still
	// shutting down (the Deployment counts it in terminatingReplicas, not
	// in replicas), so its Service and ConfigMap must stay.
	{
		p, kids := scaledDown()
		find(kids, "Deployment")["status"].(obj)["terminatingReplicas"] = 1
		add("finalize", "pods-terminating", request(p, children(kids...), related(class(autoCls)), true))
	}
	// Finalize, last call: nothing observed any more.
	{
		p := parent("elastic", 1, nil, nil, wsStatus(1, "Terminating", 0, 0, 0,
			cond("Ready", "False", "ScaledToZero", "idle"),
			cond("Progressing", "False", "RolloutComplete", "done"),
			cond("Degraded", "False", "AsExpected", "no problems observed")))
		p["metadata"].(obj)["deletionTimestamp"] = "2026-01-11T08:00:00Z"
		p["metadata"].(obj)["deletionGracePeriodSeconds"] = 0
		p["status"].(obj)["serviceName"] = ""
		add("finalize", "done", request(p, obj{}, related(class(autoCls)), true))
	}

	// Credentials: one claim ready, one denied, one missing.
	{
		stores := obj{"datastores": []obj{
			{"name": "orders-db", "envPrefix": "ORDERS_"},
			{"name": "cache", "namespace": "shared-data"},
			{"name": "analytics"},
		}}
		p := parent("standard", 3, nil, stores, wsStatus(3, "Degraded", 1, 1, 1,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "False", "RolloutComplete", "done"),
			cond("Degraded", "True", "DatastoreNotInjected", "missing")))
		base := parent("standard", 3, nil, nil, nil)
		kids := running(base, standard, 1)
		rel := related(class(standard))
		rel["ResourceClaim.formspec.dev/v1alpha1"] = obj{
			ns + "/acme-orders-db": claim("acme-orders-db", "orders-db", "", true),
			ns + "/acme-cache":     claim("acme-cache", "cache", "shared-data", false),
			ns + "/other-orders":   otherClaim(),
		}
		add("sync", "credentials-mixed", request(p, children(kids...), rel, false))
	}
	// Credentials: the one claim is not verified yet, the rest is ready:
	// Progressing (WaitingForCredentials), not Degraded.
	{
		stores := obj{"datastores": []obj{{"name": "orders-db", "envPrefix": "ORDERS_"}}}
		p := parent("standard", 3, nil, stores, wsStatus(3, "Progressing", 1, 1, 1,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "True", "WaitingForCredentials", "waiting"),
			cond("Degraded", "False", "AsExpected", "no problems observed")))
		kids := running(parent("standard", 3, nil, nil, nil), standard, 1)
		rel := related(class(standard))
		pending := claim("acme-orders-db", "orders-db", "", true)
		pending["status"] = obj{}
		rel["ResourceClaim.formspec.dev/v1alpha1"] = obj{ns + "/acme-orders-db": pending}
		add("sync", "credentials-pending", request(p, children(kids...), rel, false))
	}
	// A spec the API server let through but the hook cannot read (a
	// passthrough field of the wrong type): Degraded with the reason, and
	// the children kept as they are.
	{
		p := parent("premium", 4, nil, nil, wsStatus(3, "Degraded", 2, 2, 2,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "False", "RolloutComplete", "done"),
			cond("Degraded", "True", "InvalidSpec", "invalid")))
		kids := running(p, premium, 2)
		p["spec"].(obj)["pod"] = obj{"tolerations": []obj{{"key": "dedicated", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "abc"}}}
		add("sync", "invalid-spec", request(p, children(kids...), related(class(premium)), false))
	}
	// Customize: the class and, with datastores, the namespace's claims
	// (related mode: serve-flags), or the class alone (summary mode).
	{
		add("customize", "with-datastores", obj{"controller": controller(), "parent": parent("standard", 1, nil, obj{"datastores": []obj{{"name": "orders-db"}}}, nil)})
		add("customize", "summary-with-datastores", obj{"controller": controller(), "parent": parent("standard", 1, nil, obj{"datastores": []obj{{"name": "orders-db"}}}, nil)})
		add("customize", "class-only", obj{"controller": controller(), "parent": parent("standard", 1, nil, nil, nil)})
	}
	fs = append(fs, summaryCases()...)
	return append(fs, takeoverCases()...)
}

// claim is a ResourceClaim for this workspace as the resourceclaim hook
// leaves it: Ready with a binding, or Denied.
func claim(name, store, storeNS string, ready bool) obj {
	ds := obj{"name": store}
	if storeNS != "" {
		ds["namespace"] = storeNS
	}
	status := obj{"observedGeneration": 1}
	if ready {
		status["conditions"] = []obj{
			{"type": "Ready", "status": "True", "reason": "Verified", "message": "grant verified", "observedGeneration": 1, "lastTransitionTime": childTime},
			{"type": "Denied", "status": "False", "reason": "Verified", "message": "grant verified", "observedGeneration": 1, "lastTransitionTime": childTime},
		}
		status["binding"] = obj{"name": name + "-credentials"}
		status["credentialsHash"] = "sha256:3d5f0c7a9b1e2d4c6f8a0b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e"
	} else {
		status["conditions"] = []obj{
			{"type": "Ready", "status": "False", "reason": "TenantNotAllowed", "message": "denied", "observedGeneration": 1, "lastTransitionTime": childTime},
			{"type": "Denied", "status": "True", "reason": "TenantNotAllowed", "message": `workspace team-a/acme is not in the allowedTenants of Datastore shared-data/cache`, "observedGeneration": 1, "lastTransitionTime": childTime},
		}
	}
	return obj{
		"apiVersion": "formspec.dev/v1alpha1", "kind": "ResourceClaim",
		"metadata": obj{"name": name, "namespace": ns, "uid": "a11ce000-0000-4000-8000-" + fmt.Sprintf("%012d", len(name)), "resourceVersion": "990", "generation": 1, "creationTimestamp": "2026-01-09T12:00:00Z"},
		"spec": obj{"datastore": ds, "workspace": wsName, "permission": "readwrite", "grantedBy": "dba@acme.example", "grantedAt": "2026-01-09T11:58:00Z",
			"signatureVersion": "v2", "signature": "V2hhdCBhIGdyYW50IHNpZ25hdHVyZSBsb29rcyBsaWtlOiA2NCBieXRlcyBvZiBlZDI1NTE5IG91dHB1dC4uLi4uLg=="},
		"status": status,
	}
}

// otherClaim is a ready claim for another workspace in the same namespace;
// it must not be injected into acme.
func otherClaim() obj {
	c := claim("other-orders", "orders-db", "", true)
	c["spec"].(obj)["workspace"] = "globex"
	return c
}
