package node

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// EnvDist names the directory `make release` wrote, which TestDist checks
// and TestReleaseInstall installs; `make test-node` sets it.
const EnvDist = "FORMSPEC_DIST"

// releaseArchs are the platforms a release ships binaries and images for.
var releaseArchs = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// releaseBinaries are the programs a release ships for each platform, and
// imageBinaries those of them in the image.
var (
	releaseBinaries = []string{"formspec-clustercontrol", "formspec-hooks", "formspec-reporter"}
	imageBinaries   = []string{"formspec-hooks", "formspec-reporter"}
)

// releaseVersion is the repository's version, internal/buildinfo/VERSION (read
// as a file: the package's metrics library is no dependency of this
// module).
func releaseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(t), "internal", "buildinfo", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// releaseImage is the image a release of version v ships and its
// installs run.
func releaseImage(v string) string { return "ghcr.io/formspec/formspec-hooks:" + v }

// pluginPlatforms are the platforms kubectl-formspec is released for.
var pluginPlatforms = []string{"darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"}

// pluginArchive is kubectl-formspec's archive for one platform (os/arch).
func pluginArchive(v, platform string) string {
	return "kubectl-formspec-" + v + "-" + strings.Replace(platform, "/", "-", 1) + ".tar.gz"
}

// distFiles are the files of a release of version v, SHA256SUMS and its
// signature aside: each with an SBOM but the chart, install.yaml and the
// metadata themselves.
func distFiles(v string) []string {
	files := []string{"formspec-hooks-" + v + ".tgz", "install.yaml", "kubectl-formspec.krew.yaml", "provenance.intoto.json",
		"formspec-hooks-image-" + v + ".oci.tar", "formspec-hooks-image-" + v + ".cdx.json"}
	for arch := range releaseArchs {
		for _, bin := range releaseBinaries {
			files = append(files, bin+"-"+v+"-linux-"+arch, bin+"-"+v+"-linux-"+arch+".cdx.json")
		}
	}
	for _, p := range pluginPlatforms {
		files = append(files, pluginArchive(v, p), strings.TrimSuffix(pluginArchive(v, p), ".tar.gz")+".cdx.json")
	}
	slices.Sort(files)
	return files
}

// signatureFiles are what a release signed with SIGNING_KEY adds.
var signatureFiles = []string{"SHA256SUMS.pub", "SHA256SUMS.sig"}

// hooksImage is the name the release's image archive gives the project's
// image, the one the cluster tests run.
func hooksImage(t *testing.T) string { return releaseImage(releaseVersion(t)) }

// hooksArchive is the release's image archive, which the cluster tests
// import: they run what `make release` ships, not an image of their own.
func hooksArchive(t *testing.T) string {
	t.Helper()
	p := filepath.Join(requireDist(t), "formspec-hooks-image-"+releaseVersion(t)+".oci.tar")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the release's image archive: %v (make release writes it)", err)
	}
	return p
}

// requireDist returns the release directory, or skips when none is named.
func requireDist(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(EnvDist)
	if dir == "" {
		t.Skip(EnvDist + " is not set: `make test-node` runs `make release` into a directory and sets it; see docs/testing.md")
	}
	return dir
}

