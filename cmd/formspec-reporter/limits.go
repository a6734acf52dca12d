package main

import (
	"github.com/formspec/formspec-hooks/internal/fleetlimits"
	"github.com/formspec/formspec-hooks/internal/memlimit"
	"github.com/formspec/formspec-hooks/internal/reporter"
	"github.com/prometheus/client_golang/prometheus"
)

// Where a bound's value came from, the source label of
// formspec_reporter_limit beside memlimit's SourceCgroup and
// SourceGOMEMLIMIT: a --max-* flag, or the default when no memory limit
// was found (--max-nodes has nothing to derive from: nodes come with the
// cluster, not with its Workspaces).
const (
	sourceFlag    = "flag"
	sourceDefault = "default"
)

// bound is one of the reporter's --max-* bounds, as set.
type bound struct {
	// name is the bound label of formspec_reporter_limit and of
	// formspec_reporter_dropped_observations_total.
	name   string
	value  int
	source string
}

// setLimits sets the bounds of cfg that no flag set (still 0) from the
// memory limit mem (fleetlimits.Derive), and returns every bound with
// where its value came from.
func setLimits(cfg *reporter.Config, mem memlimit.Limit) []bound {
	def := reporter.Defaults
	derived := fleetlimits.Derive(mem, fleetlimits.Limits{
		Workspaces: def.MaxWorkspaces, Tombstones: def.MaxTombstones, Claims: def.MaxClaims, Pods: def.MaxPods,
	})
	from := mem.Source
	if mem.Bytes == 0 {
		from = sourceDefault
	}
	var bounds []bound
	for _, b := range []struct {
		name    string
		flag    *int
		derived int
		from    string
	}{
		{"workspaces", &cfg.MaxWorkspaces, derived.Workspaces, from},
		{"tombstones", &cfg.MaxTombstones, derived.Tombstones, from},
		{"claims", &cfg.MaxClaims, derived.Claims, from},
		{"pods", &cfg.MaxPods, derived.Pods, from},
		{"nodes", &cfg.MaxNodes, def.MaxNodes, sourceDefault},
	} {
		source := sourceFlag
		if *b.flag == 0 {
			*b.flag, source = b.derived, b.from
		}
		bounds = append(bounds, bound{name: b.name, value: *b.flag, source: source})
	}
	return bounds
}

// limitGauge is formspec_reporter_limit: each bound and where it came
// from, beside the drops at it.
func limitGauge(bounds []bound) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "formspec_reporter_limit",
		Help: "The reporter's bounds on what it tracks, by bound (workspaces, tombstones, claims, pods, nodes) and source (flag: a --max-* flag; cgroup or GOMEMLIMIT: derived from that memory limit; default: no memory limit found). Beyond a bound observations are dropped, counted in formspec_reporter_dropped_observations_total with the same bound.",
	}, []string{"bound", "source"})
	for _, b := range bounds {
		g.WithLabelValues(b.name, b.source).Set(float64(b.value))
	}
	return g
}

// limitAttrs renders bounds for the one log line at start.
func limitAttrs(mem memlimit.Limit, bounds []bound) []any {
	attrs := []any{"memoryLimit", mem.Bytes, "memorySource", mem.Source}
	var flags []string
	for _, b := range bounds {
		attrs = append(attrs, b.name, b.value)
		if b.source == sourceFlag {
			flags = append(flags, b.name)
		}
	}
	return append(attrs, "fromFlags", flags)
}
