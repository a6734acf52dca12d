package datastore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/hooks/claims"
	"github.com/formspec/formspec-hooks/hooks/claims/claimstest"
	"github.com/formspec/formspec-hooks/hooks/datastore"
	"github.com/formspec/formspec-hooks/hooks/internal/golden"
	"github.com/formspec/formspec-hooks/hooks/metacontroller"
)

const controllerFile = "../../compositecontrollers/datastore.yaml"

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
			{Type: datastore.ConditionValidated, Status: metav1.ConditionTrue, ObservedGeneration: 1, LastTransitionTime: since, Reason: claims.ReasonValidated, Message: msg},
			{Type: datastore.ConditionDenied, Status: metav1.ConditionFalse, ObservedGeneration: 1, LastTransitionTime: since, Reason: claims.ReasonValidated, Message: msg},
		},
	}
	return ds
}

func fixtureRequests(t *testing.T) map[string]any {
	unlabeled := claimstest.Secret()
	unlabeled.Labels = nil
	missingKeys := claimstest.Secret()
	delete(missingKeys.Data, "database")
	delete(missingKeys.Data, "password")
	missingKeys.Data["admin.password"] = []byte(claimstest.AdminPassword)
	badKey := validated()
	badKey.Generation = 2
	badKey.Spec.OwnerPublicKeys = []string{"not-a-key"}
	badTenant := claimstest.Datastore()
	badTenant.Spec.AllowedTenants = []string{"*/shop"}
	redis := claimstest.Datastore()
	redis.Spec.Driver = v1alpha1.DriverRedis
	redisSecret := claimstest.Secret()
	redisSecret.Data = map[string][]byte{"host": []byte("cache.data.svc"), "port": []byte("6379"), "password": []byte(claimstest.Password)}
	return map[string]any{
		"validated":                 request(t, claimstest.Datastore(), claimstest.Secret()),
		"validated-unchanged":       request(t, validated(), claimstest.Secret()),
		"validated-redis":           request(t, redis, redisSecret),
		"denied-secret-not-found":   request(t, validated(), nil),
		"denied-secret-not-labeled": request(t, claimstest.Datastore(), unlabeled),
		"denied-missing-keys":       request(t, claimstest.Datastore(), missingKeys),
		"denied-invalid-public-key": request(t, badKey, claimstest.Secret()),
		"denied-invalid-tenant":     request(t, badTenant, claimstest.Secret()),
		"customize":                 &metacontroller.CustomizeRequest{Controller: golden.Controller(t, controllerFile), Parent: golden.Raw(t, claimstest.Datastore())},
	}
}

func TestFixtures(t *testing.T) {
	h := datastore.New(datastore.Options{Clock: func() time.Time { return claimstest.Now }})
	golden.Run(t, "../../fixtures/datastore", fixtureRequests(t), func(ctx context.Context, name string, body []byte) (any, error) {
		if strings.HasPrefix(name, "customize") {
			req, err := golden.Decode[metacontroller.CustomizeRequest](body)
			if err != nil {
				return nil, err
			}
			return h.Customize(ctx, req)
		}
		req, err := golden.Decode[metacontroller.DecoratorRequest](body)
		if err != nil {
			return nil, err
		}
		return h.Sync(ctx, req)
	})
}
