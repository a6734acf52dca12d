// The Workspace fixture requests are built here, and TestFixtureRequests
// keeps fixtures/workspace/ in step with them, as the other controllers'
// fixture tests do.
//
// Fixture requests must look like what Metacontroller really sends: the
// controller object, a parent with server metadata and a status, observed
// children with the fields the API server adds and a status of their own,
// related objects keyed Kind.group/version → ns/name. Writing those by hand
// drifts from the hook's real output, so each observed child is built from
// what the hook itself asks for, then dressed the way the API server and
// Metacontroller would. cmd/formspec-hooks TestFixtures checks the
// responses; go test -update rewrites the requests, and a person reviews
// the diff.
//
//	go test ./internal/hooks/workspace -run 'TestFixtureRequests$' -update
package workspace_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
	"github.com/formspec/formspec-hooks/internal/testkit/golden"
)

const (
	ns        = "team-a"
	wsName    = "acme"
	wsUID     = "6f1c2f0e-3b7a-4d52-9c1e-0d6a1f2b3c4d"
	created   = "2026-01-10T09:00:00Z"
	childTime = "2026-01-10T09:00:02Z"
)

func TestFixtureRequests(t *testing.T) {
	byHook := map[string]map[string]any{}
	for _, c := range cases() {
		if byHook[c.hook] == nil {
			byHook[c.hook] = map[string]any{}
		}
		byHook[c.hook][c.name] = c.request
	}
	for hook, requests := range byHook {
		golden.Requests(t, filepath.Join("..", "..", "..", "fixtures", "workspace", hook), requests)
	}
}

type fixture struct {
	hook, name string
	request    any
}

// obj is a loosely typed Kubernetes object.
type obj = map[string]any

