package node

import (
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/formspec/formspec-hooks/test/controlplane"
)

// containerBuilder is the first container builder that can build here:
// a Docker daemon that answers, podman or buildah; "" when none can.
func containerBuilder() string {
	if exec.Command("docker", "info").Run() == nil {
		return "docker"
	}
	for _, b := range []string{"podman", "buildah"} {
		if _, err := exec.LookPath(b); err == nil {
			return b
		}
	}
	return ""
}

// TestMakeImageMatchesRelease builds the image with `make image` (the
// Dockerfile, with whichever container builder runs here) and compares it
// with the release's image archive for this machine's platform: every
// file and directory (type, mode, owner, content) and the configuration
// (user, entrypoint, command, working directory, environment, labels,
// ports, creation date). The two must be one image built two ways. It
// needs a container builder and the network the Dockerfile's base image
// comes from, so it skips, saying so, where there is none.
func TestMakeImageMatchesRelease(t *testing.T) {
	dir := requireDist(t)
	builder := containerBuilder()
	if builder == "" {
		t.Skip("no container builder runs here (no Docker daemon answers `docker info`, no podman or buildah): `make image` cannot be compared with the release")
	}
	root := controlplane.RepoRoot(t)
	v := releaseVersion(t)
	const name = "formspec.test/make-image"
	out, err := exec.Command("make", "-C", root, "image", "BUILDER="+builder, "IMAGE="+name).CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	archive := filepath.Join(t.TempDir(), "image.tar")
	save := map[string][]string{
		"docker":  {"docker", "save", "-o", archive, name + ":" + v},
		"podman":  {"podman", "save", "--format", "docker-archive", "-o", archive, name + ":" + v},
		"buildah": {"buildah", "push", name + ":" + v, "docker-archive:" + archive},
	}[builder]
	if out, err := exec.Command(save[0], save[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(save, " "), err, out)
	}
	t.Cleanup(func() { _ = exec.Command(builder, "rmi", name+":"+v).Run() })
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	built, err := readPlatform(img, false)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := ReadOCIArchive(filepath.Join(dir, "formspec-hooks-image-"+v+".oci.tar"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	released := rel.Platforms["linux/"+runtime.GOARCH]
	config := func(p OCIPlatform) v1.Config {
		return v1.Config{User: p.Config.User, Entrypoint: p.Config.Entrypoint, Cmd: p.Config.Cmd, WorkingDir: p.Config.WorkingDir,
			Env: p.Config.Env, Labels: p.Config.Labels, ExposedPorts: p.Config.ExposedPorts}
	}
	if diff := cmp.Diff(config(released), config(built)); diff != "" {
		t.Errorf("configuration: -want (release), +got (make image):\n%s", diff)
	}
	if !built.Created.Equal(released.Created) {
		t.Errorf("make image's image was created %v, the release's %v", built.Created, released.Created)
	}
	if diff := cmp.Diff(entrySummary(released), entrySummary(built)); diff != "" {
		t.Errorf("files: -want (release), +got (make image):\n%s\n(binaries or time zones that differ in content alone: the Dockerfile's golang image may be another Go version than %s)", diff, runtimeGoVersion())
	}
}

// entrySummary is each entry of an image as one comparable line.
func entrySummary(p OCIPlatform) map[string]string {
	out := map[string]string{}
	for _, path := range slices.Sorted(maps.Keys(p.Entries)) {
		e := p.Entries[path]
		kind, sum := "file", sha256Hex(e.Data)
		if e.Dir {
			kind, sum = "dir", ""
		}
		out[path] = fmt.Sprintf("%s %04o %d:%d %s", kind, e.Mode&0o7777, e.UID, e.GID, sum)
	}
	return out
}

// runtimeGoVersion is the go command's version, which built the release.
func runtimeGoVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
