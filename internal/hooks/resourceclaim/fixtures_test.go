package resourceclaim_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/internal/testkit/golden"
)

const controllerFile = "../../../compositecontrollers/resourceclaim.yaml"

// scene is one sync request of the test world.
type scene struct {
	claim      *v1alpha1.ResourceClaim
	ds         *v1alpha1.Datastore
	secret     *corev1.Secret
	attachment *corev1.Secret
}

func world() scene {
	return scene{
		claim:  claimstest.SignClaim(claimstest.Claim(), claimstest.Owner),
		ds:     validatedDatastore(),
		secret: claimstest.Secret(),
	}
}

// validatedDatastore is the Datastore as Metacontroller observes it after
// the datastore hook ran.
func validatedDatastore() *v1alpha1.Datastore {
	ds := claimstest.Datastore()
	since := metav1.NewTime(claimstest.Now.Add(-72 * time.Hour))
	ds.Status = v1alpha1.DatastoreStatus{
		ObservedGeneration: 1,
		Endpoint:           "orders-db.data.svc.cluster.local:5432",
		Conditions: []metav1.Condition{
			{Type: "Validated", Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: since, Reason: v1alpha1.ReasonValidated, Message: "Secret data/orders-db-endpoint holds a complete postgres endpoint"},
			{Type: "Denied", Status: metav1.ConditionFalse, ObservedGeneration: 1, LastTransitionTime: since, Reason: v1alpha1.ReasonValidated, Message: "Secret data/orders-db-endpoint holds a complete postgres endpoint"},
		},
	}
	return ds
}

// exposedCondition is the CredentialsExposed condition of a claim whose
// credentials Secret carries the last-applied annotation.
func exposedCondition(since metav1.Time) metav1.Condition {
	return metav1.Condition{
		Type: v1alpha1.ConditionCredentialsExposed, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: since,
		Reason: v1alpha1.ReasonLastAppliedAnnotation,
		Message: "the credentials Secret team-a/orders-credentials carries the annotation metacontroller.k8s.io/last-applied-configuration, " +
			"a copy of the whole Secret, data included, visible to anyone who can read its metadata (kubectl describe prints it); " +
			"Metacontroller writes it with its default --apply-strategy=dynamic-apply. " +
			"Run Metacontroller with --apply-strategy=server-side-apply, then delete the Secret so that it is recreated without the copy",
	}
}

// checkedStatus is the status the datastore hook gives a Datastore that it
// first saw three days ago and that has not changed since.
func checkedStatus(ds *v1alpha1.Datastore, secret *corev1.Secret) v1alpha1.DatastoreStatus {
	d := claims.CheckDatastore(ds, secret)
	since := metav1.NewTime(claimstest.Now.Add(-72 * time.Hour))
	return v1alpha1.DatastoreStatus{
		ObservedGeneration: ds.Generation,
		Conditions: []metav1.Condition{
			{Type: "Validated", Status: metav1.ConditionFalse, ObservedGeneration: ds.Generation, LastTransitionTime: since, Reason: d.Reason, Message: d.Message},
			{Type: "Denied", Status: metav1.ConditionTrue, ObservedGeneration: ds.Generation, LastTransitionTime: since, Reason: d.Reason, Message: d.Message},
		},
	}
}

// granted marks the claim as granted by an earlier sync and adds the
// Secret that sync created, as Metacontroller observes it.
func (s scene) granted() scene {
	since := metav1.NewTime(claimstest.Now.Add(-50 * time.Minute))
	yes := true
	msg := "v2 signature of data-team@example.com verified; read access to Datastore data/orders-db granted to workspace shop"
	data := claims.Project(s.secret.Data, s.ds.Spec.Driver, s.claim.Spec.Permission)
	s.claim.Status = v1alpha1.ResourceClaimStatus{
		ObservedGeneration: 1,
		Binding:            &v1alpha1.Binding{Name: "orders-credentials"},
		CredentialsHash:    claims.CredentialsHash(s.claim.UID, 1),
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: since, Reason: v1alpha1.ReasonGranted, Message: msg},
			{Type: "Denied", Status: metav1.ConditionFalse, ObservedGeneration: 1, LastTransitionTime: since, Reason: v1alpha1.ReasonGranted, Message: msg},
		},
	}
	s.attachment = &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "orders-credentials", Namespace: claimstest.ClaimNamespace,
			UID: "7e6d5c4b-3a29-4180-9f7e-6d5c4b3a2918", ResourceVersion: "5230",
			CreationTimestamp: since,
			Labels:            map[string]string{resourceclaim.LabelManagedBy: resourceclaim.ManagedBy, v1alpha1.LabelResourceClaim: "orders"},
			Annotations: map[string]string{
				"metacontroller.k8s.io/decorator-controller": "resourceclaim",
				v1alpha1.AnnotationCredentialsRevision:       "1",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.APIVersion, Kind: "ResourceClaim", Name: "orders", UID: s.claim.UID,
				Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Type: "servicebinding.io/postgres",
		Data: maps.Clone(data),
	}
	return s
}

