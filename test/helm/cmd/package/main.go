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
	"flag"
	"fmt"
	"os"
	"path/filepath"

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
	flag.Parse()
	if *version == "" || *chartDir == "" || *kustomization == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: package -version VERSION -chart DIR -kustomization DIR -out DIR")
		os.Exit(2)
	}
	if err := run(*version, *chartDir, *kustomization, *out); err != nil {
		fmt.Fprintln(os.Stderr, "package:", err)
		os.Exit(1)
	}
}

func run(version, chartDir, kustomization, out string) error {
	chrt, err := loader.LoadDir(chartDir)
	if err != nil {
		return fmt.Errorf("cannot load the chart: %w", err)
	}
	// A release whose chart says another version would install an image
	// nobody released; make sync-version writes both.
	if chrt.Metadata.Version != version || chrt.Metadata.AppVersion != version {
		return fmt.Errorf("the chart has version %q and appVersion %q, not %q: run make sync-version", chrt.Metadata.Version, chrt.Metadata.AppVersion, version)
	}
	pkg, err := chartutil.Save(chrt, out)
	if err != nil {
		return fmt.Errorf("cannot package the chart: %w", err)
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), kustomization)
	if err != nil {
		return fmt.Errorf("cannot build %s: %w", kustomization, err)
	}
	manifest, err := res.AsYaml()
	if err != nil {
		return err
	}
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
