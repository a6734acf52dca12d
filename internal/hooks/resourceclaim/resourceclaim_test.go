package resourceclaim_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/codec"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
	"github.com/formspec/formspec-hooks/internal/hooks/resourceclaim"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
	"github.com/formspec/formspec-hooks/internal/testkit/recorder"
)

// counter records Decisions.Count calls.
type counter struct {
	mu    sync.Mutex
	calls []string
}

func (c *counter) Record(hook, decision, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, hook+"/"+decision+"/"+reason)
}

// TestAdversarial runs attacks through the whole hook. Each must end
// Denied, Ready=False, with no attachment (so a Secret granted before is
// deleted), and be counted as a denial with its reason.
func TestAdversarial(t *testing.T) {
	tamper := func(change func(c *v1alpha1.ResourceClaim)) func(s *scene) {
		return func(s *scene) { change(s.claim) }
	}
	type attack struct {
		reason string
		attack func(s *scene)
		want   string
	}
	cases := map[string]attack{
		"StrangerKey": {
			reason: "Signed by a key the Datastore does not list.",
			attack: func(s *scene) { claimstest.SignClaim(s.claim, claimstest.Stranger) },
			want:   v1alpha1.ReasonInvalidSignature,
		},
		"TamperedWorkspace":  {reason: "Signed field changed.", attack: tamper(func(c *v1alpha1.ResourceClaim) { c.Spec.Workspace = "blog" }), want: v1alpha1.ReasonInvalidSignature},
		"TamperedPermission": {reason: "Signed field changed.", attack: tamper(func(c *v1alpha1.ResourceClaim) { c.Spec.Permission = "admin" }), want: v1alpha1.ReasonInvalidSignature},
		"TamperedGrantedBy":  {reason: "Signed field changed.", attack: tamper(func(c *v1alpha1.ResourceClaim) { c.Spec.GrantedBy = "mallory" }), want: v1alpha1.ReasonInvalidSignature},
		"TamperedGrantedAt":  {reason: "Signed field changed.", attack: tamper(func(c *v1alpha1.ResourceClaim) { c.Spec.GrantedAt = "2025-12-31T23:59:00Z" }), want: v1alpha1.ReasonInvalidSignature},
		"TamperedExpiresAt":  {reason: "Signed field changed (v2 signs it).", attack: tamper(func(c *v1alpha1.ResourceClaim) { c.Spec.ExpiresAt = "2099-01-01T00:00:00Z" }), want: v1alpha1.ReasonInvalidSignature},
		"TamperedDatastore": {
			reason: "Pointing the claim at another Datastore in the same namespace, signed by its own owner key.",
			attack: func(s *scene) {
				s.ds.Name = "billing-db"
				s.secret.Labels[v1alpha1.LabelDatastore] = "billing-db"
				s.claim.Spec.Datastore.Name = "billing-db"
			},
			want: v1alpha1.ReasonInvalidSignature,
		},
		"CopiedToAnotherNamespace": {
			reason: "A v2 claim copied into team-b, which allowedTenants allows as team-b/*.",
			attack: func(s *scene) { s.claim.Namespace = "team-b" },
			want:   v1alpha1.ReasonInvalidSignature,
		},
		"V1PipeMoved": {
			reason: "A v1 message shared by two grants through a moved |.",
			attack: func(s *scene) {
				s.claim.Spec.SignatureVersion = v1alpha1.SignatureV1
				s.claim.Spec.GrantedBy = "admin|ops"
				s.claim.Spec.Signature = grant.FormatSignature(signRaw(grant.MessageV1(grant.Of(s.claim))))
				s.claim.Spec.Workspace, s.claim.Spec.Permission, s.claim.Spec.GrantedBy = "shop|read", "admin", "ops"
			},
			want: v1alpha1.ReasonInvalidGrant,
		},
		"Expired": {
			reason: "A correctly signed grant past its expiry.",
			attack: func(s *scene) {
				*s = s.resign(func(c *v1alpha1.ResourceClaim) { c.Spec.ExpiresAt = "2025-12-31T23:59:59Z" })
			},
			want: v1alpha1.ReasonExpired,
		},
		"FarFuture": {
			reason: "A correctly signed grant dated next year.",
			attack: func(s *scene) {
				*s = s.resign(func(c *v1alpha1.ResourceClaim) { c.Spec.GrantedAt = "2027-01-01T00:00:00Z" })
			},
			want: v1alpha1.ReasonGrantedInFuture,
		},
		"TenantNotAllowed": {
			reason: "A correctly signed grant for a tenant the Datastore does not list.",
			attack: func(s *scene) { s.ds.Spec.AllowedTenants = []string{"team-c/*"} },
			want:   v1alpha1.ReasonTenantNotAllowed,
		},
		"KeyWrongLength":      {reason: "Malformed rotated key, claim signed by a good one.", attack: func(s *scene) { s.ds.Spec.OwnerPublicKeys = []string{"abcd"} }, want: v1alpha1.ReasonMalformedPublicKey},
		"KeyNotHex":           {reason: "Malformed rotated key, claim signed by a good one.", attack: func(s *scene) { s.ds.Spec.OwnerPublicKeys = []string{strings.Repeat("x", 64)} }, want: v1alpha1.ReasonMalformedPublicKey},
		"SigningKeyMalformed": {reason: "The signing key is the malformed one: nothing verifies, and nothing more is said.", attack: func(s *scene) { s.ds.Spec.OwnerPublicKey = "abcd" }, want: v1alpha1.ReasonInvalidSignature},
		"ForgedWithIdentityKey": {
			reason: "The reported forgery: ownerPublicKey is the identity point, and R = identity, S = 0 (made with no private key) passes plain ed25519 verification for an admin grant. Denied, and told nothing about the key.",
			attack: func(s *scene) {
				identity := claimstest.IdentityKey
				s.ds.Spec.OwnerPublicKey, s.ds.Spec.OwnerPublicKeys = identity, nil
				s.claim.Spec.Permission = v1alpha1.PermissionAdmin
				s.claim.Spec.Signature = base64.StdEncoding.EncodeToString(append([]byte{1}, make([]byte, 63)...))
				msg, err := grant.Of(s.claim).Message(grant.Version(s.claim))
				if err != nil || !ed25519.Verify(mustHex(identity), msg, mustB64(s.claim.Spec.Signature)) {
					panic("the forgery does not pass plain ed25519: the case would prove nothing")
				}
			},
			want: v1alpha1.ReasonInvalidSignature,
		},
		"OwnerGrantBesideWeakKey": {
			reason: "The owner's own grant on a Datastore that also lists a small-order key: the Datastore is refused whole, and the owner is told why.",
			attack: func(s *scene) { s.ds.Spec.OwnerPublicKeys = []string{claimstest.Order2Key} },
			want:   v1alpha1.ReasonWeakPublicKey,
		},
		"UnsignedSecretMissing": {
			reason: "An unsigned claim does not learn that the Secret is missing.",
			attack: func(s *scene) { s.claim.Spec.Signature, s.secret = "", nil },
			want:   v1alpha1.ReasonMalformedSignature,
		},
		"StrangerSecretNotLabeled": {
			reason: "A claim signed by another key does not learn that the Secret is unlabelled.",
			attack: func(s *scene) {
				claimstest.SignClaim(s.claim, claimstest.Stranger)
				delete(s.secret.Labels, v1alpha1.LabelDatastore)
			},
			want: v1alpha1.ReasonInvalidSignature,
		},
		"StrangerMissingKeys": {
			reason: "A claim signed by another key does not learn which keys the Secret lacks, nor the tenants.",
			attack: func(s *scene) {
				claimstest.SignClaim(s.claim, claimstest.Stranger)
				delete(s.secret.Data, "host")
				s.ds.Spec.AllowedTenants = append(s.ds.Spec.AllowedTenants, "not a tenant")
			},
			want: v1alpha1.ReasonInvalidSignature,
		},
		"SignatureWrongLength": {reason: "Malformed signature.", attack: func(s *scene) { s.claim.Spec.Signature = s.claim.Spec.Signature[:60] }, want: v1alpha1.ReasonMalformedSignature},
		"SignatureNotBase64":   {reason: "Malformed signature.", attack: func(s *scene) { s.claim.Spec.Signature = strings.Repeat("%", 88) }, want: v1alpha1.ReasonMalformedSignature},
		"DatastoreMissing":     {reason: "No Datastore.", attack: func(s *scene) { s.ds, s.secret = nil, nil }, want: v1alpha1.ReasonDatastoreNotFound},
		"SecretMissing":        {reason: "No endpoint Secret.", attack: func(s *scene) { s.secret = nil }, want: v1alpha1.ReasonSecretNotFound},
		"SecretNotLabeled": {
			reason: "A Secret without the consent label, even if handed over.",
			attack: func(s *scene) { delete(s.secret.Labels, v1alpha1.LabelDatastore) },
			want:   v1alpha1.ReasonSecretNotLabeled,
		},
	}
	// A forgery for every weak key of the corpus, as the Datastore's only
	// key and beside the owner's.
	for _, k := range append(append([]claimstest.WeakKey{}, claimstest.SmallOrderKeys...), claimstest.NonCanonicalSmallOrderKeys...) {
		cases["Forged"+k.Name] = attack{
			reason: "A claim forged for a small-order owner key.",
			attack: func(s *scene) {
				s.ds.Spec.OwnerPublicKey, s.ds.Spec.OwnerPublicKeys = k.Hex, nil
				claimstest.Forge(s.claim, k.Hex)
			},
			want: v1alpha1.ReasonInvalidSignature,
		}
		cases["ForgedBesideOwner"+k.Name] = attack{
			reason: "A claim forged for a small-order key listed beside the owner's.",
			attack: func(s *scene) {
				s.ds.Spec.OwnerPublicKeys = []string{k.Hex}
				claimstest.Forge(s.claim, k.Hex)
			},
			want: v1alpha1.ReasonInvalidSignature,
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := world().granted()
			tc.attack(&s)
			c := &counter{}
			h := resourceclaim.New(resourceclaim.Options{Clock: func() time.Time { return claimstest.Now }, Decisions: c})
			resp, err := h.Sync(t.Context(), s.request(t))
			if err != nil {
				t.Fatalf("Sync(): %v", err)
			}
			status := resp.Status.(*v1alpha1.ResourceClaimStatus)
			type outcome struct {
				Attachments  int
				Ready, Deny  metav1.ConditionStatus
				Reason       string
				Binding      *v1alpha1.Binding
				Hash, Counts string
			}
			want := outcome{Ready: metav1.ConditionFalse, Deny: metav1.ConditionTrue, Reason: tc.want, Counts: "resourceclaim/denied/" + tc.want}
			got := outcome{
				Attachments: len(resp.Attachments), Ready: status.Conditions[0].Status, Deny: status.Conditions[1].Status,
				Reason: status.Conditions[1].Reason, Binding: status.Binding, Hash: status.CredentialsHash, Counts: strings.Join(c.calls, ","),
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nSync(): -want, +got:\n%s\nmessage: %s", tc.reason, diff, status.Conditions[1].Message)
			}
			if tc.want == v1alpha1.ReasonMalformedSignature || tc.want == v1alpha1.ReasonInvalidSignature {
				// Before the signature verifies, nothing about the
				// Datastore's Secret or tenants may be told.
				for _, word := range []string{claimstest.SecretName, "Secret", "host", "tenant", "team-a/", "team-b/"} {
					if msg := status.Conditions[1].Message; strings.Contains(msg, word) {
						t.Errorf("%s\nSync(): an unauthenticated claim is told %q: %s", tc.reason, word, msg)
					}
				}
			}
		})
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func mustB64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func signRaw(msg []byte) []byte {
	return ed25519.Sign(claimstest.Owner, msg)
}

// TestNoLeaks runs granted and denied claims with a debug logger and
// checks that no password, in clear or base64, and no signature appears in
// a log line, a status or an error; only the attachment may carry them.
func TestNoLeaks(t *testing.T) {
	scenes := map[string]func() scene{
		"Granted":       world,
		"GrantedAdmin":  func() scene { return world().resign(func(c *v1alpha1.ResourceClaim) { c.Spec.Permission = "admin" }) },
		"Denied":        func() scene { s := world(); s.claim.Spec.Workspace = "blog"; return s },
		"MalformedSig":  func() scene { s := world(); s.claim.Spec.Signature = claimstest.Password; return s },
		"PasswordInKey": func() scene { s := world(); s.ds.Spec.OwnerPublicKey = claimstest.Password; return s },
		"Exposed":       func() scene { return world().granted().exposed() },
		"BrokenSecret": func() scene {
			s := world()
			s.secret.Data["uri"] = []byte("postgres://u:" + claimstest.Password + "@%zz")
			return s
		},
	}
	for name, build := range scenes {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var reports recorder.Sink
			h := resourceclaim.New(resourceclaim.Options{Clock: func() time.Time { return claimstest.Now }, Logger: logger, Reports: &reports})
			s := build()
			req := s.request(t)
			resp, err := h.Sync(t.Context(), req)
			if err != nil {
				t.Fatalf("Sync(): %v", err)
			}
			statusJSON, _ := json.Marshal(resp.Status)
			if len(reports.Sent) != 1 {
				t.Fatalf("Sync() handed over %d observations, want 1", len(reports.Sent))
			}
			reportJSON, _ := json.Marshal(reports.Sent[0])
			if exposed := reports.Sent[0].Claim.Exposed != nil; exposed != (name == "Exposed") {
				t.Errorf("the observation says exposed %v: %s", exposed, reportJSON)
			}
			// A broken request: the error must not quote the Secret either.
			req.Related[metacontroller.Key("v1", "Secret")]["data/orders-db-endpoint"] = json.RawMessage(`{"metadata":{"name":"orders-db-endpoint","namespace":"data","labels":{"formspec.dev/datastore":"orders-db"}},"data":{"password":"` + claimstest.Password + `!"}}`)
			_, brokenErr := h.Sync(t.Context(), req)
			if brokenErr == nil {
				t.Fatalf("Sync() with an undecodable Secret: want an error")
			}
			secrets := []string{
				claimstest.Password, claimstest.AdminPassword,
				base64.StdEncoding.EncodeToString([]byte(claimstest.Password)),
				base64.StdEncoding.EncodeToString([]byte(claimstest.AdminPassword)),
			}
			if sig := s.claim.Spec.Signature; len(sig) > 8 {
				secrets = append(secrets, sig)
			}
			if logs.Len() == 0 {
				t.Fatalf("no log lines: the test would prove nothing")
			}
			for _, secret := range secrets {
				for where, text := range map[string]string{"log": logs.String(), "status": string(statusJSON), "observation": string(reportJSON), "error": brokenErr.Error()} {
					if strings.Contains(text, secret) {
						t.Errorf("%s contains secret material %q:\n%s", where, secret[:6]+"…", text)
					}
				}
			}
		})
	}
}

