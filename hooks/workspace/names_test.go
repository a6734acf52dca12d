package workspace

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

func TestNameConflict(t *testing.T) {
	ws := &v1alpha1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: "team-a", UID: "ws-uid"}}
	owned := func(refs ...ownerRef) *namedView {
		v := &namedView{}
		v.Metadata.OwnerReferences = refs
		return v
	}
	workspaceRef := ownerRef{APIVersion: "formspec.dev/v1alpha1", Kind: "Workspace", Name: "acme", UID: "ws-uid", Controller: ptr.To(true)}
	helmRef := ownerRef{APIVersion: "helm.toolkit.fluxcd.io/v2", Kind: "HelmRelease", Name: "shop", UID: "helm-uid", Controller: ptr.To(true)}
	cases := map[string]struct {
		reason   string
		children Children
		related  Related
		// wantReason is the Degraded reason, empty for none; wantNames are
		// what its message must name.
		wantReason string
		wantNames  []string
	}{
		"Free": {
			reason: "No object at any child's name: nothing stands in the way.",
		},
		"OwnChildren": {
			reason:   "The workspace's own children, claimed by Metacontroller, are no conflict.",
			children: Children{Deployments: map[string]*deploymentView{"team-a/acme": {}}, Services: map[string]*serviceView{"team-a/acme": {}}},
			related: Related{Deployments: map[string]*namedView{"team-a/acme": owned(workspaceRef)},
				Services: map[string]*namedView{"team-a/acme": owned(workspaceRef)}},
		},
		"Unowned": {
			reason:     "A Deployment of the workspace's name that no controller owns is never taken over.",
			related:    Related{Deployments: map[string]*namedView{"team-a/acme": owned()}},
			wantReason: v1alpha1.ReasonChildNotOwned, wantNames: []string{"Deployment team-a/acme"},
		},
		"NonControllerOwner": {
			reason:     "An owner that is not a controller does not make it anyone's child.",
			related:    Related{Services: map[string]*namedView{"team-a/acme": owned(ownerRef{Kind: "Application", Name: "argo", UID: "argo-uid"})}},
			wantReason: v1alpha1.ReasonChildNotOwned, wantNames: []string{"Service team-a/acme"},
		},
		"OwnedByOther": {
			reason:     "A Deployment another controller owns is never taken over, and the message names that controller.",
			related:    Related{Deployments: map[string]*namedView{"team-a/acme": owned(helmRef)}},
			wantReason: v1alpha1.ReasonChildOwnedByOther, wantNames: []string{"Deployment team-a/acme", "HelmRelease shop"},
		},
		"NotPrepared": {
			reason:     "The original operator's child, owned by the Workspace without Metacontroller's label, is released by Metacontroller: the message says to run takeover prepare.",
			related:    Related{Deployments: map[string]*namedView{"team-a/acme": owned(workspaceRef)}},
			wantReason: v1alpha1.ReasonChildNotOwned, wantNames: []string{"Deployment team-a/acme", "kubectl formspec takeover prepare"},
		},
		"ConfigMapName": {
			reason:     "The ConfigMap's name is the workspace's with -config.",
			related:    Related{ConfigMaps: map[string]*namedView{"team-a/acme-config": owned()}},
			wantReason: v1alpha1.ReasonChildNotOwned, wantNames: []string{"ConfigMap team-a/acme-config"},
		},
		"OtherNamespace": {
			reason:  "An object of that name in another namespace is nobody's business here.",
			related: Related{Deployments: map[string]*namedView{"team-b/acme": owned()}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := nameConflict(ws, &tc.children, &tc.related)
			got := ""
			if p != nil {
				got = p.reason
			}
			if diff := cmp.Diff(tc.wantReason, got); diff != "" {
				t.Fatalf("%s\nreason: -want, +got:\n%s", tc.reason, diff)
			}
			for _, n := range tc.wantNames {
				if !strings.Contains(p.message, n) {
					t.Errorf("%s\nmessage %q does not name %q", tc.reason, p.message, n)
				}
			}
		})
	}
}
