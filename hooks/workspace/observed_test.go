package workspace

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRequestKeys keeps the JSON tags of Children and Related, which decide
// where each kind is decoded from, equal to the keys Metacontroller uses.
func TestRequestKeys(t *testing.T) {
	var got []string
	for _, typ := range []reflect.Type{reflect.TypeFor[Children](), reflect.TypeFor[Related]()} {
		for f := range typ.Fields() {
			got = append(got, f.Tag.Get("json"))
		}
	}
	want := []string{keyDeployment, keyService, keyConfigMap, keyHPA, keyPDB, keyClusterClass, keyResourceClaim}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request keys: -want, +got:\n%s", diff)
	}
}

func TestObjectCount(t *testing.T) {
	body := `{"parent":{"metadata":{"name":"a"}},
	  "children":{"Deployment.apps/v1":{"n/a":{},"n/b":null},"Service.v1":{"n/a":{}},"ConfigMap.v1":{"n/a-config":{}}},
	  "related":{"ClusterClass.formspec.dev/v1alpha1":{"c":{}},"ResourceClaim.formspec.dev/v1alpha1":{"n/x":{},"n/y":{},"n/z":null}}}`
	var req Request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(6, req.ObjectCount()); diff != "" {
		t.Errorf("ObjectCount (null entries are not objects): -want, +got:\n%s", diff)
	}
}
