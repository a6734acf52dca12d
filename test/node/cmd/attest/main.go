// Command attest writes what a platform checks about a release before it
// installs it, into the release directory `make release` filled:
//
//   - a CycloneDX SBOM of each binary (<file>.cdx.json), from the module
//     graph Go recorded in it (what `go version -m` prints), and of each
//     kubectl-formspec archive's binary;
//   - a CycloneDX SBOM of the image (formspec-hooks-image-<v>.cdx.json):
//     every file of every platform with its SHA-256, the modules of its
//     binaries, the CA bundle's module and the Go toolchain whose time
//     zones it holds;
//   - the krew plugin manifest of kubectl-formspec (kubectl-formspec.krew.yaml)
//     with each archive's SHA-256;
//   - a provenance statement (provenance.intoto.json, in-toto Statement v1
//     with a SLSA v1 provenance predicate): every other file's SHA-256, the
//     source revision, the Go version, the build command and the checksum
//     of every module built in.
//
// `make release` runs it after the binaries, archives, image and chart, and
// before SHA256SUMS; the same inputs give the same bytes.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	node "github.com/formspec/formspec-hooks/test/node"
)

const (
	repository   = "github.com/formspec/formspec-hooks"
	imageRepo    = "ghcr.io/formspec/formspec-hooks"
	pluginPrefix = "kubectl-formspec-"
	// caModule is the module the image's CA bundle comes from
	// (internal/imagefs).
	caModule = "golang.org/x/crypto/x509roots/fallback"
)

type options struct {
	dist, root, version, revision, command string
	created                                time.Time
}

func main() {
	var o options
	flag.StringVar(&o.dist, "dist", "", "the release directory")
	flag.StringVar(&o.root, "root", "", "the repository (its go.mod and go.sum)")
	flag.StringVar(&o.version, "version", "", "the release's version")
	flag.StringVar(&o.revision, "revision", "", "the source revision (git commit)")
	flag.StringVar(&o.command, "command", "", "the command that built the release, as the provenance records it")
	epoch := flag.Int64("source-date-epoch", 0, "the commit's time, Unix seconds: the SBOMs' timestamp")
	flag.Parse()
	if o.dist == "" || o.root == "" || o.version == "" || o.revision == "" || o.command == "" || *epoch == 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: attest -dist DIR -root DIR -version V -revision COMMIT -source-date-epoch N -command CMD")
		os.Exit(2)
	}
	o.created = time.Unix(*epoch, 0).UTC()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "attest:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	entries, err := os.ReadDir(o.dist)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	modules := map[string]*debug.Module{}
	var goVersion string
	for _, name := range names {
		var bin []byte
		switch {
		case strings.Contains(name, "-"+o.version+"-linux-") && !strings.HasSuffix(name, ".tar.gz") && !strings.HasSuffix(name, ".json"):
			if bin, err = os.ReadFile(filepath.Join(o.dist, name)); err != nil {
				return err
			}
		case strings.HasPrefix(name, pluginPrefix) && strings.HasSuffix(name, ".tar.gz"):
			if bin, err = fileInTarGz(filepath.Join(o.dist, name), "kubectl-formspec"); err != nil {
				return err
			}
		default:
			continue
		}
		bi, err := buildinfo.Read(bytes.NewReader(bin))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		goVersion = bi.GoVersion
		for _, m := range bi.Deps {
			modules[moduleKey(m)] = resolved(m)
		}
		bom := binaryBOM(o, name, bin, bi)
		if err := writeJSON(filepath.Join(o.dist, strings.TrimSuffix(name, ".tar.gz")+".cdx.json"), bom); err != nil {
			return err
		}
	}
	if goVersion == "" {
		return fmt.Errorf("%s holds no binaries of %s", o.dist, o.version)
	}
	ca, err := moduleFromGoMod(o.root, caModule)
	if err != nil {
		return err
	}
	modules[moduleKey(ca)] = ca

	imageName := "formspec-hooks-image-" + o.version + ".oci.tar"
	work, err := os.MkdirTemp("", "attest-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	img, err := node.ReadOCIArchive(filepath.Join(o.dist, imageName), work)
	if err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(o.dist, "formspec-hooks-image-"+o.version+".cdx.json"), imageBOM(o, img, ca, goVersion)); err != nil {
		return err
	}

	krew, err := krewManifest(o, names)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.dist, "kubectl-formspec.krew.yaml"), krew, 0o644); err != nil {
		return err
	}
	return writeProvenance(o, goVersion, modules)
}

