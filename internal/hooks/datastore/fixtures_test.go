package datastore_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/internal/testkit/golden"
)

const controllerFile = "../../../compositecontrollers/datastore.yaml"

func request(t *testing.T, ds *v1alpha1.Datastore, secret *corev1.Secret) *metacontroller.DecoratorRequest {
	var related []golden.Object
	if secret != nil {
		related = append(related, golden.Object{APIVersion: "v1", Kind: "Secret", Namespace: secret.Namespace, Name: secret.Name, Value: secret})
	}
	return &metacontroller.DecoratorRequest{
		Controller:  golden.Controller(t, controllerFile),
		Object:      golden.Raw(t, ds),
		Attachments: metacontroller.ObjectMap{},
		Related:     golden.Objects(t, nil, related...),
	}
}

// validated is the Datastore after an earlier sync validated it.
func validated() *v1alpha1.Datastore {
	ds := claimstest.Datastore()
	since := metav1.NewTime(claimstest.Now.Add(-72 * time.Hour))
	msg := "Secret data/orders-db-endpoint holds a complete postgres endpoint"
	ds.Status = v1alpha1.DatastoreStatus{
		ObservedGeneration: 1,
		Endpoint:           "orders-db.data.svc.cluster.local:5432",
		Conditions: []metav1.Condition{
			{Type: v1alpha1.ConditionValidated, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: since, Reason: v1alpha1.ReasonValidated, Message: msg},
			{Type: v1alpha1.ConditionDenied, Status: metav1.ConditionFalse, ObservedGeneration: 1, LastTransitionTime: since, Reason: v1alpha1.ReasonValidated, Message: msg},
		},
	}
	return ds
}

// syncRequests are the cases of fixtures/datastore/sync.
func syncRequests(t *testing.T) map[string]any {
	unlabeled := claimstest.Secret()
	unlabeled.Labels = nil
	missingKeys := claimstest.Secret()
	delete(missingKeys.Data, "database")
	delete(missingKeys.Data, "password")
	missingKeys.Data["admin.password"] = []byte(claimstest.AdminPassword)
	// Denials are of Datastores not synced before: with no conditions yet
	// their transition time is their creation time, so the answer is the
	// same whenever the fixture is posted. A Datastore that was validated
	// before and is denied now would take the clock.
	badKey := claimstest.Datastore()
	badKey.Spec.OwnerPublicKeys = []string{"not-a-key"}
	// A Datastore listing the identity point beside its sound keys: with
	// it anyone could sign grants, so the whole Datastore is refused.
	weakKey := claimstest.Datastore()
	weakKey.Spec.OwnerPublicKeys = append(weakKey.Spec.OwnerPublicKeys, claimstest.IdentityKey)
	badTenant := claimstest.Datastore()
	badTenant.Spec.AllowedTenants = []string{"*/shop"}
	redis := claimstest.Datastore()
	redis.Spec.Driver = v1alpha1.DriverRedis
	redisSecret := claimstest.Secret()
	redisSecret.Data = map[string][]byte{"host": []byte("cache.data.svc"), "port": []byte("6379"), "password": []byte(claimstest.Password)}
	// The endpoint Secret pins the owner's two keys; the Datastore, edited
	// by someone who may not edit the Secret, lists a third.
	pinned := claimstest.Secret()
	pinned.Annotations = map[string]string{v1alpha1.AnnotationOwnerPublicKeys: claimstest.PublicHex(claimstest.Owner) + "," + claimstest.PublicHex(claimstest.Rotated)}
	unpinnedKey := claimstest.Datastore()
	unpinnedKey.Spec.OwnerPublicKeys = append(unpinnedKey.Spec.OwnerPublicKeys, claimstest.PublicHex(claimstest.Stranger))
	withPolicy := claimstest.Datastore()
	withPolicy.Spec.GrantPolicy = &v1alpha1.GrantPolicy{MaxLifetime: "2160h", RevokedBefore: "2025-12-01T00:00:00Z"}
	badPolicy := claimstest.Datastore()
	badPolicy.Spec.GrantPolicy = &v1alpha1.GrantPolicy{MaxLifetime: "90d"}
	return map[string]any{
		"validated-pinned-keys":       request(t, claimstest.Datastore(), pinned),
		"validated-grant-policy":      request(t, withPolicy, claimstest.Secret()),
		"denied-owner-key-not-pinned": request(t, unpinnedKey, pinned),
		"denied-invalid-grant-policy": request(t, badPolicy, claimstest.Secret()),
		"validated":                   request(t, claimstest.Datastore(), claimstest.Secret()),
		"validated-unchanged":         request(t, validated(), claimstest.Secret()),
		"validated-redis":             request(t, redis, redisSecret),
		"denied-secret-not-found":     request(t, claimstest.Datastore(), nil),
		"denied-secret-not-labeled":   request(t, claimstest.Datastore(), unlabeled),
		"denied-missing-keys":         request(t, claimstest.Datastore(), missingKeys),
		"denied-invalid-public-key":   request(t, badKey, claimstest.Secret()),
		"denied-invalid-tenant":       request(t, badTenant, claimstest.Secret()),
		"denied-weak-public-key":      request(t, weakKey, claimstest.Secret()),
	}
}

// customizeRequests are the cases of fixtures/datastore/customize.
func customizeRequests(t *testing.T) map[string]any {
	return map[string]any{
		"endpoint-secret-by-name": &metacontroller.CustomizeRequest{Controller: golden.Controller(t, controllerFile), Parent: golden.Raw(t, claimstest.Datastore())},
	}
}

// TestFixtureRequests keeps the datastore fixture requests, which are built
// here, in step with fixtures/datastore/; cmd/formspec-hooks TestFixtures
// posts them to the real server and checks the responses (with the real
// clock: hence grants in the past, expiries either past or in 2099, and no
// condition transition that only the clock could date).
func TestFixtureRequests(t *testing.T) {
	golden.Requests(t, "../../../fixtures/datastore/sync", syncRequests(t))
	golden.Requests(t, "../../../fixtures/datastore/customize", customizeRequests(t))
}
