package metacontroller

import (
	"bytes"
	"fmt"

	"github.com/formspec/formspec-hooks/internal/codec"
)

// Key returns the ObjectMap group key for an apiVersion and kind:
// "Deployment.apps/v1", or "ConfigMap.v1" for the core group.
func Key(apiVersion, kind string) string {
	return kind + "." + apiVersion
}

// Name returns the ObjectMap object key: "namespace/name", or "name" for a
// cluster-scoped object.
func Name(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// Get decodes the object stored under key and name into a new T. It returns
// nil and no error when the object is not there.
func Get[T any](m ObjectMap, key, name string) (*T, error) {
	return GetAs(m, key, name, func(raw []byte) (*T, error) {
		out := new(T)
		return out, codec.Unmarshal(raw, out)
	})
}

// GetAs is Get, with decode in place of the codec's plain decoding: for
// decoders that read an object only as far as a hook needs it
// (internal/objects). Its error is reported as Get's.
func GetAs[T any](m ObjectMap, key, name string, decode func([]byte) (*T, error)) (*T, error) {
	raw, ok := m[key][name]
	if !ok || isNull(raw) {
		return nil, nil
	}
	out, err := decode(raw)
	if err != nil {
		return nil, &InvalidObjectError{What: key + " " + name, Err: err}
	}
	return out, nil
}

// InvalidObjectError reports an object in a hook request that does not
// decode into its type. It is the caller's mistake, not a bug in the hook,
// so the transport answers it with a 400 (see BadRequest).
type InvalidObjectError struct {
	// What names the object, e.g. "Deployment.apps/v1 ns/name".
	What string
	Err  error
}

func (e *InvalidObjectError) Error() string {
	return fmt.Sprintf("cannot decode %s: %v", e.What, e.Err)
}

func (e *InvalidObjectError) Unwrap() error { return e.Err }

// Is reports whether target is an InvalidObjectError about the same object,
// whatever the decoder said about it: errors.Is(err,
// &InvalidObjectError{What: "Node"}) asks "was the Node the fault?" without
// depending on a decoder's wording.
func (e *InvalidObjectError) Is(target error) bool {
	t, ok := target.(*InvalidObjectError)
	return ok && t.What == e.What
}

// BadRequest marks the error as the request's fault.
func (e *InvalidObjectError) BadRequest() bool { return true }

// LimitError reports a request that carries more of something than a hook
// serves: more related objects of a kind, or a related object with more
// entries than its CRD allows. It is the caller's request at fault, so the
// transport answers 413, before the work the count would multiply. The
// text names what was counted and the limit, never a value from the
// request.
type LimitError struct {
	// What is counted, e.g. "related ResourceClaims".
	What  string
	Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("request carries more than %d %s", e.Limit, e.What)
}

// TooLarge marks the error as a request over a limit.
func (e *LimitError) TooLarge() bool { return true }

// Limit returns a *LimitError when n is over limit, else nil.
func Limit(what string, n, limit int) error {
	if n > limit {
		return &LimitError{What: what, Limit: limit}
	}
	return nil
}

// Decode unmarshals one object of a request into out, reporting failure as
// an *InvalidObjectError naming what.
func Decode(raw codec.RawMessage, out any, what string) error {
	if err := codec.Unmarshal(raw, out); err != nil {
		return &InvalidObjectError{What: what, Err: err}
	}
	return nil
}

// Count returns how many objects the map holds across all groups.
func (m ObjectMap) Count() int {
	n := 0
	for _, group := range m {
		for _, raw := range group {
			if !isNull(raw) {
				n++
			}
		}
	}
	return n
}

// isNull reports whether raw is absent or JSON null. It looks at the
// bytes in place: the objects it is asked about are the request's largest
// values, and a string conversion would copy each one.
func isNull(raw codec.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}
