package node

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

func TestParseFinalStage(t *testing.T) {
	cases := map[string]struct {
		reason     string
		dockerfile string
		buildArgs  map[string]string
		want       *Stage
		wantErr    string
	}{
		"FinalStageOnly": {
			reason: "Instructions of earlier stages are not part of the image; ARGs are scoped to their stage.",
			dockerfile: `FROM golang AS build
ARG VERSION=dev
RUN go build ./...
# the image
FROM base:nonroot
ARG REV=abc
COPY --from=build /out/a /out/b /usr/local/bin/
USER 65532:65532
EXPOSE 8080 9090/udp
ENV A=1 B="two words"
LABEL org.opencontainers.image.source="https://example.com/x" \
      org.opencontainers.image.revision=$REV version=${VERSION}
ENTRYPOINT ["/usr/local/bin/a"]
CMD ["serve"]
`,
			want: &Stage{
				From:         "base:nonroot",
				Copies:       []Copy{{From: "build", Sources: []string{"/out/a", "/out/b"}, Dest: "/usr/local/bin/"}},
				User:         "65532:65532",
				Entrypoint:   []string{"/usr/local/bin/a"},
				Cmd:          []string{"serve"},
				Env:          []string{"A=1", "B=two words"},
				Labels:       map[string]string{"org.opencontainers.image.source": "https://example.com/x", "org.opencontainers.image.revision": "abc", "version": ""},
				ExposedPorts: []string{"8080/tcp", "9090/udp"},
			},
		},
		"BuildArgs": {
			reason:     "A build argument replaces its ARG's default, as --build-arg does; one for an undeclared ARG does nothing.",
			dockerfile: "FROM base\nARG VERSION=0.0.1\nARG REVISION=\nLABEL version=${VERSION} revision=${REVISION} other=${OTHER}\n",
			buildArgs:  map[string]string{"VERSION": "1.2.3", "OTHER": "x"},
			want: &Stage{
				From:   "base",
				Labels: map[string]string{"version": "1.2.3", "revision": "", "other": ""},
			},
		},
		"RunInFinalStage": {
			reason:     "A RUN changes the image in a way the test image cannot reproduce.",
			dockerfile: "FROM base\nRUN touch /x\n",
			wantErr:    "RUN in the final stage cannot be reproduced",
		},
		"ShellFormEntrypoint": {
			reason:     "A shell-form ENTRYPOINT needs a shell the distroless image does not have.",
			dockerfile: "FROM base\nENTRYPOINT /bin/a serve\n",
			wantErr:    "ENTRYPOINT must be in JSON form",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "Dockerfile")
			if err := os.WriteFile(path, []byte(tc.dockerfile), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ParseFinalStage(path, tc.buildArgs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nParseFinalStage: got error %v, want one containing %q", tc.reason, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParseFinalStage: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDockerfileCopiesEverySource checks that the Dockerfile's build stage
// copies in every folder of the repository that the two binaries are
// built from: a package or embedded file outside them would build here
// and fail in a docker build, which no test here runs.
func TestDockerfileCopiesEverySource(t *testing.T) {
	root := controlplane.RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var copied []string
	for _, inst := range instructions(string(data)) {
		f := strings.Fields(inst)
		if !strings.EqualFold(f[0], "COPY") || strings.HasPrefix(f[1], "--from") {
			continue
		}
		for _, src := range f[1 : len(f)-1] {
			copied = append(copied, filepath.Clean(src))
		}
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", "./cmd/formspec-hooks", "./cmd/formspec-reporter")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for dir := range strings.FieldsSeq(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module's, not the repository's
		}
		checked++
		top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		if !slices.Contains(copied, top) {
			t.Errorf("the binaries are built from %s, but the Dockerfile copies only %v: add COPY %s ./%s", rel, copied, top, top)
		}
	}
	if checked == 0 {
		t.Fatal("go list named no package of the repository")
	}
}

// rootfsRun is the build stage's RUN that writes the image's files besides
// the binaries, which HooksImageFrom reproduces with imagefs.Files.
const rootfsRun = "RUN go run ./internal/imagefs/rootfs /rootfs"

// TestHooksImageInStepWithDockerfile builds the project's image from the
// repository's Dockerfile, as `make release` does, and checks that it is
// what a docker build of the Dockerfile would give: the build stage runs
// what HooksImageFrom reproduces (the go build flags, the rootfs command),
// and the image has the final stage's user, entrypoint, command, working
// directory, environment, labels and ports, its creation date from
// SOURCE_DATE_EPOCH, the binaries its COPY names and the files a program
// in it needs at run time. The image is derived from the Dockerfile, so
// the two stay in step by construction; this test fails when the
// Dockerfile gains something the derivation does not reproduce.
func TestHooksImageInStepWithDockerfile(t *testing.T) {
	root := controlplane.RepoRoot(t)
	dockerfile := filepath.Join(root, "Dockerfile")
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, inst := range instructions(string(data)) {
		if strings.HasPrefix(inst, "RUN ") && strings.Contains(inst, "go build ") {
			line = strings.Join(strings.Fields(strings.ReplaceAll(inst, `"`, "")), " ")
		}
	}
	if line == "" {
		t.Fatal("no RUN ... go build in the Dockerfile")
	}
	for _, want := range append([]string{"CGO_ENABLED=0"}, goBuildFlags("${REVISION}")...) {
		if !strings.Contains(line, want) {
			t.Errorf("the Dockerfile builds with %q, which lacks %q that test/node/images.go builds with", line, want)
		}
	}
	if !slices.Contains(instructions(string(data)), rootfsRun) {
		t.Errorf("the Dockerfile's build stage lacks %q, whose files test/node/images.go puts into the image", rootfsRun)
	}

	stage, err := ParseFinalStage(dockerfile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if stage.From != "scratch" {
		t.Errorf("the final stage is FROM %s; the release builds on nothing but internal/imagefs (FROM scratch)", stage.From)
	}
	work := t.TempDir()
	const epoch = 1767225600 // 2026-01-01T00:00:00Z
	img, err := HooksImageFrom(root, work, Build{Args: map[string]string{"SOURCE_DATE_EPOCH": strconv.Itoa(epoch)}})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(work, "hooks.oci.tar")
	if _, err := WriteOCIArchive(archive, "example.com/hooks:test", img); err != nil {
		t.Fatal(err)
	}
	read, err := ReadOCIArchive(archive, filepath.Join(work, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	p := read.Platforms["linux/"+img.Arch]
	ports := map[string]struct{}{}
	for _, port := range stage.ExposedPorts {
		ports[port] = struct{}{}
	}
	want := v1.Config{
		User:         stage.User,
		Entrypoint:   stage.Entrypoint,
		Cmd:          stage.Cmd,
		WorkingDir:   stage.WorkingDir,
		Env:          stage.Env,
		Labels:       stage.Labels,
		ExposedPorts: ports,
	}
	if len(want.Labels) == 0 {
		want.Labels = nil
	}
	if diff := cmp.Diff(want, p.Config); diff != "" {
		t.Errorf("image config: -want (Dockerfile final stage), +got (built image):\n%s", diff)
	}
	if want := time.Unix(epoch, 0).UTC(); !p.Created.Equal(want) {
		t.Errorf("image created %v, want SOURCE_DATE_EPOCH's %v", p.Created, want)
	}

	var wantFiles, gotFiles []string
	for _, c := range stage.Copies {
		for _, src := range c.Sources {
			if path.Dir(src) == "/out" {
				wantFiles = append(wantFiles, strings.TrimPrefix(path.Join(c.Dest, path.Base(src)), "/"))
			}
		}
	}
	for name, e := range p.Entries {
		if !e.Dir && e.Mode&0o111 != 0 {
			gotFiles = append(gotFiles, name)
		}
	}
	slices.Sort(wantFiles)
	slices.Sort(gotFiles)
	if diff := cmp.Diff(wantFiles, gotFiles); diff != "" {
		t.Errorf("executables: -want (Dockerfile COPY), +got (built image):\n%s", diff)
	}
	checkRuntimeFiles(t, "the built image", p)
}

// checkRuntimeFiles checks an image's files for what its programs need at
// run time: a user other than root; the CA bundle at the path SSL_CERT_FILE names, with only
// certificates in it; the time zones where Go looks; the image's user in
// /etc/passwd, with the working directory as its home; a working
// directory that user owns and may write, but no other user; and /tmp,
// writable by all with the sticky bit.
func checkRuntimeFiles(t *testing.T, what string, p OCIPlatform) {
	t.Helper()
	env := map[string]string{}
	for _, kv := range p.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	caFile := env["SSL_CERT_FILE"]
	if caFile == "" {
		t.Errorf("%s: no SSL_CERT_FILE in %v", what, p.Config.Env)
	}
	ca, ok := p.Entries[strings.TrimPrefix(caFile, "/")]
	if !ok || ca.Dir {
		t.Errorf("%s: no CA bundle at SSL_CERT_FILE %q", what, caFile)
	} else {
		n := 0
		for rest := ca.Data; ; n++ {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				if len(bytes.TrimSpace(rest)) != 0 {
					t.Errorf("%s: %s has something else than PEM after certificate %d", what, caFile, n)
				}
				break
			}
			if _, err := x509.ParseCertificate(b.Bytes); err != nil {
				t.Errorf("%s: %s: certificate %d: %v", what, caFile, n, err)
			}
		}
		if n < 50 {
			t.Errorf("%s: %s holds %d certificates, want the public roots", what, caFile, n)
		}
	}
	if zone, ok := p.Entries["usr/share/zoneinfo/America/New_York"]; !ok {
		t.Errorf("%s: no time zones in /usr/share/zoneinfo", what)
	} else if _, err := time.LoadLocationFromTZData("America/New_York", zone.Data); err != nil {
		t.Errorf("%s: America/New_York: %v", what, err)
	}

	uid, gid, err := numericUser(p.Config.User)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if uid == 0 {
		t.Errorf("%s runs as root (USER %q); it must run as a user of its own", what, p.Config.User)
	}
	wd := p.Config.WorkingDir
	if !strings.Contains(string(p.Entries["etc/passwd"].Data), fmt.Sprintf(":x:%d:%d:", uid, gid)) || !strings.Contains(string(p.Entries["etc/passwd"].Data), ":"+wd+":") {
		t.Errorf("%s: /etc/passwd names no user %d:%d with home %s:\n%s", what, uid, gid, wd, p.Entries["etc/passwd"].Data)
	}
	dir, ok := p.Entries[strings.Trim(wd, "/")]
	switch {
	case wd == "" || !ok || !dir.Dir:
		t.Errorf("%s: the working directory %q is not a directory of the image", what, wd)
	case dir.UID != uid || dir.GID != gid || dir.Mode&0o700 != 0o700 || dir.Mode&0o022 != 0:
		t.Errorf("%s: the working directory %s is owned by %d:%d with mode %o; want the image's user %d:%d, writable by it alone", what, wd, dir.UID, dir.GID, dir.Mode, uid, gid)
	}
	if tmp := p.Entries["tmp"]; !tmp.Dir || tmp.Mode&0o1777 != 0o1777 {
		t.Errorf("%s: /tmp is %+v, want a directory with mode 1777", what, tmp)
	}
}

func TestIPTablesCleanup(t *testing.T) {
	cases := map[string]struct {
		reason string
		dump   string
		want   string
	}{
		"Nothing": {
			reason: "A table without node chains needs nothing.",
			dump:   "*filter\n:INPUT ACCEPT\n-A INPUT -i lo -j ACCEPT\nCOMMIT",
			want:   "",
		},
		"JumpsThenChains": {
			reason: "Rules jumping to a node chain from another chain go first, then the node chains are flushed and deleted; rules inside node chains go with them.",
			dump: `*filter
:INPUT ACCEPT
:FORWARD ACCEPT
:KUBE-FIREWALL -
:FORMSPEC-NODE-ISOLATION -
-A INPUT -j KUBE-FIREWALL
-A INPUT -i lo -j ACCEPT
-A FORWARD -j FORMSPEC-NODE-ISOLATION
-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -j DROP
COMMIT
*nat
:PREROUTING ACCEPT
COMMIT`,
			want: `*filter
-D INPUT -j KUBE-FIREWALL
-D FORWARD -j FORMSPEC-NODE-ISOLATION
-F KUBE-FIREWALL
-F FORMSPEC-NODE-ISOLATION
-X KUBE-FIREWALL
-X FORMSPEC-NODE-ISOLATION
COMMIT
`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, iptablesCleanup(tc.dump)); diff != "" {
				t.Errorf("%s\niptablesCleanup: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWriteOCIArchive writes a two-platform image and reads it back as
// containerd would: an OCI layout whose index.json names the image, with
// one manifest per platform, OCI media types, and each platform's own
// configuration; written twice, the bytes are the same; and ImportImage
// also tags it repository@digest, by the digest WriteOCIArchive returned.
func TestWriteOCIArchive(t *testing.T) {
	dir := t.TempDir()
	var images []Image
	for _, arch := range []string{"amd64", "arm64"} {
		images = append(images, Image{
			Name:   "example.com/demo:ignored",
			Arch:   arch,
			Files:  []File{{Path: "/bin/demo", Mode: 0o755, Data: []byte("#!" + arch)}},
			Config: v1.Config{User: nonroot, Labels: map[string]string{"org.opencontainers.image.version": "1.2.3"}},
		})
	}
	archive := filepath.Join(dir, "demo.oci.tar")
	digest, err := WriteOCIArchive(archive, "example.com/demo:1.2.3", images...)
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "again.oci.tar")
	if _, err := WriteOCIArchive(again, "example.com/demo:1.2.3", images...); err != nil {
		t.Fatal(err)
	}
	refs, err := ociDigestRefs(archive)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"example.com/demo:1.2.3": "example.com/demo@" + digest}, refs); diff != "" {
		t.Errorf("the references ImportImage tags the image with: -want, +got:\n%s", diff)
	}
	a, _ := os.ReadFile(archive)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("two archives of the same images differ")
	}

	index, err := ReadOCIArchive(archive, filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	want := OCIImage{
		Name:   "example.com/demo:1.2.3",
		Tag:    "1.2.3",
		Digest: digest,
		Platforms: map[string]OCIPlatform{
			"linux/amd64": {Labels: map[string]string{"org.opencontainers.image.version": "1.2.3"}, Files: []string{"bin/demo"}},
			"linux/arm64": {Labels: map[string]string{"org.opencontainers.image.version": "1.2.3"}, Files: []string{"bin/demo"}},
		},
	}
	if diff := cmp.Diff(want, index, cmpopts.IgnoreFields(OCIPlatform{}, "Config", "Created", "Entries")); diff != "" {
		t.Errorf("archive read back: -want, +got:\n%s", diff)
	}
}
