// Package codec is the one JSON codec of the hook path: the transport's
// decoding of requests and encoding of answers, the hooks' decoding of
// the objects inside a request and of the views they read, the wire form
// of desired children, and the hand-off to the sidecar all go through it,
// so that one implementation decides what the hook server reads and
// writes (docs/performance.md, "The JSON codec", says which and why).
//
// Packages off the hook path (the reporter, the CLIs, the reference
// Cluster Control) use encoding/json directly: nothing there is hot.
package codec

import "io"

// Encode writes v to w as one line of JSON, with map keys sorted and no
// HTML escaping: an answer is never HTML, and "<" inside a user's config
// value should reach the cluster as written.
func Encode(w io.Writer, v any) error {
	enc := newEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
