// Command release installs or upgrades the formspec-hooks chart on a
// cluster through Helm's own library (helm.sh/helm/v3/pkg/action), as
// `helm install` and `helm upgrade` do: releases stored as Secrets in the
// release namespace, the chart's crds/ created on a first install only,
// lookup answered by the cluster (so the generated CA, certificate and
// token are kept on upgrade), and an upgrade applied as Helm 3's three-way
// merge against the last release. test/node's fault and upgrade suites run
// it; it lives here so that the Helm library stays in this module.
//
//	go run ./cmd/release -kubeconfig KUBECONFIG -chart DIR -values values.yaml
//	go run ./cmd/release -kubeconfig KUBECONFIG -chart DIR -upgrade -reset-then-reuse-values -set extraArgs={--max-inflight=48}
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// sets collects repeated -set flags, in order, as helm's --set does.
type sets []string

func (s *sets) String() string     { return strings.Join(*s, ",") }
func (s *sets) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "the cluster's kubeconfig (required)")
	flag.StringVar(&o.chart, "chart", "", "the chart: a directory or a packaged .tgz (required)")
	flag.StringVar(&o.valuesFile, "values", "", "a values file, as helm -f (optional)")
	flag.Var(&o.set, "set", "a value as helm --set takes it; repeatable")
	flag.StringVar(&o.name, "name", "formspec-hooks", "the release name")
	flag.StringVar(&o.namespace, "namespace", "formspec-system", "the release namespace, which must exist")
	flag.BoolVar(&o.upgrade, "upgrade", false, "upgrade the release instead of installing it")
	flag.BoolVar(&o.resetThenReuse, "reset-then-reuse-values", false, "with -upgrade: the new chart's defaults, then the values given to the last release, then these (helm upgrade --reset-then-reuse-values)")
	flag.Parse()
	if o.kubeconfig == "" || o.chart == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: release -kubeconfig FILE -chart DIR|TGZ [-values FILE] [-set K=V]... [-upgrade [-reset-then-reuse-values]]")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

type options struct {
	kubeconfig, chart, valuesFile, name, namespace string
	set                                            sets
	upgrade, resetThenReuse                        bool
}

func run(o options) error {
	if o.resetThenReuse && !o.upgrade {
		return errors.New("-reset-then-reuse-values needs -upgrade")
	}
	chrt, err := loader.Load(o.chart)
	if err != nil {
		return fmt.Errorf("cannot load the chart: %w", err)
	}
	vals := map[string]any{}
	if o.valuesFile != "" {
		if vals, err = chartutil.ReadValuesFile(o.valuesFile); err != nil {
			return fmt.Errorf("cannot read the values: %w", err)
		}
	}
	for _, s := range o.set {
		if err := strvals.ParseInto(s, vals); err != nil {
			return fmt.Errorf("cannot parse -set %s: %w", s, err)
		}
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &o.kubeconfig
	flags.Namespace = &o.namespace
	cfg := new(action.Configuration)
	debug := func(format string, v ...any) { fmt.Fprintf(os.Stderr, "helm: "+format+"\n", v...) }
	if err := cfg.Init(flags, o.namespace, "secret", debug); err != nil {
		return fmt.Errorf("cannot reach the cluster: %w", err)
	}
	if o.upgrade {
		up := action.NewUpgrade(cfg)
		up.Namespace = o.namespace
		up.ResetThenReuseValues = o.resetThenReuse
		rel, err := up.Run(o.name, chrt, vals)
		if err != nil {
			return fmt.Errorf("helm upgrade %s: %w", o.name, err)
		}
		fmt.Printf("upgraded %s to chart %s, revision %d: %s\n", rel.Name, rel.Chart.Metadata.Version, rel.Version, rel.Info.Status)
		return nil
	}
	in := action.NewInstall(cfg)
	in.ReleaseName = o.name
	in.Namespace = o.namespace
	rel, err := in.Run(chrt, vals)
	if err != nil {
		return fmt.Errorf("helm install %s: %w", o.name, err)
	}
	fmt.Printf("installed %s from chart %s, revision %d: %s\n", rel.Name, rel.Chart.Metadata.Version, rel.Version, rel.Info.Status)
	return nil
}
