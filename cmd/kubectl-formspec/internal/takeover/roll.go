package takeover

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/formspec/formspec-hooks/cmd/kubectl-formspec/internal/live"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// RollOptions configure Roll.
type RollOptions struct {
	Dynamic dynamic.Interface
	// Self is the field manager of Roll's writes.
	Self string
	// MaxInFlight is how many workspaces may be taken over at once: each
	// one's pods roll, so this bounds how many workspaces run on a
	// surge pod at a time, and how many a bad template could reach before
	// Roll stops.
	MaxInFlight int
	// Interval is how often the workspaces being taken over are read.
	Interval time.Duration
	// Timeout is how long one workspace may take; one that takes longer
	// stops the roll.
	Timeout time.Duration
	// Out receives one line per workspace released and per workspace
	// taken over.
	Out io.Writer
}

// RollResult says how a roll went.
type RollResult struct {
	// Done are the workspaces taken over, in the order they finished.
	Done []string
	// Failed are those that turned Degraded or took longer than the
	// timeout, each with why; the roll releases no more once one fails.
	Failed []string
	// Left are the workspaces still held when the roll stopped.
	Left []string
}

// Roll removes formspec.dev/takeover: hold from the held Workspaces of
// namespace ("" for all), in order of namespace and name, never more than
// MaxInFlight at once: a workspace counts until the hooks report it taken
// over (its status of the current generation says Ready or Idle and not
// Progressing, which the hooks say only once none of the original
// operator's children is left). A workspace that turns Degraded or takes
// longer than Timeout stops the roll: the rest stay held, running as they
// are, until it is looked at and Roll is run again.
func Roll(ctx context.Context, opts RollOptions, namespace string) (RollResult, error) {
	var res RollResult
	list, err := opts.Dynamic.Resource(live.Workspaces).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return res, fmt.Errorf("cannot list Workspaces: %w", err)
	}
	var held []string
	for i := range list.Items {
		ws := &list.Items[i]
		if ws.GetAnnotations()[v1alpha1.AnnotationTakeover] == v1alpha1.TakeoverHold && ws.GetDeletionTimestamp() == nil {
			held = append(held, ws.GetNamespace()+"/"+ws.GetName())
		}
	}
	slices.Sort(held)
	total := len(held)
	fmt.Fprintf(opts.Out, "%d held %s, at most %d at a time\n", total, plural(total, "workspace"), opts.MaxInFlight)
	inFlight := map[string]time.Time{}
	for len(held) > 0 || len(inFlight) > 0 {
		for len(held) > 0 && len(inFlight) < max(opts.MaxInFlight, 1) && len(res.Failed) == 0 {
			key := held[0]
			held = held[1:]
			if err := release(ctx, opts, key); err != nil {
				return res, err
			}
			inFlight[key] = time.Now()
			fmt.Fprintf(opts.Out, "released %s (%d of %d)\n", key, total-len(held), total)
		}
		if len(inFlight) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			res.Left = append(held, slices.Sorted(maps.Keys(inFlight))...)
			return res, ctx.Err()
		case <-time.After(opts.Interval):
		}
		for _, key := range slices.Sorted(maps.Keys(inFlight)) {
			state, err := takeoverState(ctx, opts.Dynamic, key)
			if err != nil {
				return res, err
			}
			took := time.Since(inFlight[key]).Round(100 * time.Millisecond)
			switch {
			case state.done:
				delete(inFlight, key)
				res.Done = append(res.Done, key)
				fmt.Fprintf(opts.Out, "%s taken over: %s after %s\n", key, state.phase, took)
			case state.degraded != "":
				delete(inFlight, key)
				res.Failed = append(res.Failed, key+": Degraded: "+state.degraded)
				fmt.Fprintf(opts.Out, "%s is Degraded: %s; releasing no more\n", key, state.degraded)
			case took > opts.Timeout:
				delete(inFlight, key)
				res.Failed = append(res.Failed, fmt.Sprintf("%s: not taken over after %s: %s", key, took, state.progress))
				fmt.Fprintf(opts.Out, "%s is not taken over after %s (%s); releasing no more\n", key, took, state.progress)
			}
		}
	}
	res.Left = held
	return res, nil
}

// release removes the hold of one workspace.
func release(ctx context.Context, opts RollOptions, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{v1alpha1.AnnotationTakeover: nil}}})
	_, err := opts.Dynamic.Resource(live.Workspaces).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: opts.Self})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cannot release %s: %w", key, err)
	}
	return nil
}

// state is where one workspace's takeover stands, from its status.
type state struct {
	done     bool
	phase    string
	degraded string
	progress string
}

// takeoverState reads a workspace's status: taken over when the hooks have
// written it for the current generation, the phase is Ready or Idle, and
// Progressing is False (they keep it True while any child of the original
// operator is left, TakeoverHeld while held).
func takeoverState(ctx context.Context, dyn dynamic.Interface, key string) (state, error) {
	ns, name, _ := strings.Cut(key, "/")
	obj, err := dyn.Resource(live.Workspaces).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return state{done: true, phase: "deleted"}, nil
	}
	if err != nil {
		return state{}, fmt.Errorf("cannot read Workspace %s: %w", key, err)
	}
	var ws v1alpha1.Workspace
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ws); err != nil {
		return state{}, fmt.Errorf("cannot read the status of Workspace %s: %w", key, err)
	}
	return stateOf(obj, &ws.Status), nil
}

func stateOf(obj *unstructured.Unstructured, st *v1alpha1.WorkspaceStatus) state {
	s := state{phase: st.Phase}
	progressing := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing)
	if progressing != nil {
		s.progress = progressing.Reason + ": " + progressing.Message
	}
	current := st.ObservedGeneration == obj.GetGeneration()
	if d := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionDegraded); current && d != nil && d.Status == metav1.ConditionTrue {
		s.degraded = d.Reason + ": " + d.Message
	}
	s.done = current && (st.Phase == v1alpha1.PhaseReady || st.Phase == v1alpha1.PhaseIdle) &&
		progressing != nil && progressing.Status == metav1.ConditionFalse
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}
