package takeover

import (
	"fmt"
	"io"
	"strings"
)

// PrintPrepared writes what Prepare did: one line per Workspace, then a
// line per object at a child's name that is not the Workspace's, then the
// counts. It returns how many Workspaces failed and how many have such an
// object.
func PrintPrepared(w io.Writer, prepared []Prepared, dryRun bool) (failed, conflicted int) {
	var b strings.Builder
	width := len("WORKSPACE")
	for _, p := range prepared {
		width = max(width, len(p.Namespace)+1+len(p.Name))
	}
	verb := "prepared"
	if dryRun {
		verb = "would prepare (dry run)"
	}
	fmt.Fprintf(&b, "%-*s   %s\n", width, "WORKSPACE", "RESULT")
	done := 0
	for _, p := range prepared {
		var what string
		switch {
		case p.Error != "":
			failed++
			what = "error: " + p.Error
		case len(p.Children) == 0:
			what = "no children of the original operator"
		default:
			done++
			what = verb + " " + kinds(p.Children)
			if m := movedManagers(p.Children); len(m) > 0 {
				what += "; fields of " + strings.Join(m, ", ") + " moved to Metacontroller's field manager"
			}
			if p.Held {
				what += "; held"
			}
		}
		fmt.Fprintf(&b, "%-*s   %s\n", width, p.Namespace+"/"+p.Name, what)
		for _, c := range p.Conflicts {
			fmt.Fprintf(&b, "  not taken over: %s\n", c)
		}
		if len(p.Conflicts) > 0 {
			conflicted++
		}
	}
	if len(prepared) == 0 {
		b.Reset()
		b.WriteString("no Workspaces found\n")
	} else {
		fmt.Fprintf(&b, "\n%d workspaces: %d with children of the original operator, %d with an object in the way, %d errors\n", len(prepared), done, conflicted, failed)
	}
	_, _ = io.WriteString(w, b.String())
	return failed, conflicted
}
