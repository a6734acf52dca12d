package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// tracker follows the fleet through watches, as a controller would, so
// that waiting for thousands of workspaces costs the API server one watch
// per kind rather than a list every poll. It watches children as metadata
// only: the hooks' children are larger than the trivial hook's, and
// decoding them whole would cost the test, which shares the CPUs, more
// in one run than in the other. It keeps, per workspace, whether
// its status is written for its generation, whether it is Ready and
// whether its credentials are injected, and counts the children of each
// kind in the fleet's namespaces.
type tracker struct {
	fleet *fleet

	mu sync.Mutex
	ws map[string]wsProgress
	// children counts the fleet's children by resource.
	children map[string]int
	// probes are the workspaces waiting for a status of a new generation.
	probes map[string]*probe
	// latencies are the probes' times, in arrival order.
	latencies []time.Duration
}

// wsProgress is what the tracker knows of one workspace.
type wsProgress struct {
	synced, ready, injected bool
}

// probe is a change of a workspace's spec waiting for its status.
type probe struct {
	generation int64
	start      time.Time
}

// progress is the fleet's state at one moment.
type progress struct {
	synced, ready, injected int
	children                map[string]int
}

// childKinds are the children the tracker counts: name suffix within the
// fleet's namespaces, "" for any name.
var childKinds = []struct {
	gvr    schema.GroupVersionResource
	suffix string
}{
	{gvrDeployments, ""},
	{gvrServices, ""},
	{gvrConfigMaps, "-config"},
	{gvrHPAs, ""},
	{gvrPDBs, ""},
	{gvrSecrets, "-credentials"},
}

func startTracker(ctx context.Context, f *fleet, dyn dynamic.Interface, meta metadata.Interface) (*tracker, error) {
	tr := &tracker{fleet: f, ws: map[string]wsProgress{}, children: map[string]int{}, probes: map[string]*probe{}}
	dynFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	metaFactory := metadatainformer.NewSharedInformerFactory(meta, 0)

	wsInf := dynFactory.ForResource(gvrWorkspaces).Informer()
	if _, err := wsInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.observeWorkspace(obj) },
		UpdateFunc: func(_, obj any) { tr.observeWorkspace(obj) },
	}); err != nil {
		return nil, err
	}
	for _, k := range childKinds {
		if _, err := metaFactory.ForResource(k.gvr).Informer().AddEventHandler(tr.counter(k.gvr.Resource, k.suffix)); err != nil {
			return nil, err
		}
	}
	dynFactory.Start(ctx.Done())
	metaFactory.Start(ctx.Done())
	for gvr, ok := range dynFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("cannot watch %s", gvr.Resource)
		}
	}
	for gvr, ok := range metaFactory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("cannot watch %s", gvr.Resource)
		}
	}
	return tr, nil
}

// counter counts the objects of a resource in the fleet's namespaces whose
// name ends in suffix.
func (tr *tracker) counter(resource, suffix string) cache.ResourceEventHandler {
	mine := func(obj any) bool {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		return err == nil && strings.HasPrefix(key, scaleNamespacePrefix) && strings.HasSuffix(key, suffix)
	}
	add := func(d int) func(obj any) {
		return func(obj any) {
			if mine(obj) {
				tr.mu.Lock()
				tr.children[resource] += d
				tr.mu.Unlock()
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: add(1), DeleteFunc: add(-1)}
}

func (tr *tracker) observeWorkspace(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || !strings.HasPrefix(u.GetNamespace(), scaleNamespacePrefix) {
		return
	}
	key := u.GetNamespace() + "/" + u.GetName()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	stores, _, _ := unstructured.NestedSlice(u.Object, "status", "datastores")
	p := wsProgress{synced: observed > 0 && observed == u.GetGeneration()}
	p.ready = p.synced && phase == "Ready"
	p.injected = len(stores) > 0
	for _, s := range stores {
		if m, _ := s.(map[string]any); m["state"] != "Injected" {
			p.injected = false
		}
	}
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.ws[key] = p
	if pr, ok := tr.probes[key]; ok && observed >= pr.generation {
		tr.latencies = append(tr.latencies, now.Sub(pr.start))
		delete(tr.probes, key)
	}
}

// progress counts where the fleet is.
func (tr *tracker) progress() progress {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	p := progress{children: map[string]int{}}
	for _, w := range tr.ws {
		if w.synced {
			p.synced++
		}
		if w.ready {
			p.ready++
		}
		if w.injected {
			p.injected++
		}
	}
	for k, v := range tr.children {
		p.children[k] = v
	}
	return p
}

// converged reports whether every workspace has its status for its
// generation and every child its class calls for.
func (p progress) converged(f *fleet) bool {
	pdb, hpa := f.expectedExtra()
	c := p.children
	return p.synced >= f.n && c[gvrDeployments.Resource] >= f.n && c[gvrServices.Resource] >= f.n &&
		c[gvrConfigMaps.Resource] >= f.n && c[gvrPDBs.Resource] >= pdb && c[gvrHPAs.Resource] >= hpa
}

func (p progress) String() string {
	c := p.children
	return fmt.Sprintf("status written %d, Ready %d, credentials injected %d; deployments %d, services %d, configmaps %d, pdbs %d, hpas %d, credentials secrets %d",
		p.synced, p.ready, p.injected, c[gvrDeployments.Resource], c[gvrServices.Resource], c[gvrConfigMaps.Resource],
		c[gvrPDBs.Resource], c[gvrHPAs.Resource], c[gvrSecrets.Resource])
}

// startProbe records that key's spec was changed to generation at start.
func (tr *tracker) startProbe(key string, generation int64, start time.Time) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.probes[key] = &probe{generation: generation, start: start}
}

// probeLatencies returns the probes' times so far, sorted, and how many
// are still waiting.
func (tr *tracker) probeLatencies() ([]time.Duration, int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Sorted(slices.Values(tr.latencies)), len(tr.probes)
}
