package node

import (
	"archive/tar"
	"bytes"
	"cmp"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/formspec/formspec-hooks/internal/imagefs"
)

// The names the images are imported under. Only the tag differs from what
// users run (deploy/ and the hooks' defaults), and it is not latest, so
// that the kubelet's default pull policy (IfNotPresent) never pulls.
const (
	// HooksImage is the name HooksImageFrom gives the project's image;
	// the cluster tests do not run it but the release's (hooksImage), and
	// `make release` names it by the version.
	HooksImage = "ghcr.io/formspec/formspec-hooks:node-test"
	// WorkspaceImage stands in for the resource image workspaces run
	// (--resource-image formahub/formspec-resource, spec.version node-test).
	WorkspaceImage = "docker.io/formahub/formspec-resource:node-test"
	// WorkspaceVersion is the spec.version that selects WorkspaceImage.
	WorkspaceVersion = "node-test"
	// MetacontrollerImage runs METACONTROLLER_BIN.
	MetacontrollerImage = "formspec.test/metacontroller:node-test"
)

// nonroot is the user distroless' :nonroot images run as.
const nonroot = "65532"

// goBuildFlags are the Dockerfile's go build flags, with its REVISION
// argument (TestHooksImageInStepWithDockerfile checks that they still are).
func goBuildFlags(revision string) []string {
	return []string{"-trimpath", "-ldflags=-s -w -X github.com/formspec/formspec-hooks/internal/buildinfo.revision=" + revision}
}

// Build says how HooksImageFrom builds the image, as the options of a
// container build would.
type Build struct {
	// Arch is the GOARCH of the binaries and the image (empty: this
	// machine's).
	Arch string
	// Args are the Dockerfile's build arguments (--build-arg), such as
	// VERSION and REVISION; an ARG without one keeps its default.
	Args map[string]string
}

// arch is b.Arch, or this machine's.
func (b Build) arch() string { return cmp.Or(b.Arch, goArch()) }

// File is one regular file or directory of an image, with its owner.
type File = imagefs.File

// Image is a single-layer linux image.
type Image struct {
	Name   string
	Files  []File
	Config v1.Config
	// Arch is the image's architecture (empty: this machine's).
	Arch string
	// Created is the configuration's creation date (zero: none, which
	// go-containerregistry writes as the epoch).
	Created time.Time
}

// WriteArchive writes img as a docker archive (what `docker save` writes and
// `ctr images import` reads) with img.Name as its tag. The layer's
// timestamps are zero, so the same files give the same image.
func (img Image) WriteArchive(path string) error {
	out, err := img.image(false)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(img.Name)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(path, tag, out); err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return nil
}

// image is img for go-containerregistry, with OCI media types or Docker's.
func (img Image) image(oci bool) (v1.Image, error) {
	layerTar, err := img.layer()
	if err != nil {
		return nil, err
	}
	var layerOpts []tarball.LayerOption
	base := empty.Image
	if oci {
		layerOpts = append(layerOpts, tarball.WithMediaType(types.OCILayer))
		base = mutate.ConfigMediaType(mutate.MediaType(base, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, layerOpts...)
	if err != nil {
		return nil, fmt.Errorf("cannot make the layer of %s: %w", img.Name, err)
	}
	out, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return nil, err
	}
	cf, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", cmp.Or(img.Arch, goArch())
	cf.Config = img.Config
	cf.Created = v1.Time{Time: img.Created}
	return mutate.ConfigFile(out, cf)
}

// layer is the image's files as a tar stream, parents before children.
func (img Image) layer() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	written := map[string]bool{}
	var mkdirs func(dir string) error
	mkdirs = func(dir string) error {
		if dir == "/" || dir == "." || written[dir] {
			return nil
		}
		if err := mkdirs(path.Dir(dir)); err != nil {
			return err
		}
		written[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(dir, "/") + "/", Mode: 0o755, ModTime: time.Unix(0, 0)})
	}
	files := slices.Clone(img.Files)
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range files {
		if err := mkdirs(path.Dir(f.Path)); err != nil {
			return nil, err
		}
		if f.Dir {
			written[f.Path] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(f.Path, "/") + "/", Mode: f.Mode, Uid: f.UID, Gid: f.GID, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Uid: f.UID, Gid: f.GID, Size: int64(len(f.Data)), ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func goArch() string {
	out, err := exec.Command("go", "env", "GOARCH").Output()
	if err != nil {
		return "amd64"
	}
	return strings.TrimSpace(string(out))
}

// distrolessBase stands in for gcr.io/distroless/static's files that a Go
// program may touch, for the images of test programs and of a revision
// whose Dockerfile still built on distroless (TestUpgrade's previous
// version): the users (root, nobody, nonroot 65532), a world-writable /tmp
// and nonroot's home. It has no CA bundle or time zones: nothing in the
// cluster leaves those images. The project's image no longer has a base:
// its own files are internal/imagefs.
func distrolessBase() []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: "/home/nonroot", Mode: 0o700, Dir: true, UID: 65532, GID: 65532},
	}
}

