//go:build stdjson

package codec

import (
	"encoding/json"
	"io"
)

// Implementation names the codec this binary was built with.
const Implementation = "encoding/json"

// RawMessage is a raw encoded JSON value.
type RawMessage = json.RawMessage

// UnmarshalTypeError describes a JSON value of the wrong type for its
// destination.
type UnmarshalTypeError = json.UnmarshalTypeError

// Marshal returns the JSON encoding of v.
func Marshal(v any) ([]byte, error) { return json.Marshal(v) }

// Unmarshal decodes data into v.
func Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func newEncoder(w io.Writer) *json.Encoder { return json.NewEncoder(w) }
