package e2e

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/test/controlplane"
)

// testDegradedEvents brings one Workspace into each Degraded reason, the
// way a cluster gets there, and checks that the reporter announces each as
// a Warning Event on the Workspace whose note is the Degraded condition's
// message:
//
//   - ClusterClassNotFound: the Workspace names a class that does not exist.
//   - InvalidSpec: a resource quantity the CRD's pattern lets through and
//     Kubernetes' quantity parser refuses ("1e1.5": the pattern allows a
//     fractional exponent), so the API server stores the Workspace and the
//     hook cannot decode its spec.
//   - ProgressDeadlineExceeded and ReplicaFailure: this control plane runs
//     no deployment controller, so the test writes the Deployment's status
//     as that controller does when a rollout passes its deadline (the
//     Progressing condition False, reason ProgressDeadlineExceeded) and when
//     the ReplicaSet cannot create pods (ReplicaFailure True, FailedCreate,
//     with the quota's refusal as its message).
//   - DatastoreNotInjected: the Workspace lists a datastore no claim serves.
//   - ChildNotCreated: a Deployment with the Workspace's name exists
//     before it, owned by nobody (its own selector, which is immutable), or
//     controlled by another object (a ConfigMap standing in for another
//     tool's object); Metacontroller's apply of the workspace's Deployment
//     onto it fails, and once the Workspace is Degraded (the hook's grace
//     is a few seconds here) the Deployment must be exactly as it was made:
//     not adopted, not relabelled, not overwritten. The same for a Service
//     nobody owns, which Metacontroller's apply would overwrite but for
//     the install's admission policy (deploy/hooks/children-admission-policy.yaml).
//     The hook never sees the object (missing.go); the message names the
//     child it could not create.
func testDegradedEvents(t *testing.T, e *env) {
	const ns, className = "e2e-degraded", "e2e-degraded"
	e.namespace(t, ns)
	e.apply(t, clusterClass(className, v1alpha1.Scaling{MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](2)}))

	cases := map[string]struct {
		reason string
		create func(t *testing.T, name string)
		// deploymentCondition, when set, is written into the running
		// workspace's Deployment status, as the deployment controller
		// would.
		deploymentCondition map[string]any
		// inTheWay, when set, is created before the Workspace, with its
		// name, and must stay exactly as it was created.
		inTheWay func(t *testing.T, name string) controlplane.Object
	}{
		"classless": {
			reason: v1alpha1.ReasonClusterClassNotFound,
			create: func(t *testing.T, name string) { e.apply(t, newWorkspace(ns, name, "e2e-no-such-class")) },
		},
		"unreadable": {
			reason: v1alpha1.ReasonInvalidSpec,
			create: func(t *testing.T, name string) {
				obj := toObject(t, newWorkspace(ns, name, className))
				delete(obj, "status")
				delete(obj["metadata"].(map[string]any), "creationTimestamp")
				obj["spec"].(map[string]any)["resources"] = map[string]any{"limits": map[string]any{"memory": "1e1.5"}}
				if _, err := e.c.Apply(obj, fieldManager); err != nil {
					t.Fatalf("the API server refuses the Workspace with a quantity its CRD's pattern allows: %v", err)
				}
			},
		},
		"stalled": {
			reason: v1alpha1.ReasonProgressDeadlineExceeded,
			create: func(t *testing.T, name string) { e.apply(t, newWorkspace(ns, name, className)) },
			deploymentCondition: map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
				"message": `ReplicaSet "stalled-5d9f7c8b6d" has timed out progressing.`},
		},
		"quota": {
			reason: v1alpha1.ReasonReplicaFailure,
			create: func(t *testing.T, name string) { e.apply(t, newWorkspace(ns, name, className)) },
			deploymentCondition: map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
				"message": `pods "quota-5d9f7c8b6d-x2x7q" is forbidden: exceeded quota: compute, requested: cpu=1, used: cpu=4, limited: cpu=4`},
		},
		"unowned": {
			reason:   v1alpha1.ReasonChildNotCreated,
			create:   func(t *testing.T, name string) { e.apply(t, newWorkspace(ns, name, className)) },
			inTheWay: func(t *testing.T, name string) controlplane.Object { return e.someonesDeployment(t, ns, name, nil) },
		},
		"unowned-service": {
			reason: v1alpha1.ReasonChildNotCreated,
			create: func(t *testing.T, name string) { e.apply(t, newWorkspace(ns, name, className)) },
			inTheWay: func(t *testing.T, name string) controlplane.Object {
				svc, err := e.c.Create(controlplane.Object{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"app": "someones-" + name}},
					"spec": map[string]any{"selector": map[string]any{"app": "someones-" + name}, "ports": []any{map[string]any{"port": 8080}}}})
				if err != nil {
					t.Fatal(err)
				}
				return svc
			},
		},
		"foreign": {
			reason: v1alpha1.ReasonChildNotCreated,
			create: func(t *testing.T, name string) { e.apply(t, newWorkspace(ns, name, className)) },
			inTheWay: func(t *testing.T, name string) controlplane.Object {
				owner, err := e.c.Create(controlplane.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name + "-release", "namespace": ns}})
				if err != nil {
					t.Fatal(err)
				}
				md := owner["metadata"].(map[string]any)
				return e.someonesDeployment(t, ns, name, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": md["name"], "uid": md["uid"], "controller": true})
			},
		},
		"unbound": {
			reason: v1alpha1.ReasonDatastoreNotInjected,
			create: func(t *testing.T, name string) {
				ws := newWorkspace(ns, name, className)
				ws.Spec.Datastores = []v1alpha1.DatastoreRef{{Name: "ledger-db"}}
				e.apply(t, ws)
			},
		},
	}
	for name, tc := range cases {
		t.Run(tc.reason+"/"+name, func(t *testing.T) {
			t.Parallel()
			var inTheWay controlplane.Object
			if tc.inTheWay != nil {
				inTheWay = tc.inTheWay(t, name)
			}
			tc.create(t, name)
			if tc.deploymentCondition != nil {
				e.eventually(t, "Deployment "+ns+"/"+name+" rolled out", func() error { return e.runDeployment(ns, name) })
				e.eventually(t, "Workspace "+ns+"/"+name+" Ready", e.workspacePhase(ns, name, v1alpha1.PhaseReady, ""))
				e.stallDeployment(t, ns, name, tc.deploymentCondition)
			}
			e.eventually(t, "Workspace "+ns+"/"+name+" Degraded with "+tc.reason, e.workspacePhase(ns, name, v1alpha1.PhaseDegraded, tc.reason))
			ws, err := e.workspaceStatus(ns, name)
			if err != nil {
				t.Fatal(err)
			}
			message := ""
			for _, c := range ws.Status.Conditions {
				if c.Type == v1alpha1.ConditionDegraded {
					message = c.Message
				}
			}
			var ev *corev1.Event
			e.eventually(t, "Event "+tc.reason+" on Workspace "+ns+"/"+name, func() error {
				ev, err = e.reporterEvent(ns, "Workspace", name, tc.reason)
				return err
			})
			want := eventShape{Type: corev1.EventTypeWarning, Reason: tc.reason, UID: string(ws.UID), Note: message}
			if got := shapeOfEvent(ev); got != want {
				t.Errorf("Event on Workspace %s/%s:\n got %+v\nwant %+v", ns, name, got, want)
			}
			if inTheWay != nil {
				if what := inTheWay["kind"].(string) + " " + ns + "/" + name; !strings.Contains(message, what) {
					t.Errorf("the Degraded message does not name the %s: %q", what, message)
				}
				e.untouched(t, inTheWay)
			}
		})
	}
}

