package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shellBlocks returns the ```sh blocks of the README section under heading,
// in order.
func shellBlocks(t *testing.T, readme, heading string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README has no section %q", heading)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// TestReadmeWalkthrough runs the README's claim walkthrough exactly as
// written, pasted into bash in an empty folder with the built binaries on
// the PATH, up to the step that needs a cluster: heredocs that do not
// terminate, a flag that no longer exists or a changed output would fail
// here.
func TestReadmeWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building the binaries")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, string(readme), "## Granting a workspace access to a datastore")
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	ran := 0
	for _, b := range blocks {
		if strings.Contains(b, "kubectl ") {
			continue // needs a cluster; test/integration checks its names
		}
		script.WriteString(b + "\n")
		ran++
	}
	if ran < 4 {
		t.Fatalf("found %d runnable blocks in the walkthrough, want at least 4", ran)
	}
	bin := buildBinaries(t)
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walkthrough fails: %v\nstdout:\n%s\nstderr:\n%s\nscript:\n%s", err, stdout.String(), stderr.String(), script.String())
	}
	for _, want := range []string{"accepted: Granted", "shop-orders-credentials", "ORDERS_", "/bindings/shop-orders"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, stdout.String())
		}
	}
	if strings.Contains(stdout.String()+stderr.String(), "change-me") {
		t.Errorf("the walkthrough printed the Secret's password")
	}
}

// TestNoIndentedHeredocs keeps heredocs out of indented code blocks in the
// README and docs: copied from the raw file, the indented terminator does
// not end the heredoc and bash waits for one that never comes.
func TestNoIndentedHeredocs(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, "../../README.md") {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		indent, fenceLine := "", 0
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			trimmed := strings.TrimLeft(line, " \t")
			if strings.HasPrefix(trimmed, "```") {
				if fenceLine == 0 {
					indent, fenceLine = line[:len(line)-len(trimmed)], n
				} else {
					fenceLine = 0
				}
				continue
			}
			if fenceLine != 0 && indent != "" && strings.Contains(line, "<<") {
				t.Errorf("%s:%d: a heredoc in a code block indented by %q (from line %d); unindent the block", filepath.Base(f), n, indent, fenceLine)
			}
		}
		fh.Close()
	}
}
