package handoff

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/internal/codec"
)

// TestEncodeMatchesCodec fills every field of observations at random,
// through reflection, so that a field added to any of the wire types and
// not to encode fails here, and checks that encode writes exactly what
// codec.Marshal does, or fails where it fails.
func TestEncodeMatchesCodec(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 2026))
	kinds := 0
	for i := range 20000 {
		var obs observation.Observation
		for i := range reflect.TypeFor[observation.Observation]().NumField() {
			// A Node is the codec's (TestEncodeNode).
			if f := reflect.ValueOf(&obs).Elem().Field(i); f.Type() != reflect.TypeFor[*corev1.Node]() {
				fill(r, f)
			}
		}
		if i%4 != 0 {
			// Mostly one kind, as the hooks make them.
			keep := r.IntN(4)
			if keep != 0 {
				obs.Workspace = nil
			}
			if keep != 1 {
				obs.WorkspaceDeleted = nil
			}
			if keep != 2 {
				obs.Pod = nil
			}
			if keep != 3 {
				obs.Claim = nil
			}
		}
		want, wantErr := codec.Marshal(obs)
		got, gotErr := encode(obs)
		if (wantErr != nil) != (gotErr != nil) || !bytes.Equal(want, got) {
			t.Fatalf("observation %d:\ncodec:  %s (%v)\nencode: %s (%v)", i, want, wantErr, got, gotErr)
		}
		if obs.Workspace != nil && obs.Workspace.Class != nil && obs.Workspace.Class.Wake != nil && len(obs.Workspace.Conditions) > 0 {
			kinds++
		}
	}
	if kinds == 0 {
		t.Fatal("no observation had every part of a workspace status filled in: the filler does not reach them")
	}
}

// TestEncodeNode: a Node goes to the codec whole.
func TestEncodeNode(t *testing.T) {
	obs := observation.Observation{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pool-a-1", Labels: map[string]string{"a": "<b>"}}}}
	want, err := codec.Marshal(obs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := encode(obs)
	if err != nil || !bytes.Equal(want, got) {
		t.Errorf("encode(Node) = %s, %v; want %s", got, err, want)
	}
}

// strs are strings every writer of JSON gets wrong one way or another.
var strs = []string{"", "a", "team-a", "with space", `q"uote`, `back\slash`, "<b>&amp;", "a<b", "a>b", "a&b", "é", "\u2028", "\x00", "\x7f", "\xff", "tab\t", "nl\n", "\b\f", "~}|{"}

var ints = []int64{0, 1, -1, 42, math.MaxInt32, math.MinInt32}

// fill sets v to random values, as far down as it goes.
func fill(r *rand.Rand, v reflect.Value) {
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(randomTime(r)))
		return
	case reflect.TypeFor[metav1.Time]():
		v.Set(reflect.ValueOf(metav1.Time{Time: randomTime(r)}))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(strs[r.IntN(len(strs))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 1)
	case reflect.Int32, reflect.Int64:
		v.SetInt(ints[r.IntN(len(ints))])
	case reflect.Pointer:
		if r.IntN(3) == 0 {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(r, v.Elem())
	case reflect.Slice:
		n := r.IntN(3)
		if n == 0 {
			if r.IntN(2) == 0 {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(r, v.Index(i))
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(r, v.Field(i))
			}
		}
	case reflect.Map:
		// Only a Node has maps, and encode leaves Nodes to the codec.
	default:
		panic("fill: no values for " + v.Type().String())
	}
}

func randomTime(r *rand.Rand) time.Time {
	base := time.Date(2026, 12, 3, 10, 4, 5, 0, time.UTC)
	switch r.IntN(6) {
	case 0:
		return time.Time{}
	case 1:
		return base
	case 2:
		return base.Add(time.Duration(r.IntN(1e9)))
	case 3:
		return base.In(time.FixedZone("x", (r.IntN(48)-24)*1800))
	case 4:
		return time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	default:
		return time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
}
