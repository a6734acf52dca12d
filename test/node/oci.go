package node

import (
	"archive/tar"
	"bytes"
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations of an OCI layout's index.json entry that name the image:
// containerd's and Docker's, and the OCI layout's own tag.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// WriteOCIArchive writes images, one per architecture, as one multi-platform
// image named name (repository:tag) in an OCI image layout, tarred: what
// `docker buildx build --output type=oci` writes, and what `ctr images
// import`, `docker load` and `skopeo copy oci-archive:` read. The index.json
// entry carries the name both as containerd and Docker read it
// (io.containerd.image.name) and as the OCI layout's tag
// (org.opencontainers.image.ref.name). The same images give the same bytes.
// It returns the image index's digest, the one a registry the archive is
// copied to (skopeo copy --all --preserve-digests) serves it under.
func WriteOCIArchive(path, name string, images ...Image) (string, error) {
	ref, err := nameTag(name)
	if err != nil {
		return "", err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, img := range images {
		v1img, err := img.image(true)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        v1img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: cmp.Or(img.Arch, goArch())}},
		})
	}
	dir, err := os.MkdirTemp("", "oci-layout-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name": ref.Name(),
		annotationRefName:          ref.TagStr(),
	})); err != nil {
		return "", err
	}
	digest, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return digest.String(), tarDir(dir, path)
}

// nameTag parses repository:tag, which must name a tag.
func nameTag(s string) (name.Tag, error) {
	tag, err := name.NewTag(s, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image name %q: %w", s, err)
	}
	return tag, nil
}

// tarDir writes the files under dir into a tar at path, in sorted order and
// with zero timestamps, so that the same files give the same bytes.
func tarDir(dir, path string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && p != dir {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: filepath.ToSlash(rel) + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return err
			}
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// OCIImage is what ReadOCIArchive finds in an archive.
type OCIImage struct {
	// Name and Tag are the index.json entry's annotations, and Digest
	// its digest: the image index's.
	Name, Tag, Digest string
	// Platforms are the image's manifests by "os/arch".
	Platforms map[string]OCIPlatform
}

// OCIPlatform is one platform's image.
type OCIPlatform struct {
	// Labels are the image configuration's labels.
	Labels map[string]string
	// Files are the regular files of its layers, sorted.
	Files []string
	// Machines are the ELF machines of the files that are ELF
	// executables (EM_X86_64, EM_AARCH64), by file; nil when none is.
	Machines map[string]string `json:",omitempty"`
	// Config is the image configuration's config, and Created its
	// creation date.
	Config  v1.Config
	Created time.Time
	// Entries are the layers' files and directories by path (without a
	// leading or trailing slash), with the data of regular files.
	Entries map[string]Entry
}

// Entry is one file or directory of an image's layers.
type Entry struct {
	Dir      bool
	Mode     int64
	UID, GID int
	Data     []byte
}

// ReadOCIArchive unpacks the OCI archive at path into dir and reads it back
// as a runtime would: one index.json entry naming one multi-platform
// image, OCI media types throughout, and each platform's configuration and
// files.
func ReadOCIArchive(path, dir string) (OCIImage, error) {
	if err := untar(path, dir); err != nil {
		return OCIImage{}, err
	}
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return OCIImage{}, fmt.Errorf("%s is not an OCI layout: %w", path, err)
	}
	rootManifest, err := root.IndexManifest()
	if err != nil {
		return OCIImage{}, err
	}
	if len(rootManifest.Manifests) != 1 {
		return OCIImage{}, fmt.Errorf("%s: index.json has %d entries, want one image", path, len(rootManifest.Manifests))
	}
	entry := rootManifest.Manifests[0]
	if entry.MediaType != types.OCIImageIndex {
		return OCIImage{}, fmt.Errorf("%s: index.json's entry is a %s, want an OCI image index", path, entry.MediaType)
	}
	out := OCIImage{Name: entry.Annotations[annotationImageName], Tag: entry.Annotations[annotationRefName], Digest: entry.Digest.String(), Platforms: map[string]OCIPlatform{}}
	idx, err := root.ImageIndex(entry.Digest)
	if err != nil {
		return OCIImage{}, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return OCIImage{}, err
	}
	for _, desc := range im.Manifests {
		if desc.MediaType != types.OCIManifestSchema1 || desc.Platform == nil {
			return OCIImage{}, fmt.Errorf("%s: manifest %s is a %s for %v, want an OCI manifest with a platform", path, desc.Digest, desc.MediaType, desc.Platform)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return OCIImage{}, err
		}
		p, err := readPlatform(img, true)
		if err != nil {
			return OCIImage{}, fmt.Errorf("%s: %s: %w", path, desc.Platform, err)
		}
		out.Platforms[desc.Platform.OS+"/"+desc.Platform.Architecture] = p
	}
	return out, nil
}

// readPlatform reads one platform's image: its configuration, and its
// layers' files (a later layer's entry replacing an earlier one's) with the
// ELF machine of each executable; oci requires OCI media types.
func readPlatform(img v1.Image, oci bool) (OCIPlatform, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return OCIPlatform{}, err
	}
	if mt, err := img.MediaType(); oci && (err != nil || mt != types.OCIManifestSchema1) {
		return OCIPlatform{}, fmt.Errorf("manifest media type %s (%v)", mt, err)
	}
	p := OCIPlatform{Labels: cf.Config.Labels, Config: cf.Config, Created: cf.Created.UTC(), Entries: map[string]Entry{}}
	layers, err := img.Layers()
	if err != nil {
		return OCIPlatform{}, err
	}
	for _, l := range layers {
		if mt, err := l.MediaType(); oci && (err != nil || mt != types.OCILayer) {
			return OCIPlatform{}, fmt.Errorf("layer media type %s (%v)", mt, err)
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return OCIPlatform{}, err
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				_ = rc.Close()
				return OCIPlatform{}, err
			}
			if h.Typeflag == tar.TypeDir {
				p.Entries[strings.Trim(h.Name, "/")] = Entry{Dir: true, Mode: h.Mode, UID: h.Uid, GID: h.Gid}
			}
			if h.Typeflag != tar.TypeReg {
				continue
			}
			p.Files = append(p.Files, h.Name)
			data, err := io.ReadAll(tr)
			if err != nil {
				_ = rc.Close()
				return OCIPlatform{}, err
			}
			p.Entries[h.Name] = Entry{Mode: h.Mode, UID: h.Uid, GID: h.Gid, Data: data}
			if f, err := elf.NewFile(bytes.NewReader(data)); err == nil {
				if p.Machines == nil {
					p.Machines = map[string]string{}
				}
				p.Machines[h.Name] = f.Machine.String()
			}
		}
		_ = rc.Close()
	}
	slices.Sort(p.Files)
	return p, nil
}

// untar unpacks the tar at path into dir, refusing names that leave it.
func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := untarFrom(f, dir); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// untarFrom unpacks a tar stream's files and directories into dir,
// refusing names that leave it and anything else but a pax global header
// (git archive writes one, holding the commit).
func untarFrom(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		dest := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(dest, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("%q leaves the archive", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeXGlobalHeader:
		case tar.TypeDir:
			if err := os.MkdirAll(dest, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
				return err
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(dest, data, 0o644); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%q is neither a file nor a directory", h.Name)
		}
	}
}
