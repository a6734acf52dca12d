// Command package writes the two install artifacts of a release into a
// directory: the Helm chart packaged by Helm's own packaging
// (chartutil.Save, what `helm package` does), and the kustomize install
// rendered into one install.yaml by kustomize's own library (what
// `kubectl kustomize` prints). `make release` runs it; it lives here so
// that both libraries stay in this module.
//
//	go run ./cmd/package -version 0.1.0 -chart ../../deploy/helm/formspec-hooks -kustomization ../../deploy -out ../../dist
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	version := flag.String("version", "", "the release's version, which the chart must carry as version and appVersion")
	chartDir := flag.String("chart", "", "the chart's directory")
	kustomization := flag.String("kustomization", "", "the kustomization rendered into install.yaml")
	out := flag.String("out", "", "the directory to write into")
	image := flag.String("image", "", "the repository of the release's image")
	digest := flag.String("image-digest", "", "the digest of the release's image, sha256:<hex>")
	epoch := flag.Int64("source-date-epoch", 0, "the commit's time, Unix seconds: the chart package's file times (0: Helm's, the time of packaging)")
	flag.Parse()
	if *version == "" || *chartDir == "" || *kustomization == "" || *out == "" || *image == "" || !imageDigest.MatchString(*digest) || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: package -version VERSION -chart DIR -kustomization DIR -image REPOSITORY -image-digest sha256:HEX -out DIR")
		os.Exit(2)
	}
	if err := run(*version, *chartDir, *kustomization, *image, *digest, *out, *epoch); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

// imageDigest is a sha256 digest, as the chart's schema wants it.
var imageDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// emptyDigest is the line of the chart's values.yaml that the packaged
// chart fills in.
var emptyDigest = regexp.MustCompile(`(?m)^  digest: ""$`)

func run(version, chartDir, kustomization, image, digest, out string, epoch int64) error {
	chrt, err := loader.LoadDir(chartDir)
	if err != nil {
		return fmt.Errorf("cannot load the chart: %w", err)
	}
	// A release whose chart says another version would install an image
	// nobody released; make sync-version writes both.
	if chrt.Metadata.Version != version || chrt.Metadata.AppVersion != version {
		return fmt.Errorf("the chart has version %q and appVersion %q, not %q: run make sync-version", chrt.Metadata.Version, chrt.Metadata.AppVersion, version)
	}
	// Save writes values.yaml as read (its comments are the chart's
	// documentation), so the digest goes into that text.
	pinned := false
	for _, f := range chrt.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		if n := len(emptyDigest.FindAllIndex(f.Data, -1)); n != 1 {
			return fmt.Errorf("the chart's values.yaml has %d lines `  digest: \"\"` (image.digest), want one", n)
		}
		f.Data = emptyDigest.ReplaceAll(f.Data, []byte("  digest: "+digest))
		pinned = true
	}
	if !pinned {
		return fmt.Errorf("the chart has no values.yaml")
	}
	pkg, err := chartutil.Save(chrt, out)
	if err != nil {
		return fmt.Errorf("cannot package the chart: %w", err)
	}
	if epoch != 0 {
		if err := setFileTimes(pkg, time.Unix(epoch, 0)); err != nil {
			return fmt.Errorf("cannot date %s: %w", pkg, err)
		}
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kustomization)
	if err != nil {
		return fmt.Errorf("cannot build %s: %w", kustomization, err)
	}
	manifest, err := res.AsYaml()
	if err != nil {
		return err
	}
	// Every container of ours runs repository:tag@digest.
	tagged := regexp.MustCompile(`(?m)^(\s+(?:- )?image: )` + regexp.QuoteMeta(image+":"+version) + `$`)
	if len(tagged.FindAllIndex(manifest, -1)) == 0 {
		return fmt.Errorf("%s runs no %s:%s to pin by digest", kustomization, image, version)
	}
	manifest = tagged.ReplaceAll(manifest, []byte("${1}"+image+":"+version+"@"+digest))
	header := "# formspec-hooks " + version + ": everything but Metacontroller, as `kubectl apply -k deploy/`\n" +
		"# installs it. Needs cert-manager and the Secret formspec-system/formspec-hooks-token\n" +
		"# first; see docs/install.md.\n"
	install := filepath.Join(out, "install.yaml")
	if err := os.WriteFile(install, append([]byte(header), manifest...), 0o644); err != nil {
		return err
	}
	fmt.Println(pkg)
	fmt.Println(install)
	return nil
}

// setFileTimes rewrites the chart package at path with every file dated t:
// Helm's packaging dates them at the time of packaging, so two packages of
// the same commit would differ. The gzip header's extra field and comment,
// which Helm writes, are kept.
func setFileTimes(path string, t time.Time) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Header.Extra, zw.Header.Comment = zr.Header.Extra, zr.Header.Comment
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		h.ModTime = t
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
