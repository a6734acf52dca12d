package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimcli"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

// The cases below follow the procedures of docs/claims.md step by step,
// with the merge patches it shows, each in namespaces of its own so that
// they run beside testCredentials.

// testRevocation follows "Revoking grants": one grant revoked by its
// signature's digest, as `claim digest` prints it for the live claim, then
// every grant signed before a time. A revoked claim is denied GrantRevoked
// with a message naming the rule, its credentials Secret is deleted and
// the workspace stops injecting it; a copy of the claim under another name
// is revoked with it, and a grant signed after revokedBefore stands.
func testRevocation(t *testing.T, e *env) {
	const (
		dataNS, ns     = "e2e-revoke-data", "e2e-revoke"
		name           = claimstest.Workspace
		className      = "e2e-revoke"
		claimName      = claimstest.ClaimName
		copyName       = claimName + "-copy"
		laterName      = claimName + "-later"
		laterWorkspace = name + "-later"
		envPrefix      = "ORDERS_"
	)
	ds, claim := e.applyGrantIn(t, dataNS, ns, v1alpha1.SignatureV2)
	// The same signed grant under another name, as anyone who may create
	// claims in the namespace can apply it.
	dup := *claim
	dup.Name = copyName
	e.apply(t, &dup)
	for _, n := range []string{claimName, copyName} {
		e.waitForClaim(t, ns, n, claimGranted)
	}

	e.applyWorkspaceOf(t, ns, name, className, ds, envPrefix)
	e.waitForInjected(t, ns, name, "credentials of claim "+ns+"/"+claimName+" injected into Workspace "+ns+"/"+name, ds, claimName, envPrefix)

	// Step 1, one grant: `kubectl get rclaim -o yaml | formspec-hooks
	// claim digest`, then the digest in revokedSignatures.
	digest := e.claimDigest(t, ns, claimName)
	e.patch(t, v1alpha1.APIVersion, "Datastore", dataNS, ds.Name, "",
		json.RawMessage(`{"spec":{"grantPolicy":{"revokedSignatures":["`+digest+`"]}}}`))
	// Step 3, watch it take effect, for the claim and its copy.
	for _, n := range []string{claimName, copyName} {
		c := e.waitForClaim(t, ns, n, claimRevoked)
		if msg := conditionMessage(c, v1alpha1.ConditionDenied); !strings.Contains(msg, digest) || !strings.Contains(msg, "(spec.grantPolicy.revokedSignatures)") {
			t.Errorf("ResourceClaim %s/%s revoked by digest: message %q names neither the digest %s nor spec.grantPolicy.revokedSignatures", ns, n, msg, digest)
		}
	}
	e.waitForNotInjected(t, ns, name, "credentials of the claim revoked by digest removed from Workspace "+ns+"/"+name, ds, claimName)

	// Step 2, every grant signed before a time. A fresh grant of the claim,
	// ten minutes old (a new signature, so a new digest), is granted and
	// injected again; a grant a minute old, of another workspace, beside it.
	now := time.Now()
	e.apply(t, signedClaim(ds, ns, claimName, name, now.Add(-10*time.Minute), v1alpha1.SignatureV2))
	e.waitForClaim(t, ns, claimName, claimGranted)
	e.waitForInjected(t, ns, name, "credentials of the fresh grant "+ns+"/"+claimName+" injected into Workspace "+ns+"/"+name, ds, claimName, envPrefix)
	e.apply(t, signedClaim(ds, ns, laterName, laterWorkspace, now.Add(-time.Minute), v1alpha1.SignatureV2))
	e.waitForClaim(t, ns, laterName, claimGranted)
	laterSecret := e.secret(t, ns, laterName+resourceclaim.SecretSuffix)

	revokedBefore := now.Add(-5 * time.Minute).UTC().Truncate(time.Second).Format(time.RFC3339)
	e.patch(t, v1alpha1.APIVersion, "Datastore", dataNS, ds.Name, "",
		json.RawMessage(`{"spec":{"grantPolicy":{"revokedBefore":"`+revokedBefore+`"}}}`))
	c := e.waitForClaim(t, ns, claimName, claimRevoked)
	if msg := conditionMessage(c, v1alpha1.ConditionDenied); !strings.Contains(msg, "before "+revokedBefore+" (spec.grantPolicy.revokedBefore)") {
		t.Errorf("ResourceClaim %s/%s revoked by date: message %q does not name spec.grantPolicy.revokedBefore %s", ns, claimName, msg, revokedBefore)
	}
	e.waitForNotInjected(t, ns, name, "credentials of the claim revoked by date removed from Workspace "+ns+"/"+name, ds, claimName)
	// "a grant signed later stands": the Datastore change that denied the
	// older grant resynced this one too. Had it been denied in between, its
	// Secret would have been deleted and made anew.
	e.waitForClaim(t, ns, laterName, claimGranted)
	if got := e.secret(t, ns, laterName+resourceclaim.SecretSuffix); got.UID != laterSecret.UID {
		t.Errorf("the credentials Secret of %s/%s, granted after revokedBefore, was deleted and created again (uid %s, then %s)", ns, laterName, laterSecret.UID, got.UID)
	}
}

