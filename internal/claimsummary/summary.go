// Package claimsummary is what a Workspace needs to know about its
// ResourceClaims, written on the Workspace itself as one annotation.
//
// Metacontroller maps a write of a related object back to its parents by
// testing every parent, so relating each Workspace to the claims of its
// namespace makes every claim write cost a pass over the whole fleet. The
// elected reporter, which can look claims up by workspace in its own
// index, writes this summary instead; a write to the Workspace reaches
// Metacontroller as a change of that one parent, and the workspace hook
// reads the summary from the parent it is given.
//
// The summary decides which credentials Secret a workspace's pods mount,
// so it is trusted only because an admission policy lets no one but the
// reporter's service account write it. The hook checks it anyway: a
// summary that does not parse, names a Secret other than the claim's own,
// or is larger than a workspace can need is refused, never half-used.
//
// Imported by the workspace hook and the reporter; not a public API.
package claimsummary

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// Annotation on a Workspace holds its claims summary, as JSON.
const Annotation = "formspec.dev/claims"

// SecretSuffix ends the name of every claim's credentials Secret.
const SecretSuffix = "-credentials"

// MaxClaims bounds a summary: one claim per datastore entry, and a
// workspace has at most v1alpha1.MaxWorkspaceDatastores of those.
const MaxClaims = v1alpha1.MaxWorkspaceDatastores

// States of a summarised claim, as the workspace hook acts on them.
const (
	// StateReady: verified, its credentials Secret named; injected.
	StateReady = "Ready"
	// StateDenied: the resourceclaim hook refused the grant.
	StateDenied = "Denied"
	// StatePending: not verified yet, or going away.
	StatePending = "Pending"
)

// Claim is one ResourceClaim as a workspace sees it.
type Claim struct {
	// Name of the claim, in the workspace's namespace.
	Name string `json:"name"`
	// Datastore the claim asks for; Namespace is always filled in.
	Datastore v1alpha1.DatastoreClaimRef `json:"datastore"`
	// State is StateReady, StateDenied or StatePending.
	State string `json:"state"`
	// SecretName is the credentials Secret, set only when Ready.
	SecretName string `json:"secretName,omitempty"`
	// CredentialsHash is the claim's status.credentialsHash, set only when
	// Ready; it rolls the pods when the credentials rotate.
	CredentialsHash string `json:"credentialsHash,omitempty"`
}

// Summary is the value of Annotation: the claim serving each datastore
// entry of the workspace, ordered by name. A datastore entry with no claim
// has no entry here.
type Summary struct {
	Claims []Claim `json:"claims"`
}

// Ready is true when the claim's last verdict was Ready and names the
// Secret to inject, and the claim is not going away. A verdict older than
// the claim's spec still counts: while the resourceclaim hook re-verifies
// an edited claim, dropping the credentials would roll every pod twice; a
// grant the re-verification denies loses its Secret a moment later.
func Ready(c *v1alpha1.ResourceClaim) bool {
	if c.DeletionTimestamp != nil {
		return false
	}
	return meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionReady) &&
		c.Status.Binding != nil && c.Status.Binding.Name != ""
}

