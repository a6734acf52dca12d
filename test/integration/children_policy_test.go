package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// TestChildrenPolicy installs deploy/hooks/children-admission-policy.yaml
// on a real API server and makes, as Metacontroller does (a server-side
// apply with force under its field manager), and as takeover prepare
// does, each write the policy judges: only the one that makes an object
// nobody owns, unlabelled, a Workspace's child is refused, and that object
// is left as it was.
func TestChildrenPolicy(t *testing.T) {
	cp := controlplane.Start(t, controlplane.WithoutControllerManager())
	c := cp.Client()
	ensureNamespace(t, c, "team-a")
	if _, err := c.ApplyYAMLFile(filepath.Join(controlplane.RepoRoot(t), "deploy", "hooks", "children-admission-policy.yaml"), fieldManager, false); err != nil {
		t.Fatalf("cannot apply the policy: %v", err)
	}
	const uid = "6f1c2f0e-3b7a-4d52-9c1e-0d6a1f2b3c4d"
	workspace := []any{map[string]any{"apiVersion": "formspec.dev/v1alpha1", "kind": "Workspace", "name": "acme", "uid": uid, "controller": true, "blockOwnerDeletion": true}}
	other := []any{map[string]any{"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "name": "shop", "uid": "5e1f0000-0000-4000-8000-000000002102", "controller": true}}
	labelled := map[string]any{"controller-uid": uid}
	configMap := func(name string, labels map[string]any, owners []any, value string) controlplane.Object {
		md := map[string]any{"name": name, "namespace": "team-a"}
		if labels != nil {
			md["labels"] = labels
		}
		if owners != nil {
			md["ownerReferences"] = owners
		}
		return controlplane.Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": map[string]any{"k": value}}
	}
	// patchMeta merge-patches a ConfigMap's metadata, as Metacontroller
	// adopts and releases and takeover prepare labels.
	patchMeta := func(name string, md map[string]any) func() error {
		return func() error {
			_, err := c.MergePatch("v1", "ConfigMap", "team-a", name, "", map[string]any{"metadata": md})
			return err
		}
	}
	// The policy takes a moment to reach the API server's admission: wait
	// for the write it refuses to be refused.
	if _, err := c.Create(configMap("someones", map[string]any{"team": "a"}, nil, "theirs")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.DryRunApply(configMap("someones", labelled, workspace, "ours"), "metacontroller")
		if err != nil && strings.Contains(err.Error(), "formspec-workspace-children") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy does not refuse Metacontroller's apply onto an object nobody owns after 30 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	cases := map[string]struct {
		reason string
		// before is made first (nil: nothing); write then does the write.
		before  controlplane.Object
		write   func() error
		refused bool
	}{
		"TakeUnowned": {
			reason: "Metacontroller's apply onto a ConfigMap nobody owns, which would overwrite it and make it the workspace's child.",
			before: configMap("unowned", map[string]any{"team": "a"}, nil, "theirs"),
			write: func() error {
				_, err := c.Apply(configMap("unowned", labelled, workspace, "ours"), "metacontroller")
				return err
			},
			refused: true,
		},
		"Create": {
			reason: "Metacontroller creating a child: a create is not judged.",
			write: func() error {
				_, err := c.Apply(configMap("new", labelled, workspace, "ours"), "metacontroller")
				return err
			},
		},
		"UpdateOwnChild": {
			reason: "Metacontroller updating the workspace's own child.",
			before: configMap("own", labelled, workspace, "old"),
			write: func() error {
				_, err := c.Apply(configMap("own", labelled, workspace, "new"), "metacontroller")
				return err
			},
		},
		"AdoptLabelled": {
			reason: "Metacontroller adopting an orphan labelled with the Workspace's controller-uid, as it adopts.",
			before: configMap("orphan", labelled, nil, "v"),
			write:  patchMeta("orphan", map[string]any{"ownerReferences": workspace}),
		},
		"PrepareOriginal": {
			reason: "takeover prepare labelling the original operator's child, which the Workspace already controls.",
			before: configMap("legacy", map[string]any{"app": "legacy"}, workspace, "v"),
			write:  patchMeta("legacy", map[string]any{"labels": labelled}),
		},
		"Release": {
			reason: "Metacontroller releasing a child.",
			before: configMap("released", labelled, workspace, "v"),
			write:  patchMeta("released", map[string]any{"ownerReferences": nil}),
		},
		"OtherControllers": {
			reason: "Another controller's writes to its own objects pass on the match condition.",
			before: configMap("helm", nil, other, "v"),
			write:  func() error { _, err := c.Apply(configMap("helm", nil, other, "w"), "helm-controller"); return err },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var made controlplane.Object
			if tc.before != nil {
				var err error
				if made, err = c.Create(tc.before); err != nil {
					t.Fatal(err)
				}
			}
			err := tc.write()
			switch {
			case tc.refused && (err == nil || !strings.Contains(err.Error(), "formspec-workspace-children")):
				t.Fatalf("%s\ngot %v, want the policy's refusal", tc.reason, err)
			case !tc.refused && err != nil:
				t.Fatalf("%s\nrefused: %v", tc.reason, err)
			}
			if tc.refused {
				md := made["metadata"].(map[string]any)
				now, err := c.Get("v1", "ConfigMap", "team-a", md["name"].(string))
				if err != nil {
					t.Fatal(err)
				}
				if now["metadata"].(map[string]any)["resourceVersion"] != md["resourceVersion"] {
					t.Errorf("%s\nthe refused write changed the object: %v", tc.reason, now)
				}
			}
		})
	}
}
