package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// lastAppliedAnnotation is where Metacontroller's default apply strategy
// (dynamic-apply) keeps the whole object it last applied.
const lastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// testCredentials walks a Datastore's credentials into a workspace and out
// again: a validated Datastore and a claim signed by its owner give a
// credentials Secret, a Workspace that lists the Datastore gets it injected,
// and when the owner stops allowing the workspace the Secret is deleted and
// the Deployment no longer references it.
func testCredentials(t *testing.T, e *env) {
	const (
		dataNS    = claimstest.DatastoreNamespace
		ns        = claimstest.ClaimNamespace
		name      = claimstest.Workspace
		className = "e2e-data"
		claimName = claimstest.ClaimName
		secret    = claimName + resourceclaim.SecretSuffix
		envPrefix = "ORDERS_"
	)
	ds := e.applyGrant(t)

	e.eventually(t, "Datastore "+dataNS+"/"+ds.Name+" Validated", func() error {
		got, err := get[v1alpha1.Datastore](e.c, v1alpha1.APIVersion, "Datastore", dataNS, ds.Name)
		if err != nil {
			return err
		}
		if c := condition(got.Status.Conditions, "Validated"); c.Status != "True" {
			return fmt.Errorf("conditions %v", conds(got.Status.Conditions))
		}
		return nil
	})

	var creds *corev1.Secret
	e.eventually(t, "credentials Secret "+ns+"/"+secret, func() error {
		var err error
		if creds, err = getAs[corev1.Secret](e.c, "v1", "Secret", ns, secret); err != nil {
			return err
		}
		if creds == nil {
			c, err := get[v1alpha1.ResourceClaim](e.c, v1alpha1.APIVersion, "ResourceClaim", ns, claimName)
			if err != nil {
				return err
			}
			return fmt.Errorf("not created; claim conditions %v", conds(c.Status.Conditions))
		}
		return nil
	})
	type secretShape struct {
		Controller string
		Type       corev1.SecretType
		Keys       []string
		Password   string
		// LastApplied is the annotation Metacontroller's default apply
		// strategy writes.
		LastApplied string
	}
	wantSecret := secretShape{
		Controller: "ResourceClaim/" + claimName,
		Type:       "servicebinding.io/postgres",
		// A read claim gets the unprefixed keys, never the admin ones, plus
		// the Service Binding type and provider.
		Keys:     []string{"database", "host", "password", "port", "provider", "type", "username"},
		Password: claimstest.Password,
		// Under server-side apply Metacontroller keeps no copy of what it
		// applied: its default strategy would put the whole Secret, data
		// included, into this annotation.
		LastApplied: "",
	}
	gotSecret := secretShape{
		Controller:  controller(creds.ObjectMeta),
		Type:        creds.Type,
		Password:    string(creds.Data["password"]),
		LastApplied: creds.Annotations[lastAppliedAnnotation],
	}
	for k := range creds.Data {
		gotSecret.Keys = append(gotSecret.Keys, k)
	}
	slices.Sort(gotSecret.Keys)
	if diff := cmp.Diff(wantSecret, gotSecret); diff != "" {
		t.Errorf("Secret %s/%s: -want, +got:\n%s", ns, secret, diff)
	}

	e.applyWorkspaceOf(t, ns, name, className, ds, envPrefix)
	e.waitForInjected(t, ns, name, "credentials of claim "+ns+"/"+claimName+" injected into Workspace "+ns+"/"+name, ds, claimName, envPrefix)

	// The owner stops allowing the workspace.
	e.patch(t, v1alpha1.APIVersion, "Datastore", dataNS, ds.Name, "", map[string]any{
		"spec": map[string]any{"allowedTenants": []string{"team-b/*"}},
	})
	e.eventually(t, "claim "+ns+"/"+claimName+" denied and its Secret deleted", func() error {
		c, err := get[v1alpha1.ResourceClaim](e.c, v1alpha1.APIVersion, "ResourceClaim", ns, claimName)
		if err != nil {
			return err
		}
		if got, want := condition(c.Status.Conditions, v1alpha1.ConditionDenied), (cond{v1alpha1.ConditionDenied, "True", v1alpha1.ReasonTenantNotAllowed}); got != want {
			return fmt.Errorf("Denied condition %+v, want %+v", got, want)
		}
		if ok, err := e.exists("v1", "Secret", ns, secret); err != nil || ok {
			return fmt.Errorf("Secret still there (%v)", err)
		}
		return nil
	})
	e.waitForNotInjected(t, ns, name, "credentials of the denied claim removed from Workspace "+ns+"/"+name, ds, claimName)
}

