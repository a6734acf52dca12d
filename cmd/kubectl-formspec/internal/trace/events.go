package trace

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var events = schema.GroupVersionResource{Version: "v1", Resource: "events"}

// eventReaders bounds the Event lists a trace has in flight.
const eventReaders = 8

// events fills in every node's latest Events. They are listed through the
// core API, which also shows the events.k8s.io Events the reporter
// records, by the UID of the object they are about. A user who may not
// list Events gets the tree without them, and a warning.
func (t *Tracer) events(ctx context.Context, root *Node) error {
	if t.MaxEvents <= 0 {
		return nil
	}
	var nodes []*Node
	root.walk(func(n *Node) {
		// Cluster-scoped objects (a ClusterClass) have no Events of ours.
		if n.uid != "" && n.Namespace != "" {
			nodes = append(nodes, n)
		}
	})
	var forbidden sync.Once
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(eventReaders)
	for _, n := range nodes {
		g.Go(func() error {
			list, err := t.Dynamic.Resource(events).Namespace(n.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(n.uid)})
			if apierrors.IsForbidden(err) {
				forbidden.Do(func() { t.Warn(fmt.Sprintf("cannot list Events, so the trace shows none: %v", err)) })
				return nil
			}
			if err != nil {
				return fmt.Errorf("cannot list the Events of %s %s/%s: %w", n.Kind, n.Namespace, n.Name, err)
			}
			for i := range list.Items {
				var e corev1.Event
				if err := decode(&list.Items[i], &e); err != nil {
					return err
				}
				n.Events = append(n.Events, eventOf(&e))
			}
			sortEvents(n.Events)
			if len(n.Events) > t.MaxEvents {
				n.Events = n.Events[:t.MaxEvents]
			}
			return nil
		})
	}
	return g.Wait()
}

// eventOf reads an Event the way kubectl events does, whichever API wrote
// it: a series' last observation and count when it has one, otherwise the
// newest of its timestamps and its count.
func eventOf(e *corev1.Event) Event {
	times := []time.Time{e.LastTimestamp.Time, e.FirstTimestamp.Time, e.EventTime.Time, e.CreationTimestamp.Time}
	count := e.Count
	if e.Series != nil {
		times, count = append(times, e.Series.LastObservedTime.Time), e.Series.Count
	}
	return Event{
		Type:     e.Type,
		Reason:   e.Reason,
		Message:  e.Message,
		Count:    max(count, 1),
		LastSeen: metav1.NewTime(slices.MaxFunc(times, time.Time.Compare)),
		Source:   cmp.Or(e.ReportingController, e.Source.Component),
	}
}