// distrolessEnv is the environment distroless images set.
var distrolessEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}

// goBuild builds Go packages statically (CGO_ENABLED=0) with the
// Dockerfile's flags for this machine, in the module at dir, into out.
func goBuild(dir, out string, pkgs ...string) error {
	return goBuildFor(dir, out, Build{}, pkgs...)
}

// goBuildFor is goBuild for b's architecture and REVISION.
func goBuildFor(dir, out string, b Build, pkgs ...string) error {
	args := append(append([]string{"build"}, goBuildFlags(b.Args["REVISION"])...), "-o", out+"/")
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+b.arch())
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", strings.Join(pkgs, " "), err, b)
	}
	return nil
}

// HooksImageFrom builds the project's image the way the Dockerfile at root
// describes it, as a container build with b's architecture and build
// arguments would, without one. The build stage is not run but
// reproduced: its /out/<name> is ./cmd/<name> built with the Dockerfile's
// flags, and its /rootfs/ what ./internal/imagefs/rootfs writes there
// (imagefs.Files, in this process). The final stage's base is empty for
// FROM scratch (a distroless base, of an older revision, gets a stand-in);
// each COPY --from=build puts those files where it says; WORKDIR creates
// the working directory, when no COPY did, owned by the USER in effect
// then (root without one) with mode 0755, as BuildKit does; and the configuration gets the stage's user,
// entrypoint, command, environment, labels and ports, and the
// SOURCE_DATE_EPOCH build argument as its creation date, as BuildKit
// does. work is a scratch directory.
func HooksImageFrom(root, work string, b Build) (Image, error) {
	stage, err := ParseFinalStage(filepath.Join(root, "Dockerfile"), b.Args)
	if err != nil {
		return Image{}, err
	}
	work = filepath.Join(work, b.arch())
	img := Image{
		Name: HooksImage,
		Arch: b.arch(),
		Config: v1.Config{
			User:         stage.User,
			Entrypoint:   stage.Entrypoint,
			Cmd:          stage.Cmd,
			WorkingDir:   stage.WorkingDir,
			Env:          stage.Env,
			Labels:       stage.Labels,
			ExposedPorts: map[string]struct{}{},
		},
	}
	if epoch := b.Args["SOURCE_DATE_EPOCH"]; epoch != "" {
		sec, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil {
			return Image{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", epoch, err)
		}
		img.Created = time.Unix(sec, 0).UTC()
	}
	if stage.From != "scratch" {
		img.Files = distrolessBase()
		img.Config.Env = append(slices.Clone(distrolessEnv), stage.Env...)
		img.Config.WorkingDir = cmp.Or(stage.WorkingDir, "/home/nonroot")
	}
	for _, p := range stage.ExposedPorts {
		img.Config.ExposedPorts[p] = struct{}{}
	}
	for _, c := range stage.Copies {
		files, err := buildStageFiles(root, work, b, c)
		if err != nil {
			return Image{}, err
		}
		img.Files = append(img.Files, files...)
	}
	if wd := stage.WorkingDir; wd != "" && !slices.ContainsFunc(img.Files, func(f File) bool { return f.Path == wd }) {
		uid, gid, err := numericUser(cmp.Or(stage.WorkingDirUser, "0"))
		if err != nil {
			return Image{}, err
		}
		img.Files = append(img.Files, File{Path: wd, Mode: 0o755, Dir: true, UID: uid, GID: gid})
	}
	return img, nil
}

// buildStageFiles are the files one COPY --from of the final stage puts
// into the image, from the reproduced build stage.
func buildStageFiles(root, work string, b Build, c Copy) ([]File, error) {
	if c.From == "" {
		return nil, fmt.Errorf("Dockerfile: COPY %v from the build context is not reproduced by test/node/images.go", c.Sources)
	}
	var out []File
	var pkgs []string
	for _, src := range c.Sources {
		switch {
		case path.Clean(src) == "/rootfs":
			goroot, err := imagefs.GOROOT()
			if err != nil {
				return nil, err
			}
			files, err := imagefs.Files(goroot)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				f.Path = path.Join(c.Dest, f.Path)
				out = append(out, f)
			}
		case path.Dir(src) == "/out":
			pkgs = append(pkgs, "./cmd/"+path.Base(src))
		default:
			return nil, fmt.Errorf("Dockerfile: COPY --from=%s %s: test/node/images.go reproduces only /out/<binary> and /rootfs/ of the build stage", c.From, src)
		}
	}
	if len(pkgs) == 0 {
		return out, nil
	}
	if err := goBuildFor(root, work, b, pkgs...); err != nil {
		return nil, err
	}
	for _, pkg := range pkgs {
		name := path.Base(pkg)
		data, err := os.ReadFile(filepath.Join(work, name))
		if err != nil {
			return nil, err
		}
		dest := c.Dest
		if strings.HasSuffix(dest, "/") || len(c.Sources) > 1 {
			dest = path.Join(dest, name)
		}
		out = append(out, File{Path: dest, Mode: 0o755, Data: data})
	}
	return out, nil
}

