package claimsummary

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
)

// workspace is a Workspace of team-a with the given datastore entries.
func workspace(name string, refs ...v1alpha1.DatastoreRef) *v1alpha1.Workspace {
	return &v1alpha1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec:       v1alpha1.WorkspaceSpec{Datastores: refs},
	}
}

// state is what the resourceclaim hook last decided about a claim.
type state int

const (
	pending state = iota
	ready
	denied
)

// claim is a ResourceClaim of team-a as the resourceclaim hook leaves it.
func claim(name, ws, store, storeNS string, s state) *v1alpha1.ResourceClaim {
	c := &v1alpha1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec:       v1alpha1.ResourceClaimSpec{Workspace: ws, Datastore: v1alpha1.DatastoreClaimRef{Name: store, Namespace: storeNS}},
	}
	switch s {
	case ready:
		c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue}, {Type: v1alpha1.ConditionDenied, Status: metav1.ConditionFalse}}
		c.Status.Binding = &v1alpha1.Binding{Name: name + SecretSuffix}
		c.Status.CredentialsHash = "sha256:" + name
	case denied:
		c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse}, {Type: v1alpha1.ConditionDenied, Status: metav1.ConditionTrue}}
	}
	return c
}

func ref(name, namespace string) v1alpha1.DatastoreRef {
	return v1alpha1.DatastoreRef{Name: name, Namespace: namespace}
}

