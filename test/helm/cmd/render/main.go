// Command render prints the formspec-hooks chart as `helm install` would
// send it to a cluster on a first install: the chart's CRDs, then its
// rendered templates, as one multi-document YAML stream on stdout. The
// template function lookup finds nothing, so the chart generates its own
// CA, serving certificate and token. test/node applies its output to a
// real node; it lives here so that the Helm library stays in this module.
//
//	go run ./cmd/render -chart ../../deploy/helm/formspec-hooks -values values.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

func main() {
	chartDir := flag.String("chart", "", "the chart's directory")
	valuesFile := flag.String("values", "", "a values file (optional)")
	name := flag.String("name", "formspec-hooks", "the release name")
	namespace := flag.String("namespace", "formspec-system", "the release namespace")
	flag.Parse()
	out, err := render(*chartDir, *valuesFile, *name, *namespace)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render:", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

// render returns the chart's CRDs and rendered templates (NOTES.txt left
// out), in file order, separated by "---".
func render(chartDir, valuesFile, name, namespace string) (string, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("load the chart: %w", err)
	}
	vals := chartutil.Values{}
	if valuesFile != "" {
		if vals, err = chartutil.ReadValuesFile(valuesFile); err != nil {
			return "", fmt.Errorf("read the values: %w", err)
		}
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}
	opts := chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(chrt, vals, opts, caps)
	if err != nil {
		return "", fmt.Errorf("compute the render values: %w", err)
	}
	files, err := engine.Render(chrt, top)
	if err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	var docs []string
	for _, crd := range chrt.CRDObjects() {
		docs = append(docs, string(crd.File.Data))
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if !strings.HasSuffix(n, "NOTES.txt") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		docs = append(docs, files[n])
	}
	return strings.Join(docs, "\n---\n"), nil
}