// numericUser parses USER uid[:gid]; a build resolves names through the
// image's /etc/passwd, which this one need not.
func numericUser(user string) (uid, gid int, err error) {
	u, g, hasGroup := strings.Cut(user, ":")
	if uid, err = strconv.Atoi(u); err != nil {
		return 0, 0, fmt.Errorf("Dockerfile: USER %q: want a numeric uid:gid", user)
	}
	gid = uid
	if hasGroup {
		if gid, err = strconv.Atoi(g); err != nil {
			return 0, 0, fmt.Errorf("Dockerfile: USER %q: want a numeric uid:gid", user)
		}
	}
	return uid, gid, nil
}

// programImage is an image of one static program built from
// test/node/cmd/<program>, run as user.
func programImage(nodeDir, work, imageName, program, user string, ports ...string) (Image, error) {
	if err := goBuild(nodeDir, work, "./cmd/"+program); err != nil {
		return Image{}, err
	}
	data, err := os.ReadFile(filepath.Join(work, program))
	if err != nil {
		return Image{}, err
	}
	img := Image{
		Name:   imageName,
		Files:  append(distrolessBase(), File{Path: "/" + program, Mode: 0o755, Data: data}),
		Config: v1.Config{User: user, Entrypoint: []string{"/" + program}, Env: distrolessEnv, ExposedPorts: map[string]struct{}{}},
	}
	for _, p := range ports {
		img.Config.ExposedPorts[p] = struct{}{}
	}
	return img, nil
}

// MetacontrollerImageFrom packs the Metacontroller binary at bin the way
// Metacontroller's own distroless image does (/usr/bin/metacontroller, user
// nonroot). A dynamically linked binary gets the shared libraries it loads
// from this machine (its ELF interpreter and what ldd lists).
func MetacontrollerImageFrom(bin string) (Image, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return Image{}, err
	}
	img := Image{
		Name:   MetacontrollerImage,
		Files:  append(distrolessBase(), File{Path: "/usr/bin/metacontroller", Mode: 0o755, Data: data}),
		Config: v1.Config{User: nonroot + ":" + nonroot, Entrypoint: []string{"/usr/bin/metacontroller"}, Env: distrolessEnv},
	}
	libs, err := sharedLibraries(bin)
	if err != nil {
		return Image{}, err
	}
	for _, lib := range libs {
		b, err := os.ReadFile(lib)
		if err != nil {
			return Image{}, err
		}
		img.Files = append(img.Files, File{Path: lib, Mode: 0o755, Data: b})
	}
	return img, nil
}

var lddPath = regexp.MustCompile(`(/\S+) \(0x`)

// sharedLibraries lists the files a dynamically linked binary loads, or
// nothing for a static one.
func sharedLibraries(bin string) ([]string, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	dynamic := false
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			dynamic = true
		}
	}
	if !dynamic {
		return nil, nil
	}
	out, err := exec.Command("ldd", bin).Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %w", bin, err)
	}
	var libs []string
	for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
		real, err := filepath.EvalSymlinks(m[1])
		if err != nil {
			return nil, err
		}
		libs = append(libs, m[1])
		if real != m[1] {
			libs = append(libs, real)
		}
	}
	return libs, nil
}

// Archives are the image archives of a test run, by image name.
type Archives map[string]string

// BuildImages builds the pause image, the stand-in workspace image and,
// when mcBin is not empty, the Metacontroller image, writes each as an
// archive into work, and returns them with hooksArchive, the project's
// image as a release ships it, under releaseName.
func BuildImages(hooksArchive, releaseName, nodeDir, work, mcBin string) (Archives, error) {
	var images []Image
	pause, err := programImage(nodeDir, work, PauseImage, "pause", "65535:65535")
	if err != nil {
		return nil, err
	}
	images = append(images, pause)
	ws, err := programImage(nodeDir, work, WorkspaceImage, "workspace", nonroot+":"+nonroot, "8080/tcp")
	if err != nil {
		return nil, err
	}
	images = append(images, ws)
	if mcBin != "" {
		mc, err := MetacontrollerImageFrom(mcBin)
		if err != nil {
			return nil, err
		}
		images = append(images, mc)
	}
	out := Archives{releaseName: hooksArchive}
	for _, img := range images {
		p := filepath.Join(work, strings.NewReplacer("/", "_", ":", "_").Replace(img.Name)+".tar")
		if err := img.WriteArchive(p); err != nil {
			return nil, err
		}
		out[img.Name] = p
	}
	return out, nil
}

// Paths returns the archives' paths, sorted.
func (a Archives) Paths() []string {
	var out []string
	for _, p := range a {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}