// moduleKey names a module at a version.
func moduleKey(m *debug.Module) string { return m.Path + "@" + m.Version }

// resolved is the module a dependency was built from: its replacement,
// when it has one.
func resolved(m *debug.Module) *debug.Module {
	if m.Replace != nil {
		return m.Replace
	}
	return m
}

// purl is a Go module's package URL.
func purl(m *debug.Module) string { return "pkg:golang/" + m.Path + "@" + m.Version }

// moduleFromGoMod reads a required module's version from root's go.mod
// and its checksum from go.sum.
func moduleFromGoMod(root, path string) (*debug.Module, error) {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(path) + `\s+(\S+)`).FindSubmatch(gomod)
	if m == nil {
		return nil, fmt.Errorf("go.mod requires no %s", path)
	}
	mod := &debug.Module{Path: path, Version: string(m[1])}
	gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return nil, err
	}
	s := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(path+" "+mod.Version) + ` (h1:\S+)$`).FindSubmatch(gosum)
	if s == nil {
		return nil, fmt.Errorf("go.sum has no checksum of %s", moduleKey(mod))
	}
	mod.Sum = string(s[1])
	return mod, nil
}

// The parts of CycloneDX 1.5 (JSON) these SBOMs use.
type (
	bom struct {
		BOMFormat    string       `json:"bomFormat"`
		SpecVersion  string       `json:"specVersion"`
		SerialNumber string       `json:"serialNumber"`
		Version      int          `json:"version"`
		Metadata     metadata     `json:"metadata"`
		Components   []component  `json:"components"`
		Dependencies []dependency `json:"dependencies,omitempty"`
	}
	metadata struct {
		Timestamp string    `json:"timestamp"`
		Tools     tools     `json:"tools"`
		Component component `json:"component"`
	}
	tools struct {
		Components []component `json:"components"`
	}
	component struct {
		Type       string     `json:"type"`
		BOMRef     string     `json:"bom-ref,omitempty"`
		Name       string     `json:"name"`
		Version    string     `json:"version,omitempty"`
		PURL       string     `json:"purl,omitempty"`
		Hashes     []hash     `json:"hashes,omitempty"`
		Properties []property `json:"properties,omitempty"`
	}
	hash struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	}
	property struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	dependency struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	}
)