func TestFor(t *testing.T) {
	db := v1alpha1.DatastoreClaimRef{Name: "db", Namespace: "team-a"}
	cases := map[string]struct {
		reason string
		ws     *v1alpha1.Workspace
		claims []*v1alpha1.ResourceClaim
		want   Summary
	}{
		"NoDatastores": {
			reason: "A workspace without datastore entries summarises to an empty list, never to null.",
			ws:     workspace("acme"),
			claims: []*v1alpha1.ResourceClaim{claim("c1", "acme", "db", "", ready)},
			want:   Summary{Claims: []Claim{}},
		},
		"Ready": {
			reason: "A ready claim names its Secret and hash; the datastore namespace defaults to the workspace's.",
			ws:     workspace("acme", ref("db", "")),
			claims: []*v1alpha1.ResourceClaim{claim("c1", "acme", "db", "", ready)},
			want:   Summary{Claims: []Claim{{Name: "c1", Datastore: db, State: StateReady, SecretName: "c1-credentials", CredentialsHash: "sha256:c1"}}},
		},
		"Denied": {
			reason: "A denied claim is summarised as Denied, without a Secret.",
			ws:     workspace("acme", ref("db", "")),
			claims: []*v1alpha1.ResourceClaim{claim("c1", "acme", "db", "", denied)},
			want:   Summary{Claims: []Claim{{Name: "c1", Datastore: db, State: StateDenied}}},
		},
		"Pending": {
			reason: "A claim not verified yet is Pending.",
			ws:     workspace("acme", ref("db", "")),
			claims: []*v1alpha1.ResourceClaim{claim("c1", "acme", "db", "", pending)},
			want:   Summary{Claims: []Claim{{Name: "c1", Datastore: db, State: StatePending}}},
		},
		"Deleting": {
			reason: "A ready claim that is going away is Pending: its Secret is about to go.",
			ws:     workspace("acme", ref("db", "")),
			claims: func() []*v1alpha1.ResourceClaim {
				c := claim("c1", "acme", "db", "", ready)
				c.DeletionTimestamp = &metav1.Time{}
				return []*v1alpha1.ResourceClaim{c}
			}(),
			want: Summary{Claims: []Claim{{Name: "c1", Datastore: db, State: StatePending}}},
		},
		"ForeignSecret": {
			reason: "A Ready status naming a Secret other than the claim's own was not the resourceclaim hook's: Pending, so that Parse accepts what For writes.",
			ws:     workspace("acme", ref("db", "")),
			claims: func() []*v1alpha1.ResourceClaim {
				c := claim("c1", "acme", "db", "", ready)
				c.Status.Binding.Name = "someone-elses"
				return []*v1alpha1.ResourceClaim{c}
			}(),
			want: Summary{Claims: []Claim{{Name: "c1", Datastore: db, State: StatePending}}},
		},
		"BestPerDatastore": {
			reason: "Among claims for one datastore a ready one wins over an earlier name; then the first by name.",
			ws:     workspace("acme", ref("db", ""), ref("cache", "")),
			claims: []*v1alpha1.ResourceClaim{
				claim("b-ready", "acme", "db", "", ready),
				claim("a-pending", "acme", "db", "", pending),
				claim("z-cache", "acme", "cache", "", denied),
				claim("y-cache", "acme", "cache", "", pending),
			},
			want: Summary{Claims: []Claim{
				{Name: "b-ready", Datastore: db, State: StateReady, SecretName: "b-ready-credentials", CredentialsHash: "sha256:b-ready"},
				{Name: "y-cache", Datastore: v1alpha1.DatastoreClaimRef{Name: "cache", Namespace: "team-a"}, State: StatePending},
			}},
		},
		"OtherWorkspaces": {
			reason: "Claims of another workspace, or of a workspace of the same name in another namespace, are ignored.",
			ws:     workspace("acme", ref("db", "")),
			claims: func() []*v1alpha1.ResourceClaim {
				elsewhere := claim("c2", "acme", "db", "", ready)
				elsewhere.Namespace = "team-b"
				return []*v1alpha1.ResourceClaim{claim("c1", "globex", "db", "", ready), elsewhere}
			}(),
			want: Summary{Claims: []Claim{}},
		},
		"DuplicateEntries": {
			reason: "The same datastore written twice (with and without the workspace's namespace) is summarised once.",
			ws:     workspace("acme", ref("db", ""), ref("db", "team-a")),
			claims: []*v1alpha1.ResourceClaim{claim("c1", "acme", "db", "team-a", ready)},
			want:   Summary{Claims: []Claim{{Name: "c1", Datastore: db, State: StateReady, SecretName: "c1-credentials", CredentialsHash: "sha256:c1"}}},
		},
		"DatastoreNamespace": {
			reason: "A datastore in another namespace matches only a claim naming that namespace.",
			ws:     workspace("acme", ref("db", "shared")),
			claims: []*v1alpha1.ResourceClaim{
				claim("local", "acme", "db", "", ready),
				claim("shared", "acme", "db", "shared", denied),
			},
			want: Summary{Claims: []Claim{{Name: "shared", Datastore: v1alpha1.DatastoreClaimRef{Name: "db", Namespace: "shared"}, State: StateDenied}}},
		},
		"OrderedByName": {
			reason: "Entries are ordered by claim name, whatever the order of spec.datastores.",
			ws:     workspace("acme", ref("z", ""), ref("a", "")),
			claims: []*v1alpha1.ResourceClaim{claim("for-z", "acme", "z", "", pending), claim("for-a", "acme", "a", "", pending)},
			want: Summary{Claims: []Claim{
				{Name: "for-a", Datastore: v1alpha1.DatastoreClaimRef{Name: "a", Namespace: "team-a"}, State: StatePending},
				{Name: "for-z", Datastore: v1alpha1.DatastoreClaimRef{Name: "z", Namespace: "team-a"}, State: StatePending},
			}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := For(tc.ws, tc.claims)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nFor: -want, +got:\n%s", tc.reason, diff)
			}
			back, err := Parse(Encode(got))
			if err != nil {
				t.Fatalf("%s\nParse(Encode(For(...))): %v", tc.reason, err)
			}
			if diff := cmp.Diff(got, back); diff != "" {
				t.Errorf("%s\nParse(Encode(s)): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	s := Summary{Claims: []Claim{
		{Name: "c1", Datastore: v1alpha1.DatastoreClaimRef{Name: "db", Namespace: "team-a"}, State: StateReady, SecretName: "c1-credentials", CredentialsHash: "sha256:1"},
		{Name: "c2", Datastore: v1alpha1.DatastoreClaimRef{Name: "cache", Namespace: "shared"}, State: StateDenied},
	}}
	want := `{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Ready","secretName":"c1-credentials","credentialsHash":"sha256:1"},` +
		`{"name":"c2","datastore":{"name":"cache","namespace":"shared"},"state":"Denied"}]}`
	for i := range 3 {
		if got := Encode(s); got != want {
			t.Fatalf("Encode, call %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if got, want := Encode(Summary{}), `{"claims":[]}`; got != want {
		t.Errorf("Encode(Summary{}) = %s, want %s", got, want)
	}
}

func TestParse(t *testing.T) {
	valid := `{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Ready","secretName":"c1-credentials","credentialsHash":"sha256:1"}`
	many := make([]string, MaxClaims+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"name":"c%d","datastore":{"name":"db","namespace":"team-a"},"state":"Pending"}`, i)
	}
	cases := map[string]struct {
		reason  string
		value   string
		want    Summary
		wantErr error
		// message is a part the error must contain, naming what is wrong.
		message string
	}{
		"Valid": {
			reason: "A summary as Encode writes it parses.",
			value:  `{"claims":[` + valid + `]}`,
			want: Summary{Claims: []Claim{{Name: "c1", Datastore: v1alpha1.DatastoreClaimRef{Name: "db", Namespace: "team-a"},
				State: StateReady, SecretName: "c1-credentials", CredentialsHash: "sha256:1"}}},
		},
		"Empty": {
			reason: "No claims is a valid summary.",
			value:  `{"claims":[]}`,
			want:   Summary{Claims: []Claim{}},
		},
		"NotJSON": {
			reason:  "A value that is not JSON is refused.",
			value:   `claims: []`,
			wantErr: ErrInvalid,
			message: "invalid character",
		},
		"Null": {
			reason:  "null, which no encoder of this package writes, is refused rather than read as no claims.",
			value:   `null`,
			wantErr: ErrInvalid,
			message: "no claims list",
		},
		"UnknownField": {
			reason:  "A field this version does not know is refused, not ignored.",
			value:   `{"claims":[],"grants":["all"]}`,
			wantErr: ErrInvalid,
			message: "unknown field",
		},
		"UnknownClaimField": {
			reason:  "An unknown field inside a claim is refused too.",
			value:   `{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Pending","mountPath":"/"}]}`,
			wantErr: ErrInvalid,
			message: "unknown field",
		},
		"TrailingValue": {
			reason:  "A second JSON value after the first is refused.",
			value:   `{"claims":[]} {"claims":[]}`,
			wantErr: ErrInvalid,
			message: "text after the JSON value",
		},
		"TrailingBrace": {
			reason:  "A stray closing brace after the value is refused too.",
			value:   `{"claims":[]}}`,
			wantErr: ErrInvalid,
			message: "text after the JSON value",
		},
		"TooBig": {
			reason:  "A value beyond MaxBytes is refused before it is read.",
			value:   `{"claims":[]}` + strings.Repeat(" ", MaxBytes),
			wantErr: ErrInvalid,
			message: fmt.Sprintf("at most %d", MaxBytes),
		},
		"TooMany": {
			reason:  "More claims than a workspace can have datastores is refused.",
			value:   `{"claims":[` + strings.Join(many, ",") + `]}`,
			wantErr: ErrInvalid,
			message: fmt.Sprintf("%d claims, at most %d", MaxClaims+1, MaxClaims),
		},
		"BadName": {
			reason:  "A claim name that is not a DNS subdomain cannot name a Secret.",
			value:   `{"claims":[{"name":"../c1","datastore":{"name":"db","namespace":"team-a"},"state":"Pending"}]}`,
			wantErr: ErrInvalid,
			message: `name "../c1"`,
		},
		"Duplicate": {
			reason:  "The same claim twice is refused.",
			value:   `{"claims":[` + valid + `,` + valid + `]}`,
			wantErr: ErrInvalid,
			message: `claim "c1" twice`,
		},
		"NoDatastore": {
			reason:  "A claim without its datastore's name and namespace is refused.",
			value:   `{"claims":[{"name":"c1","datastore":{"name":"db"},"state":"Pending"}]}`,
			wantErr: ErrInvalid,
			message: "datastore name and namespace are required",
		},
		"WrongSecretName": {
			reason:  "A Ready claim naming any Secret but its own would mount another claim's credentials.",
			value:   `{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Ready","secretName":"c2-credentials","credentialsHash":"sha256:1"}]}`,
			wantErr: ErrInvalid,
			message: `secretName must be "c1-credentials"`,
		},
		"ReadyWithoutHash": {
			reason:  "A Ready claim without its hash could not roll the pods on rotation.",
			value:   `{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Ready","secretName":"c1-credentials"}]}`,
			wantErr: ErrInvalid,
			message: "needs its credentialsHash",
		},
		"PendingWithSecret": {
			reason:  "Only a Ready claim names a Secret.",
			value:   `{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Pending","secretName":"c1-credentials"}]}`,
			wantErr: ErrInvalid,
			message: "only a Ready claim names a Secret",
		},
		"DeniedWithHash": {
			reason:  "Nor does a Denied one carry a hash.",
			value:   `{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Denied","credentialsHash":"sha256:1"}]}`,
			wantErr: ErrInvalid,
			message: "only a Ready claim names a Secret",
		},
		"UnknownState": {
			reason:  "A state other than Ready, Denied or Pending is refused.",
			value:   `{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Granted"}]}`,
			wantErr: ErrInvalid,
			message: `state "Granted"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.value)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nParse error: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil && !strings.Contains(err.Error(), tc.message) {
				t.Errorf("%s\nParse error %q does not say %q", tc.reason, err, tc.message)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParse: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestResourceClaims shows that the claims a summary stands for are ready,
// denied or pending exactly as the summary says, in the workspace's
// namespace and naming it.
func TestResourceClaims(t *testing.T) {
	ws := workspace("acme", ref("db", ""), ref("cache", "shared"), ref("logs", ""))
	claims := []*v1alpha1.ResourceClaim{
		claim("c-db", "acme", "db", "", ready),
		claim("c-cache", "acme", "cache", "shared", denied),
		claim("c-logs", "acme", "logs", "", pending),
	}
	got := For(ws, claims).ResourceClaims(ws)
	type view struct {
		Name, Namespace, Workspace, Datastore string
		Ready, Denied                         bool
		Secret, Hash                          string
	}
	var views []view
	for _, c := range got {
		v := view{Name: c.Name, Namespace: c.Namespace, Workspace: c.Spec.Workspace, Datastore: DatastoreKey(c), Ready: Ready(c), Hash: c.Status.CredentialsHash}
		for _, cond := range c.Status.Conditions {
			v.Denied = v.Denied || (cond.Type == v1alpha1.ConditionDenied && cond.Status == metav1.ConditionTrue)
		}
		if c.Status.Binding != nil {
			v.Secret = c.Status.Binding.Name
		}
		views = append(views, v)
	}
	want := []view{
		{Name: "c-cache", Namespace: "team-a", Workspace: "acme", Datastore: "shared/cache", Denied: true},
		{Name: "c-db", Namespace: "team-a", Workspace: "acme", Datastore: "team-a/db", Ready: true, Secret: "c-db-credentials", Hash: "sha256:c-db"},
		{Name: "c-logs", Namespace: "team-a", Workspace: "acme", Datastore: "team-a/logs"},
	}
	if diff := cmp.Diff(want, views); diff != "" {
		t.Errorf("ResourceClaims: -want, +got:\n%s", diff)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"claims":[]}`)
	f.Add(`{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Ready","secretName":"c1-credentials","credentialsHash":"sha256:1"}]}`)
	f.Add(`{"claims":[{"name":"c1","datastore":{"name":"db","namespace":"team-a"},"state":"Denied"}]}`)
	f.Fuzz(func(t *testing.T, value string) {
		s, err := Parse(value)
		if err != nil {
			return
		}
		// Whatever Parse accepts encodes and parses back to itself, and
		// every Ready claim names its own Secret.
		back, err := Parse(Encode(s))
		if err != nil {
			t.Fatalf("Parse(Encode(%+v)): %v", s, err)
		}
		if diff := cmp.Diff(s, back); diff != "" {
			t.Fatalf("round trip: -want, +got:\n%s", diff)
		}
		for _, c := range s.Claims {
			if c.State == StateReady && c.SecretName != c.Name+SecretSuffix {
				t.Fatalf("claim %q: Ready with Secret %q", c.Name, c.SecretName)
			}
		}
	})
}
