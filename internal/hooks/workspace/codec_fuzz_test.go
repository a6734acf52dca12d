package workspace

import (
	"bytes"
	stdjson "encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/formspec/formspec-hooks/internal/codec"
)

// FuzzCodecMatchesStdlib holds the hook path's codec (internal/codec,
// github.com/goccy/go-json), which decodes and encodes the hook server's
// requests and responses, to encoding/json on
// this package's request type: the same bodies are refused, the same
// requests come out (compared through encoding/json, which writes every
// observed child as it was received), and the answers encode to the same
// bytes, which the ETags and the golden fixtures depend on.
//
//	go test ./internal/hooks/workspace -run '^$' -fuzz FuzzCodecMatchesStdlib -fuzztime 60s
func FuzzCodecMatchesStdlib(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("..", "..", "..", "fixtures", "workspace", "*", "*", "request.json"))
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"{\"parent\":{\"metadata\":{\"name\":\"a\\ud800\",\"namespace\":\"n\xff\"},\"spec\":{}}}",
		`{"parent":{"metadata":{"name":"a","name":"b"},"spec":{"clusterClass":"c"}},"related":{"ClusterClass.formspec.dev/v1alpha1":{"c":{"spec":{"scaling":{"minReplicas":1e400}}}}}}`,
		`{"parent":{"metadata":{"name":"a","generation":99999999999999999999}}}`,
		`{"children":{"Deployment.apps/v1":{"n/a":[]}},"parent":{"metadata":{"name":"a"}}}`,
		`{"parent":{"metadata":{"name":"a","creationTimestamp":"2026-01-10T09:00:00.123456789+07:00"},"spec":{"resources":{"limits":{"cpu":"1500m","memory":"1.5Gi"}},"disruptionBudget":{"maxUnavailable":"25%"}}}}`,
		`{"parent":{"metadata":{"name":"a"}}} trailing`,
	} {
		f.Add([]byte(s))
	}
	h := New(Config{})
	f.Fuzz(func(t *testing.T, body []byte) {
		var want, got Request
		wantErr := stdjson.Unmarshal(body, &want)
		gotErr := got.Decode(body)
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("encoding/json error %v, codec error %v", wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		wantRaw, err1 := stdjson.Marshal(&want)
		gotRaw, err2 := stdjson.Marshal(&got)
		if err1 != nil || err2 != nil {
			t.Fatalf("re-encoding the decoded requests: %v, %v", err1, err2)
		}
		if !bytes.Equal(wantRaw, gotRaw) {
			t.Fatalf("decoded requests differ:\nencoding/json %s\ncodec %s", wantRaw, gotRaw)
		}
		if got.Validate() != nil {
			return
		}
		resp, err := h.Sync(t.Context(), &got)
		if err != nil {
			return
		}
		var a, b bytes.Buffer
		stdEnc := stdjson.NewEncoder(&a)
		stdEnc.SetEscapeHTML(false)
		err1, err2 = stdEnc.Encode(resp), codec.Encode(&b, resp)
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("encoded answers differ (%v, %v):\nencoding/json %s\ncodec %s", err1, err2, a.Bytes(), b.Bytes())
		}
	})
}
