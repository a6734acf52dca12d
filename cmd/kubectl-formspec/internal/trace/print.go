package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// Output is the document `-o json` and `-o yaml` print.
type Output struct {
	// Ready is true when every node of the tree is Ready (or has no ready
	// state): what the exit code says.
	Ready bool  `json:"ready"`
	Tree  *Node `json:"tree"`
}

// PrintJSON writes the tree as one JSON document.
func PrintJSON(w io.Writer, root *Node) error {
	out, err := json.MarshalIndent(Output{Ready: root.AllReady(), Tree: root}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return err
}

// PrintYAML writes the tree as one YAML document, the same fields as
// PrintJSON.
func PrintYAML(w io.Writer, root *Node) error {
	out, err := yaml.Marshal(Output{Ready: root.AllReady(), Tree: root})
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// PrintText writes the tree as kubectl tree and crossplane beta trace do:
// a table whose NAME column draws the tree, each node's Events on the
// lines under it. The default table shows the Events of the nodes that are
// not Ready and the Warnings of the others; wide adds a NAMESPACE column
// and shows every node's Events.
func PrintText(w io.Writer, root *Node, wide bool, now time.Time) error {
	var rows []row
	// prefix is what the lines above n leave in the NAME column: a
	// vertical line for every ancestor with siblings still to come.
	var walk func(n *Node, prefix string, depth int, last bool)
	walk = func(n *Node, prefix string, depth int, last bool) {
		name, below := n.Ref(), prefix
		switch {
		case depth == 0:
		case last:
			name, below = prefix+"└─"+name, prefix+"  "
		default:
			name, below = prefix+"├─"+name, prefix+"│ "
		}
		r := row{cells: []string{name, orDash(n.Ready), orDash(n.Status), n.Reason, age(n.Created, now), oneLine(n.Message)}}
		if wide {
			r.cells = append([]string{orDash(n.Namespace)}, r.cells...)
		}
		gutter := below + "  "
		if len(n.Children) > 0 {
			gutter = below + "│ "
		}
		notReady := n.Ready != "" && n.Ready != ReadyTrue
		for _, e := range n.Events {
			if wide || notReady || e.Type == corev1.EventTypeWarning {
				r.events = append(r.events, gutter+"  "+eventLine(e, now))
			}
		}
		rows = append(rows, r)
		for i, c := range n.Children {
			walk(c, below, depth+1, i == len(n.Children)-1)
		}
	}
	walk(root, "", 0, true)

	header := []string{"NAME", "READY", "STATUS", "REASON", "AGE", "MESSAGE"}
	if wide {
		header = append([]string{"NAMESPACE"}, header...)
	}
	widths := make([]int, len(header))
	for _, r := range append([]row{{cells: header}}, rows...) {
		for i, c := range r.cells {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	writeRow := func(cells []string) {
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+columnGap))
		}
		b.WriteString("\n")
	}
	writeRow(header)
	// Event lines start under the NAME column, so that the tree's lines
	// run on through them.
	indent := ""
	if wide {
		indent = strings.Repeat(" ", widths[0]+columnGap)
	}
	for _, r := range rows {
		writeRow(r.cells)
		for _, e := range r.events {
			b.WriteString(indent + e + "\n")
		}
	}
	_, err := io.WriteString(w, trimTrailing(b.String()))
	return err
}

// columnGap separates columns, as kubectl's tables do.
const columnGap = 3

type row struct {
	cells  []string
	events []string
}

func eventLine(e Event, now time.Time) string {
	count := ""
	if e.Count > 1 {
		count = fmt.Sprintf(" (x%d)", e.Count)
	}
	from := ""
	if e.Source != "" {
		from = " from " + e.Source
	}
	return fmt.Sprintf("%s %s %s ago%s%s: %s", e.Type, e.Reason, age(&e.LastSeen, now), count, from, oneLine(e.Message))
}

// age is how long ago t was, as kubectl prints ages.
func age(t *metav1.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t.Time))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// oneLine keeps a message on its row.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// trimTrailing drops the spaces that padding leaves at the end of lines.
func trimTrailing(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