// newBOM is an SBOM of subject, whose serial number is derived from the
// subject's SHA-256, so that the same release gives the same bytes.
func newBOM(o options, subject component, subjectSHA string) bom {
	u := subjectSHA[:32]
	return bom{
		BOMFormat:    "CycloneDX",
		SpecVersion:  "1.5",
		SerialNumber: "urn:uuid:" + u[0:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:32],
		Version:      1,
		Metadata: metadata{
			Timestamp: o.created.Format(time.RFC3339),
			Tools:     tools{Components: []component{{Type: "application", Name: "formspec-hooks make release (test/node/cmd/attest)", Version: o.version}}},
			Component: subject,
		},
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// binaryBOM is the SBOM of one binary: the binary, with its Go version and
// build settings, depending on every module built into it.
func binaryBOM(o options, name string, bin []byte, bi *debug.BuildInfo) bom {
	sum := sha256Hex(bin)
	props := []property{{Name: "go:version", Value: bi.GoVersion}, {Name: "go:package", Value: bi.Path}}
	for _, s := range bi.Settings {
		props = append(props, property{Name: "go:build:" + s.Key, Value: s.Value})
	}
	subject := component{
		Type: "application", BOMRef: "subject", Name: filepath.Base(bi.Path), Version: o.version,
		PURL:       "pkg:golang/" + repository + "@" + o.version,
		Hashes:     []hash{{Alg: "SHA-256", Content: sum}},
		Properties: append([]property{{Name: "formspec:release-file", Value: name}}, props...),
	}
	b := newBOM(o, subject, sum)
	deps := dependency{Ref: "subject", DependsOn: []string{}}
	for _, m := range bi.Deps {
		c := moduleComponent(resolved(m))
		b.Components = append(b.Components, c)
		deps.DependsOn = append(deps.DependsOn, c.BOMRef)
	}
	b.Dependencies = []dependency{deps}
	return b
}

// moduleComponent is a Go module, with its go.sum checksum.
func moduleComponent(m *debug.Module) component {
	c := component{Type: "library", BOMRef: purl(m), Name: m.Path, Version: m.Version, PURL: purl(m)}
	if m.Sum != "" {
		c.Properties = []property{{Name: "go:sum", Value: m.Sum}}
	}
	return c
}

// imageBOM is the SBOM of the image: every file of every platform with
// its SHA-256 (bom-ref <os/arch>:/<path>), the modules of the binaries,
// the CA bundle's module and the Go toolchain the time zones come from.
func imageBOM(o options, img node.OCIImage, ca *debug.Module, goVersion string) bom {
	subject := component{
		Type: "container", BOMRef: "subject", Name: imageRepo, Version: o.version,
		PURL:   "pkg:oci/formspec-hooks@" + img.Digest + "?repository_url=" + imageRepo + "&tag=" + o.version,
		Hashes: []hash{{Alg: "SHA-256", Content: strings.TrimPrefix(img.Digest, "sha256:")}},
	}
	b := newBOM(o, subject, strings.TrimPrefix(img.Digest, "sha256:"))
	mods := map[string]component{}
	mods[purl(ca)] = component{Type: "library", BOMRef: purl(ca), Name: ca.Path, Version: ca.Version, PURL: purl(ca),
		Properties: []property{{Name: "go:sum", Value: ca.Sum}, {Name: "formspec:provides", Value: "the CA bundle, /etc/ssl/certs/ca-certificates.crt"}}}
	mods["go"] = component{Type: "application", BOMRef: "pkg:golang/std@" + goVersion, Name: "go", Version: goVersion, PURL: "pkg:golang/std@" + goVersion,
		Properties: []property{{Name: "formspec:provides", Value: "the time zones, /usr/share/zoneinfo (lib/time/zoneinfo.zip)"}}}
	contains := dependency{Ref: "subject", DependsOn: []string{}}
	for _, platform := range slices.Sorted(maps.Keys(img.Platforms)) {
		p := img.Platforms[platform]
		for _, path := range slices.Sorted(maps.Keys(p.Entries)) {
			e := p.Entries[path]
			if e.Dir {
				continue
			}
			ref := platform + ":/" + path
			b.Components = append(b.Components, component{
				Type: "file", BOMRef: ref, Name: "/" + path,
				Hashes:     []hash{{Alg: "SHA-256", Content: sha256Hex(e.Data)}},
				Properties: []property{{Name: "formspec:platform", Value: platform}, {Name: "formspec:mode", Value: strconv.FormatInt(e.Mode, 8)}},
			})
			contains.DependsOn = append(contains.DependsOn, ref)
			if bi, err := buildinfo.Read(bytes.NewReader(e.Data)); err == nil {
				for _, m := range bi.Deps {
					c := moduleComponent(resolved(m))
					mods[c.BOMRef] = c
				}
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(mods)) {
		b.Components = append(b.Components, mods[k])
		contains.DependsOn = append(contains.DependsOn, mods[k].BOMRef)
	}
	b.Dependencies = []dependency{contains}
	return b
}

// krewManifest is kubectl-formspec's krew plugin manifest: one platform
// per archive, with its download address on the release's page and its
// SHA-256.
func krewManifest(o options, names []string) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `apiVersion: krew.googlecontainertools.github.com/v1alpha2
kind: Plugin
metadata:
  name: formspec
spec:
  version: v%s
  homepage: https://%s
  shortDescription: Trace and diff FormSpec Workspaces
  description: |
    Shows a Workspace, ResourceClaim or Datastore as a tree with what
    keeps each part from being Ready (trace), and previews what a new
    version of the formspec-hooks would change in the live Workspaces
    before an upgrade (diff).
  platforms:
`, o.version, repository)
	n := 0
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, pluginPrefix+o.version+"-")
		if !ok || !strings.HasSuffix(rest, ".tar.gz") {
			continue
		}
		osName, arch, ok := strings.Cut(strings.TrimSuffix(rest, ".tar.gz"), "-")
		if !ok {
			return nil, fmt.Errorf("%s: want %s<version>-<os>-<arch>.tar.gz", name, pluginPrefix)
		}
		data, err := os.ReadFile(filepath.Join(o.dist, name))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, `    - selector:
        matchLabels:
          os: %s
          arch: %s
      uri: https://%s/releases/download/v%s/%s
      sha256: %s
      bin: kubectl-formspec
`, osName, arch, repository, o.version, name, sha256Hex(data))
		n++
	}
	if n == 0 {
		return nil, errors.New("no kubectl-formspec archives")
	}
	return buf.Bytes(), nil
}

