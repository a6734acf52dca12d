package workspace_test

import "fmt"

// The cases of objects the hooks did not make: a child that could not be
// created, an object of its name being in the way
// (hooks/workspace/missing.go), and the children of the original FormSpec
// operator being taken over (hooks/workspace/takeover.go,
// docs/migrating.md).

// ownerRef is an owner reference to the Workspace.
func ownerRef() []obj {
	return []obj{{"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace", "name": wsName, "uid": wsUID, "controller": true, "blockOwnerDeletion": true}}
}

// foreign is an object as the API server returns it, with its own labels
// and owner references (none: nobody owns it).
func foreign(kind, name string, rv int, labels obj, refs []obj, spec obj, status obj) obj {
	apiVersion := "v1"
	if kind == "Deployment" {
		apiVersion = "apps/v1"
	}
	m := obj{"name": name, "namespace": ns, "uid": fmt.Sprintf("0f0e1900-0000-4000-8000-%012d", rv), "resourceVersion": fmt.Sprint(rv),
		"creationTimestamp": "2025-11-02T10:00:00Z", "labels": labels}
	if kind == "Deployment" {
		m["generation"] = 1
		m["annotations"] = obj{"deployment.kubernetes.io/revision": "1"}
	}
	if len(refs) > 0 {
		m["ownerReferences"] = refs
	}
	o := obj{"apiVersion": apiVersion, "kind": kind, "metadata": m}
	switch kind {
	case "ConfigMap":
		o["data"] = spec
	default:
		o["spec"] = spec
	}
	if status != nil {
		o["status"] = status
	}
	return o
}

// originalDeployment is the Deployment the original operator made for the
// workspace, under name: its own selector and labels, its own container
// name, the workspace's ConfigMap and the datastore's endpoint Secret as
// environment; labelled for Metacontroller by takeover prepare when
// prepared.
func originalDeployment(name string, rv, replicas int, prepared bool, status obj) obj {
	labels := obj{"app": wsName}
	if prepared {
		labels["controller-uid"] = wsUID
	}
	spec := obj{
		"replicas":                replicas,
		"selector":                obj{"matchLabels": obj{"app": wsName}},
		"progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
		"strategy": obj{"type": "RollingUpdate", "rollingUpdate": obj{"maxSurge": "25%", "maxUnavailable": "25%"}},
		"template": obj{
			"metadata": obj{"labels": obj{"app": wsName}},
			"spec": obj{
				"containers": []obj{{
					"name": "workspace", "image": "formahub/formspec-resource:1.8.2",
					"ports":                    []obj{{"containerPort": 8080, "protocol": "TCP"}},
					"env":                      []obj{{"name": "CONTROL_CLUSTER_URL", "value": "http://formspec-ctl.formspec-system:7070"}, {"name": "WORKSPACE_ID", "value": wsName}},
					"envFrom":                  []obj{{"configMapRef": obj{"name": wsName}}, {"prefix": "ORDERS_", "secretRef": obj{"name": "orders-db-endpoint"}}},
					"resources":                obj{"requests": obj{"cpu": "250m", "memory": "256Mi"}},
					"securityContext":          obj{"allowPrivilegeEscalation": false, "capabilities": obj{"drop": []string{"ALL"}}},
					"terminationMessagePath":   "/dev/termination-log",
					"terminationMessagePolicy": "File",
					"imagePullPolicy":          "IfNotPresent",
				}},
				"restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
				"terminationGracePeriodSeconds": 30, "securityContext": obj{"runAsNonRoot": true, "seccompProfile": obj{"type": "RuntimeDefault"}},
			},
		},
	}
	return foreign("Deployment", name, rv, labels, ownerRef(), spec, status)
}

// originalService and originalConfigMap are the original operator's.
func originalService(prepared bool) obj {
	labels := obj{"app": wsName}
	if prepared {
		labels["controller-uid"] = wsUID
	}
	return foreign("Service", wsName, 2202, labels, ownerRef(), obj{
		"type": "ClusterIP", "selector": obj{"app": wsName},
		"ports":     []obj{{"port": 80, "targetPort": 8080, "protocol": "TCP"}},
		"clusterIP": "10.96.41.17", "clusterIPs": []string{"10.96.41.17"}, "ipFamilies": []string{"IPv4"}, "ipFamilyPolicy": "SingleStack",
		"sessionAffinity": "None", "internalTrafficPolicy": "Cluster",
	}, obj{"loadBalancer": obj{}})
}

