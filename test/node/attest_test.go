package node

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// cdx is the part of a CycloneDX SBOM the checks read.
type cdx struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component cdxComponent `json:"component"`
	} `json:"metadata"`
	Components []cdxComponent `json:"components"`
}

type cdxComponent struct {
	Type    string `json:"type"`
	BOMRef  string `json:"bom-ref"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Hashes  []struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	} `json:"hashes"`
	Properties []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"properties"`
}

func (c cdxComponent) property(name string) string {
	for _, p := range c.Properties {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

func readCDX(t *testing.T, path string) cdx {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bom cdx
	if err := json.Unmarshal(b, &bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != "1.5" {
		t.Errorf("%s: %s %s, want CycloneDX 1.5", path, bom.BOMFormat, bom.SpecVersion)
	}
	return bom
}

// goVersionM runs `go version -m` on a binary and returns the Go version
// and the modules built in, path@version → go.sum checksum (a replaced
// module as its replacement).
func goVersionM(t *testing.T, bin string) (string, map[string]string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", bin, err)
	}
	mods := map[string]string{}
	var goVersion, last string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for first := true; sc.Scan(); first = false {
		f := strings.Fields(sc.Text())
		switch {
		case first && len(f) == 2:
			goVersion = f[1]
		case len(f) >= 3 && f[0] == "dep":
			last = f[1] + "@" + f[2]
			mods[last] = ""
			if len(f) >= 4 {
				mods[last] = f[3]
			}
		case len(f) >= 4 && f[0] == "=>": // replaces the dep before
			delete(mods, last)
			mods[f[1]+"@"+f[2]] = f[3]
		}
	}
	return goVersion, mods
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sbomModules are an SBOM's Go module components, path@version → sum.
func sbomModules(bom cdx) map[string]string {
	mods := map[string]string{}
	for _, c := range bom.Components {
		if c.Type == "library" {
			mods[c.Name+"@"+c.Version] = c.property("go:sum")
		}
	}
	return mods
}

// checkSBOMs checks that each binary's SBOM lists exactly the modules `go
// version -m` reads from it, with their checksums, and names the binary by
// its SHA-256; the plugin archives' the same for the binary inside; and the
// image's every file of every platform with its SHA-256, and the modules
// of its binaries.
func checkSBOMs(t *testing.T, dir, v string) {
	for arch := range releaseArchs {
		for _, bin := range releaseBinaries {
			name := bin + "-" + v + "-linux-" + arch
			checkBinarySBOM(t, filepath.Join(dir, name), filepath.Join(dir, name+".cdx.json"))
		}
	}
	for _, p := range pluginPlatforms {
		archive := pluginArchive(v, p)
		bin := extractPlugin(t, filepath.Join(dir, archive))
		checkBinarySBOM(t, bin, filepath.Join(dir, strings.TrimSuffix(archive, ".tar.gz")+".cdx.json"))
	}

	img, err := ReadOCIArchive(filepath.Join(dir, "formspec-hooks-image-"+v+".oci.tar"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	bom := readCDX(t, filepath.Join(dir, "formspec-hooks-image-"+v+".cdx.json"))
	if got := bom.Metadata.Component; got.Type != "container" || len(got.Hashes) != 1 || "sha256:"+got.Hashes[0].Content != img.Digest {
		t.Errorf("the image SBOM describes %+v, want the container %s", got, img.Digest)
	}
	want, got := map[string]string{}, map[string]string{}
	for platform, p := range img.Platforms {
		for path, e := range p.Entries {
			if !e.Dir {
				want[platform+":/"+path] = sha256Hex(e.Data)
			}
		}
	}
	for _, c := range bom.Components {
		if c.Type == "file" && len(c.Hashes) == 1 {
			got[c.BOMRef] = c.Hashes[0].Content
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the image SBOM's files: -want (the image), +got:\n%s", diff)
	}
	mods := sbomModules(bom)
	if !strings.HasPrefix(mods["golang.org/x/crypto/x509roots/fallback@"+moduleVersion(t, "golang.org/x/crypto/x509roots/fallback")], "h1:") {
		t.Errorf("the image SBOM does not name the CA bundle's module with its checksum: %v", slices.Sorted(maps.Keys(mods)))
	}
}

// moduleVersion is the version of a module go.mod requires.
func moduleVersion(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(path) + `\s+(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("go.mod requires no %s", path)
	}
	return string(m[1])
}

func checkBinarySBOM(t *testing.T, bin, sbom string) {
	t.Helper()
	_, want := goVersionM(t, bin)
	bom := readCDX(t, sbom)
	if diff := cmp.Diff(want, sbomModules(bom)); diff != "" {
		t.Errorf("%s: modules: -want (go version -m %s), +got:\n%s", sbom, filepath.Base(bin), diff)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if h := bom.Metadata.Component.Hashes; len(h) != 1 || h[0].Content != sha256Hex(data) {
		t.Errorf("%s: describes %v, not the binary's SHA-256 %s", sbom, h, sha256Hex(data))
	}
}

// extractPlugin unpacks kubectl-formspec from an archive into a temporary
// directory, and checks the archive holds it and the licence, nothing else.
func extractPlugin(t *testing.T, archive string) string {
	t.Helper()
	files := readTarGz(t, archive)
	if diff := cmp.Diff([]string{"LICENSE", "kubectl-formspec"}, slices.Sorted(maps.Keys(files))); diff != "" {
		t.Errorf("%s: files: -want, +got:\n%s", archive, diff)
	}
	bin := filepath.Join(t.TempDir(), "kubectl-formspec")
	if err := os.WriteFile(bin, files["kubectl-formspec"], 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// checkProvenance checks the provenance statement: it names every other
// file of the release with its SHA-256, the revision the image is labelled
// with, the Go version the binaries were built by, and every module built
// into them with its checksum.
func checkProvenance(t *testing.T, dir, v string) {
	b, err := os.ReadFile(filepath.Join(dir, "provenance.intoto.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Type          string `json:"_type"`
		PredicateType string `json:"predicateType"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
		Predicate struct {
			BuildDefinition struct {
				ExternalParameters struct {
					Source  map[string]string `json:"source"`
					Command string            `json:"command"`
				} `json:"externalParameters"`
				InternalParameters struct {
					GoVersion string `json:"goVersion"`
				} `json:"internalParameters"`
				ResolvedDependencies []struct {
					URI    string            `json:"uri"`
					Digest map[string]string `json:"digest"`
				} `json:"resolvedDependencies"`
			} `json:"buildDefinition"`
		} `json:"predicate"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://slsa.dev/provenance/v1" {
		t.Errorf("provenance is %s / %s, want an in-toto Statement v1 of SLSA provenance v1", st.Type, st.PredicateType)
	}
	want := slices.DeleteFunc(distFiles(v), func(n string) bool { return n == "provenance.intoto.json" })
	var names []string
	for _, s := range st.Subject {
		names = append(names, s.Name)
		if got, err := sha256File(filepath.Join(dir, s.Name)); err != nil || got != s.Digest["sha256"] {
			t.Errorf("provenance: %s has SHA-256 %s (%v), the statement says %s", s.Name, got, err, s.Digest["sha256"])
		}
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("provenance subjects: -want, +got:\n%s", diff)
	}
	img, err := ReadOCIArchive(filepath.Join(dir, "formspec-hooks-image-"+v+".oci.tar"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rev := img.Platforms["linux/amd64"].Labels["org.opencontainers.image.revision"]
	bd := st.Predicate.BuildDefinition
	if src := bd.ExternalParameters.Source; src["revision"] != rev || src["version"] != v || !strings.HasPrefix(bd.ExternalParameters.Command, "make release") {
		t.Errorf("provenance: source %v, command %q; want revision %s, version %s, make release", src, bd.ExternalParameters.Command, rev, v)
	}
	goVersion, mods := goVersionM(t, filepath.Join(dir, "formspec-hooks-"+v+"-linux-amd64"))
	if bd.InternalParameters.GoVersion != goVersion {
		t.Errorf("provenance: Go %s, the binaries say %s", bd.InternalParameters.GoVersion, goVersion)
	}
	resolved := map[string]string{}
	for _, d := range bd.ResolvedDependencies {
		resolved[strings.TrimPrefix(d.URI, "pkg:golang/")] = d.Digest["gosum"]
	}
	for mod, sum := range mods {
		if resolved[mod] != sum {
			t.Errorf("provenance: module %s has checksum %q, want %q (go version -m)", mod, resolved[mod], sum)
		}
	}
}

// checkPlugin checks the krew manifest against the archives (a platform
// each, its address on the release page and its SHA-256), runs this
// platform's linux build with --help, and checks that the darwin builds
// are Mach-O executables for their CPUs.
func checkPlugin(t *testing.T, dir, v string) {
	objs, err := controlplane.ReadYAMLFile(filepath.Join(dir, "kubectl-formspec.krew.yaml"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("the krew manifest: %v (%d documents)", err, len(objs))
	}
	m := objs[0]
	if m["kind"] != "Plugin" || get2(m, "metadata", "name") != "formspec" || get2(m, "spec", "version") != "v"+v {
		t.Errorf("the krew manifest is %v %v %v, want Plugin formspec v%s", m["kind"], get2(m, "metadata", "name"), get2(m, "spec", "version"), v)
	}
	got := map[string]string{}
	platforms, _ := get2(m, "spec", "platforms").([]any)
	for _, p := range platforms {
		labels := get2(p, "selector", "matchLabels")
		platform := get2(labels, "os").(string) + "/" + get2(labels, "arch").(string)
		uri, _ := get2(p, "uri").(string)
		if want := "https://github.com/formspec/formspec-hooks/releases/download/v" + v + "/" + pluginArchive(v, platform); uri != want || get2(p, "bin") != "kubectl-formspec" {
			t.Errorf("krew %s: uri %s, bin %v; want %s, kubectl-formspec", platform, uri, get2(p, "bin"), want)
		}
		got[platform], _ = get2(p, "sha256").(string)
	}
	want := map[string]string{}
	for _, p := range pluginPlatforms {
		sum, err := sha256File(filepath.Join(dir, pluginArchive(v, p)))
		if err != nil {
			t.Fatal(err)
		}
		want[p] = sum
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("krew platforms' sha256: -want (the archives), +got:\n%s", diff)
	}

	bin := extractPlugin(t, filepath.Join(dir, pluginArchive(v, "linux/"+runtime.GOARCH)))
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "Usage: kubectl formspec") {
		t.Errorf("kubectl-formspec --help (linux/%s): %v\n%s", runtime.GOARCH, err, out)
	}
	for arch, cpu := range map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64} {
		f, err := macho.Open(extractPlugin(t, filepath.Join(dir, pluginArchive(v, "darwin/"+arch))))
		if err != nil {
			t.Errorf("darwin/%s: %v", arch, err)
			continue
		}
		if f.Cpu != cpu || f.Type != macho.TypeExec {
			t.Errorf("darwin/%s: a Mach-O %v for %v, want an executable for %v", arch, f.Type, f.Cpu, cpu)
		}
		_ = f.Close()
	}
}

// checkSignature verifies SHA256SUMS.sig, when the release was signed, as
// docs/releasing.md tells users to (ssh-keygen -Y verify with the key as
// an allowed signer), and checks that a changed SHA256SUMS fails it.
func checkSignature(t *testing.T, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "SHA256SUMS.sig")); err != nil {
		t.Skip("the release is not signed (make release without SIGNING_KEY); make test-node signs with a key of its own")
	}
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Fatal("ssh-keygen not found: apt-get install openssh-client")
	}
	pub, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS.pub"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	signers := filepath.Join(work, "allowed_signers")
	if err := os.WriteFile(signers, []byte("release@formspec.dev "+string(pub)), 0o600); err != nil {
		t.Fatal(err)
	}
	verify := func(sums string) ([]byte, error) {
		cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", signers, "-I", "release@formspec.dev", "-n", "file", "-s", filepath.Join(dir, "SHA256SUMS.sig"))
		f, err := os.Open(sums)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		cmd.Stdin = f
		return cmd.CombinedOutput()
	}
	if out, err := verify(filepath.Join(dir, "SHA256SUMS")); err != nil {
		t.Errorf("ssh-keygen -Y verify SHA256SUMS: %v\n%s", err, out)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	changed := filepath.Join(work, "SHA256SUMS")
	if err := os.WriteFile(changed, append(sums, []byte(strings.Repeat("0", 64)+"  extra\n")...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := verify(changed); err == nil {
		t.Errorf("ssh-keygen -Y verify accepted a changed SHA256SUMS:\n%s", out)
	}
}