// The parts of an in-toto Statement v1 with a SLSA provenance v1
// predicate that the provenance uses.
type (
	statement struct {
		Type          string     `json:"_type"`
		Subject       []resource `json:"subject"`
		PredicateType string     `json:"predicateType"`
		Predicate     provenance `json:"predicate"`
	}
	resource struct {
		Name   string            `json:"name,omitempty"`
		URI    string            `json:"uri,omitempty"`
		Digest map[string]string `json:"digest,omitempty"`
	}
	provenance struct {
		BuildDefinition buildDefinition `json:"buildDefinition"`
		RunDetails      runDetails      `json:"runDetails"`
	}
	buildDefinition struct {
		BuildType            string         `json:"buildType"`
		ExternalParameters   map[string]any `json:"externalParameters"`
		InternalParameters   map[string]any `json:"internalParameters"`
		ResolvedDependencies []resource     `json:"resolvedDependencies"`
	}
	runDetails struct {
		Builder struct {
			ID string `json:"id"`
		} `json:"builder"`
	}
)

// ProvenanceFile is the provenance statement's name in the release.
const ProvenanceFile = "provenance.intoto.json"

// writeProvenance writes the provenance of every file in the release
// directory but itself and SHA256SUMS (which lists it): the source
// revision, the command, the Go version, and each module built into the
// binaries or the image, with its go.sum checksum (digest "gosum").
func writeProvenance(o options, goVersion string, modules map[string]*debug.Module) error {
	entries, err := os.ReadDir(o.dist)
	if err != nil {
		return err
	}
	st := statement{Type: "https://in-toto.io/Statement/v1", PredicateType: "https://slsa.dev/provenance/v1"}
	for _, e := range entries {
		if e.Name() == ProvenanceFile || strings.HasPrefix(e.Name(), "SHA256SUMS") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(o.dist, e.Name()))
		if err != nil {
			return err
		}
		st.Subject = append(st.Subject, resource{Name: e.Name(), Digest: map[string]string{"sha256": sha256Hex(data)}})
	}
	deps := []resource{{URI: "git+https://" + repository + "@" + o.revision, Digest: map[string]string{"gitCommit": o.revision}}}
	for _, k := range slices.Sorted(maps.Keys(modules)) {
		m := modules[k]
		deps = append(deps, resource{URI: purl(m), Digest: map[string]string{"gosum": m.Sum}})
	}
	st.Predicate.BuildDefinition = buildDefinition{
		BuildType: "https://" + repository + "/blob/" + o.revision + "/docs/releasing.md",
		ExternalParameters: map[string]any{
			"source":  map[string]string{"uri": "git+https://" + repository, "revision": o.revision, "version": o.version},
			"command": o.command,
		},
		InternalParameters: map[string]any{
			"goVersion":       goVersion,
			"sourceDateEpoch": o.created.Unix(),
		},
		ResolvedDependencies: deps,
	}
	st.Predicate.RunDetails.Builder.ID = "https://" + repository + "/blob/" + o.revision + "/Makefile#release"
	return writeJSON(filepath.Join(o.dist, ProvenanceFile), st)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// fileInTarGz returns the regular file name of a .tar.gz.
func fileInTarGz(path, name string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s has no %s", path, name)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.Name == name && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}
