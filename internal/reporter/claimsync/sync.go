// Package claimsync writes each Workspace's claims summary
// (claimsummary.Annotation) from the ResourceClaims that name it.
//
// Relating every claim of a namespace to its Workspaces makes
// Metacontroller test every Workspace on each claim write. The writer
// instead watches claims itself, follows the reporter's watch of
// Workspaces, indexes claims by the workspace they name, and on a change
// of a claim, or of a Workspace's datastores or summary, re-evaluates
// that one workspace: the summary is written only when it differs from
// what the Workspace carries, and a Workspace without datastores carries
// none.
// Writes go through a work queue that holds each workspace at most once,
// so a burst of claim writes becomes at most one patch per workspace,
// paced by the API client's rate limit, and a failed patch is retried
// with a per-workspace backoff.
//
// Only the reporter elected to write directives writes summaries (the
// Leader function); the others keep their caches warm, and the one elected
// next evaluates every Workspace once as it takes over.
package claimsync

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/claimsummary"
	"github.com/formspec/formspec-hooks/internal/reporter/kube"
)

// Config configures a Writer. Zero durations and counts take their value
// from Defaults.
type Config struct {
	// Dynamic lists and watches ResourceClaims, and patches Workspaces.
	// Its rate limit paces the writes.
	Dynamic dynamic.Interface
	// Workspaces is the reporter's watch of Workspaces
	// (kube.NewWorkspaceInformer), which its owner runs (kube.Watch): the
	// writer adds its handlers and reads its cache.
	Workspaces cache.SharedIndexInformer
	// Leader reports whether this reporter writes now.
	Leader func() bool
	// Registerer takes the writer's metrics; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger

	// Workers is how many patches may be in flight at once; one
	// workspace is never written by two at once.
	Workers int
	// RequestTimeout bounds one patch.
	RequestTimeout time.Duration
	// LeaderCheck is how often the writer looks whether it was elected,
	// to evaluate every Workspace once when it is.
	LeaderCheck time.Duration
	// RetryBase and RetryMax bound the backoff of a failed patch, per
	// workspace, doubling from one to the other.
	RetryBase, RetryMax time.Duration
}

// Defaults is the one table of defaults.
var Defaults = Config{
	// A patch takes a few milliseconds on an idle API server and tens on
	// a busy one; four in flight keep up with a client allowed 50 calls a
	// second, and the client's limiter, not the workers, sets the pace.
	Workers:        4,
	RequestTimeout: 10 * time.Second,
	// The Lease is renewed every 2 s; a second adds little to a failover
	// that takes up to the Lease's 15 s.
	LeaderCheck: time.Second,
	// As the reporter's calls to Cluster Control: half a second first, at
	// most half the workspace controller's 60 s resync.
	RetryBase: 500 * time.Millisecond,
	RetryMax:  30 * time.Second,
}

func (cfg Config) withDefaults() Config {
	d := Defaults
	cfg.Workers = cmp.Or(cfg.Workers, d.Workers)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, d.RequestTimeout)
	cfg.LeaderCheck = cmp.Or(cfg.LeaderCheck, d.LeaderCheck)
	cfg.RetryBase = cmp.Or(cfg.RetryBase, d.RetryBase)
	cfg.RetryMax = cmp.Or(cfg.RetryMax, d.RetryMax)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// byWorkspace indexes claims by "namespace/workspace" they name.
const byWorkspace = "workspace"

// Writer writes claims summaries onto Workspaces. Create it with New and
// start it with Run.
type Writer struct {
	cfg        Config
	workspaces cache.SharedIndexInformer
	claims     cache.SharedIndexInformer
	queue      workqueue.TypedRateLimitingInterface[types.NamespacedName]
	m          *metrics
	// workspacesSynced reports whether the writer's handler has been
	// handed every Workspace listed.
	workspacesSynced cache.InformerSynced
	// dropped is set when a workspace is dropped for want of the Lease.
	dropped atomic.Bool
	// evaluated, when set, is told each workspace evaluated (tests).
	evaluated func(types.NamespacedName)
}

// New builds a Writer; it starts nothing.
func New(cfg Config) (*Writer, error) {
	if cfg.Dynamic == nil || cfg.Workspaces == nil || cfg.Leader == nil {
		return nil, fmt.Errorf("claims summary writer: a client, a watch of Workspaces and a leader function are required")
	}
	cfg = cfg.withDefaults()
	w := &Writer{
		cfg: cfg,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](cfg.RetryBase, cfg.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "claims-summary"}),
	}
	w.workspaces = cfg.Workspaces
	w.claims = dynamicinformer.NewFilteredDynamicInformer(cfg.Dynamic, claimsResource, metav1.NamespaceAll, 0, cache.Indexers{
		byWorkspace: func(obj any) ([]string, error) {
			if c, ok := obj.(*claim); ok && c.rc.Spec.Workspace != "" {
				return []string{c.workspaceKey().String()}, nil
			}
			return nil, nil
		},
	}, nil).Informer()
	if err := w.watch(); err != nil {
		return nil, err
	}
	w.m = newMetrics(cfg.Registerer, w.queue)
	return w, nil
}

