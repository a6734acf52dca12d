//go:build !stdjson

package codec

import (
	"io"

	json "github.com/goccy/go-json"
)

// Implementation names the codec this binary was built with.
const Implementation = "github.com/goccy/go-json"

// RawMessage is a raw encoded JSON value (encoding/json's type).
type RawMessage = json.RawMessage

// UnmarshalTypeError describes a JSON value of the wrong type for its
// destination (encoding/json's type).
type UnmarshalTypeError = json.UnmarshalTypeError

// Marshal returns the JSON encoding of v, as encoding/json does.
func Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data into v, as encoding/json does.
func Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func newEncoder(w io.Writer) *json.Encoder { return json.NewEncoder(w) }
