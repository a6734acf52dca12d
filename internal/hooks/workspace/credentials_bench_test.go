package workspace

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// BenchmarkBindingsForForged matches a request far past the CRD's maxItems
// (spec.datastores allows 32) of the kind only a forged request can carry:
// 40,000 datastore entries against 4,000 claims. Matching by datastore
// keeps it linear; the earlier per-entry scan of every claim took seconds.
func BenchmarkBindingsForForged(b *testing.B) {
	ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "ws", Namespace: "team-a"}}
	for i := range 40000 {
		ws.Spec.Datastores = append(ws.Spec.Datastores, v1alpha1.DatastoreRef{Name: fmt.Sprintf("d%d", i)})
	}
	var claims []*v1alpha1.ResourceClaim
	for i := range 4000 {
		claims = append(claims, claimObj(fmt.Sprintf("c%d", i), "ws", fmt.Sprintf("d%d", i), "", 1, 1, i%2 == 0, false))
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := bindingsFor(ws, claims); len(got) != len(ws.Spec.Datastores) {
			b.Fatalf("%d bindings, want %d", len(got), len(ws.Spec.Datastores))
		}
	}
}