// testV1OptIn follows "Grants of the original operator (v1)": a claim
// signed in the v1 format is denied SignatureVersionNotAccepted and gets
// no Secret; with the Datastore's acceptV1Signatures patched to true it is
// granted, gets its Secret and the LegacySignature condition; patched back
// to false, it is denied again and its Secret deleted. granted, when set,
// runs while the claim is granted (TestReporter checks the Event there).
func testV1OptIn(t *testing.T, e *env, granted func(t *testing.T, c *v1alpha1.ResourceClaim)) {
	const (
		dataNS, ns = "e2e-v1-data", "e2e-v1"
		claimName  = claimstest.ClaimName
	)
	ds, _ := e.applyGrantIn(t, dataNS, ns, v1alpha1.SignatureV1)
	notAccepted := claimState{Conditions: deniedConds(v1alpha1.ReasonSignatureVersionNotAccepted)}
	e.waitForClaim(t, ns, claimName, notAccepted)

	e.patch(t, v1alpha1.APIVersion, "Datastore", dataNS, ds.Name, "",
		json.RawMessage(`{"spec":{"grantPolicy":{"acceptV1Signatures":true}}}`))
	c := e.waitForClaim(t, ns, claimName, claimState{
		Conditions: append(grantedConds(), cond{Type: v1alpha1.ConditionLegacySignature, Status: "True", Reason: v1alpha1.ReasonSignatureV1}),
		Secret:     true,
	})
	if granted != nil {
		granted(t, c)
	}

	// Step 5: v1 off again.
	e.patch(t, v1alpha1.APIVersion, "Datastore", dataNS, ds.Name, "",
		json.RawMessage(`{"spec":{"grantPolicy":{"acceptV1Signatures":false}}}`))
	e.waitForClaim(t, ns, claimName, notAccepted)
}