// madeByVersion010 makes the granted scene's claim and Secret as the
// hooks of version 0.1.0 left them: a credentials hash computed from the
// credentials themselves, and a Secret without a revision.
func (s scene) madeByVersion010() scene {
	fields := []string{}
	for _, k := range claims.SortedKeys(s.attachment.Data) {
		fields = append(fields, k, string(s.attachment.Data[k]))
	}
	sum := sha256.Sum256(grant.PAE(fields...))
	s.claim.Status.CredentialsHash = "sha256:" + hex.EncodeToString(sum[:])
	s.attachment.Annotations = maps.Clone(s.attachment.Annotations)
	delete(s.attachment.Annotations, v1alpha1.AnnotationCredentialsRevision)
	return s
}

// rotated changes the endpoint Secret's password after the grant: the
// credentials Secret observed still holds the old one.
func (s scene) rotated() scene {
	s.secret.Data = maps.Clone(s.secret.Data)
	s.secret.Data["password"] = []byte("n3w-r0tated-pa55word")
	return s
}

// exposed adds to the observed credentials Secret what Metacontroller's
// default --apply-strategy=dynamic-apply writes on it: the annotation
// holding the whole Secret as applied, data included.
func (s scene) exposed() scene {
	applied := credentialsAsApplied(s.attachment)
	s.attachment.Annotations = maps.Clone(s.attachment.Annotations)
	s.attachment.Annotations[resourceclaim.LastAppliedAnnotation] = applied
	return s
}

// credentialsAsApplied is the value Metacontroller's dynamic apply puts in
// the last-applied annotation: the object the hook returned, as JSON.
func credentialsAsApplied(secret *corev1.Secret) string {
	applied := &corev1.Secret{
		TypeMeta: secret.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: secret.Name, Namespace: secret.Namespace, Labels: secret.Labels,
		},
		Type: secret.Type,
		Data: secret.Data,
	}
	b, err := json.Marshal(applied)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// managed adds the managedFields the API server keeps on every object and
