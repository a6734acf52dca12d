package workspace

import (
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
