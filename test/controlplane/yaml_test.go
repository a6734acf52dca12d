package controlplane

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeYAML(t *testing.T) {
	cases := map[string]struct {
		reason string
		data   string
		want   []Object
	}{
		"Single": {
			reason: "A document without separators is one object.",
			data:   "kind: A\n",
			want:   []Object{{"kind": "A"}},
		},
		"Several": {
			reason: "Documents are split on --- lines, including a leading one and one with a comment.",
			data:   "---\nkind: A\n--- # second\nkind: B\n---\nkind: C\n",
			want:   []Object{{"kind": "A"}, {"kind": "B"}, {"kind": "C"}},
		},
		"EmptyDocuments": {
			reason: "Documents holding only comments or whitespace are skipped.",
			data:   "# header\n---\n\n---\nkind: A\n---\n# trailing\n",
			want:   []Object{{"kind": "A"}},
		},
		"SeparatorInsideBlockScalar": {
			reason: "An indented --- inside a block scalar is content, not a separator.",
			data:   "kind: A\ndata: |\n  x\n  ---\n  y\n",
			want:   []Object{{"kind": "A", "data": "x\n---\ny\n"}},
		},
		"CRLF": {
			reason: "Windows line endings still separate documents.",
			data:   "kind: A\r\n---\r\nkind: B\r\n",
			want:   []Object{{"kind": "A"}, {"kind": "B"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeYAML([]byte(tc.data))
			if err != nil {
				t.Fatalf("%s\nDecodeYAML(...): %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecodeYAML(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