// watch sets the claims informer's transform and both informers'
// handlers: a new Workspace, or an update of what its summary depends on
// or carries, queues it; a claim's change queues the workspace it names
// (both, when an update moves it). A deleted Workspace needs nothing.
func (w *Writer) watch() error {
	if err := w.claims.SetTransform(kube.Keep(func(u *unstructured.Unstructured) any { return claimOf(u) })); err != nil {
		return fmt.Errorf("cannot watch ResourceClaims: %w", err)
	}
	queueWorkspace := func(obj any) {
		if ws, ok := obj.(*kube.Workspace); ok {
			w.queue.Add(ws.Key())
		}
	}
	queueClaim := func(obj any) {
		if c, ok := kube.Final(obj).(*claim); ok && c.rc.Spec.Workspace != "" {
			w.queue.Add(c.workspaceKey())
		}
	}
	reg, err := w.workspaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: queueWorkspace,
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*kube.Workspace)
			c, ok2 := obj.(*kube.Workspace)
			if !ok1 || !ok2 || summaryInputs(o, c) {
				queueWorkspace(obj)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("cannot watch Workspaces: %w", err)
	}
	w.workspacesSynced = reg.HasSynced
	if _, err := w.claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: queueClaim,
		UpdateFunc: func(old, obj any) {
			queueClaim(old)
			queueClaim(obj)
		},
		DeleteFunc: queueClaim,
	}); err != nil {
		return fmt.Errorf("cannot watch ResourceClaims: %w", err)
	}
	return nil
}

// Run watches claims and writes until ctx ends; the watch of Workspaces
// runs with the reporter. Nothing is written before both caches have
// listed everything: a summary computed from a partial list of claims
// would take credentials away from the workspaces whose claims are not
// listed yet.
func (w *Writer) Run(ctx context.Context) {
	defer w.queue.ShutDown()
	go w.claims.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), w.workspacesSynced, w.claims.HasSynced) {
		return
	}
	w.cfg.Logger.Info("watching ResourceClaims: the elected reporter writes each workspace's claims summary")
	done := make(chan struct{})
	for range w.cfg.Workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for w.next(ctx) {
			}
		}()
	}
	w.followLeadership(ctx)
	w.queue.ShutDown()
	for range w.cfg.Workers {
		<-done
	}
}

// followLeadership queues every Workspace each time this reporter is
// elected, until ctx ends: the one elected before may have left writes
// undone, and while not elected this one dropped what it was queued. A
// reporter that lost the Lease and took it back between two looks has
// dropped workspaces too, and is told by the dropped flag.
func (w *Writer) followLeadership(ctx context.Context) {
	t := time.NewTicker(w.cfg.LeaderCheck)
	defer t.Stop()
	leading := false
	for {
		now := w.cfg.Leader()
		if now {
			if dropped := w.dropped.Swap(false); !leading || dropped {
				w.queueAll()
			}
		}
		leading = now
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// queueAll queues every Workspace in the cache.
func (w *Writer) queueAll() {
	for _, obj := range w.workspaces.GetStore().List() {
		if ws, ok := obj.(*kube.Workspace); ok {
			w.queue.Add(ws.Key())
		}
	}
}

// next handles one queued workspace; false once the queue is shut down.
func (w *Writer) next(ctx context.Context) bool {
	k, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(k)
	if !w.cfg.Leader() {
		// The next elected evaluates every Workspace as it takes over.
		w.dropped.Store(true)
		w.queue.Forget(k)
		return true
	}
	err := w.sync(ctx, k)
	if w.evaluated != nil {
		w.evaluated(k)
	}
	switch {
	case err == nil:
		w.queue.Forget(k)
	case ctx.Err() != nil:
	default:
		w.queue.AddRateLimited(k)
		w.cfg.Logger.Warn("cannot write the claims summary onto workspace; will retry", "namespace", k.Namespace, "name", k.Name,
			"retries", w.queue.NumRequeues(k), "err", err)
	}
	return true
}

// sync writes the summary of workspace k if it differs from the one it
// carries. A Workspace that is gone needs nothing.
func (w *Writer) sync(ctx context.Context, k types.NamespacedName) error {
	obj, ok, err := w.workspaces.GetStore().GetByKey(k.String())
	if err != nil || !ok {
		return nil
	}
	ws, ok := obj.(*kube.Workspace)
	if !ok {
		return nil
	}
	objs, err := w.claims.GetIndexer().ByIndex(byWorkspace, k.String())
	if err != nil {
		return nil
	}
	claims := make([]*v1alpha1.ResourceClaim, 0, len(objs))
	for _, o := range objs {
		claims = append(claims, o.(*claim).rc)
	}
	value, keep := want(ws, claims)
	if keep == ws.HasClaims && value == ws.Claims {
		return nil
	}
	return w.patch(ctx, k, value, keep)
}

// patch writes (keep) or removes the summary with a JSON merge patch that
// touches that one annotation. It carries no resourceVersion, as the
// directive writer's patches do not: the value comes from the writer's
// latest view, any later change of the Workspace or its claims queues the
// workspace again, and Metacontroller's status writes would turn a
// precondition into a conflict and a retry on busy workspaces.
func (w *Writer) patch(ctx context.Context, k types.NamespacedName, value string, keep bool) error {
	var v any
	if keep {
		v = value
	}
	err := kube.Patch(ctx, w.cfg.Dynamic, w.cfg.RequestTimeout, k, types.MergePatchType, kube.AnnotationPatch(claimsummary.Annotation, v))
	switch {
	case err == nil:
		w.m.writes.WithLabelValues(resultOK).Inc()
		return nil
	case apierrors.IsNotFound(err):
		// Deleted since the cache saw it: its delete event is on its way.
		w.m.writes.WithLabelValues(resultNotFound).Inc()
		return nil
	default:
		w.m.writes.WithLabelValues(resultError).Inc()
		return fmt.Errorf("cannot patch workspace %s: %w", k, err)
	}
}
