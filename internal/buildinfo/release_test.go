package buildinfo

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// root is the repository, from this package's directory.
const root = "../.."

// semver is Semantic Versioning 2.0.0's grammar, without a leading v.
var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func TestReleaseIsSemver(t *testing.T) {
	if !semver.MatchString(Release()) {
		t.Errorf("VERSION is %q, not a semantic version (like 0.1.0, without a v)", Release())
	}
}

func readRepoFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCopiesOfVersion checks every place that has to write the version
// literally against VERSION: the chart's version and appVersion, the image
// tag deploy/ pins, the Dockerfile's label default, and the changelog's
// entry (## [Unreleased] while VERSION is a development version). `make
// sync-version` writes the first three.
func TestCopiesOfVersion(t *testing.T) {
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/helm/formspec-hooks/Chart.yaml"), &chart); err != nil {
		t.Fatal(err)
	}
	var kustomization struct {
		Images []struct {
			Name   string `json:"name"`
			NewTag string `json:"newTag"`
		} `json:"images"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/hooks/kustomization.yaml"), &kustomization); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{
		"Chart.yaml version":    chart.Version,
		"Chart.yaml appVersion": chart.AppVersion,
	}
	for _, img := range kustomization.Images {
		got["deploy/hooks/kustomization.yaml images "+img.Name] = img.NewTag
	}
	args := regexp.MustCompile(`(?m)^ARG VERSION=(.*)$`).FindAllStringSubmatch(string(readRepoFile(t, "Dockerfile")), -1)
	for _, m := range args {
		got["Dockerfile ARG VERSION"] += m[1] // more than one: they show up joined
	}
	v := Release()
	want := map[string]string{
		"Chart.yaml version":    v,
		"Chart.yaml appVersion": v,
		"deploy/hooks/kustomization.yaml images ghcr.io/formspec/formspec-hooks": v,
		"Dockerfile ARG VERSION": v,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("copies of VERSION (%s) differ; run make sync-version: -want, +got:\n%s", Release(), diff)
	}
	if entry := ChangelogHeading(Release()); !strings.Contains(string(readRepoFile(t, "CHANGELOG.md")), entry) {
		t.Errorf("CHANGELOG.md has no entry %q for this version (docs/releasing.md)", entry)
	}
}

// TestNoLatest checks that nothing the install applies names latest: not
// an image tag, not a default version. A tag that moves is a version
// nobody chose.
func TestNoLatest(t *testing.T) {
	latest := regexp.MustCompile(`(?i)latest`)
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if latest.MatchString(line) {
				t.Errorf("%s:%d names latest: %s", path, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReleaseRefusesDevVersion runs `make release` with a development
// version and checks that it stops before building anything, naming the
// way out (PRERELEASE=1); main carries such a version between releases.
func TestReleaseRefusesDevVersion(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not found: apt-get install make")
	}
	dist := filepath.Join(t.TempDir(), "dist")
	cmd := exec.Command("make", "-C", root, "release", "VERSION=9.9.9"+DevSuffix, "DIST="+dist)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "9.9.9-dev is a pre-release version") || !strings.Contains(string(out), "PRERELEASE=1") {
		t.Errorf("make release with a -dev version: %v, want a refusal naming PRERELEASE=1:\n%s", err, out)
	}
	if _, err := os.Stat(dist); !os.IsNotExist(err) {
		t.Errorf("make release wrote %s before refusing (%v)", dist, err)
	}
}
