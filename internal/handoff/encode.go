package handoff

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/formspec/formspec-hooks/hooks/api/observation"
	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/codec"
)

// encode is codec.Marshal(obs), byte for byte, written out by hand for
// every kind of observation but a Node's. Send encodes on the hook's
// goroutine, once per sync, and the hook calls are far apart: the codec's
// general path then brings its compiled programs for these types into the
// caches for every call, where these few functions are short. A Node (the
// node-health hook, a few calls a minute) and anything unusual (a time
// outside the years JSON can hold) go to the codec. TestEncodeMatchesCodec
// fills every field of every type and compares.
func encode(obs observation.Observation) ([]byte, error) {
	if obs.Node != nil {
		return codec.Marshal(obs)
	}
	e := encoder{b: make([]byte, 0, 512)}
	e.byte('{')
	first := true
	field := func(name string) {
		if !first {
			e.byte(',')
		}
		first = false
		e.key(name)
	}
	if w := obs.Workspace; w != nil {
		field("workspace")
		e.workspace(w)
	}
	if d := obs.WorkspaceDeleted; d != nil {
		field("workspaceDeleted")
		e.workspaceRef(d)
	}
	if p := obs.Pod; p != nil {
		field("pod")
		e.pod(p)
	}
	if c := obs.Claim; c != nil {
		field("claim")
		e.claim(c)
	}
	e.byte('}')
	if e.unusual {
		return codec.Marshal(obs)
	}
	return e.b, nil
}

// encoder appends JSON to b. A value it cannot write as the codec would
// sets unusual, and encode gives the whole observation to the codec.
type encoder struct {
	b       []byte
	unusual bool
}

func (e *encoder) byte(c byte) { e.b = append(e.b, c) }

// key writes "name": for a name that needs no escaping (all of them are
// the wire types' own).
func (e *encoder) key(name string) {
	e.b = append(e.b, '"')
	e.b = append(e.b, name...)
	e.b = append(e.b, '"', ':')
}

// str writes s as a JSON string. One that needs any escaping (quotes,
// backslashes, control characters, HTML's <, > and &, anything outside
// ASCII) is the codec's to write, so that the bytes are its own.
func (e *encoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, err := codec.Marshal(s)
			if err != nil {
				e.unusual = true
				return
			}
			e.b = append(e.b, quoted...)
			return
		}
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, s...)
	e.b = append(e.b, '"')
}

func (e *encoder) int(v int64) { e.b = strconv.AppendInt(e.b, v, 10) }

// time writes t as time.Time's MarshalJSON does; a year outside 0-9999
// is unusual (MarshalJSON refuses it).
func (e *encoder) time(t time.Time) {
	if y := t.Year(); y < 0 || y > 9999 {
		e.unusual = true
		return
	}
	e.b = append(e.b, '"')
	e.b = t.AppendFormat(e.b, time.RFC3339Nano)
	e.b = append(e.b, '"')
}

// metaTime writes t as metav1.Time's MarshalJSON does: null when zero,
// else in UTC to the second, whatever the year.
func (e *encoder) metaTime(t metav1.Time) {
	if t.IsZero() {
		e.b = append(e.b, "null"...)
		return
	}
	e.b = append(e.b, '"')
	e.b = t.UTC().AppendFormat(e.b, time.RFC3339)
	e.b = append(e.b, '"')
}

// field writes ,"key": (every object below starts with a field of its
// own, so each later one has a comma).
func (e *encoder) field(key string) {
	e.b = append(e.b, ',', '"')
	e.b = append(e.b, key...)
	e.b = append(e.b, '"', ':')
}

func (e *encoder) strField(key, v string) { e.field(key); e.str(v) }

func (e *encoder) intField(key string, v int64) { e.field(key); e.int(v) }

// omitEmpty and the others write a field with omitempty's rule.
func (e *encoder) omitEmpty(key, v string) {
	if v != "" {
		e.strField(key, v)
	}
}

func (e *encoder) omitZero(key string, v int64) {
	if v != 0 {
		e.intField(key, v)
	}
}

func (e *encoder) omitFalse(key string, v bool) {
	if v {
		e.field(key)
		e.b = append(e.b, "true"...)
	}
}

func (e *encoder) omitZeroTime(key string, t time.Time) {
	if !t.IsZero() {
		e.field(key)
		e.time(t)
	}
}

// item opens a list before its first element and separates the others.
func (e *encoder) item(i int) {
	if i == 0 {
		e.byte('[')
	} else {
		e.byte(',')
	}
}

// names opens an object with its namespace, name and, when set, uid.
func (e *encoder) names(namespace, name string, uid types.UID) {
	e.b = append(e.b, `{"namespace":`...)
	e.str(namespace)
	e.strField("name", name)
	e.omitEmpty("uid", string(uid))
}

