package metacontroller

import (
	"fmt"

	"github.com/formspec/formspec-hooks/internal/codec"
)

// ToObject converts a typed k8s.io/api object (with TypeMeta set) to its wire
// form. It is the one place where desired objects leave Go types, and it
// strips what encoding/json adds for zero values of k8s types but the
// project never meant to send: "creationTimestamp": null at any depth (pod
// templates have one too), "status" (the zero status of a Service is not
// empty), and empty "metadata" maps.
// Without this, every apply would carry noise into Metacontroller's
// last-applied annotation.
func ToObject(obj any) (Object, error) {
	raw, err := codec.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot encode %T: %w", obj, err)
	}
	var out Object
	if err := codec.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("cannot decode %T: %w", obj, err)
	}
	if out["apiVersion"] == nil || out["kind"] == nil {
		return nil, fmt.Errorf("object %T has no apiVersion or kind", obj)
	}
	// A desired object never carries status: the API server ignores it on
	// apply and it would only make last-applied noisy.
	delete(out, "status")
	prune(out)
	return out, nil
}

// prune removes null creationTimestamps and empty metadata maps, recursively.
func prune(v any) {
	switch t := v.(type) {
	case map[string]any:
		if meta, ok := t["metadata"].(map[string]any); ok {
			if ts, ok := meta["creationTimestamp"]; ok && ts == nil {
				delete(meta, "creationTimestamp")
			}
			if len(meta) == 0 {
				delete(t, "metadata")
			}
		}
		for _, child := range t {
			prune(child)
		}
	case []any:
		for _, child := range t {
			prune(child)
		}
	}
}
