package node

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

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

// TestHooksImageInStepWithDockerfile builds the test cluster's project image
// from the repository's Dockerfile and checks that it is what a docker build
// of the Dockerfile would give where it matters to a pod: the same
// binaries, built with the same flags, at the same paths, and the same
// user, entrypoint, command, labels and ports. The test image is derived
// from the Dockerfile, so the two stay in step by construction; this test
// fails when the Dockerfile gains something the derivation does not
// reproduce.
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

	stage, err := ParseFinalStage(dockerfile, nil)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	img, err := HooksImageFrom(root, work, Build{})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(work, "hooks.tar")
	if err := img.WriteArchive(archive); err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]struct{}{}
	for _, p := range stage.ExposedPorts {
		ports[p] = struct{}{}
	}
	want := v1.Config{
		User:         stage.User,
		Entrypoint:   stage.Entrypoint,
		Cmd:          stage.Cmd,
		Labels:       stage.Labels,
		ExposedPorts: ports,
	}
	got := v1.Config{
		User:         cf.Config.User,
		Entrypoint:   cf.Config.Entrypoint,
		Cmd:          cf.Config.Cmd,
		Labels:       cf.Config.Labels,
		ExposedPorts: cf.Config.ExposedPorts,
	}
	if len(want.Labels) == 0 {
		want.Labels = nil
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image config: -want (Dockerfile final stage), +got (test image):\n%s", diff)
	}

	var wantFiles, gotFiles []string
	for _, c := range stage.Copies {
		for _, src := range c.Sources {
			wantFiles = append(wantFiles, filepath.Join(c.Dest, filepath.Base(src)))
		}
	}
	for _, f := range img.Files {
		if !f.Dir && f.Mode&0o111 != 0 {
			gotFiles = append(gotFiles, f.Path)
		}
	}
	slices.Sort(wantFiles)
	slices.Sort(gotFiles)
	if diff := cmp.Diff(wantFiles, gotFiles); diff != "" {
		t.Errorf("executables: -want (Dockerfile COPY), +got (test image):\n%s", diff)
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
// configuration; written twice, the bytes are the same.
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
	if err := WriteOCIArchive(archive, "example.com/demo:1.2.3", images...); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "again.oci.tar")
	if err := WriteOCIArchive(again, "example.com/demo:1.2.3", images...); err != nil {
		t.Fatal(err)
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
		Name: "example.com/demo:1.2.3",
		Tag:  "1.2.3",
		Platforms: map[string]OCIPlatform{
			"linux/amd64": {Labels: map[string]string{"org.opencontainers.image.version": "1.2.3"}, Files: []string{"bin/demo"}},
			"linux/arm64": {Labels: map[string]string{"org.opencontainers.image.version": "1.2.3"}, Files: []string{"bin/demo"}},
		},
	}
	if diff := cmp.Diff(want, index); diff != "" {
		t.Errorf("archive read back: -want, +got:\n%s", diff)
	}
}
