package diff

import (
	"fmt"
	"io"
	"strings"
)

// Print writes the results: one line per workspace with its outcome, under
// it each child that would change and, for an update, each field with its
// live and desired values; then a count of the outcomes.
func Print(w io.Writer, results []Result) error {
	var b strings.Builder
	width := len("WORKSPACE")
	for _, r := range results {
		width = max(width, len(r.Namespace)+1+len(r.Name))
	}
	fmt.Fprintf(&b, "%-*s   %s\n", width, "WORKSPACE", "RESULT")
	counts := map[string]int{}
	for _, r := range results {
		counts[r.Outcome]++
		outcome := r.Outcome
		switch r.Outcome {
		case Terminating:
			outcome += " (not compared: its finalize hook decides)"
		case Failed:
			outcome += ": " + r.Error
		}
		if r.Held {
			outcome += " once released (formspec.dev/takeover: hold; kubectl formspec takeover roll)"
		}
		fmt.Fprintf(&b, "%-*s   %s\n", width, r.Namespace+"/"+r.Name, outcome)
		if r.Degraded != "" {
			fmt.Fprintf(&b, "  degraded: %s\n", r.Degraded)
		}
		for _, c := range r.Children {
			fmt.Fprintf(&b, "  %s/%s: %s\n", c.Kind, c.Name, actionText(c))
			for _, f := range c.Fields {
				fmt.Fprintf(&b, "    %s: %s → %s\n", f.Path, f.Live, f.Desired)
			}
		}
	}
	var summary []string
	for _, o := range []string{Unchanged, Changed, PodsWouldRoll, Terminating, Failed} {
		if counts[o] > 0 {
			summary = append(summary, fmt.Sprintf("%d %s", counts[o], o))
		}
	}
	noun := "workspaces"
	if len(results) == 1 {
		noun = "workspace"
	}
	if len(results) == 0 {
		b.Reset()
		b.WriteString("no Workspaces found\n")
	} else {
		fmt.Fprintf(&b, "\n%d %s: %s\n", len(results), noun, strings.Join(summary, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func actionText(c Child) string {
	switch c.Action {
	case InTheWay:
		return fmt.Sprintf("cannot be created: an object of this name is in the way, %s; the apply fails (%s), and the Workspace turns Degraded, ChildNotCreated, until it is moved", c.Owner, c.Error)
	case TakeOver:
		return fmt.Sprintf("would overwrite the object of this name that is not the workspace's (%s) and make it the workspace's child", c.Owner)
	case Create:
		return "would be created"
	case Delete:
		return "would be deleted"
	}
	return "would change"
}
