package grant_test

import (
	"bytes"
	"encoding/hex"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
)

// sample is a well-formed grant to start each case from.
func sample() grant.Grant {
	return grant.Grant{
		DatastoreNamespace: "data", DatastoreName: "db", ClaimNamespace: "ns",
		Workspace: "ws", Permission: "read", GrantedBy: "me",
		GrantedAt: "2026-01-01T00:00:00Z",
	}
}

func TestMessage(t *testing.T) {
	cases := map[string]struct {
		reason  string
		grant   grant.Grant
		version string
		want    []byte
		wantErr error
	}{
		"V1": {
			reason:  "v1 joins five fields with |, values as written.",
			grant:   sample(),
			version: v1alpha1.SignatureV1,
			want:    []byte("db|ws|read|me|2026-01-01T00:00:00Z"),
		},
		"V2": {
			reason:  "v2 is the PAE of nine fields; an unset expiresAt is an empty field.",
			grant:   sample(),
			version: v1alpha1.SignatureV2,
			want: mustHex(t, ""+
				"0900000000000000"+
				"1500000000000000"+hex.EncodeToString([]byte("formspec.dev/grant/v2"))+
				"0400000000000000"+hex.EncodeToString([]byte("data"))+
				"0200000000000000"+hex.EncodeToString([]byte("db"))+
				"0200000000000000"+hex.EncodeToString([]byte("ns"))+
				"0200000000000000"+hex.EncodeToString([]byte("ws"))+
				"0400000000000000"+hex.EncodeToString([]byte("read"))+
				"0200000000000000"+hex.EncodeToString([]byte("me"))+
				"1400000000000000"+hex.EncodeToString([]byte("2026-01-01T00:00:00Z"))+
				"0000000000000000"),
		},
		"V1Pipe": {
			reason:  "v1 cannot carry | in a field.",
			grant:   func() grant.Grant { g := sample(); g.GrantedBy = "a|b"; return g }(),
			version: v1alpha1.SignatureV1,
			wantErr: grant.ErrInvalidGrant,
		},
		"V2Pipe": {
			reason:  "v2 can: every field is length-prefixed.",
			grant:   func() grant.Grant { g := sample(); g.GrantedBy = "a|b"; return g }(),
			version: v1alpha1.SignatureV2,
			want:    grant.MessageV2(func() grant.Grant { g := sample(); g.GrantedBy = "a|b"; return g }()),
		},
		"ControlCharacter": {
			reason:  "No version takes control characters.",
			grant:   func() grant.Grant { g := sample(); g.Workspace = "ws\x00"; return g }(),
			version: v1alpha1.SignatureV2,
			wantErr: grant.ErrInvalidGrant,
		},
		"InvalidUTF8": {
			reason:  "No version takes broken UTF-8.",
			grant:   func() grant.Grant { g := sample(); g.GrantedBy = "\xff"; return g }(),
			version: v1alpha1.SignatureV2,
			wantErr: grant.ErrInvalidGrant,
		},
		"V2NeedsNamespace": {
			reason:  "v2 binds the claim's namespace, so it needs one.",
			grant:   func() grant.Grant { g := sample(); g.ClaimNamespace = ""; return g }(),
			version: v1alpha1.SignatureV2,
			wantErr: grant.ErrInvalidGrant,
		},
		"ExpiresBeforeGranted": {
			reason:  "A grant cannot end before it starts.",
			grant:   func() grant.Grant { g := sample(); g.ExpiresAt = "2025-01-01T00:00:00Z"; return g }(),
			version: v1alpha1.SignatureV2,
			wantErr: grant.ErrInvalidGrant,
		},
		"NotRFC3339": {
			reason:  "grantedAt is RFC 3339.",
			grant:   func() grant.Grant { g := sample(); g.GrantedAt = "yesterday"; return g }(),
			version: v1alpha1.SignatureV1,
			wantErr: grant.ErrInvalidGrant,
		},
		"UnknownVersion": {
			reason:  "There is no v3.",
			grant:   sample(),
			version: "v3",
			wantErr: grant.ErrUnknownVersion,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.grant.Message(tc.version)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nMessage(): -want err, +got err:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nMessage(): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestV1Ambiguity shows why Check refuses "|": two different v1 grants,
// one of them an admin grant, share a message.
func TestV1Ambiguity(t *testing.T) {
	read := sample()
	read.Workspace, read.Permission, read.GrantedBy = "shop", "read", "admin|ops"
	admin := sample()
	admin.Workspace, admin.Permission, admin.GrantedBy = "shop|read", "admin", "ops"
	if !bytes.Equal(grant.MessageV1(read), grant.MessageV1(admin)) {
		t.Fatalf("MessageV1(): the two grants should share a message")
	}
	if bytes.Equal(grant.MessageV2(read), grant.MessageV2(admin)) {
		t.Errorf("MessageV2(): different grants share a message")
	}
	for _, g := range []grant.Grant{read, admin} {
		if _, err := g.Message(v1alpha1.SignatureV1); !cmp.Equal(err, grant.ErrInvalidGrant, cmpopts.EquateErrors()) {
			t.Errorf("Message(v1) of %+v: got err %v, want %v", g, err, grant.ErrInvalidGrant)
		}
	}
}

func TestCheckTimes(t *testing.T) {
	g := sample()
	g.ExpiresAt = "2026-01-02T00:00:00+01:00"
	got, err := g.Check(v1alpha1.SignatureV2)
	if err != nil {
		t.Fatalf("Check(): %v", err)
	}
	want := grant.Times{
		GrantedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		ExpiresAt: time.Date(2026, 1, 1, 23, 0, 0, 0, time.UTC),
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(time.Time.Equal)); diff != "" {
		t.Errorf("Check(): -want, +got:\n%s", diff)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