// TestDist checks that the release directory `make release` wrote is
// complete and what it says it is: exactly the files of this version;
// SHA256SUMS lists each of them and every sum verifies; each binary is a
// static ELF executable for its platform, and the one for this machine's
// prints this version and a revision; the image archive holds both
// platforms under this version's name, labelled with it, with its binaries
// built for each; install.yaml runs that image and nothing else of ours;
// and the chart package carries this version as version and appVersion,
// with its schema.
func TestDist(t *testing.T) {
	dir := requireDist(t)
	v := releaseVersion(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("cannot read %s: %v", dir, err)
	}
	var got []string
	for _, e := range entries {
		if e.Name() != "SHA256SUMS" && !slices.Contains(signatureFiles, e.Name()) {
			got = append(got, e.Name())
		}
	}
	if diff := cmp.Diff(distFiles(v), got); diff != "" {
		t.Errorf("files in %s: -want, +got:\n%s", dir, diff)
	}

	t.Run("SHA256SUMS", func(t *testing.T) {
		sums := readSums(t, filepath.Join(dir, "SHA256SUMS"))
		if diff := cmp.Diff(distFiles(v), slices.Sorted(maps.Keys(sums))); diff != "" {
			t.Errorf("files SHA256SUMS lists: -want, +got:\n%s", diff)
		}
		for name, want := range sums {
			if got, err := sha256File(filepath.Join(dir, name)); err != nil || got != want {
				t.Errorf("%s: SHA256 %s (%v), SHA256SUMS says %s", name, got, err, want)
			}
		}
	})
	t.Run("SBOMs", func(t *testing.T) { checkSBOMs(t, dir, v) })
	t.Run("provenance", func(t *testing.T) { checkProvenance(t, dir, v) })
	t.Run("kubectl plugin and krew manifest", func(t *testing.T) { checkPlugin(t, dir, v) })
	t.Run("signature", func(t *testing.T) { checkSignature(t, dir) })
	t.Run("binaries", func(t *testing.T) {
		for arch, machine := range releaseArchs {
			for _, bin := range releaseBinaries {
				path := filepath.Join(dir, bin+"-"+v+"-linux-"+arch)
				checkStaticELF(t, path, machine)
				if arch == runtime.GOARCH {
					out, err := exec.Command(path, "version").Output()
					want := regexp.MustCompile(`^` + bin + ` ` + regexp.QuoteMeta(v) + ` \(revision [0-9a-f]{40}, go\S+\)\n$`)
					if err != nil || !want.Match(out) {
						t.Errorf("%s version: %q (%v), want it to match %s", path, out, err, want)
					}
				}
			}
		}
	})
	t.Run("image", func(t *testing.T) {
		img, err := ReadOCIArchive(filepath.Join(dir, "formspec-hooks-image-"+v+".oci.tar"), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if img.Name != releaseImage(v) || img.Tag != v {
			t.Errorf("the image archive names %q (tag %q), want %q (tag %q)", img.Name, img.Tag, releaseImage(v), v)
		}
		for arch, machine := range releaseArchs {
			p, ok := img.Platforms["linux/"+arch]
			if !ok {
				t.Errorf("the image has no linux/%s (it has %v)", arch, slices.Sorted(maps.Keys(img.Platforms)))
				continue
			}
			if got := p.Labels["org.opencontainers.image.version"]; got != v {
				t.Errorf("linux/%s: label org.opencontainers.image.version %q, want %q", arch, got, v)
			}
			want := map[string]string{}
			for _, bin := range imageBinaries {
				want["usr/local/bin/"+bin] = machine.String()
			}
			if diff := cmp.Diff(want, p.Machines); diff != "" {
				t.Errorf("linux/%s: executables and their machines: -want, +got:\n%s", arch, diff)
			}
		}
		if len(img.Platforms) != len(releaseArchs) {
			t.Errorf("the image has %d platforms, want %d", len(img.Platforms), len(releaseArchs))
		}
		for platform, p := range img.Platforms {
			checkRuntimeFiles(t, "the release's image, "+platform, p)
			rev := p.Labels["org.opencontainers.image.revision"]
			out, err := exec.Command("git", "-C", controlplane.RepoRoot(t), "show", "-s", "--format=%ct", rev).Output()
			if err != nil {
				t.Errorf("%s: git show %s (the revision label): %v", platform, rev, err)
				continue
			}
			sec, _ := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
			if want := time.Unix(sec, 0).UTC(); !p.Created.Equal(want) {
				t.Errorf("%s: the image was created %v, want its commit's time %v", platform, p.Created, want)
			}
			if diff := cmp.Diff(installPorts(t, dir), slices.Sorted(maps.Keys(p.Config.ExposedPorts))); diff != "" {
				t.Errorf("%s: exposed ports: -want (install.yaml's hooks container), +got:\n%s", platform, diff)
			}
		}
	})
	t.Run("install.yaml", func(t *testing.T) {
		objs, err := controlplane.ReadYAMLFile(filepath.Join(dir, "install.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		images := map[string]bool{}
		kinds := map[string]int{}
		for _, obj := range objs {
			kind, _ := obj["kind"].(string)
			kinds[kind]++
			if kind != "Deployment" {
				continue
			}
			containers, _ := get2(obj, "spec", "template", "spec", "containers").([]any)
			for _, c := range containers {
				img, _ := get2(c, "image").(string)
				images[img] = true
			}
		}
		pinned := releaseImage(v) + "@" + imageDigest(t, dir, v)
		if diff := cmp.Diff(map[string]bool{pinned: true}, images); diff != "" {
			t.Errorf("images install.yaml runs: -want, +got:\n%s", diff)
		}
		if kinds["CustomResourceDefinition"] != 4 || kinds["Deployment"] != 1 || kinds["Certificate"] == 0 {
			t.Errorf("install.yaml has %v; want the 4 CRDs, the Deployment and its Certificate, as kubectl apply -k deploy/", kinds)
		}
	})
	t.Run("chart", func(t *testing.T) {
		files := readTarGz(t, filepath.Join(dir, "formspec-hooks-"+v+".tgz"))
		objs, err := controlplane.DecodeYAML(files["formspec-hooks/Chart.yaml"])
		if err != nil || len(objs) != 1 {
			t.Fatalf("the package's Chart.yaml: %v (%d documents)", err, len(objs))
		}
		if got := [2]any{objs[0]["version"], objs[0]["appVersion"]}; got != [2]any{v, v} {
			t.Errorf("the package's version and appVersion are %v, want %s", got, v)
		}
		values, err := controlplane.DecodeYAML(files["formspec-hooks/values.yaml"])
		if err != nil || len(values) != 1 {
			t.Fatalf("the package's values.yaml: %v", err)
		}
		if got, want := get2(values[0], "image", "digest"), imageDigest(t, dir, v); got != want {
			t.Errorf("the package's image.digest is %v, want the image archive's %s", got, want)
		}
		for _, name := range []string{"formspec-hooks/values.yaml", "formspec-hooks/values.schema.json", "formspec-hooks/templates/deployment.yaml", "formspec-hooks/crds/formspec.dev_workspaces.yaml"} {
			if files[name] == nil {
				t.Errorf("the chart package lacks %s", name)
			}
		}
	})
}

// imageDigest is the digest of the release's image archive's image index.
func imageDigest(t *testing.T, dir, v string) string {
	t.Helper()
	img, err := ReadOCIArchive(filepath.Join(dir, "formspec-hooks-image-"+v+".oci.tar"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return img.Digest
}

// installPorts are the container ports of install.yaml's hooks
// container, as port/tcp, sorted.
func installPorts(t *testing.T, dir string) []string {
	t.Helper()
	objs, err := controlplane.ReadYAMLFile(filepath.Join(dir, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, obj := range objs {
		if obj["kind"] != "Deployment" {
			continue
		}
		containers, _ := get2(obj, "spec", "template", "spec", "containers").([]any)
		for _, c := range containers {
			if get2(c, "name") != "hooks" {
				continue
			}
			list, _ := get2(c, "ports").([]any)
			for _, p := range list {
				ports = append(ports, fmt.Sprintf("%v/tcp", get2(p, "containerPort")))
			}
		}
	}
	slices.Sort(ports)
	return ports
}

// get2 is the value at a path of maps, or nil.
func get2(v any, path ...string) any {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// readSums parses a sha256sum file: "<hex>  <name>" per line.
func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sums := map[string]string{}
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Errorf("%s: %q is not \"<sha256>  <file>\"", path, sc.Text())
			continue
		}
		sums[m[2]] = m[1]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return sums
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkStaticELF checks that path is an executable ELF file for machine
// that needs no dynamic loader (CGO_ENABLED=0).
func checkStaticELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	defer func() { _ = f.Close() }()
	if f.Machine != machine || f.Type != elf.ET_EXEC {
		t.Errorf("%s: %s %s, want an executable for %s", path, f.Type, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", path)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable (%v)", path, err)
	}
}

// readTarGz returns the regular files of a .tgz by name.
func readTarGz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReleaseInstall installs the release as a user would, each install on
// a cluster of its own with only the release's image archive (and the
// pause image) imported, so that nothing built by the tests runs:
// install.yaml with `kubectl apply -f` after its prerequisites (the token
// Secret docs/install.md has users make, and, standing in for
// cert-manager, which is not built here, its CRDs and the serving Secret
// it would issue for the install's Certificate); and the packaged chart
// with nothing but defaultVersion set, as `helm install` would render it.
// Each time the hook pods turn Ready under the image's own name and tag
// (IfNotPresent: nothing is pulled), run as their securityContext says,
// and answer every fixture over TLS with the token.
func TestReleaseInstall(t *testing.T) {
	RequirePrerequisites(t)
	dir := requireDist(t)
	v := releaseVersion(t)
	images := []string{filepath.Join(dir, "formspec-hooks-image-"+v+".oci.tar"), pauseArchive(t)}

	t.Run("install.yaml", func(t *testing.T) {
		tm := NewTimings(t)
		c := Start(t, tm, images...)
		c.installManifest(t, filepath.Join(dir, "install.yaml"))
		tm.Phase("install.yaml applied, hook pods Ready")
		c.checkHookImage(t, dir)
		t.Run("pods run as their securityContext says", func(t *testing.T) { c.checkHookProcesses(t) })
		t.Run("hooks answer through the Service over TLS with the token", func(t *testing.T) { c.checkTLSAndToken(t) })
		tm.Phase("checks")
	})
	t.Run("chart", func(t *testing.T) {
		tm := NewTimings(t)
		c := Start(t, tm, images...)
		c.helmInstallChart(t, filepath.Join(dir, "formspec-hooks-"+v+".tgz"), "defaultVersion: "+workspaceVersion+"\n")
		tm.Phase("packaged chart applied, hook pods Ready")
		c.checkHookImage(t, dir)
		t.Run("hooks answer through the Service over TLS with the token", func(t *testing.T) { c.checkTLSAndToken(t) })
		tm.Phase("checks")
	})
}

// pauseArchive builds the pause image, containerd's sandbox image, alone.
func pauseArchive(t *testing.T) string {
	t.Helper()
	nodeDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	img, err := programImage(nodeDir, work, PauseImage, "pause", "65535:65535")
	if err != nil {
		t.Fatalf("cannot build the pause image: %v", err)
	}
	archive := filepath.Join(work, "pause.tar")
	if err := img.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	return archive
}

// installManifest applies a release's install.yaml the way docs/install.md
// says, on a cluster without cert-manager: Metacontroller's CRDs (a
// prerequisite), stand-ins for cert-manager's, the namespace and the token
// Secret, then the manifest; then it plays cert-manager's part, issuing
// the install's Certificate into its Secret from a CA of its own, and
// waits for the hook Deployment.
func (c *Cluster) installManifest(t *testing.T, manifest string) {
	t.Helper()
	client := c.Client()
	if err := client.InstallCRDs(controlplane.MetacontrollerCRDs(t), controlplane.CertManagerCRDs(t)); err != nil {
		t.Fatalf("cannot install the prerequisite CRDs: %v", err)
	}
	c.kubectl(t, "create", "namespace", hooksNamespace)
	token := "release-test-token"
	c.kubectl(t, "-n", hooksNamespace, "create", "secret", "generic", hooksName+"-token",
		"--from-literal=tokens="+token, "--from-literal=token="+token)
	c.kubectl(t, "apply", "-f", manifest)

	cert, err := client.Get("cert-manager.io/v1", "Certificate", hooksNamespace, hooksName)
	if err != nil {
		t.Fatalf("install.yaml made no Certificate %s/%s: %v", hooksNamespace, hooksName, err)
	}
	var dnsNames []string
	names, _ := get2(cert, "spec", "dnsNames").([]any)
	for _, n := range names {
		dnsNames = append(dnsNames, n.(string))
	}
	ca, err := controlplane.NewCA("release-test-ca")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServing(dnsNames[0], dnsNames, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := controlplane.Object{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata":   map[string]any{"name": stringField(cert, "spec", "secretName"), "namespace": hooksNamespace},
		"stringData": map[string]any{"tls.crt": string(certPEM), "tls.key": string(keyPEM), "ca.crt": string(ca.CertPEM)},
	}
	if _, err := client.Create(secret); err != nil {
		t.Fatalf("cannot create the serving Secret cert-manager would: %v", err)
	}
	c.waitDeploymentReady(t, hooksNamespace, hooksName)
}

// checkHookImage checks that both containers of the hook pods run the
// release's image, by its tag and its digest, as the release's
// install.yaml and chart name it.
func (c *Cluster) checkHookImage(t *testing.T, dir string) {
	t.Helper()
	v := releaseVersion(t)
	want := releaseImage(v) + "@" + imageDigest(t, dir, v)
	d, err := c.Client().Get("apps/v1", "Deployment", hooksNamespace, hooksName)
	if err != nil {
		t.Fatal(err)
	}
	containers, _ := get2(d, "spec", "template", "spec", "containers").([]any)
	for _, ct := range containers {
		if img := stringField(ct.(map[string]any), "image"); img != want {
			t.Errorf("container %s runs %s, want the release's %s", stringField(ct.(map[string]any), "name"), img, want)
		}
	}
}
