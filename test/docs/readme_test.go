package docs

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// shellBlocks returns the ```sh blocks of a document's section under
// heading, in order.
func shellBlocks(t *testing.T, readme, heading string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no section %q", heading)
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
	runWalkthrough(t, "../../README.md", "## Granting a workspace access to a datastore", walkthroughWant{
		stdout: []string{"accepted: Granted", "signature digest (to revoke it): sha256:", "shop-orders-credentials", "ORDERS_", "/bindings/shop-orders"},
		stderr: []string{"signature digest (to revoke it): sha256:"},
		never:  "change-me",
	})
}

// TestClaimsWalkthrough runs docs/claims.md's walkthrough the same way:
// keygen, sign (printing the digest), the public key refused as --key,
// verify, a tampered claim denied, and digest alone on its line.
func TestClaimsWalkthrough(t *testing.T) {
	runWalkthrough(t, "../../docs/claims.md", "## Walkthrough", walkthroughWant{
		stdout: []string{"accepted: Granted", "signature digest (to revoke it): sha256:", "denied: InvalidSignature", "exit 1", "\nsha256:"},
		stderr: []string{"signature digest (to revoke it): sha256:", "--key owner.pub holds a public key, not a private key"},
		never:  "change-me",
	})
}

// walkthroughWant is what a walkthrough must print, and the secret it
// must never print.
type walkthroughWant struct {
	stdout, stderr []string
	never          string
}

// runWalkthrough runs the shell blocks of a document's section in bash,
// in an empty folder with the built binaries on the PATH, leaving out the
// blocks that need a cluster.
func runWalkthrough(t *testing.T, doc, heading string, want walkthroughWant) {
	if testing.Short() {
		t.Skip("-short: not building the binaries")
	}
	text, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, string(text), heading)
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
		t.Fatalf("found %d runnable blocks in the walkthrough of %s, want at least 4", ran, doc)
	}
	bin := buildBinaries(t)
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "PATH="+bin+string(filepath.ListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the walkthrough of %s fails: %v\nstdout:\n%s\nstderr:\n%s\nscript:\n%s", doc, err, stdout.String(), stderr.String(), script.String())
	}
	for stream, wants := range map[*bytes.Buffer][]string{&stdout: want.stdout, &stderr: want.stderr} {
		for _, w := range wants {
			if !strings.Contains(stream.String(), w) {
				t.Errorf("the walkthrough of %s does not print %q:\nstdout:\n%s\nstderr:\n%s", doc, w, stdout.String(), stderr.String())
			}
		}
	}
	if strings.Contains(stdout.String()+stderr.String(), want.never) {
		t.Errorf("the walkthrough of %s printed the Secret's password", doc)
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

// TestReadmeWaitGivesUp runs the README's "Try it with curl" block with a
// `make run` that fails at once (its port is taken) and a curl that never
// connects: the wait for /readyz must end, saying why, rather than spin
// for ever.
func TestReadmeWaitGivesUp(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, string(raw), "## Try it with curl")
	if len(blocks) == 0 {
		t.Fatal("no sh block under \"## Try it with curl\"")
	}
	bin := t.TempDir()
	fakes := map[string]string{
		"make": "echo 'listen tcp 127.0.0.1:9090: bind: address already in use' >&2; exit 2",
		"curl": "exit 7",
		"jq":   "cat >/dev/null",
	}
	for name, body := range fakes {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", blocks[0])
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	_ = cmd.Run() // the block's last commands fail with make gone
	if ctx.Err() != nil {
		t.Fatalf("the README's wait for /readyz was still waiting after 30 s with make run gone; stderr:\n%s", stderr.String())
	}
	for _, want := range []string{"address already in use", "make run stopped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
