package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitYAML(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   []string
	}{
		"One":        {reason: "A single document.", in: "a: 1\n", want: []string{"a: 1\n"}},
		"Two":        {reason: "A line of --- separates documents.", in: "a: 1\n---\nb: 2\n", want: []string{"a: 1\n", "b: 2\n"}},
		"Trailing":   {reason: "Trailing blanks after --- still separate.", in: "a: 1\n---  \nb: 2\n", want: []string{"a: 1\n", "b: 2\n"}},
		"InString":   {reason: "--- inside a line is content.", in: "a: \"---\"\n", want: []string{"a: \"---\"\n"}},
		"LeadingSep": {reason: "A leading separator gives an empty first document, which Documents skips.", in: "---\na: 1\n", want: []string{"", "a: 1\n"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			parts, err := SplitYAML([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(parts))
			for i, p := range parts {
				got[i] = string(p)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSplitYAML: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSplitYAMLTooLong shows that an input line over the scanner's limit is
// an error, not a silently cut document.
func TestSplitYAMLTooLong(t *testing.T) {
	huge := "a: " + strings.Repeat("x", 17*1024*1024) + "\n"
	if _, err := SplitYAML([]byte(huge)); err == nil {
		t.Error("SplitYAML of a 17 MiB line: want an error")
	}
}

func TestDocumentsSkipsEmpty(t *testing.T) {
	docs, err := Documents("in.yaml", []byte("---\napiVersion: v1\nkind: Secret\n---\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 1 || !bytes.Contains(docs[0], []byte(`"kind":"Secret"`)) {
		t.Errorf("Documents: got %q, want the one Secret", docs)
	}
}

// TestDocumentsBadYAMLHidesValues checks that a document that is not
// YAML is named with its line where the parser gives one, and that
// nothing of the document reaches the error: an unknown alias, for
// one, is quoted by the parser, and here it is a Secret's value.
func TestDocumentsBadYAMLHidesValues(t *testing.T) {
	const secretValue = "Hunter2NeverPrinted"
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  password: "
	cases := map[string]struct{ in, want string }{
		"unknown alias":   {secret + "*" + secretValue + "\n", "in.yaml: document 2: not valid YAML"},
		"broken mapping":  {secret + secretValue + ": x: y\n", "in.yaml: document 2: not valid YAML (line 6)"},
		"unclosed quote":  {secret + `"` + secretValue + "\n", "in.yaml: document 2: not valid YAML"},
		"tab indentation": {secret + "\n\t" + secretValue + "\n", "in.yaml: document 2: not valid YAML"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Documents("in.yaml", []byte("apiVersion: v1\nkind: ConfigMap\n---\n"+tc.in))
			if err == nil {
				t.Fatal("Documents accepted a document that is not YAML")
			}
			if msg := err.Error(); strings.Contains(msg, secretValue) || !strings.HasPrefix(msg, tc.want) {
				t.Errorf("Documents: error %q; want it to start %q, without the Secret's value", msg, tc.want)
			}
		})
	}
}