// Metacontroller sends along: who applied the claim, the Datastore and
// the endpoint Secret, and which status fields the hooks' answers set.
func (s scene) managed() scene {
	at := metav1.NewTime(claimstest.Now.Add(-50 * time.Minute))
	entry := func(manager, apiVersion, subresource string, operation metav1.ManagedFieldsOperationType, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: operation, APIVersion: apiVersion, Time: &at,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}, Subresource: subresource}
	}
	conditions := func(types ...string) string {
		var out []string
		for _, t := range types {
			out = append(out, `"k:{\"type\":\"`+t+`\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}`)
		}
		return `"f:conditions":{` + strings.Join(out, ",") + `}`
	}
	s.claim.ManagedFields = []metav1.ManagedFieldsEntry{
		entry("kubectl", v1alpha1.APIVersion, "", metav1.ManagedFieldsOperationApply,
			`{"f:spec":{"f:datastore":{"f:name":{},"f:namespace":{}},"f:grantedAt":{},"f:grantedBy":{},"f:permission":{},"f:signature":{},"f:signatureVersion":{},"f:workspace":{}}}`),
		entry("metacontroller", v1alpha1.APIVersion, "status", metav1.ManagedFieldsOperationUpdate,
			`{"f:status":{".":{},"f:binding":{".":{},"f:name":{}},`+conditions("Ready", "Denied")+`,"f:credentialsHash":{},"f:observedGeneration":{}}}`),
	}
	s.ds.ManagedFields = []metav1.ManagedFieldsEntry{
		entry("kubectl", v1alpha1.APIVersion, "", metav1.ManagedFieldsOperationApply,
			`{"f:spec":{"f:allowedTenants":{},"f:driver":{},"f:endpointSecretRef":{"f:name":{}},"f:owner":{},"f:ownerPublicKey":{},"f:ownerPublicKeys":{}}}`),
		entry("metacontroller", v1alpha1.APIVersion, "status", metav1.ManagedFieldsOperationUpdate,
			`{"f:status":{".":{},`+conditions("Validated", "Denied")+`,"f:endpoint":{},"f:observedGeneration":{}}}`),
	}
	s.secret.ManagedFields = []metav1.ManagedFieldsEntry{
		entry("kubectl", "v1", "", metav1.ManagedFieldsOperationApply,
			`{"f:data":{"f:database":{},"f:host":{},"f:password":{},"f:port":{},"f:username":{}},"f:metadata":{"f:labels":{"f:formspec.dev/datastore":{}}},"f:type":{}}`),
	}
	if s.attachment != nil {
		s.attachment.ManagedFields = []metav1.ManagedFieldsEntry{
			entry("metacontroller", "v1", "", metav1.ManagedFieldsOperationApply,
				`{"f:data":{"f:database":{},"f:host":{},"f:password":{},"f:port":{},"f:provider":{},"f:type":{},"f:username":{}},"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{},"f:formspec.dev/resourceclaim":{}},"f:ownerReferences":{"k:{\"uid\":\"`+string(s.claim.UID)+`\"}":{}}},"f:type":{}}`),
		}
	}
	return s
}

func (s scene) request(t *testing.T) *metacontroller.DecoratorRequest {
	var related []golden.Object
	if s.ds != nil {
		related = append(related, golden.Object{APIVersion: v1alpha1.APIVersion, Kind: "Datastore", Namespace: s.ds.Namespace, Name: s.ds.Name, Value: s.ds})
	}
	if s.secret != nil {
		related = append(related, golden.Object{APIVersion: "v1", Kind: "Secret", Namespace: s.secret.Namespace, Name: s.secret.Name, Value: s.secret})
	}
	var attached []golden.Object
	if s.attachment != nil {
		attached = append(attached, golden.Object{APIVersion: "v1", Kind: "Secret", Namespace: s.attachment.Namespace, Name: s.attachment.Name, Value: s.attachment})
	}
	return &metacontroller.DecoratorRequest{
		Controller:  golden.Controller(t, controllerFile),
		Object:      golden.Raw(t, s.claim),
		Attachments: golden.Objects(t, []string{"Secret.v1"}, attached...),
		Related:     golden.Objects(t, nil, related...),
	}
}

// resign signs the claim again after a change, as its owner would.
func (s scene) resign(change func(c *v1alpha1.ResourceClaim)) scene {
	change(s.claim)
	claimstest.SignClaim(s.claim, claimstest.Owner)
	return s
}

func customize(t *testing.T, c *v1alpha1.ResourceClaim) *metacontroller.CustomizeRequest {
	return &metacontroller.CustomizeRequest{Controller: golden.Controller(t, controllerFile), Parent: golden.Raw(t, c)}
}

// sameNamespace is the world with the Datastore next to the claim, named
// without a namespace.
func sameNamespace() scene {
	s := world()
	s.ds.Namespace, s.secret.Namespace = claimstest.ClaimNamespace, claimstest.ClaimNamespace
	s.claim.Spec.Datastore.Namespace = ""
	return s
}

