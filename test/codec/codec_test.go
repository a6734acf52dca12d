// Package codec compares JSON codecs on the hook server's real requests and
// responses, to choose the one the server uses (docs/performance.md, "The JSON
// codec"). It is a module of its own so that the codecs that lose stay out
// of the main go.mod. It asserts nothing about speed: the benchmarks print
// figures. The correctness tests hold every codec to encoding/json's
// behaviour and fail for each one that differs; a codec that fails here
// cannot be the server's.
//
//	cd test/codec && go test -run Correctness -v . ; go test -run '^$' -bench . -benchmem
//	GOEXPERIMENT=jsonv2 go test -run '^$' -bench . -benchmem   # read the encoding_json rows
package codec

import (
	"bytes"
	stdjson "encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/bytedance/sonic"
	goccy "github.com/goccy/go-json"
	segment "github.com/segmentio/encoding/json"

	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
)

// codec is one JSON implementation, used the way the hook server uses
// encoding/json: Unmarshal of a whole body, and an Encoder without HTML
// escaping.
type codec struct {
	name      string
	unmarshal func([]byte, any) error
	marshal   func(any) ([]byte, error)
	// differs lists the checks of correctness_test.go where the codec does
	// not behave as encoding/json does, as "<check>/<case>".
	differs []string
}

var codecs = []codec{
	{"encoding/json", stdjson.Unmarshal, func(v any) ([]byte, error) {
		var buf bytes.Buffer
		enc := stdjson.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(v)
		return buf.Bytes(), err
	}, nil},
	{"goccy/go-json", goccy.Unmarshal, func(v any) ([]byte, error) {
		var buf bytes.Buffer
		enc := goccy.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(v)
		return buf.Bytes(), err
	}, nil},
	{"bytedance/sonic", sonic.ConfigStd.Unmarshal, func(v any) ([]byte, error) {
		var buf bytes.Buffer
		enc := sonic.ConfigStd.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(v)
		return buf.Bytes(), err
	}, []string{
		// Invalid UTF-8 inside a raw value (the spec) is kept as it is;
		// encoding/json replaces it with U+FFFD.
		"edges/InvalidUTF8",
	}},
	{"segmentio/encoding", segment.Unmarshal, func(v any) ([]byte, error) {
		var buf bytes.Buffer
		enc := segment.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(v)
		return buf.Bytes(), err
	}, []string{
		// No nesting limit: 10,001 levels decode (encoding/json stops at
		// 10,000), even inside a value that is only skipped.
		"edges/DeepNesting", "edges/DeepNestingSkip",
	}},
}

type fixture struct {
	name string
	body []byte
}

func fixtures(t testing.TB) []fixture {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", "..", "fixtures", "workspace", "sync", "*", "request.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []fixture
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fixture{filepath.Base(filepath.Dir(p)), b})
	}
	return out
}

// answer runs the sync hook on body decoded by encoding/json.
func answer(t testing.TB, body []byte) any {
	t.Helper()
	// As the server decodes it: Decode keeps the body for the decisions
	// that re-emit the observed children whole.
	var req workspace.Request
	if err := req.Decode(body); err != nil {
		t.Fatal(err)
	}
	resp, err := workspace.New(workspace.Config{}).Sync(t.Context(), &req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// BenchmarkDecode decodes every Workspace sync fixture, in full
// (fullRequest) and as the server does (workspace.Request, which decodes
// each child only as a view of what a sync reads).
func BenchmarkDecode(b *testing.B) {
	fs := fixtures(b)
	for _, target := range []struct {
		name string
		new  func() any
	}{
		{"full", func() any { return new(fullRequest) }},
		{"server", func() any { return new(workspace.Request) }},
	} {
		// Only the bodies that encoding/json takes (the invalid-spec
		// fixture's spec does not fit the full type).
		var ok []fixture
		var n int64
		for _, f := range fs {
			if stdjson.Unmarshal(f.body, target.new()) == nil {
				ok = append(ok, f)
				n += int64(len(f.body))
			}
		}
		for _, c := range codecs {
			b.Run(target.name+"/"+strings.ReplaceAll(c.name, "/", "_"), func(b *testing.B) {
				b.SetBytes(n)
				b.ReportAllocs()
				for b.Loop() {
					for _, f := range ok {
						if err := c.unmarshal(f.body, target.new()); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	fs := fixtures(b)
	answers := make([]any, len(fs))
	for i, f := range fs {
		answers[i] = answer(b, f.body)
	}
	for _, c := range codecs {
		b.Run(strings.ReplaceAll(c.name, "/", "_"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, a := range answers {
					if _, err := c.marshal(a); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func init() {
	// sonic compiles a decoder per type on first use; do it before any
	// benchmark so that it is not measured.
	_ = sonic.Pretouch(reflect.TypeFor[workspace.Request]())
}