// TestCredentialsExposed: while a claim is granted and its credentials
// Secret is observed carrying Metacontroller's last-applied annotation (a
// copy of its data), CredentialsExposed is True and each sync that finds it
// counts it; a Secret without the copy gets no condition, nor does a
// denied claim's Secret, which is being deleted. The annotation's value
// reaches nothing.
func TestCredentialsExposed(t *testing.T) {
	now := claimstest.Now
	since := metav1.NewTime(now.Add(-50 * time.Minute))
	type want struct {
		Status      metav1.ConditionStatus // "" for no condition
		Reason      string
		Transition  metav1.Time
		Counts      string
		Attachments int
	}
	cases := map[string]struct {
		reason string
		scene  func() scene
		want   want
	}{
		"NoCopy": {
			reason: "Under server-side apply the Secret carries no copy, and the claim no condition.",
			scene:  func() scene { return world().granted() },
			want:   want{Counts: "resourceclaim/granted/Granted", Attachments: 1},
		},
		"FirstFound": {
			reason: "Under dynamic apply it does; the condition turns True now, and the finding is counted.",
			scene:  func() scene { return world().granted().exposed() },
			want: want{
				Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonLastAppliedAnnotation, Transition: metav1.NewTime(now),
				Counts: "resourceclaim/granted/Granted,resourceclaim/exposed/LastAppliedAnnotation", Attachments: 1,
			},
		},
		"StillThere": {
			reason: "On later syncs it keeps its transition time and is counted again.",
			scene: func() scene {
				s := world().granted().exposed()
				s.claim.Status.Conditions = append(s.claim.Status.Conditions, exposedCondition(since))
				return s
			},
			want: want{
				Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonLastAppliedAnnotation, Transition: since,
				Counts: "resourceclaim/granted/Granted,resourceclaim/exposed/LastAppliedAnnotation", Attachments: 1,
			},
		},
		"Fixed": {
			reason: "Once the Secret is recreated without the copy, the condition goes.",
			scene: func() scene {
				s := world().granted()
				s.claim.Status.Conditions = append(s.claim.Status.Conditions, exposedCondition(since))
				return s
			},
			want: want{Counts: "resourceclaim/granted/Granted", Attachments: 1},
		},
		"NotYetCreated": {
			reason: "Before Metacontroller created the Secret there is nothing to judge.",
			scene:  func() scene { return world() },
			want:   want{Counts: "resourceclaim/granted/Granted", Attachments: 1},
		},
		"Denied": {
			reason: "A denied claim's Secret, copy and all, is left out of the answer and deleted: no verdict, no count.",
			scene: func() scene {
				s := world().granted().exposed()
				claimstest.SignClaim(s.claim, claimstest.Stranger)
				return s
			},
			want: want{Counts: "resourceclaim/denied/InvalidSignature"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &counter{}
			h := resourceclaim.New(resourceclaim.Options{Clock: func() time.Time { return now }, Decisions: c})
			resp, err := h.Sync(t.Context(), tc.scene().request(t))
			if err != nil {
				t.Fatalf("Sync(): %v", err)
			}
			status := resp.Status.(*v1alpha1.ResourceClaimStatus)
			got := want{Counts: strings.Join(c.calls, ","), Attachments: len(resp.Attachments)}
			if cond := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionCredentialsExposed); cond != nil {
				got.Status, got.Reason, got.Transition = cond.Status, cond.Reason, cond.LastTransitionTime
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSync(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestGrantedStatusIsFinal: the status the first sync of a claim writes
// is the one every later sync answers, with the Secret Metacontroller then
// created observed, under server-side apply. Metacontroller writes a
// decorator's status only when it changed, and each change of a claim makes
// it match the claim against every Workspace, so a second status would
// cost a write and a pass over the fleet per claim.
func TestGrantedStatusIsFinal(t *testing.T) {
	h := resourceclaim.New(resourceclaim.Options{Clock: func() time.Time { return claimstest.Now }})
	first := world()
	resp, err := h.Sync(t.Context(), first.request(t))
	if err != nil {
		t.Fatalf("first Sync(): %v", err)
	}
	written := resp.Status.(*v1alpha1.ResourceClaimStatus)
	if len(resp.Attachments) != 1 {
		t.Fatalf("first Sync() answered %d attachments, want the credentials Secret", len(resp.Attachments))
	}

	// The next sync: the claim carries what the first wrote, and the
	// Secret exists as Metacontroller created it.
	next := world().granted()
	next.claim.Status = *written
	resp, err = h.Sync(t.Context(), next.request(t))
	if err != nil {
		t.Fatalf("second Sync(): %v", err)
	}
	want, err := json.Marshal(written)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(resp.Status)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the status changed once the credentials Secret was observed, which costs a second write:\nfirst:  %s\nsecond: %s", want, got)
	}
}

// TestResyncAfter pins resyncAfterSeconds with a fixed clock: the time
// until the decision changes by itself, rounded up to the second, capped
// by MaxResync. The fixtures, answered with the real clock, can only show
// the cap.
func TestResyncAfter(t *testing.T) {
	cases := map[string]struct {
		reason string
		change func(c *v1alpha1.ResourceClaim)
		now    time.Time
		want   float64
	}{
		"NoExpiry": {
			reason: "A grant without expiry changes only when an object does: no resync asked.",
			change: func(*v1alpha1.ResourceClaim) {},
			now:    claimstest.Now,
			want:   0,
		},
		"UntilExpiry": {
			reason: "A grant expiring in six hours asks to be synced again at expiry.",
			change: func(c *v1alpha1.ResourceClaim) { c.Spec.ExpiresAt = "2026-01-01T06:00:00Z" },
			now:    claimstest.Now,
			want:   6 * 3600,
		},
		"RoundedUp": {
			reason: "Half a second short of six hours is asked as six hours, never a moment early.",
			change: func(c *v1alpha1.ResourceClaim) { c.Spec.ExpiresAt = "2026-01-01T06:00:00Z" },
			now:    claimstest.Now.Add(500 * time.Millisecond),
			want:   6 * 3600,
		},
		"Capped": {
			reason: "A grant expiring in years asks for MaxResync, and again at each resync.",
			change: func(c *v1alpha1.ResourceClaim) { c.Spec.ExpiresAt = "2030-01-01T00:00:00Z" },
			now:    claimstest.Now,
			want:   resourceclaim.MaxResync.Seconds(),
		},
		"GrantedInFuture": {
			reason: "A grant dated two hours ahead becomes usable five minutes (the allowed skew) before that.",
			change: func(c *v1alpha1.ResourceClaim) { c.Spec.GrantedAt = "2026-01-01T02:00:00Z" },
			now:    claimstest.Now,
			want:   (2*time.Hour - claims.MaxClockSkew).Seconds(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := world().resign(tc.change)
			h := resourceclaim.New(resourceclaim.Options{Clock: func() time.Time { return tc.now }})
			resp, err := h.Sync(t.Context(), s.request(t))
			if err != nil {
				t.Fatalf("Sync(): %v", err)
			}
			if diff := cmp.Diff(tc.want, resp.ResyncAfterSeconds); diff != "" {
				t.Errorf("%s\nResyncAfterSeconds: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSyncBrokenObject(t *testing.T) {
	h := resourceclaim.New(resourceclaim.Options{})
	_, err := h.Sync(t.Context(), &metacontroller.DecoratorRequest{Object: json.RawMessage(`{"spec":"nope"}`)})
	var typeErr *codec.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		t.Errorf("Sync(): got err %v, want a decode error", err)
	}
}

// TestRepeatedDecision shows the hook telling the reporter's hand-off which
// decisions are repeats: the first sync of a claim decides anew; a resync
// of the claim with the status that sync wrote decides the same and says
// so; and a denial after a grant is new again.
func TestRepeatedDecision(t *testing.T) {
	var reports recorder.Sink
	h := resourceclaim.New(resourceclaim.Options{Clock: func() time.Time { return claimstest.Now }, Reports: &reports})
	s := world()
	sync := func(what string) {
		t.Helper()
		resp, err := h.Sync(t.Context(), s.request(t))
		if err != nil {
			t.Fatalf("%s: Sync(): %v", what, err)
		}
		s.claim.Status = *resp.Status.(*v1alpha1.ResourceClaimStatus)
	}
	sync("first sync")
	sync("resync")
	s = s.resign(func(c *v1alpha1.ResourceClaim) { c.Spec.Workspace = "blog" })
	sync("resync after the grant names another workspace")
	var got []string
	for _, r := range reports.Sent {
		got = append(got, fmt.Sprintf("granted=%v repeat=%v", r.Claim.Granted, r.Claim.Repeat))
	}
	want := []string{"granted=true repeat=false", "granted=true repeat=true", "granted=false repeat=false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions handed over (-want, +got):\n%s", diff)
	}
}