// testRotation rotates the endpoint Secret's password, as its owner does:
// the credentials Secret gets the new password and revision 2, the claim's
// credentialsHash becomes claims.CredentialsHash of its UID and 2, and the
// workspace's pod template changes once, in its credentials-hash
// annotation only. A later claim sync that is not a rotation (the owner
// caps grant lifetimes, which changes the claim's message) and a later
// workspace sync change neither. Neither the claim nor the Deployment holds
// a password, its SHA-256, or the digest of the credentials that the hook
// wrote before 0.2.0.
func testRotation(t *testing.T, e *env) {
	const (
		dataNS, ns  = "e2e-rotate-data", "e2e-rotate"
		name        = claimstest.Workspace
		className   = "e2e-rotate"
		claimName   = claimstest.ClaimName
		secret      = claimName + resourceclaim.SecretSuffix
		envPrefix   = "ORDERS_"
		newPassword = "r0tated-PASSWORD-must-never-leak"
	)
	ds, claim := e.applyGrantIn(t, dataNS, ns, v1alpha1.SignatureV2)
	c := e.waitForClaim(t, ns, claimName, claimGranted)
	e.applyWorkspaceOf(t, ns, name, className, ds, envPrefix)
	e.waitForInjected(t, ns, name, "credentials of claim "+ns+"/"+claimName+" injected into Workspace "+ns+"/"+name, ds, claimName, envPrefix)

	// What a rotation changes, in the credentials Secret and the claim.
	type rotation struct {
		Revision, Password, CredentialsHash string
	}
	rotationOf := func() (rotation, *corev1.Secret, error) {
		s, err := getAs[corev1.Secret](e.c, "v1", "Secret", ns, secret)
		if err != nil || s == nil {
			return rotation{}, nil, fmt.Errorf("Secret %s/%s: %v", ns, secret, err)
		}
		c, err := get[v1alpha1.ResourceClaim](e.c, v1alpha1.APIVersion, "ResourceClaim", ns, claimName)
		if err != nil {
			return rotation{}, nil, err
		}
		return rotation{s.Annotations[v1alpha1.AnnotationCredentialsRevision], string(s.Data["password"]), c.Status.CredentialsHash}, s, nil
	}
	waitForRotation := func(what string, want rotation) *corev1.Secret {
		t.Helper()
		var s *corev1.Secret
		e.eventually(t, what, func() error {
			got, cur, err := rotationOf()
			if err != nil {
				return err
			}
			if diff := cmp.Diff(want, got); diff != "" {
				return fmt.Errorf("-want, +got:\n%s", diff)
			}
			s = cur
			return nil
		})
		return s
	}
	first := waitForRotation("revision 1 of the credentials of "+ns+"/"+claimName,
		rotation{"1", claimstest.Password, claims.CredentialsHash(c.UID, 1)})
	// A workspace sync applied after everything above: the pod template
	// the rotation starts from.
	before := e.resync(t, ns, name, "e2e-before-rotation")

	e.patch(t, "v1", "Secret", dataNS, claimstest.SecretName, "", map[string]any{"stringData": map[string]string{"password": newPassword}})
	second := waitForRotation("revision 2 of the credentials of "+ns+"/"+claimName,
		rotation{"2", newPassword, claims.CredentialsHash(c.UID, 2)})
	var rolled *appsv1.Deployment
	e.eventually(t, "the pod template of Deployment "+ns+"/"+name+" rolled onto the rotated credentials", func() error {
		var err error
		if rolled, err = e.deployment(ns, name); err != nil || rolled == nil {
			return fmt.Errorf("Deployment: %v", err)
		}
		if rolled.Generation > before.Generation+1 {
			return fail("generation %d after %d: the rotation changed the Deployment's spec more than once", rolled.Generation, before.Generation)
		}
		if rolled.Generation == before.Generation {
			return fmt.Errorf("generation %d, credentials hash %q: not rolled yet", rolled.Generation, credentialsHashOf(rolled))
		}
		return nil
	})
	if diff := cmp.Diff(withoutAnnotation(before, v1alpha1.AnnotationCredentialsHash), withoutAnnotation(rolled, v1alpha1.AnnotationCredentialsHash)); diff != "" {
		t.Errorf("the rotation changed the pod template of Deployment %s/%s beyond its credentials hash: -before, +after:\n%s", ns, name, diff)
	}
	if credentialsHashOf(rolled) == credentialsHashOf(before) {
		t.Errorf("the rotation left the pod template's %s at %q", v1alpha1.AnnotationCredentialsHash, credentialsHashOf(rolled))
	}

	// A claim sync that is not a rotation: the owner caps grants at 90
	// days ("How long a grant lasts"), which the granted message states.
	// The sync that writes it saw the rotated Secret and keeps revision 2.
	e.patch(t, v1alpha1.APIVersion, "Datastore", dataNS, ds.Name, "",
		json.RawMessage(`{"spec":{"grantPolicy":{"maxLifetime":"2160h"}}}`))
	grantedAt, err := time.Parse(time.RFC3339, claim.Spec.GrantedAt)
	if err != nil {
		t.Fatal(err)
	}
	until := " until " + grantedAt.Add(2160*time.Hour).UTC().Format(time.RFC3339)
	e.eventually(t, "the 90-day limit in the message of ResourceClaim "+ns+"/"+claimName, func() error {
		c, err := get[v1alpha1.ResourceClaim](e.c, v1alpha1.APIVersion, "ResourceClaim", ns, claimName)
		if err != nil {
			return err
		}
		if msg := conditionMessage(c, v1alpha1.ConditionReady); !strings.HasSuffix(msg, until) {
			return fmt.Errorf("Ready message %q", msg)
		}
		return nil
	})
	if got, _, err := rotationOf(); err != nil || got != (rotation{"2", newPassword, claims.CredentialsHash(c.UID, 2)}) {
		t.Errorf("after a claim sync that is not a rotation: %+v (%v), want revision 2 and its hash unchanged", got, err)
	}
	after := e.resync(t, ns, name, "e2e-after-rotation")
	if after.Generation != rolled.Generation+1 {
		t.Errorf("Deployment %s/%s: generation %d after %d; only the resync's marker should have changed", ns, name, after.Generation, rolled.Generation)
	}
	if diff := cmp.Diff(withoutAnnotation(rolled, v1alpha1.AnnotationArtifactBinaryHash), withoutAnnotation(after, v1alpha1.AnnotationArtifactBinaryHash)); diff != "" {
		t.Errorf("a sync after the rotation changed the pod template of Deployment %s/%s: -before, +after:\n%s", ns, name, diff)
	}

	// What anyone with the view role reads: the claim and the Deployment.
	type secretForm struct{ what, value string }
	var forms []secretForm
	for _, s := range []*corev1.Secret{first, second} {
		password := string(s.Data["password"])
		sum := sha256.Sum256(s.Data["password"])
		forms = append(forms,
			secretForm{"the password of revision " + s.Annotations[v1alpha1.AnnotationCredentialsRevision], password},
			secretForm{"the base64 of that password", base64.StdEncoding.EncodeToString(s.Data["password"])},
			secretForm{"the SHA-256 of that password", hex.EncodeToString(sum[:])},
			secretForm{"the pre-0.2.0 credentials hash of that revision", preV020CredentialsHash(s.Data)})
	}
	for _, obj := range []struct{ apiVersion, kind, name string }{
		{v1alpha1.APIVersion, "ResourceClaim", claimName},
		{"apps/v1", "Deployment", name},
	} {
		o, err := e.c.Get(obj.apiVersion, obj.kind, ns, obj.name)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range forms {
			if strings.Contains(string(raw), f.value) {
				t.Errorf("%s %s/%s holds %s", obj.kind, ns, obj.name, f.what)
			}
		}
	}
}