// applyGrant creates claimstest's endpoint Secret, Datastore and a claim
// on it signed by the owner, granted a minute ago by the real clock (which
// is what the hook checks against), in claimstest's namespaces, and
// returns the Datastore.
func (e *env) applyGrant(t testing.TB) *v1alpha1.Datastore {
	t.Helper()
	ds := claimstest.Datastore()
	e.applyDatastore(t, ds)
	e.namespace(t, claimstest.ClaimNamespace)
	e.apply(t, signedClaim(ds, claimstest.ClaimNamespace, claimstest.ClaimName, claimstest.Workspace,
		time.Now().Add(-time.Minute), v1alpha1.SignatureV2))
	return ds
}

// applyDatastore creates ds's namespace, claimstest's labelled endpoint
// Secret there and ds.
func (e *env) applyDatastore(t testing.TB, ds *v1alpha1.Datastore) {
	t.Helper()
	e.namespace(t, ds.Namespace)
	endpoint := claimstest.Secret()
	endpoint.ObjectMeta = fresh(endpoint.ObjectMeta)
	endpoint.Namespace = ds.Namespace
	e.apply(t, endpoint)
	ds.ObjectMeta = fresh(ds.ObjectMeta)
	e.apply(t, ds)
}

// applyGrantIn is applyGrant in namespaces of a case's own, so that it
// runs beside testCredentials: claimstest's endpoint Secret and Datastore
// in dataNS, allowing every workspace of ns, and claimstest's claim in ns,
// granted a minute ago and signed in the given signature version. It
// returns the Datastore and the claim.
func (e *env) applyGrantIn(t testing.TB, dataNS, ns, version string) (*v1alpha1.Datastore, *v1alpha1.ResourceClaim) {
	t.Helper()
	ds := claimstest.Datastore()
	ds.Namespace = dataNS
	ds.Spec.AllowedTenants = []string{ns + "/*"}
	e.applyDatastore(t, ds)
	e.namespace(t, ns)
	claim := signedClaim(ds, ns, claimstest.ClaimName, claimstest.Workspace, time.Now().Add(-time.Minute), version)
	e.apply(t, claim)
	return ds, claim
}

// signedClaim is claimstest's read claim, named name in ns, of workspace on
// ds, granted at grantedAt (whole seconds, UTC, as claim sign writes it)
// and signed by the owner in the given signature version.
func signedClaim(ds *v1alpha1.Datastore, ns, name, workspace string, grantedAt time.Time, version string) *v1alpha1.ResourceClaim {
	c := claimstest.Claim()
	c.ObjectMeta = metav1.ObjectMeta{Name: name, Namespace: ns}
	c.Spec.Datastore = v1alpha1.DatastoreClaimRef{Name: ds.Name, Namespace: ds.Namespace}
	c.Spec.Workspace = workspace
	c.Spec.GrantedAt = grantedAt.UTC().Truncate(time.Second).Format(time.RFC3339)
	c.Spec.SignatureVersion = version
	return claimstest.SignClaim(c, claimstest.Owner)
}

// injection is what a workspace's pod template says about credentials.
type injection struct {
	SecretEnvFrom []corev1.EnvFromSource
	Volumes       []corev1.Volume
	Mounts        []corev1.VolumeMount
	BindingRoot   string
	HashSet       bool
}

// injectionOf is the injection of one claim's credentials Secret, its
// variables under envPrefix.
func injectionOf(claimName, envPrefix string) injection {
	secret := claimName + resourceclaim.SecretSuffix
	return injection{
		SecretEnvFrom: []corev1.EnvFromSource{{Prefix: envPrefix, SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}},
		Volumes:       []corev1.Volume{{Name: "binding-" + claimName, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}},
		Mounts:        []corev1.VolumeMount{{Name: "binding-" + claimName, MountPath: "/bindings/" + claimName, ReadOnly: true}},
		BindingRoot:   "/bindings",
		HashSet:       true,
	}
}

// injected reads the injection from a workspace's Deployment.
func (e *env) injected(ns, name string) (injection, error) {
	dep, err := e.deployment(ns, name)
	if err != nil || dep == nil {
		return injection{}, fmt.Errorf("Deployment: %v", err)
	}
	var in injection
	pod := dep.Spec.Template.Spec
	for _, v := range pod.Volumes {
		if v.Secret != nil {
			in.Volumes = append(in.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName}}})
		}
	}
	if len(pod.Containers) != 1 {
		return in, fail("Deployment %s/%s has %d containers, want 1", ns, name, len(pod.Containers))
	}
	c := pod.Containers[0]
	for _, f := range c.EnvFrom {
		if f.SecretRef != nil {
			in.SecretEnvFrom = append(in.SecretEnvFrom, f)
		}
	}
	for _, m := range c.VolumeMounts {
		if m.ReadOnly {
			in.Mounts = append(in.Mounts, m)
		}
	}
	for _, v := range c.Env {
		if v.Name == "SERVICE_BINDING_ROOT" {
			in.BindingRoot = v.Value
		}
	}
	_, in.HashSet = dep.Spec.Template.Annotations[v1alpha1.AnnotationCredentialsHash]
	return in, nil
}