// syncRequests are the cases of fixtures/resourceclaim/sync.
func syncRequests(t *testing.T) map[string]any {
	return map[string]any{
		"granted-v2": world().request(t),
		// A claim of the original operator: v1, the Datastore beside it.
		// Refused by default, since v1 binds no namespace.
		"denied-v1-not-accepted": sameNamespace().resign(func(c *v1alpha1.ResourceClaim) {
			c.Spec.SignatureVersion = ""
		}).request(t),
		// The same where the Datastore opts in: granted, with the
		// LegacySignature condition the reporter announces.
		"granted-v1-datastore-accepts": func() scene {
			s := sameNamespace().resign(func(c *v1alpha1.ResourceClaim) {
				c.Spec.SignatureVersion = ""
			})
			s.ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{AcceptV1Signatures: true}
			return s
		}().request(t),
		// The review's replay: the team-a v1 claim applied in team-b,
		// which the Datastore allows (team-b/*). Granted before v1 needed
		// an opt-in.
		"denied-v1-replayed-into-another-namespace": func() scene {
			s := world().resign(func(c *v1alpha1.ResourceClaim) {
				c.Spec.SignatureVersion = v1alpha1.SignatureV1
			})
			s.claim.Namespace = "team-b"
			return s
		}().request(t),
		// The Datastore's password rotated: the Secret observed still
		// holds the old one, so it is written with revision 2, and the
		// claim's credentialsHash changes, which rolls the workspace.
		"granted-credentials-rotated": world().granted().rotated().request(t),
		// A claim granted by version 0.1.0, whose credentialsHash was a
		// digest of the credentials: the first sync of this version gives
		// it the revision's hash (one roll of its workspace) and writes
		// revision 1 on the Secret, whose data stays as it is.
		"granted-credentials-from-0.1.0": world().granted().madeByVersion010().request(t),
		// Revoked by the Datastore's owner: by date, and by the digest of
		// its signature. The Secret of the earlier grant is left out of
		// the answer, so Metacontroller deletes it.
		"denied-revoked-before-deletes-secret": func() scene {
			s := world().granted()
			s.ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{RevokedBefore: "2025-12-31T23:30:00Z"}
			s.claim.Status = v1alpha1.ResourceClaimStatus{}
			return s
		}().request(t),
		"denied-revoked-signature": func() scene {
			s := world()
			sig, err := grant.ParseSignature(s.claim.Spec.Signature)
			if err != nil {
				t.Fatal(err)
			}
			s.ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{RevokedSignatures: []string{grant.Digest(sig)}}
			return s
		}().request(t),
		// Signed in 2015 without expiresAt, for a Datastore that accepts
		// grants for 90 days.
		"denied-past-max-lifetime": func() scene {
			s := world().resign(func(c *v1alpha1.ResourceClaim) {
				c.Spec.GrantedAt = "2015-03-01T00:00:00Z"
			})
			s.ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{MaxLifetime: "2160h"}
			return s
		}().request(t),
		// Someone who may edit the Datastore but not its Secret lists a
		// key of their own and signs a grant with it; the Secret pins the
		// owner's keys.
		"denied-owner-key-not-pinned": func() scene {
			s := world()
			s.secret.Annotations = map[string]string{v1alpha1.AnnotationOwnerPublicKeys: s.ds.Spec.OwnerPublicKey + "," + s.ds.Spec.OwnerPublicKeys[0]}
			s.ds.Spec.OwnerPublicKeys = append(s.ds.Spec.OwnerPublicKeys, claimstest.PublicHex(claimstest.Stranger))
			claimstest.SignClaim(s.claim, claimstest.Stranger)
			return s
		}().request(t),
		"granted-admin-override": world().resign(func(c *v1alpha1.ResourceClaim) {
			c.Spec.Permission = v1alpha1.PermissionAdmin
		}).request(t),
		// Far enough ahead that resyncAfterSeconds is at its cap whenever
		// the fixture is posted; TestResyncAfter covers the uncapped value.
		"granted-expiring": world().resign(func(c *v1alpha1.ResourceClaim) {
			c.Spec.ExpiresAt = "2099-01-01T00:00:00Z"
		}).request(t),
		"granted-rotated-key": func() scene {
			s := world()
			claimstest.SignClaim(s.claim, claimstest.Rotated)
			return s
		}().request(t),
		"granted-unchanged": world().granted().request(t),
		// The same, with the managedFields of every object, as
		// Metacontroller sends it: the hooks' answer does not change.
		"granted-unchanged-managed-fields": world().granted().managed().request(t),
		// Metacontroller runs with its default --apply-strategy=dynamic-apply,
		// so the credentials Secret carries a copy of itself in an
		// annotation. The claim already says so (this is a later sync), and
		// still does; the copy is not repeated anywhere in the answer.
		"granted-credentials-exposed": func() scene {
			s := world().granted().exposed()
			s.claim.Status.Conditions = append(s.claim.Status.Conditions, exposedCondition(s.claim.Status.Conditions[0].LastTransitionTime))
			return s
		}().request(t),
		// The Secret of the earlier grant is observed and left out of the
		// answer, so Metacontroller deletes it. The claim has no status:
		// a granted status flipping to Denied would take the clock, while
		// a claim without conditions dates its state from its creation,
		// which keeps the answer the same whenever it is posted (as when
		// the claim is edited before its first status was recorded).
		"denied-tampered-permission-deletes-secret": func() scene {
			s := world().granted()
			s.claim.Generation = 2
			s.claim.Spec.Permission = v1alpha1.PermissionAdmin
			s.claim.Status = v1alpha1.ResourceClaimStatus{}
			return s
		}().request(t),
		"denied-stranger-key": func() scene {
			s := world()
			claimstest.SignClaim(s.claim, claimstest.Stranger)
			return s
		}().request(t),
		"denied-copied-to-another-namespace": func() scene {
			s := world()
			s.claim.Namespace = "team-b"
			return s
		}().request(t),
		// A claim applied after its grant expired: its Denied condition
		// dates from its creation, which is when it was denied.
		"denied-expired": func() scene {
			s := world().resign(func(c *v1alpha1.ResourceClaim) {
				c.Spec.ExpiresAt = "2026-01-02T00:00:00Z"
			})
			s.claim.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC))
			return s
		}().request(t),
		// Dated so far ahead that the resync asked for is at its cap.
		"denied-granted-in-future": world().resign(func(c *v1alpha1.ResourceClaim) {
			c.Spec.GrantedAt = "2099-01-01T00:00:00Z"
		}).request(t),
		"denied-tenant-not-allowed": world().resign(func(c *v1alpha1.ResourceClaim) {
			c.Spec.Workspace = "blog"
		}).request(t),
		"denied-malformed-signature": func() scene {
			s := world()
			s.claim.Spec.Signature = strings.Repeat("A", 40)
			return s
		}().request(t),
		// The reported forgery: the Datastore's only key is the identity
		// point, and the admin claim's signature R = identity, S = 0 was
		// made with no private key; plain ed25519 verification accepts it.
		// The Datastore is as its own hook left it: refused, WeakPublicKey.
		"denied-forged-identity-key": func() scene {
			s := world()
			s.ds.Spec.OwnerPublicKey, s.ds.Spec.OwnerPublicKeys = claimstest.IdentityKey, nil
			s.ds.Status = checkedStatus(s.ds, s.secret)
			s.claim.Spec.Permission = v1alpha1.PermissionAdmin
			claimstest.Forge(s.claim, claimstest.IdentityKey)
			return s
		}().request(t),
		"denied-datastore-missing": func() scene {
			s := world()
			s.ds, s.secret = nil, nil
			return s
		}().request(t),
		"denied-secret-missing": func() scene {
			s := world()
			s.secret = nil
			return s
		}().request(t),
	}
}

// customizeRequests are the cases of fixtures/resourceclaim/customize.
func customizeRequests(t *testing.T) map[string]any {
	return map[string]any{
		"cross-namespace": customize(t, claimstest.Claim()),
		"same-namespace":  customize(t, sameNamespace().claim),
	}
}

// TestFixtureRequests keeps the resourceclaim fixture requests, which are built
// here, in step with fixtures/resourceclaim/; cmd/formspec-hooks TestFixtures
// posts them to the real server and checks the responses (with the real
// clock: hence grants in the past, expiries either past or in 2099, and no
// condition transition that only the clock could date).
func TestFixtureRequests(t *testing.T) {
	golden.Requests(t, "../../../fixtures/resourceclaim/sync", syncRequests(t))
	golden.Requests(t, "../../../fixtures/resourceclaim/customize", customizeRequests(t))
}