// claimState is what the tests wait for of a claim: its conditions, in the
// order the hook writes them, and whether its credentials Secret exists.
type claimState struct {
	Conditions []cond
	Secret     bool
}

// grantedConds are the conditions of a claim granted on a v2 signature.
func grantedConds() []cond {
	return []cond{
		{Type: v1alpha1.ConditionReady, Status: "True", Reason: v1alpha1.ReasonGranted},
		{Type: v1alpha1.ConditionDenied, Status: "False", Reason: v1alpha1.ReasonGranted},
	}
}

// deniedConds are the conditions of a claim denied for reason.
func deniedConds(reason string) []cond {
	return []cond{
		{Type: v1alpha1.ConditionReady, Status: "False", Reason: reason},
		{Type: v1alpha1.ConditionDenied, Status: "True", Reason: reason},
	}
}

var (
	claimGranted = claimState{Conditions: grantedConds(), Secret: true}
	claimRevoked = claimState{Conditions: deniedConds(v1alpha1.ReasonGrantRevoked)}
)

// waitForClaim waits until the named claim is in state want and returns
// it.
func (e *env) waitForClaim(t testing.TB, ns, name string, want claimState) *v1alpha1.ResourceClaim {
	t.Helper()
	var c *v1alpha1.ResourceClaim
	what := fmt.Sprintf("ResourceClaim %s/%s with conditions %v and a credentials Secret: %v", ns, name, want.Conditions, want.Secret)
	e.eventually(t, what, func() error {
		var err error
		if c, err = get[v1alpha1.ResourceClaim](e.c, v1alpha1.APIVersion, "ResourceClaim", ns, name); err != nil {
			return err
		}
		secret, err := e.exists("v1", "Secret", ns, name+resourceclaim.SecretSuffix)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, claimState{Conditions: conds(c.Status.Conditions), Secret: secret}); diff != "" {
			return fmt.Errorf("-want, +got:\n%s", diff)
		}
		return nil
	})
	return c
}

// conditionMessage is the message of a claim's condition, empty when it
// has none.
func conditionMessage(c *v1alpha1.ResourceClaim, conditionType string) string {
	if found := meta.FindStatusCondition(c.Status.Conditions, conditionType); found != nil {
		return found.Message
	}
	return ""
}

// claimDigest is what `kubectl -n ns get rclaim name -o yaml |
// formspec-hooks claim digest` prints, through the command's own code: the
// live claim as the API server returns it (JSON is YAML) on its stdin.
func (e *env) claimDigest(t testing.TB, ns, name string) string {
	t.Helper()
	obj, err := e.c.Get(v1alpha1.APIVersion, "ResourceClaim", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if err := claimcli.Run(t.Context(), []string{"digest"}, bytes.NewReader(raw), &stdout, &stderr); err != nil {
		t.Fatalf("claim digest of ResourceClaim %s/%s: %v\n%s", ns, name, err, stderr.String())
	}
	return strings.TrimSuffix(stdout.String(), "\n")
}

// secret reads a Secret that must exist.
func (e *env) secret(t testing.TB, ns, name string) *corev1.Secret {
	t.Helper()
	s, err := get[corev1.Secret](e.c, "v1", "Secret", ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// credentialsHashOf is the credentials hash in a Deployment's pod template.
func credentialsHashOf(dep *appsv1.Deployment) string {
	return dep.Spec.Template.Annotations[v1alpha1.AnnotationCredentialsHash]
}

// withoutAnnotation is a Deployment's pod template without one annotation.
func withoutAnnotation(dep *appsv1.Deployment, key string) corev1.PodTemplateSpec {
	tpl := *dep.Spec.Template.DeepCopy()
	delete(tpl.Annotations, key)
	return tpl
}

// preV020CredentialsHash is the status.credentialsHash of claims before
// 0.2.0 (internal/hooks/claims CredentialsHash at e6eb621): a SHA-256 of the
// credentials themselves, every key and value in key order, length-prefixed
// as grant.PAE writes them. Whoever read it could test password guesses
// offline; the tests check that it appears nowhere.
func preV020CredentialsHash(data map[string][]byte) string {
	fields := make([]string, 0, 2*len(data))
	for _, k := range slices.Sorted(maps.Keys(data)) {
		fields = append(fields, k, string(data[k]))
	}
	sum := sha256.Sum256(grant.PAE(fields...))
	return "sha256:" + hex.EncodeToString(sum[:])
}