// The methods below follow their types' fields in order, with the
// omitempty and omitzero of their tags.

func (e *encoder) workspace(w *observation.WorkspaceStatus) {
	e.names(w.Namespace, w.Name, w.UID)
	e.omitEmpty("clusterClass", w.ClusterClass)
	e.omitZero("observedGeneration", w.ObservedGeneration)
	e.strField("phase", w.Phase)
	if len(w.Conditions) > 0 {
		e.field("conditions")
		for i := range w.Conditions {
			e.item(i)
			e.condition(&w.Conditions[i])
		}
		e.byte(']')
	}
	e.intField("replicas", int64(w.Replicas))
	e.intField("readyReplicas", int64(w.ReadyReplicas))
	e.intField("updatedReplicas", int64(w.UpdatedReplicas))
	e.omitEmpty("artifactHash", w.ArtifactHash)
	if len(w.Datastores) > 0 {
		e.field("datastores")
		for i := range w.Datastores {
			e.item(i)
			e.datastore(&w.Datastores[i])
		}
		e.byte(']')
	}
	e.omitEmpty("wantedArtifactHash", w.WantedArtifactHash)
	e.omitFalse("idle", w.Idle)
	e.omitFalse("wakeOverflow", w.WakeOverflow)
	e.omitFalse("terminating", w.Terminating)
	if w.Class != nil {
		e.field("class")
		e.class(w.Class)
	}
	e.omitZeroTime("observedAt", w.ObservedAt)
	e.omitFalse("statusChanged", w.StatusChanged)
	e.byte('}')
}

func (e *encoder) condition(c *metav1.Condition) {
	e.b = append(e.b, `{"type":`...)
	e.str(c.Type)
	e.strField("status", string(c.Status))
	e.omitZero("observedGeneration", c.ObservedGeneration)
	e.field("lastTransitionTime")
	e.metaTime(c.LastTransitionTime)
	e.strField("reason", c.Reason)
	e.strField("message", c.Message)
	e.byte('}')
}

func (e *encoder) datastore(d *v1alpha1.WorkspaceDatastoreStatus) {
	e.b = append(e.b, `{"name":`...)
	e.str(d.Name)
	e.omitEmpty("claim", d.Claim)
	e.strField("state", d.State)
	e.omitEmpty("secretName", d.SecretName)
	e.byte('}')
}

func (e *encoder) class(c *observation.ClassInfo) {
	e.b = append(e.b, `{"name":`...)
	e.str(c.Name)
	e.intField("maxWorkspaces", int64(c.MaxWorkspaces))
	e.omitFalse("scaleToZero", c.ScaleToZero)
	if w := c.Wake; w != nil {
		e.field("wake")
		e.byte('{')
		if w.IdleAfterSeconds != 0 {
			e.b = append(e.b, `"idleAfterSeconds":`...)
			e.int(int64(w.IdleAfterSeconds))
			e.byte(',')
		}
		e.b = append(e.b, `"timeoutSeconds":`...)
		e.int(int64(w.TimeoutSeconds))
		e.intField("maxHeldRequests", int64(w.MaxHeldRequests))
		e.byte('}')
	}
	e.byte('}')
}

func (e *encoder) workspaceRef(r *observation.WorkspaceRef) {
	e.names(r.Namespace, r.Name, r.UID)
	e.omitZeroTime("observedAt", r.ObservedAt)
	e.byte('}')
}

func (e *encoder) pod(p *observation.PodPlacement) {
	e.names(p.Namespace, p.Name, "")
	e.strField("workspace", p.Workspace)
	e.omitEmpty("nodeName", p.NodeName)
	e.omitEmpty("phase", string(p.Phase))
	e.omitFalse("terminating", p.Terminating)
	e.byte('}')
}

func (e *encoder) claim(c *observation.ClaimDecision) {
	e.names(c.Namespace, c.Name, c.UID)
	e.omitEmpty("workspace", c.Workspace)
	e.field("granted")
	e.b = strconv.AppendBool(e.b, c.Granted)
	e.omitEmpty("reason", c.Reason)
	e.omitEmpty("message", c.Message)
	e.omitEmpty("credentialsVersion", c.CredentialsVersion)
	e.field("since")
	e.metaTime(c.Since)
	e.finding("exposed", c.Exposed)
	e.finding("legacySignature", c.LegacySignature)
	e.byte('}')
}

// finding writes a claim's finding under name, nothing when it is nil.
func (e *encoder) finding(name string, f *observation.Finding) {
	if f == nil {
		return
	}
	e.field(name)
	e.b = append(e.b, `{"reason":`...)
	e.str(f.Reason)
	e.omitEmpty("message", f.Message)
	e.byte('}')
}
