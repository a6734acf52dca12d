package diff

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// relatedCache finds the related objects the customize hook asks for, as
// Metacontroller does for hook API v2: by names or by label selector, in
// the rule's namespace or, without one, in all namespaces. Each distinct
// list is read once per diff, as Metacontroller reads its informer's
// cache, so that a thousand workspaces asking for the claims of one
// namespace cost one request.
type relatedCache struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper

	mu    sync.Mutex
	lists map[string]*relatedList
}

type relatedList struct {
	once sync.Once
	objs []unstructured.Unstructured
	err  error
}

func newRelatedCache(dyn dynamic.Interface, mapper meta.RESTMapper) *relatedCache {
	return &relatedCache{dyn: dyn, mapper: mapper, lists: map[string]*relatedList{}}
}

// objects resolves the rules into the related objects of a request.
// Every rule's group is present, empty or not, as Metacontroller sends it.
func (c *relatedCache) objects(ctx context.Context, rules []metacontroller.RelatedResourceRule) (metacontroller.ObjectMap, error) {
	out := metacontroller.ObjectMap{}
	for _, rule := range rules {
		gv, err := schema.ParseGroupVersion(rule.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("customize hook: related apiVersion %q: %w", rule.APIVersion, err)
		}
		gvr := gv.WithResource(rule.Resource)
		gvk, err := c.mapper.KindFor(gvr)
		if err != nil {
			return nil, fmt.Errorf("customize hook asks for %s, which the API server does not serve: %w", gvr.GroupResource(), err)
		}
		selector := labels.Everything()
		if rule.LabelSelector != nil {
			if selector, err = metav1.LabelSelectorAsSelector(rule.LabelSelector); err != nil {
				return nil, fmt.Errorf("customize hook: bad label selector for %s: %w", gvr.GroupResource(), err)
			}
		}
		objs, err := c.list(ctx, gvr, rule.Namespace, selector.String())
		if err != nil {
			return nil, err
		}
		key := metacontroller.Key(rule.APIVersion, gvk.Kind)
		if out[key] == nil {
			out[key] = map[string]json.RawMessage{}
		}
		for i := range objs {
			o := &objs[i]
			if len(rule.Names) > 0 && !slices.Contains(rule.Names, o.GetName()) {
				continue
			}
			raw, err := json.Marshal(o.Object)
			if err != nil {
				return nil, err
			}
			out[key][metacontroller.Name(o.GetNamespace(), o.GetName())] = raw
		}
	}
	return out, nil
}

// list reads one list once.
func (c *relatedCache) list(ctx context.Context, gvr schema.GroupVersionResource, namespace, selector string) ([]unstructured.Unstructured, error) {
	key := gvr.String() + "|" + namespace + "|" + selector
	c.mu.Lock()
	l := c.lists[key]
	if l == nil {
		l = &relatedList{}
		c.lists[key] = l
	}
	c.mu.Unlock()
	l.once.Do(func() {
		list, err := c.dyn.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			l.err = fmt.Errorf("cannot list related %s: %w", gvr.GroupResource(), err)
			return
		}
		l.objs = list.Items
	})
	return l.objs, l.err
}