// Best picks the claim serving a datastore among those asking for it: a
// ready one wins, then the first by name, so the choice does not depend
// on the order they came in. Nil when there are none.
func Best(matches []*v1alpha1.ResourceClaim) *v1alpha1.ResourceClaim {
	if len(matches) == 0 {
		return nil
	}
	return slices.MinFunc(matches, func(a, b *v1alpha1.ResourceClaim) int {
		if ra, rb := Ready(a), Ready(b); ra != rb {
			if ra {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// DatastoreKey is "namespace/name" of the datastore a claim asks for, its
// own namespace when it names none.
func DatastoreKey(c *v1alpha1.ResourceClaim) string {
	ns := c.Spec.Datastore.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	return ns + "/" + c.Spec.Datastore.Name
}

// ByDatastore groups the claims that name workspace ws (in its namespace)
// by DatastoreKey. Matching every datastore entry through it stays linear
// in entries plus claims.
func ByDatastore(ws *v1alpha1.Workspace, claims []*v1alpha1.ResourceClaim) map[string][]*v1alpha1.ResourceClaim {
	out := map[string][]*v1alpha1.ResourceClaim{}
	for _, c := range claims {
		if c.Namespace != ws.Namespace || c.Spec.Workspace != ws.Name {
			continue
		}
		key := DatastoreKey(c)
		out[key] = append(out[key], c)
	}
	return out
}

// Entry is one distinct datastore entry of a workspace and the claim
// serving it, nil when none does.
type Entry struct {
	Ref v1alpha1.DatastoreRef
	// Namespace is the datastore's, the workspace's when Ref names none.
	Namespace string
	Claim     *v1alpha1.ResourceClaim
}

// Match pairs each datastore entry of ws, in spec order, with the claim
// Best picks among those naming ws and that datastore. The same datastore
// written twice (once with the workspace's own namespace, once without)
// would mount one Secret twice under one volume name, which the API
// server refuses: the first entry wins.
func Match(ws *v1alpha1.Workspace, claims []*v1alpha1.ResourceClaim) []Entry {
	byStore := ByDatastore(ws, claims)
	out := make([]Entry, 0, len(ws.Spec.Datastores))
	seen := map[string]bool{}
	for _, ref := range ws.Spec.Datastores {
		ns := cmpOr(ref.Namespace, ws.Namespace)
		key := ns + "/" + ref.Name
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, Entry{Ref: ref, Namespace: ns, Claim: Best(byStore[key])})
	}
	return out
}

// For summarises claims for ws: for each distinct datastore entry, the
// claim Best picks among those naming ws and that datastore. claims may
// hold any claims; those of other workspaces are ignored. A ready claim
// whose status names another Secret than its own, or no credentialsHash,
// was not written by the resourceclaim hook; it is summarised as Pending,
// so that what For writes always passes Parse.
func For(ws *v1alpha1.Workspace, claims []*v1alpha1.ResourceClaim) Summary {
	s := Summary{Claims: []Claim{}}
	for _, m := range Match(ws, claims) {
		c, ns, ref := m.Claim, m.Namespace, m.Ref
		if c == nil {
			continue
		}
		e := Claim{Name: c.Name, Datastore: v1alpha1.DatastoreClaimRef{Name: ref.Name, Namespace: ns}, State: StatePending}
		switch {
		case Ready(c) && c.Status.Binding.Name == c.Name+SecretSuffix && c.Status.CredentialsHash != "":
			e.State = StateReady
			e.SecretName = c.Status.Binding.Name
			e.CredentialsHash = c.Status.CredentialsHash
		case meta.IsStatusConditionTrue(c.Status.Conditions, v1alpha1.ConditionDenied):
			e.State = StateDenied
		}
		s.Claims = append(s.Claims, e)
	}
	slices.SortFunc(s.Claims, func(a, b Claim) int { return strings.Compare(a.Name, b.Name) })
	return s
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Encode is the annotation value for s: the same summary always encodes
// to the same bytes, so the reporter writes only what changed.
func Encode(s Summary) string {
	if s.Claims == nil {
		s.Claims = []Claim{}
	}
	b, err := json.Marshal(s)
	if err != nil {
		// A Summary holds only strings; it always encodes.
		panic(fmt.Sprintf("claimsummary: encode: %v", err))
	}
	return string(b)
}

// ErrInvalid wraps every reason Parse refuses a value.
var ErrInvalid = errors.New("invalid claims summary")

// MaxBytes bounds an annotation value Parse reads at all.
const MaxBytes = 64 << 10

// Parse reads an annotation value and checks each entry: a DNS-subdomain
// claim name, a known state, and for a Ready claim exactly the Secret the
// resourceclaim hook names for it (name + SecretSuffix) and a hash; no
// entry twice.
func Parse(value string) (Summary, error) {
	if len(value) > MaxBytes {
		return Summary{}, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(value), MaxBytes)
	}
	var s Summary
	dec := json.NewDecoder(bytes.NewReader([]byte(value)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Summary{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Summary{}, fmt.Errorf("%w: text after the JSON value", ErrInvalid)
	}
	if s.Claims == nil {
		// null, {} or {"claims":null}: Encode always writes the list.
		return Summary{}, fmt.Errorf("%w: no claims list", ErrInvalid)
	}
	if len(s.Claims) > MaxClaims {
		return Summary{}, fmt.Errorf("%w: %d claims, at most %d", ErrInvalid, len(s.Claims), MaxClaims)
	}
	seen := map[string]bool{}
	for i, c := range s.Claims {
		if errs := validation.IsDNS1123Subdomain(c.Name); len(errs) > 0 {
			return Summary{}, fmt.Errorf("%w: claim %d: name %q: %s", ErrInvalid, i, c.Name, errs[0])
		}
		if seen[c.Name] {
			return Summary{}, fmt.Errorf("%w: claim %q twice", ErrInvalid, c.Name)
		}
		seen[c.Name] = true
		if c.Datastore.Name == "" || c.Datastore.Namespace == "" {
			return Summary{}, fmt.Errorf("%w: claim %q: datastore name and namespace are required", ErrInvalid, c.Name)
		}
		switch c.State {
		case StateReady:
			if c.SecretName != c.Name+SecretSuffix {
				return Summary{}, fmt.Errorf("%w: claim %q: secretName must be %q", ErrInvalid, c.Name, c.Name+SecretSuffix)
			}
			if c.CredentialsHash == "" {
				return Summary{}, fmt.Errorf("%w: claim %q: a Ready claim needs its credentialsHash", ErrInvalid, c.Name)
			}
		case StateDenied, StatePending:
			if c.SecretName != "" || c.CredentialsHash != "" {
				return Summary{}, fmt.Errorf("%w: claim %q: only a Ready claim names a Secret", ErrInvalid, c.Name)
			}
		default:
			return Summary{}, fmt.Errorf("%w: claim %q: state %q is not Ready, Denied or Pending", ErrInvalid, c.Name, c.State)
		}
	}
	return s, nil
}

// ResourceClaims turns s back into ResourceClaims of workspace ws, carrying
// exactly what the workspace hook reads from a claim, so the hook matches
// them by the same rules whether they came related or summarised.
func (s Summary) ResourceClaims(ws *v1alpha1.Workspace) []*v1alpha1.ResourceClaim {
	out := make([]*v1alpha1.ResourceClaim, 0, len(s.Claims))
	for _, e := range s.Claims {
		c := &v1alpha1.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: ws.Namespace},
			Spec:       v1alpha1.ResourceClaimSpec{Workspace: ws.Name, Datastore: e.Datastore},
		}
		switch e.State {
		case StateReady:
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}}
			c.Status.Binding = &v1alpha1.Binding{Name: e.SecretName}
			c.Status.CredentialsHash = e.CredentialsHash
		case StateDenied:
			c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionDenied, Status: metav1.ConditionTrue}}
		}
		out = append(out, c)
	}
	return out
}