// applyWorkspaceOf applies a ClusterClass and a Workspace of it that lists
// ds, its credentials' variables under envPrefix.
func (e *env) applyWorkspaceOf(t testing.TB, ns, name, className string, ds *v1alpha1.Datastore, envPrefix string) {
	t.Helper()
	e.apply(t, clusterClass(className, v1alpha1.Scaling{MinReplicas: ptr.To[int32](1)}))
	ws := newWorkspace(ns, name, className)
	ws.Spec.Datastores = []v1alpha1.DatastoreRef{{Name: ds.Name, Namespace: ds.Namespace, EnvPrefix: envPrefix}}
	e.apply(t, ws)
}

// waitForInjected waits until a workspace injects claimName's credentials
// for ds, with envPrefix, and is not Degraded.
func (e *env) waitForInjected(t testing.TB, ns, name, what string, ds *v1alpha1.Datastore, claimName, envPrefix string) {
	t.Helper()
	e.waitForWorkspace(t, ns, name, what, injectionOf(claimName, envPrefix),
		[]v1alpha1.WorkspaceDatastoreStatus{{Name: ds.Name, Claim: claimName, State: v1alpha1.DatastoreInjected, SecretName: claimName + resourceclaim.SecretSuffix}},
		cond{Type: v1alpha1.ConditionDegraded, Status: "False", Reason: "AsExpected"})
	e.checkSummary(t, ns, name, claimName, claimsummary.StateReady)
}

// waitForNotInjected waits until a workspace injects no credentials, says
// that claimName for ds is denied, and is Degraded for it.
func (e *env) waitForNotInjected(t testing.TB, ns, name, what string, ds *v1alpha1.Datastore, claimName string) {
	t.Helper()
	e.waitForWorkspace(t, ns, name, what, injection{},
		[]v1alpha1.WorkspaceDatastoreStatus{{Name: ds.Name, Claim: claimName, State: v1alpha1.DatastoreDenied}},
		cond{Type: v1alpha1.ConditionDegraded, Status: "True", Reason: "DatastoreNotInjected"})
	e.checkSummary(t, ns, name, claimName, claimsummary.StateDenied)
}

// checkSummary checks where the workspace's view of claimName came from,
// once the workspace shows it. With the hooks reading the claims summary,
// the Workspace carries one that says claimName is in state: the
// reporter wrote it before the hook could act on it. With claims related
// instead, the reporter (run with --write-claims-summary=false) wrote
// none.
func (e *env) checkSummary(t testing.TB, ns, name, claimName, state string) {
	t.Helper()
	ws, err := e.workspace(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := ws.Annotations[claimsummary.Annotation]
	if e.claimsRelated {
		if ok {
			t.Errorf("Workspace %s/%s carries a claims summary, which no one should write with the claims related: %s", ns, name, v)
		}
		return
	}
	s, err := claimsummary.Parse(v)
	if !ok || err != nil {
		t.Fatalf("Workspace %s/%s: no claims summary the hook could have read (present %v): %v", ns, name, ok, err)
	}
	for _, c := range s.Claims {
		if c.Name == claimName && c.State == state {
			return
		}
	}
	t.Errorf("Workspace %s/%s: claims summary %s does not show claim %s %s", ns, name, v, claimName, state)
}

// waitForWorkspace waits until a workspace's pod template has wantIn, its
// status.datastores is wantDS and its Degraded condition wantDegraded.
func (e *env) waitForWorkspace(t testing.TB, ns, name, what string, wantIn injection, wantDS []v1alpha1.WorkspaceDatastoreStatus, wantDegraded cond) {
	t.Helper()
	e.eventually(t, what, func() error {
		in, err := e.injected(ns, name)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(wantIn, in); diff != "" {
			return fmt.Errorf("pod template: -want, +got:\n%s", diff)
		}
		got, err := e.workspace(ns, name)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(wantDS, got.Status.Datastores); diff != "" {
			return fmt.Errorf("status.datastores: -want, +got:\n%s", diff)
		}
		if diff := cmp.Diff(wantDegraded, condition(got.Status.Conditions, v1alpha1.ConditionDegraded)); diff != "" {
			return fmt.Errorf("Degraded condition: -want, +got:\n%s", diff)
		}
		return nil
	})
}

// fresh keeps only what a client sets of a test object's metadata, dropping
// what the API server assigns (uid, resourceVersion, generation, creation
// time).
func fresh(md metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: md.Name, Namespace: md.Namespace, Labels: md.Labels, Annotations: md.Annotations}
}
