package codec

import (
	"bytes"
	stdjson "encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/formspec/formspec-hooks/internal/hooks/workspace"
)

// TestCorrectnessRequests decodes every Workspace sync fixture with each
// codec and compares the typed result with encoding/json's: the k8s
// custom unmarshalers (Time, Quantity, IntOrString) must run the same way.
func TestCorrectnessRequests(t *testing.T) {
	fs := fixtures(t)
	for _, c := range codecs[1:] {
		t.Run(c.name, func(t *testing.T) {
			d := differs{t: t, want: c.differs}
			defer d.check("requests")
			for _, f := range fs {
				var want, got fullRequest
				wantErr, gotErr := codecs[0].unmarshal(f.body, &want), c.unmarshal(f.body, &got)
				if (wantErr == nil) != (gotErr == nil) {
					d.add("requests", f.name, "encoding/json error %v, %s error %v", wantErr, c.name, gotErr)
				}
				if wantErr != nil || gotErr != nil {
					continue
				}
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 && a.String() == b.String() })); diff != "" {
					d.add("requests", f.name, "decoded request differs from encoding/json's: -want, +got:\n%s", diff)
				}
			}
		})
	}
}

// TestCorrectnessResponses encodes every answer with each codec: the bytes
// must be encoding/json's, since ETags and fixtures depend on them.
func TestCorrectnessResponses(t *testing.T) {
	fs := fixtures(t)
	for _, c := range codecs[1:] {
		t.Run(c.name, func(t *testing.T) {
			d := differs{t: t, want: c.differs}
			defer d.check("responses")
			for _, f := range fs {
				a := answer(t, f.body)
				want, err := codecs[0].marshal(a)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.marshal(a)
				if err != nil {
					d.add("requests", f.name, "%v", err)
					continue
				}
				if !bytes.Equal(want, got) {
					d.add("responses", f.name, "encoded response differs from encoding/json's:\n%s", cmp.Diff(string(want), string(got)))
				}
			}
		})
	}
}

// TestCorrectnessEdges feeds each codec the inputs a hostile or broken
// client may send and compares accept/refuse (and the value) with
// encoding/json.
func TestCorrectnessEdges(t *testing.T) {
	parent := func(spec string) []byte {
		return []byte(`{"parent":{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"a","namespace":"n"},"spec":` + spec + `},"children":{},"related":{}}`)
	}
	deep := strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001)
	edges := map[string][]byte{
		"InvalidUTF8":      parent("{\"clusterClass\":\"c\xff\"}"),
		"DuplicateKeys":    []byte(`{"parent":{"metadata":{"name":"a","name":"b","namespace":"n"},"spec":{}},"children":{}}`),
		"HugeNumber":       []byte(`{"parent":{"metadata":{"name":"a","generation":1e400},"spec":{}}}`),
		"HugeInt":          []byte(`{"parent":{"metadata":{"name":"a","generation":99999999999999999999999},"spec":{}}}`),
		"DeepNesting":      []byte(`{"parent":{"metadata":{"name":"a"},"spec":{"cache":` + deep + `}}}`),
		"DeepNestingSkip":  []byte(`{"controller":` + deep + `,"parent":{"metadata":{"name":"a"},"spec":{}}}`),
		"BadTime":          []byte(`{"parent":{"metadata":{"name":"a","creationTimestamp":"yesterday"},"spec":{}}}`),
		"BadQuantity":      []byte(`{"children":{"Deployment.apps/v1":{"n/a":{"spec":{"template":{"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"lots"}}}]}}}}}},"parent":{"metadata":{"name":"a"}}}`),
		"IntOrString":      []byte(`{"children":{"PodDisruptionBudget.policy/v1":{"n/a":{"spec":{"maxUnavailable":"25%","minAvailable":2}}}},"parent":{"metadata":{"name":"a"}}}`),
		"ChildNotObject":   []byte(`{"children":{"ConfigMap.v1":{"n/a":7}},"parent":{"metadata":{"name":"a"}}}`),
		"TrailingGarbage":  []byte(`{"parent":{"metadata":{"name":"a"}}} x`),
		"EscapedKeyCase":   []byte(`{"PARENT":{"metadata":{"name":"a"}}}`),
		"NullParent":       []byte(`{"parent":null}`),
		"EscapedUnicode":   parent(`{"clusterClass":"\ud800x"}`),
		"LargeStringField": parent(`{"clusterClass":"` + strings.Repeat("x", 1<<16) + `"}`),
	}
	for _, c := range codecs[1:] {
		t.Run(c.name, func(t *testing.T) {
			d := differs{t: t, want: c.differs}
			defer d.check("edges")
			for name, body := range edges {
				// In full, and as the server decodes it (compared through
				// encoding/json, which writes what each decoded).
				var want, got fullRequest
				var wantServer, gotServer workspace.Request
				for _, target := range [][2]any{{&want, &got}, {&wantServer, &gotServer}} {
					wantErr := codecs[0].unmarshal(body, target[0])
					gotErr := c.unmarshal(body, target[1])
					switch {
					case (wantErr == nil) != (gotErr == nil):
						d.add("edges", name, "(%T) encoding/json error %v, %s error %v", target[0], wantErr, c.name, gotErr)
					case wantErr == nil:
						a, _ := stdjson.Marshal(target[0])
						b, _ := stdjson.Marshal(target[1])
						if diff := cmp.Diff(string(a), string(b)); diff != "" {
							d.add("edges", name, "(%T) -encoding/json, +%s:\n%s", target[0], c.name, diff)
						}
					}
				}
			}
		})
	}
}

// differs records, for one codec, which checks differ from encoding/json,
// and compares them with what the codec's entry in codecs says: a codec's
// known differences are pinned, and a change in either direction fails.
type differs struct {
	t    *testing.T
	want []string
	got  []string
}

func (d *differs) add(check, name, format string, args ...any) {
	d.got = append(d.got, check+"/"+name)
	d.t.Logf(check+"/"+name+": "+format, args...)
}

func (d *differs) check(check string) {
	var want []string
	for _, w := range d.want {
		if strings.HasPrefix(w, check+"/") {
			want = append(want, w)
		}
	}
	slices.Sort(d.got)
	d.got = slices.Compact(d.got)
	if diff := cmp.Diff(want, d.got, cmpopts.EquateEmpty()); diff != "" {
		d.t.Errorf("checks that differ from encoding/json: -want, +got:\n%s", diff)
	}
}