// testExposedEvent expects Metacontroller to run with its default apply
// strategy, dynamic-apply, which writes on every object it applies an
// annotation holding the whole object as applied: for a credentials
// Secret, its data. A claim granted then gets a Secret carrying that copy,
// the resourceclaim hook reports CredentialsExposed, and the reporter
// announces it as a Warning Event on the claim, with no secret in it.
func testExposedEvent(t *testing.T, e *env) {
	const (
		ns        = claimstest.ClaimNamespace
		claimName = claimstest.ClaimName
		secret    = claimName + resourceclaim.SecretSuffix
	)
	e.applyGrant(t)
	e.eventually(t, "credentials Secret "+ns+"/"+secret+" with Metacontroller's copy of it", func() error {
		creds, err := getAs[corev1.Secret](e.c, "v1", "Secret", ns, secret)
		switch {
		case err != nil:
			return err
		case creds == nil:
			return errors.New("not created")
		case !strings.Contains(creds.Annotations[lastAppliedAnnotation], base64.StdEncoding.EncodeToString([]byte(claimstest.Password))):
			return fmt.Errorf("annotations %v", slices.Sorted(maps.Keys(creds.Annotations)))
		}
		return nil
	})

	var err error
	var got *v1alpha1.ResourceClaim
	e.eventually(t, "ResourceClaim "+ns+"/"+claimName+" CredentialsExposed", func() error {
		if got, err = get[v1alpha1.ResourceClaim](e.c, v1alpha1.APIVersion, "ResourceClaim", ns, claimName); err != nil {
			return err
		}
		want := cond{Type: v1alpha1.ConditionCredentialsExposed, Status: "True", Reason: v1alpha1.ReasonLastAppliedAnnotation}
		if c := condition(got.Status.Conditions, v1alpha1.ConditionCredentialsExposed); c != want {
			return fmt.Errorf("conditions %v", conds(got.Status.Conditions))
		}
		return nil
	})
	var ev *corev1.Event
	e.eventually(t, "Event CredentialsExposed on ResourceClaim "+ns+"/"+claimName, func() error {
		ev, err = e.reporterEvent(ns, "ResourceClaim", claimName, v1alpha1.ConditionCredentialsExposed)
		return err
	})
	want := eventShape{Type: corev1.EventTypeWarning, Reason: v1alpha1.ConditionCredentialsExposed, UID: string(got.UID),
		Note: conditionMessage(got, v1alpha1.ConditionCredentialsExposed)}
	if got := shapeOfEvent(ev); got != want {
		t.Errorf("Event on ResourceClaim %s/%s:\n got %+v\nwant %+v", ns, claimName, got, want)
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{claimstest.Password, base64.StdEncoding.EncodeToString([]byte(claimstest.Password))} {
		if strings.Contains(string(raw), s) {
			t.Errorf("the CredentialsExposed Event carries the Secret's password: %s", raw)
		}
	}
}

// legacySignatureEvent checks that the reporter announces a claim granted
// on a v1 signature with a Warning Event LegacySignature on the claim,
// whose note is the condition's message.
func (e *env) legacySignatureEvent(t *testing.T, c *v1alpha1.ResourceClaim) {
	t.Helper()
	var ev *corev1.Event
	e.eventually(t, "Event LegacySignature on ResourceClaim "+c.Namespace+"/"+c.Name, func() error {
		var err error
		ev, err = e.reporterEvent(c.Namespace, "ResourceClaim", c.Name, v1alpha1.ConditionLegacySignature)
		return err
	})
	want := eventShape{Type: corev1.EventTypeWarning, Reason: v1alpha1.ConditionLegacySignature, UID: string(c.UID),
		Note: conditionMessage(c, v1alpha1.ConditionLegacySignature)}
	if got := shapeOfEvent(ev); got != want {
		t.Errorf("Event on ResourceClaim %s/%s:\n got %+v\nwant %+v", c.Namespace, c.Name, got, want)
	}
}

// applyStrategy returns a change to Metacontroller's arguments, for
// restartMetacontroller, that sets its --apply-strategy.
func (e *env) applyStrategy(strategy string) func() {
	return func() {
		for i, a := range e.mcArgs {
			if strings.HasPrefix(a, "--apply-strategy=") {
				e.mcArgs[i] = "--apply-strategy=" + strategy
			}
		}
	}
}

// stallDeployment writes a Deployment's status as the deployment
// controller would for a rollout whose pods are not available: the current
// generation observed, every replica updated and none available, and cond
// among its conditions.
func (e *env) stallDeployment(t *testing.T, ns, name string, cond map[string]any) {
	t.Helper()
	dep, err := e.deployment(ns, name)
	if err != nil || dep == nil {
		t.Fatalf("Deployment %s/%s: %v", ns, name, err)
	}
	want := ptr.Deref(dep.Spec.Replicas, 1)
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond = maps.Clone(cond)
	cond["lastUpdateTime"], cond["lastTransitionTime"] = now, now
	_, err = e.c.ApplyStatus(controlplane.Object{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"status": map[string]any{
			"observedGeneration":  dep.Generation,
			"replicas":            want,
			"updatedReplicas":     want,
			"readyReplicas":       0,
			"availableReplicas":   0,
			"unavailableReplicas": want,
			"conditions": []any{
				map[string]any{"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable",
					"message": "Deployment does not have minimum availability.", "lastUpdateTime": now, "lastTransitionTime": now},
				cond,
			},
		},
	}, fieldManager)
	if err != nil {
		t.Fatalf("cannot write the status of Deployment %s/%s: %v", ns, name, err)
	}
}

// statusOnly is a Workspace with its spec left out: a spec the Go types
// cannot decode is one of the cases.
type statusOnly struct {
	metav1.ObjectMeta `json:"metadata"`
	Status            v1alpha1.WorkspaceStatus `json:"status"`
}

// someonesDeployment creates a Deployment that is not a Workspace's: its
// own labels and selector, and owner as its controller (nil: none).
func (e *env) someonesDeployment(t *testing.T, ns, name string, owner map[string]any) controlplane.Object {
	t.Helper()
	labels := map[string]any{"app": "someones-" + name}
	md := map[string]any{"name": name, "namespace": ns, "labels": labels}
	if owner != nil {
		md["ownerReferences"] = []any{owner}
	}
	dep, err := e.c.Create(controlplane.Object{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": md, "spec": map[string]any{
		"replicas": 1, "selector": map[string]any{"matchLabels": labels},
		"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1"}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return dep
}

// untouched checks, once the Workspace whose name it has is Degraded, that
// an object in the way is as it was made: neither adopted, relabelled nor
// overwritten.
func (e *env) untouched(t *testing.T, made controlplane.Object) {
	t.Helper()
	md := made["metadata"].(map[string]any)
	ns, name := md["namespace"].(string), md["name"].(string)
	now, err := e.c.Get(made["apiVersion"].(string), made["kind"].(string), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	nmd := now["metadata"].(map[string]any)
	if nmd["resourceVersion"] != md["resourceVersion"] || fmt.Sprint(nmd["ownerReferences"]) != fmt.Sprint(md["ownerReferences"]) || fmt.Sprint(nmd["labels"]) != fmt.Sprint(md["labels"]) {
		t.Errorf("%s %s/%s was changed: resourceVersion %v → %v, owners %v → %v, labels %v → %v", made["kind"], ns, name,
			md["resourceVersion"], nmd["resourceVersion"], md["ownerReferences"], nmd["ownerReferences"], md["labels"], nmd["labels"])
	}
}

// workspaceStatus reads a Workspace's metadata and status.
func (e *env) workspaceStatus(ns, name string) (*statusOnly, error) {
	return get[statusOnly](e.c, v1alpha1.APIVersion, "Workspace", ns, name)
}

// workspacePhase checks a Workspace's phase and, when reason is set, its
// Degraded reason.
func (e *env) workspacePhase(ns, name, phase, reason string) func() error {
	return func() error {
		ws, err := e.workspaceStatus(ns, name)
		if err != nil {
			return err
		}
		got := condition(ws.Status.Conditions, v1alpha1.ConditionDegraded)
		if ws.Status.Phase != phase || reason != "" && got.Reason != reason {
			return fmt.Errorf("phase %q, conditions %v", ws.Status.Phase, conds(ws.Status.Conditions))
		}
		return nil
	}
}

// eventShape is what the tests compare of an Event.
type eventShape struct {
	Type, Reason string
	UID          string
	Note         string
}

func shapeOfEvent(ev *corev1.Event) eventShape {
	return eventShape{Type: ev.Type, Reason: ev.Reason, UID: string(ev.InvolvedObject.UID), Note: ev.Message}
}

// reporterEvent returns the reporter's Event with reason about the named
// object, found the way `kubectl events --for <kind>/<name>` finds it.
func (e *env) reporterEvent(ns, kind, name, reason string) (*corev1.Event, error) {
	sel := "involvedObject.kind=" + kind + ",involvedObject.apiVersion=" + v1alpha1.APIVersion + ",involvedObject.name=" + name
	raw, err := e.c.Do(http.MethodGet, "/api/v1/namespaces/"+ns+"/events?fieldSelector="+url.QueryEscape(sel), nil)
	if err != nil {
		return nil, err
	}
	var l corev1.EventList
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, err
	}
	var seen []string
	for i, ev := range l.Items {
		if ev.Reason == reason && ev.ReportingController == "formspec.dev/reporter" {
			return &l.Items[i], nil
		}
		seen = append(seen, ev.ReportingController+" "+ev.Reason)
	}
	return nil, fmt.Errorf("events about %s %s/%s: %v", kind, ns, name, seen)
}