func originalConfigMap(prepared bool) obj {
	labels := obj{"app": wsName}
	if prepared {
		labels["controller-uid"] = wsUID
	}
	return foreign("ConfigMap", wsName, 2203, labels, ownerRef(), obj{"LOG_LEVEL": "info", "FEATURE_FORMS_V2": "true"}, nil)
}

// takeoverStatus is the status an earlier sync wrote, with conditions of
// the statuses the hook answers again (so that their times are kept and
// the answer does not depend on the clock): ready, progressing and
// degraded, each "True" or "False".
func takeoverStatus(phase, ready, progressing, degraded string) obj {
	return wsStatus(1, phase, 1, 1, 1,
		cond("Ready", ready, "ReplicasAvailable", "ready"),
		cond("Progressing", progressing, "TakeoverHeld", "held"),
		cond("Degraded", degraded, "AsExpected", "no problems observed"))
}

func takeoverCases() []fixture {
	var fs []fixture
	add := func(name string, req obj) { fs = append(fs, fixture{hook: "sync", name: name, request: req}) }
	rolled := func(gen, replicas int) obj { return deploymentStatus(gen, replicas, replicas, replicas, replicas, nil) }

	// A new workspace whose Deployment a sync asked for a minute and more
	// ago and has still not been created (a Deployment of its name that
	// nobody owns is in the way, which the hook cannot see): the Service
	// and ConfigMap were made; Degraded, ChildNotCreated, naming it. The
	// status is that of a sync after the one that found it Degraded, so
	// that the answer keeps every time and does not depend on the clock
	// (the transition is TestJudgeMissing's).
	{
		p := parent("standard", 1, nil, nil, wsStatus(1, "Degraded", 0, 0, 0,
			cond("Ready", "False", "DeploymentNotFound", "waiting for the Deployment to be created"),
			cond("Progressing", "True", "Creating", "creating the workspace's Deployment"),
			cond("Degraded", "True", "ChildNotCreated", "Deployment team-a/acme not created 1m0s after it was asked for")))
		kids := without(running(p, standard, 1), "Deployment")
		add("deployment-not-created", request(p, children(kids...), related(class(standard)), false))
	}
	// A running workspace whose ConfigMap was deleted and could not be
	// made again (someone's ConfigMap of that name, controlled by another
	// object, is in the way): Degraded, ChildNotCreated, naming it; the
	// rest as it was.
	{
		p := parent("standard", 1, nil, nil, wsStatus(1, "Degraded", 1, 1, 1,
			cond("Ready", "True", "ReplicasAvailable", "1 of 1 replicas available"),
			obj{"type": "Progressing", "status": "True", "reason": "Creating", "message": "creating the workspace's ConfigMap acme-config", "lastTransitionTime": "2026-01-10T10:00:00Z"},
			obj{"type": "Degraded", "status": "True", "reason": "ChildNotCreated", "message": "ConfigMap team-a/acme-config not created 1m0s after it was asked for", "lastTransitionTime": "2026-01-10T10:01:00Z"}))
		kids := without(running(p, standard, 1), "ConfigMap")
		add("configmap-not-created", request(p, children(kids...), related(class(standard)), false))
	}

	// The original operator's children, prepared and held: kept as they
	// are, Progressing TakeoverHeld.
	original := func(deployment obj) []obj {
		return []obj{deployment, originalService(true), originalConfigMap(true)}
	}
	hold := map[string]string{"formspec.dev/takeover": "hold"}
	{
		p := parent("standard", 1, hold, nil, takeoverStatus("Progressing", "True", "True", "False"))
		add("takeover-held", request(p, children(original(originalDeployment(wsName, 2201, 1, true, rolled(1, 1)))...), related(class(standard)), false))
	}
	// Released: this version's template onto the Deployment, keeping its
	// selector; the Service selects what old and new pods carry; the
	// original ConfigMap stays while old pods may read it.
	{
		p := parent("standard", 1, nil, nil, takeoverStatus("Progressing", "True", "True", "False"))
		add("takeover-start", request(p, children(original(originalDeployment(wsName, 2201, 1, true, rolled(1, 1)))...), related(class(standard)), false))
	}
	// Released, but the workspace's claim is not verified yet (a v1 grant
	// whose Datastore has not opted in, say): everything stays, so that
	// the pods keep their credentials and roll once, onto the new ones.
	{
		stores := obj{"datastores": []obj{{"name": "orders-db", "envPrefix": "ORDERS_"}}}
		p := parent("standard", 1, nil, stores, takeoverStatus("Progressing", "True", "True", "False"))
		rel := related(class(standard))
		pending := claim("acme-orders-db", "orders-db", "", true)
		pending["status"] = obj{}
		rel["ResourceClaim.formspec.dev/v1alpha1"] = obj{ns + "/acme-orders-db": pending}
		add("takeover-waiting-credentials", request(p, children(original(originalDeployment(wsName, 2201, 1, true, rolled(1, 1)))...), rel, false))
	}
	// The steps after the first: this version's Deployment (selector kept)
	// rolling beside the original Service, then rolled out, then the
	// Service switched.
	taken := func(gen int, status obj) obj {
		d := desiredFor(parent("standard", 1, nil, nil, nil), related(class(standard)))
		dep := observe(d["Deployment"], 1102, status)
		dep["metadata"].(obj)["generation"] = gen
		spec := dep["spec"].(obj)
		spec["selector"] = obj{"matchLabels": obj{"app": wsName}}
		spec["template"].(obj)["metadata"].(obj)["labels"].(obj)["app"] = wsName
		return dep
	}
	configMap := func() obj {
		return observe(desiredFor(parent("standard", 1, nil, nil, nil), related(class(standard)))["ConfigMap"], 1101, nil)
	}
	progressing := func(reason string) obj {
		return wsStatus(1, "Progressing", 1, 1, 1,
			cond("Ready", "True", "ReplicasAvailable", "ready"),
			cond("Progressing", "True", reason, "taking over"),
			cond("Degraded", "False", "AsExpected", "no problems observed"))
	}
	{
		p := parent("standard", 1, nil, nil, progressing("TakingOver"))
		dep := taken(2, deploymentStatus(2, 2, 1, 1, 1, obj{"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated", "message": `ReplicaSet "acme-7f6d5c4b3" is progressing.`, "lastUpdateTime": "2026-01-10T10:00:05Z", "lastTransitionTime": childTime}))
		add("takeover-rolling", request(p, children(dep, originalService(true), configMap(), originalConfigMap(true)), related(class(standard)), false))
	}
	{
		p := parent("standard", 1, nil, nil, progressing("RollingOut"))
		add("takeover-rolled-out", request(p, children(taken(2, rolled(2, 1)), originalService(true), configMap(), originalConfigMap(true)), related(class(standard)), false))
	}
	{
		p := parent("standard", 1, nil, nil, progressing("TakingOver"))
		svc := observe(desiredFor(parent("standard", 1, nil, nil, nil), related(class(standard)))["Service"], 1103, nil)
		// The original Service's port kept its name (none).
		delete(svc["spec"].(obj)["ports"].([]any)[0].(obj), "name")
		add("takeover-service-switched", request(p, children(taken(2, rolled(2, 1)), svc, configMap(), originalConfigMap(true)), related(class(standard)), false))
	}
	// An original Deployment of another name: this version's Deployment
	// comes up beside it, and the Service keeps serving the old pods until
	// the new ones have rolled out.
	{
		p := parent("standard", 1, nil, nil, takeoverStatus("Pending", "False", "True", "False"))
		add("takeover-other-name", request(p, children(originalDeployment(wsName+"-app", 2201, 1, true, rolled(1, 1)), originalService(true), originalConfigMap(true)), related(class(standard)), false))
	}
	return fs
}