func controller() obj {
	hook := func(path string) obj {
		return obj{"version": "v2", "webhook": obj{"url": "http://formspec-hooks.formspec-system/v1/workspace/" + path, "etag": obj{"enabled": true}}}
	}
	child := func(apiVersion, resource string) obj {
		return obj{"apiVersion": apiVersion, "resource": resource, "updateStrategy": obj{"method": "InPlace"}}
	}
	return obj{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   obj{"name": "formspec-workspace", "uid": "0b9e8a46-1d1f-4c57-a0de-5f0c1d2e3f40", "resourceVersion": "812", "generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
		"spec": obj{
			"generateSelector": true,
			"parentResource":   obj{"apiVersion": "formspec.dev/v1alpha1", "resource": "workspaces", "ignoreStatusChanges": true},
			"childResources": []obj{
				child("apps/v1", "deployments"),
				child("v1", "services"),
				child("v1", "configmaps"),
				child("autoscaling/v2", "horizontalpodautoscalers"),
				child("policy/v1", "poddisruptionbudgets"),
			},
			"hooks": obj{"sync": hook("sync"), "finalize": hook("finalize"), "customize": hook("customize")},
		},
		"status": obj{},
	}
}

// classSpec describes a ClusterClass for a case.
type classSpec struct {
	name     string
	min, max int
	zero     bool
	auto     bool
	nodeType string
}

func class(c classSpec) obj {
	scaling := obj{"minReplicas": c.min, "targetCPUUtilizationPercentage": 80}
	if c.max > 0 {
		scaling["maxReplicas"] = c.max
	}
	if c.zero {
		scaling["scaleToZero"] = true
	}
	spec := obj{"sla": "99.9", "maxWorkspaces": 200, "scaling": scaling, "pricing": obj{"plan": c.name, "currency": "USD"}}
	if c.nodeType != "" {
		spec["nodeType"] = c.nodeType
	}
	if c.auto {
		spec["features"] = []string{"auto-scaling"}
	}
	return obj{
		"apiVersion": "formspec.dev/v1alpha1",
		"kind":       "ClusterClass",
		"metadata":   obj{"name": c.name, "uid": "c1a55000-0000-4000-8000-" + fmt.Sprintf("%012d", len(c.name)), "resourceVersion": "640", "generation": 1, "creationTimestamp": "2026-01-02T00:00:00Z"},
		"spec":       spec,
	}
}

// parent builds a Workspace as the API server returns it.
func parent(className string, generation int, annotations map[string]string, spec obj, status obj) obj {
	s := obj{"owner": "acme-corp", "region": "ap-southeast-3", "clusterClass": className, "environment": "production", "version": "1.8.2",
		"resources": obj{"requests": obj{"cpu": "250m", "memory": "256Mi"}, "limits": obj{"memory": "512Mi"}},
		"config":    obj{"LOG_LEVEL": "info", "FEATURE_FORMS_V2": "true"},
		"cache":     obj{"driver": "memory", "ttlSeconds": 300}}
	maps.Copy(s, spec)
	meta := obj{"name": wsName, "namespace": ns, "uid": wsUID, "resourceVersion": "1204", "generation": generation,
		"creationTimestamp": created, "finalizers": []string{"metacontroller.io/compositecontroller-formspec-workspace"},
		"labels": obj{"formspec.dev/owner": "acme-corp"}}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	p := obj{"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace", "metadata": meta, "spec": s}
	if status != nil {
		p["status"] = status
	}
	return p
}

// desiredFor runs the real hook over a request with no children to learn
// what it asks for; the observed children are dressed from that.
func desiredFor(p, related obj) map[string]obj {
	req := obj{"controller": controller(), "parent": p, "children": obj{}, "related": related, "finalizing": false}
	raw, _ := json.Marshal(req)
	var creq workspace.Request
	if err := creq.Decode(raw); err != nil {
		panic(err) // the hook refused a fixture the cases build: a bug of the cases
	}
	h := workspace.New(workspace.Config{ResourceImage: "formahub/formspec-resource", DefaultVersion: "latest", ControlClusterURL: "http://formspec-ctl.formspec-system:7070", Now: func() time.Time { return time.Date(2026, 1, 10, 9, 0, 0, 0, time.UTC) }})
	resp, err := h.Sync(context.Background(), &creq)
	if err != nil {
		panic(err) // the hook refused a fixture the cases build: a bug of the cases
	}
	children, _ := json.Marshal(resp.Children)
	var objs []obj
	if err := json.Unmarshal(children, &objs); err != nil {
		panic(err) // the hook refused a fixture the cases build: a bug of the cases
	}
	out := map[string]obj{}
	for _, c := range objs {
		out[c["kind"].(string)] = c
	}
	return out
}

// observe dresses a desired child as the API server would return it after
// Metacontroller applied it.
func observe(desired obj, rv int, status obj) obj {
	raw, _ := json.Marshal(desired)
	var applied obj
	_ = json.Unmarshal(raw, &applied)
	meta := applied["metadata"].(obj)
	labels := meta["labels"].(obj)
	labels["controller-uid"] = wsUID
	lastApplied, _ := json.Marshal(applied)

	var o obj
	_ = json.Unmarshal(lastApplied, &o)
	m := o["metadata"].(obj)
	kind := o["kind"].(string)
	m["uid"] = fmt.Sprintf("%08x-0000-4000-8000-%012d", len(kind)*7919, rv)
	m["resourceVersion"] = fmt.Sprint(rv)
	m["creationTimestamp"] = childTime
	if kind != "ConfigMap" && kind != "Service" {
		m["generation"] = 1
	}
	m["annotations"] = obj{"metacontroller.k8s.io/last-applied-configuration": string(lastApplied)}
	m["ownerReferences"] = []obj{{"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace", "name": wsName, "uid": wsUID, "controller": true, "blockOwnerDeletion": true}}
	switch kind {
	case "Deployment":
		spec := o["spec"].(obj)
		spec["progressDeadlineSeconds"] = 600
		if _, set := spec["revisionHistoryLimit"]; !set {
			spec["revisionHistoryLimit"] = 10
		}
		spec["strategy"] = obj{"type": "RollingUpdate", "rollingUpdate": obj{"maxSurge": "25%", "maxUnavailable": "25%"}}
		tmpl := spec["template"].(obj)["spec"].(obj)
		tmpl["restartPolicy"] = "Always"
		tmpl["dnsPolicy"] = "ClusterFirst"
		tmpl["schedulerName"] = "default-scheduler"
		tmpl["terminationGracePeriodSeconds"] = 30
		m["annotations"].(obj)["deployment.kubernetes.io/revision"] = "1"
	case "Service":
		spec := o["spec"].(obj)
		spec["clusterIP"] = "10.96.41.17"
		spec["clusterIPs"] = []string{"10.96.41.17"}
		spec["ipFamilies"] = []string{"IPv4"}
		spec["ipFamilyPolicy"] = "SingleStack"
		spec["sessionAffinity"] = "None"
		spec["internalTrafficPolicy"] = "Cluster"
		status = obj{"loadBalancer": obj{}}
	}
	if status != nil {
		o["status"] = status
	}
	return o
}

// deploymentStatus is a Deployment's status with the usual conditions.
func deploymentStatus(gen, replicas, updated, ready, available int, progressing obj) obj {
	avail := obj{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability.", "lastUpdateTime": childTime, "lastTransitionTime": childTime}
	if available == 0 && replicas > 0 {
		avail = obj{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "Deployment does not have minimum availability.", "lastUpdateTime": childTime, "lastTransitionTime": childTime}
	}
	if progressing == nil {
		progressing = obj{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": `ReplicaSet "acme-6d9f7c8b5" has successfully progressed.`, "lastUpdateTime": childTime, "lastTransitionTime": childTime}
	}
	s := obj{"observedGeneration": gen, "replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready, "availableReplicas": available,
		"conditions": []obj{avail, progressing}}
	if replicas-available > 0 {
		s["unavailableReplicas"] = replicas - available
	}
	return s
}

func related(classes ...obj) obj {
	r := obj{}
	if len(classes) > 0 {
		group := obj{}
		for _, c := range classes {
			group[c["metadata"].(obj)["name"].(string)] = c
		}
		r["ClusterClass.formspec.dev/v1alpha1"] = group
	}
	return r
}

// children groups observed children by Metacontroller's keys.
func children(objs ...obj) obj {
	out := obj{}
	for _, o := range objs {
		key := o["kind"].(string) + "." + o["apiVersion"].(string)
		if out[key] == nil {
			out[key] = obj{}
		}
		m := o["metadata"].(obj)
		out[key].(obj)[m["namespace"].(string)+"/"+m["name"].(string)] = o
	}
	return out
}

func request(p, kids, rel obj, finalizing bool) obj {
	return obj{"controller": controller(), "parent": p, "children": kids, "related": rel, "finalizing": finalizing}
}

// wsStatus is a Workspace status as a previous sync would have written it.
func wsStatus(gen int, phase string, replicas, ready, updated int, conds ...obj) obj {
	cs := make([]obj, 0, len(conds))
	for _, c := range conds {
		c["observedGeneration"] = gen
		if c["lastTransitionTime"] == nil {
			c["lastTransitionTime"] = created
		}
		cs = append(cs, c)
	}
	return obj{"observedGeneration": gen, "phase": phase, "replicas": replicas, "readyReplicas": ready, "updatedReplicas": updated, "serviceName": wsName, "conditions": cs}
}

func cond(t, status, reason, message string) obj {
	return obj{"type": t, "status": status, "reason": reason, "message": message}
}
