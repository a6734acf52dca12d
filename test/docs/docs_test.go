package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNoInternalReferences keeps references a reader of the repository
// cannot follow out of everything people read: the README, docs/, the
// manifests and chart, --help texts and code comments. The product
// specification and the issue tracker live outside the repository, so a
// section number of the one or a number of the other tells a reader
// nothing; the rule itself is written out instead.
func TestNoInternalReferences(t *testing.T) {
	// Spelled in pieces, so that this file does not match itself.
	spec := regexp.MustCompile(`\b` + "SP" + `EC\b`)
	section := regexp.MustCompile(`§\s*\d`)
	rfcSection := regexp.MustCompile(`RFC \d+ $`)
	issue := regexp.MustCompile(`\b[Ii]ssues? #?\d+\b|\(#\d+\)`)
	read := map[string]bool{".md": true, ".go": true, ".yaml": true, ".yml": true, ".json": true, ".txt": true, ".tpl": true, ".sh": true, ".mk": true, ".py": true}
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "dist", "fixtures", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !read[filepath.Ext(path)] && d.Name() != "Makefile" && d.Name() != "Dockerfile" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		rel, _ := filepath.Rel(root, path)
		for n, line := range strings.Split(string(b), "\n") {
			bad := spec.MatchString(line) || issue.MatchString(line)
			for _, m := range section.FindAllStringIndex(line, -1) {
				bad = bad || !rfcSection.MatchString(line[:m[0]])
			}
			if bad {
				t.Errorf("%s:%d cites the specification or an issue, which a reader of the repository cannot follow; say the rule in words:\n\t%s", rel, n+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d files: the walk did not find the repository", checked)
	}
}
