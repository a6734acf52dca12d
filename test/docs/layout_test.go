package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLayoutTableMatchesTree holds the README's layout table to the tree:
// every path it names exists, and every package folder under internal/
// and hooks/api/ is named, itself or through a folder it names that ends
// in a slash (internal/testkit/).
func TestLayoutTableMatchesTree(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "\n## Layout\n")
	if start < 0 {
		t.Fatal("the README has no ## Layout section")
	}
	table := text[start+1:]
	if end := strings.Index(table[1:], "\n## "); end >= 0 {
		table = table[:end+1]
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z0-9./_-]+)`").FindAllStringSubmatch(table, -1) {
		p := m[1]
		if !strings.Contains(p, "/") || strings.HasPrefix(p, "make") {
			continue
		}
		named[p] = true
		if _, err := os.Stat(filepath.Join(root, strings.TrimSuffix(p, "/"))); err != nil && p != "dist/" {
			t.Errorf("the README's layout table names %s, which is not in the tree", p)
		}
	}
	// A folder that covers what is below it; internal/ itself, named for
	// what it means, covers nothing.
	covered := func(dir string) bool {
		for p := range named {
			if p == dir || p == dir+"/" || p != "internal/" && strings.HasSuffix(p, "/") && strings.HasPrefix(dir, p) {
				return true
			}
		}
		return false
	}
	for _, top := range []string{"internal", "internal/hooks", "hooks/api"} {
		entries, err := os.ReadDir(filepath.Join(root, top))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			dir := top + "/" + e.Name()
			if e.IsDir() && dir != "internal/hooks" && !covered(dir) {
				t.Errorf("%s is not in the README's layout table", dir)
			}
		}
	}
}
