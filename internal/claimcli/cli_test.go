package claimcli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/cliflag"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/internal/testkit/claimstest"
)

const claimYAML = `apiVersion: formspec.dev/v1alpha1
kind: ResourceClaim
metadata:
  name: orders
  namespace: team-a
  labels:
    team: a
spec:
  datastore:
    name: orders-db
    namespace: data
  workspace: shop
  permission: read
  grantedBy: data-team@example.com
  grantedAt: "2025-12-31T23:00:00Z"
`

// files writes the test world's Datastore and Secret (with stringData, as
// a person writes it) and the owner's key into a temporary directory.
func files(t *testing.T) (dir string) {
	dir = t.TempDir()
	ds, err := yaml.Marshal(claimstest.Datastore())
	if err != nil {
		t.Fatal(err)
	}
	secret := claimstest.Secret()
	stringData := map[string]string{}
	for k, v := range secret.Data {
		stringData[k] = string(v)
	}
	secret.Data, secret.StringData = nil, stringData
	sec, err := yaml.Marshal(secret)
	if err != nil {
		t.Fatal(err)
	}
	owner, err := grant.MarshalPrivateKey(claimstest.Owner)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := grant.MarshalPrivateKey(claimstest.Stranger)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"datastore.yaml": ds,
		"secret.yaml":    sec,
		"claim.yaml":     []byte(claimYAML),
		"owner.key":      owner,
		"owner.pub":      []byte(claimstest.PublicHex(claimstest.Owner) + "\n"),
		"owner.hex":      []byte(grant.FormatPrivateKey(claimstest.Owner) + "\n"),
		"stranger.key":   stranger,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var o, e bytes.Buffer
	err = run(t.Context(), args, strings.NewReader(stdin), &o, &e, func() time.Time { return claimstest.Now })
	return o.String(), e.String(), err
}

// signed signs claim with a key file of dir and returns the signed claim,
// sign's stderr and the digest sign printed there.
func signed(t *testing.T, claim string, args ...string) (out, errOut, digest string) {
	t.Helper()
	out, errOut, err := runCLI(t, claim, append([]string{"sign"}, args...)...)
	if err != nil {
		t.Fatalf("sign: %v\n%s", err, errOut)
	}
	for line := range strings.Lines(errOut) {
		if d, ok := strings.CutPrefix(line, "signature digest (to revoke it): "); ok {
			return out, errOut, strings.TrimSuffix(d, "\n")
		}
	}
	t.Fatalf("sign printed no signature digest on stderr:\n%s", errOut)
	return "", "", ""
}

// signatureOf returns the bytes of a signed claim's spec.signature.
func signatureOf(t *testing.T, claim string) []byte {
	t.Helper()
	var c v1alpha1.ResourceClaim
	if err := yaml.Unmarshal([]byte(claim), &c); err != nil {
		t.Fatal(err)
	}
	sig, err := grant.ParseSignature(c.Spec.Signature)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// TestSignVerify signs the test claim and verifies it, as edited, against
// the test Datastore, as edited: what verify decides, and that sign and
// verify print the digest the Datastore revokes the grant by.
func TestSignVerify(t *testing.T) {
	dir := files(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	type args struct {
		key, format string
		// edit changes the signed claim; nil leaves it.
		edit func(signed string) string
		// datastore changes the Datastore; digest is the one sign
		// printed. nil leaves it.
		datastore func(ds *v1alpha1.Datastore, digest string)
		// verify are verify's flags beside the three files.
		verify []string
	}
	type want struct {
		// out starts verify's output.
		out string
		err error
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"V2": {
			reason: "A claim signed by the owner verifies.",
			args:   args{key: "owner.key", format: "v2"},
			want:   want{out: "accepted: Granted"},
		},
		"V1": {
			reason: "A v1 claim, which binds no namespace, is refused by default even though its signature verifies.",
			args:   args{key: "owner.key", format: "v1"},
			want:   want{out: "denied: SignatureVersionNotAccepted", err: ErrDenied},
		},
		"V1AcceptV1Grants": {
			reason: "--accept-v1-grants judges as an install that accepts v1 grants: the v1 claim is granted.",
			args:   args{key: "owner.key", format: "v1", verify: []string{"--accept-v1-grants"}},
			want:   want{out: "accepted: Granted"},
		},
		"V1AcceptedByDatastore": {
			reason: "A Datastore that sets spec.grantPolicy.acceptV1Signatures grants the v1 claim without the flag.",
			args: args{key: "owner.key", format: "v1", datastore: func(ds *v1alpha1.Datastore, _ string) {
				ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{AcceptV1Signatures: true}
			}},
			want: want{out: "accepted: Granted"},
		},
		"Revoked": {
			reason: "The digest sign printed, listed in the Datastore's spec.grantPolicy.revokedSignatures, revokes the grant.",
			args: args{key: "owner.key", format: "v2", datastore: func(ds *v1alpha1.Datastore, digest string) {
				ds.Spec.GrantPolicy = &v1alpha1.GrantPolicy{RevokedSignatures: []string{digest}}
			}},
			want: want{out: "denied: GrantRevoked", err: ErrDenied},
		},
		"Stranger": {
			reason: "Another key is denied.",
			args:   args{key: "stranger.key", format: "v2"},
			want:   want{out: "denied: InvalidSignature", err: ErrDenied},
		},
		"Tampered": {
			reason: "Editing the signed claim is denied.",
			args:   args{key: "owner.key", format: "v2", edit: func(s string) string { return strings.Replace(s, "permission: read", "permission: admin", 1) }},
			want:   want{out: "denied: InvalidSignature", err: ErrDenied},
		},
		"ExpiryRemoved": {
			reason: "The expiry sign sets by default is signed: removing it is denied.",
			args: args{key: "owner.key", format: "v2", edit: func(s string) string {
				return regexp.MustCompile(`(?m)^  expiresAt: .*\n`).ReplaceAllString(s, "")
			}},
			want: want{out: "denied: InvalidSignature", err: ErrDenied},
		},
		"CopiedNamespace": {
			reason: "Moving a v2 claim to team-b is denied.",
			args:   args{key: "owner.key", format: "v2", edit: func(s string) string { return strings.Replace(s, "namespace: team-a", "namespace: team-b", 1) }},
			want:   want{out: "denied: InvalidSignature", err: ErrDenied},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			claim, errOut, digest := signed(t, claimYAML, "--key", p(tc.args.key), "--format", tc.args.format)
			seed := grant.FormatPrivateKey(claimstest.Owner)
			if strings.Contains(claim+errOut, seed) {
				t.Fatalf("sign printed the private key")
			}
			if !strings.Contains(claim, "team: a") {
				t.Errorf("sign dropped fields of the input:\n%s", claim)
			}
			if diff := cmp.Diff(grant.Digest(signatureOf(t, claim)), digest); diff != "" {
				t.Errorf("digest sign printed: -want, +got:\n%s", diff)
			}
			work := t.TempDir()
			if tc.args.edit != nil {
				claim = tc.args.edit(claim)
			}
			claimFile := filepath.Join(work, "signed.yaml")
			if err := os.WriteFile(claimFile, []byte(claim), 0o600); err != nil {
				t.Fatal(err)
			}
			dsFile := p("datastore.yaml")
			if tc.args.datastore != nil {
				ds := claimstest.Datastore()
				tc.args.datastore(ds, digest)
				dsFile = writeYAML(t, work, "datastore.yaml", ds)
			}
			out, _, err := runCLI(t, "", append([]string{"verify", "--claim", claimFile, "--datastore", dsFile, "--secret", p("secret.yaml")}, tc.args.verify...)...)
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nverify err: -want, +got:\n%s", tc.reason, diff)
			}
			if !strings.HasPrefix(out, tc.want.out) {
				t.Errorf("%s\nverify printed %q, want a line starting %q", tc.reason, out, tc.want.out)
			}
			if wantLine := "signature digest (to revoke it): " + digest + "\n"; err == nil && !strings.Contains(out, wantLine) {
				t.Errorf("%s\nverify printed %q, want the line %q", tc.reason, out, wantLine)
			}
			if strings.Contains(out, claimstest.Password) {
				t.Errorf("verify printed a Secret value")
			}
		})
	}
}

// writeYAML writes obj as YAML to dir/name and returns the path.
func writeYAML(t *testing.T, dir, name string, obj any) string {
	t.Helper()
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantErr is the error a table case wants; the zero value wants none.
type wantErr struct {
	// names is what the message must name, the flag or field at fault;
	// empty when no error is wanted.
	names string
	// usage wants a *cliflag.UsageError.
	usage bool
	// is, when set, must be in the error's chain.
	is error
}

func (w wantErr) check(t *testing.T, reason string, err error) {
	t.Helper()
	if (err != nil) != (w.names != "") {
		t.Errorf("%s\nerror %v, want one naming %q", reason, err, w.names)
		return
	}
	if err == nil {
		return
	}
	if _, isUsage := errors.AsType[*cliflag.UsageError](err); isUsage != w.usage {
		t.Errorf("%s\nusage error: got %v (%v), want %v", reason, isUsage, err, w.usage)
	}
	if w.is != nil {
		if diff := cmp.Diff(w.is, err, cmpopts.EquateErrors()); diff != "" {
			t.Errorf("%s\nerr: -want, +got:\n%s", reason, diff)
		}
	}
	if !strings.Contains(err.Error(), w.names) {
		t.Errorf("%s\nerror %q does not name %s", reason, err, w.names)
	}
}

// TestSignExpiry: sign gives a claim without spec.expiresAt one 90 days
// after spec.grantedAt, keeps the claim's own, and lets --expires-in
// replace either; --expires-in 0 signs a grant that never expires, with a
// warning. The expiry is signed (v2) and written in UTC.
func TestSignExpiry(t *testing.T) {
	dir := files(t)
	const grantedAt = `  grantedAt: "2025-12-31T23:00:00Z"` + "\n"
	withExpiry := claimYAML + `  expiresAt: "2026-06-01T00:00:00Z"` + "\n"
	withGrantedAt := func(s string) string { return strings.Replace(claimYAML, grantedAt, s, 1) }
	type args struct {
		claim string
		flags []string
	}
	type want struct {
		grantedAt, expiresAt string
		// warnings start the warning lines of stderr, one each, in order.
		warnings []string
		err      wantErr
	}
	never := "warning: the grant never expires unless the Datastore sets spec.grantPolicy.maxLifetime"
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"Default": {
			reason: "A claim without expiresAt expires 90 days (2160h) after its grantedAt.",
			args:   args{claim: claimYAML},
			want:   want{grantedAt: "2025-12-31T23:00:00Z", expiresAt: "2026-03-31T23:00:00Z"},
		},
		"DefaultFromGrantedAtNow": {
			reason: "The 90 days count from the grantedAt sign fills in.",
			args:   args{claim: withGrantedAt("")},
			want:   want{grantedAt: "2026-01-01T00:00:00Z", expiresAt: "2026-04-01T00:00:00Z"},
		},
		"DefaultInUTC": {
			reason: "A grantedAt with an offset is kept as written; the expiry is written in UTC.",
			args:   args{claim: withGrantedAt(`  grantedAt: "2026-01-01T02:00:00+02:00"` + "\n")},
			want:   want{grantedAt: "2026-01-01T02:00:00+02:00", expiresAt: "2026-04-01T00:00:00Z"},
		},
		"ClaimExpiryKept": {
			reason: "The claim's own expiresAt is kept when --expires-in is not given.",
			args:   args{claim: withExpiry},
			want:   want{grantedAt: "2025-12-31T23:00:00Z", expiresAt: "2026-06-01T00:00:00Z"},
		},
		"ExpiresIn": {
			reason: "--expires-in sets the expiry that long after grantedAt.",
			args:   args{claim: claimYAML, flags: []string{"--expires-in", "720h"}},
			want:   want{grantedAt: "2025-12-31T23:00:00Z", expiresAt: "2026-01-30T23:00:00Z"},
		},
		"ExpiresInReplacesClaimExpiry": {
			reason: "--expires-in, given explicitly, wins over the claim's expiresAt.",
			args:   args{claim: withExpiry, flags: []string{"--expires-in", "24h"}},
			want:   want{grantedAt: "2025-12-31T23:00:00Z", expiresAt: "2026-01-01T23:00:00Z"},
		},
		"ExpiresInZero": {
			reason: "--expires-in 0 signs without expiry, with a warning that only maxLifetime bounds it.",
			args:   args{claim: claimYAML, flags: []string{"--expires-in", "0"}},
			want:   want{grantedAt: "2025-12-31T23:00:00Z", warnings: []string{never}},
		},
		"ExpiresInZeroRemovesClaimExpiry": {
			reason: "--expires-in 0 removes the claim's expiresAt too.",
			args:   args{claim: withExpiry, flags: []string{"--expires-in", "0"}},
			want:   want{grantedAt: "2025-12-31T23:00:00Z", warnings: []string{never}},
		},
		"V1": {
			reason: "A v1 grant gets the default expiry too, with the warning that v1 does not sign it.",
			args:   args{claim: claimYAML, flags: []string{"--format", "v1"}},
			want: want{grantedAt: "2025-12-31T23:00:00Z", expiresAt: "2026-03-31T23:00:00Z",
				warnings: []string{"warning: a v1 signature does not cover expiresAt"}},
		},
		"ExpiresInNegative": {
			reason: "A negative --expires-in is a usage error naming the flag.",
			args:   args{claim: claimYAML, flags: []string{"--expires-in", "-1h"}},
			want:   want{err: wantErr{usage: true, names: "--expires-in"}},
		},
		"ExpiresInUnderASecond": {
			reason: "An expiry is written to the second: a positive --expires-in under 1s is a usage error naming the flag.",
			args:   args{claim: claimYAML, flags: []string{"--expires-in", "500ms"}},
			want:   want{err: wantErr{usage: true, names: "--expires-in"}},
		},
		"ExpiresInDays": {
			reason: "Go durations have no d unit: --expires-in 90d is a usage error naming the flag.",
			args:   args{claim: claimYAML, flags: []string{"--expires-in", "90d"}},
			want:   want{err: wantErr{usage: true, names: "--expires-in"}},
		},
		"MalformedGrantedAt": {
			reason: "The expiry cannot be computed from a grantedAt that is no time; the error names the field.",
			args:   args{claim: withGrantedAt(`  grantedAt: "yesterday"` + "\n")},
			want:   want{err: wantErr{is: grant.ErrInvalidGrant, names: "spec.grantedAt"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := runCLI(t, tc.args.claim, append([]string{"sign", "--key", filepath.Join(dir, "owner.key")}, tc.args.flags...)...)
			tc.want.err.check(t, tc.reason, err)
			if err != nil {
				if out != "" {
					t.Errorf("%s\nprinted a claim on error:\n%s", tc.reason, out)
				}
				return
			}
			var c v1alpha1.ResourceClaim
			if err := yaml.Unmarshal([]byte(out), &c); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want.grantedAt+" "+tc.want.expiresAt, c.Spec.GrantedAt+" "+c.Spec.ExpiresAt); diff != "" {
				t.Errorf("%s\ngrantedAt and expiresAt: -want, +got:\n%s", tc.reason, diff)
			}
			if strings.Contains(out, "expiresAt") != (tc.want.expiresAt != "") {
				t.Errorf("%s\nthe claim printed has expiresAt %v, want %v:\n%s", tc.reason, strings.Contains(out, "expiresAt"), tc.want.expiresAt != "", out)
			}
			msg, err := grant.Of(&c).Message(grant.Version(&c))
			if err != nil {
				t.Fatal(err)
			}
			if !grant.Verify(claimstest.Owner.Public().(ed25519.PublicKey), msg, signatureOf(t, out)) {
				t.Errorf("%s\nthe signature does not cover the claim printed", tc.reason)
			}
			var got []string
			for line := range strings.Lines(errOut) {
				if !strings.HasPrefix(line, "warning: ") || strings.Contains(line, "no metadata.namespace") {
					continue
				}
				if i := len(got); i < len(tc.want.warnings) && strings.HasPrefix(line, tc.want.warnings[i]) {
					line = tc.want.warnings[i]
				}
				got = append(got, strings.TrimSuffix(line, "\n"))
			}
			if diff := cmp.Diff(tc.want.warnings, got); diff != "" {
				t.Errorf("%s\nwarnings: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestDigest: claim digest prints the digest of a claim's signature, the
// one sign printed, for either spelling of it; a claim without a sound
// signature is an error naming spec.signature and never quoting it.
func TestDigest(t *testing.T) {
	dir := files(t)
	claim, _, signDigest := signed(t, claimYAML, "--key", filepath.Join(dir, "owner.key"))
	sig := grant.FormatSignature(signatureOf(t, claim))
	digest := grant.Digest(signatureOf(t, claim))
	if diff := cmp.Diff(digest, signDigest); diff != "" {
		t.Fatalf("the digest sign printed: -want, +got:\n%s", diff)
	}
	withSignature := func(s string) string { return strings.Replace(claim, "signature: "+sig, "signature: "+s, 1) }
	notBase64 := sig[:10] + "-" + sig[11:] // '-' is URL-safe base64, not standard
	for name, content := range map[string]string{
		"signed.yaml":     claim,
		"unpadded.yaml":   withSignature(strings.TrimRight(sig, "=")),
		"short.yaml":      withSignature(sig[:40]),
		"not-base64.yaml": withSignature(notBase64),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	type args struct {
		stdin string
		args  []string
	}
	type want struct {
		out string
		err wantErr
	}
	cases := map[string]struct {
		reason string
		args   args
		want   want
	}{
		"File": {
			reason: "The digest of a signed claim file is the one sign printed, alone on its line.",
			args:   args{args: []string{filepath.Join(dir, "signed.yaml")}},
			want:   want{out: digest + "\n"},
		},
		"Stdin": {
			reason: "Without CLAIM the claim is read from stdin.",
			args:   args{stdin: claim},
			want:   want{out: digest + "\n"},
		},
		"StdinDash": {
			reason: "CLAIM - is stdin.",
			args:   args{stdin: claim, args: []string{"-"}},
			want:   want{out: digest + "\n"},
		},
		"Unpadded": {
			reason: "The unpadded spelling of the signature has the same digest, so a revoked grant cannot come back by losing its padding.",
			args:   args{args: []string{filepath.Join(dir, "unpadded.yaml")}},
			want:   want{out: digest + "\n"},
		},
		"Unsigned": {
			reason: "A claim without a signature is a malformed-signature error naming spec.signature.",
			args:   args{args: []string{filepath.Join(dir, "claim.yaml")}},
			want:   want{err: wantErr{is: grant.ErrMalformedSignature, names: "spec.signature"}},
		},
		"Short": {
			reason: "A truncated signature is a malformed-signature error naming spec.signature.",
			args:   args{args: []string{filepath.Join(dir, "short.yaml")}},
			want:   want{err: wantErr{is: grant.ErrMalformedSignature, names: "spec.signature"}},
		},
		"NotBase64": {
			reason: "A signature of the right length that is not base64 is a malformed-signature error naming spec.signature.",
			args:   args{args: []string{filepath.Join(dir, "not-base64.yaml")}},
			want:   want{err: wantErr{is: grant.ErrMalformedSignature, names: "spec.signature"}},
		},
		"NotAClaim": {
			reason: "Another kind is refused by kind.",
			args:   args{args: []string{filepath.Join(dir, "datastore.yaml")}},
			want:   want{err: wantErr{names: `holds a "Datastore", want a ResourceClaim`}},
		},
		"TwoClaims": {
			reason: "More than one claim file is a usage error.",
			args:   args{args: []string{filepath.Join(dir, "signed.yaml"), filepath.Join(dir, "unpadded.yaml")}},
			want:   want{err: wantErr{usage: true, names: "at most one claim file"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := runCLI(t, tc.args.stdin, append([]string{"digest"}, tc.args.args...)...)
			tc.want.err.check(t, tc.reason, err)
			if diff := cmp.Diff(tc.want.out, out); diff != "" {
				t.Errorf("%s\nstdout: -want, +got:\n%s", tc.reason, diff)
			}
			for _, s := range []string{sig, strings.TrimRight(sig, "="), sig[:40], notBase64} {
				if strings.Contains(out+errOut+fmt.Sprint(err), s) {
					t.Errorf("%s\nprinted the signature:\nstdout %q\nstderr %q\nerr %v", tc.reason, out, errOut, err)
				}
			}
		})
	}
}

func TestKeygen(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "owner.key")
	out, errOut, err := runCLI(t, "", "keygen", "--out", keyFile)
	if err != nil {
		t.Fatalf("keygen: %v\n%s", err, errOut)
	}
	info, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(os.FileMode(0o600), info.Mode().Perm()); diff != "" {
		t.Errorf("key file mode: -want, +got:\n%s", diff)
	}
	text, _ := os.ReadFile(keyFile)
	priv, oldHex, err := grant.ReadPrivateKey(text)
	if err != nil || oldHex || !strings.HasPrefix(string(text), "-----BEGIN PRIVATE KEY-----\n") {
		t.Fatalf("key file is not a PKCS#8 PEM private key (old hex %v): %v", oldHex, err)
	}
	if diff := cmp.Diff(claimstest.PublicHex(priv)+"\n", out); diff != "" {
		t.Errorf("printed public key: -want, +got:\n%s", diff)
	}
	if _, err := grant.ParsePublicKey(strings.TrimSpace(out)); err != nil {
		t.Errorf("keygen printed a public key a Datastore refuses: %v", err)
	}
	if strings.Contains(out+errOut, strings.TrimSpace(string(text))) {
		t.Errorf("keygen printed the private key")
	}
	if _, _, err := runCLI(t, "", "keygen", "--out", keyFile); !errors.Is(err, os.ErrExist) {
		t.Errorf("keygen over an existing file: got %v, want %v", err, os.ErrExist)
	}
	if _, _, err := runCLI(t, "", "keygen"); err == nil {
		t.Errorf("keygen without --out: want an error (the key is never printed)")
	}
}

// TestVerifyWeakKey: a claim forged for a Datastore whose owner key is a
// small-order point (the identity) is refused, and verify says that the
// Datastore's key is weak, while the hook tells the claim only that its
// signature does not verify.
func TestVerifyWeakKey(t *testing.T) {
	dir := files(t)
	ds := claimstest.Datastore()
	identity := claimstest.IdentityKey
	ds.Spec.OwnerPublicKey, ds.Spec.OwnerPublicKeys = identity, nil
	claim := claimstest.Forge(claimstest.Claim(), identity)
	for name, obj := range map[string]any{"weak-datastore.yaml": ds, "forged.yaml": claim} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := runCLI(t, "", "verify", "--claim", filepath.Join(dir, "forged.yaml"),
		"--datastore", filepath.Join(dir, "weak-datastore.yaml"), "--secret", filepath.Join(dir, "secret.yaml"))
	if !errors.Is(err, ErrDenied) {
		t.Errorf("verify of a forged claim: got err %v, want %v", err, ErrDenied)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var got []string
	for _, l := range lines {
		prefix, _, _ := strings.Cut(l, ": ")
		reason, _, _ := strings.Cut(strings.TrimPrefix(l, prefix+": "), ":")
		got = append(got, prefix+": "+reason)
	}
	want := []string{"denied: InvalidSignature", "datastore refused: WeakPublicKey"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("verify output: -want, +got:\n%s\n%s", diff, out)
	}
}

func TestVerifyWrongKind(t *testing.T) {
	dir := files(t)
	_, _, err := runCLI(t, "", "verify", "--claim", filepath.Join(dir, "secret.yaml"), "--datastore", filepath.Join(dir, "datastore.yaml"), "--secret", filepath.Join(dir, "secret.yaml"))
	if err == nil || !strings.Contains(err.Error(), "want a ResourceClaim") {
		t.Errorf("verify with files swapped: got %v", err)
	}
}

// TestHelpStreams shows that usage asked for goes to stdout with no error
// beyond flag.ErrHelp, and that a mistake is a *cliflag.UsageError that
// prints nothing itself (the caller reports it; see cliflag.Exit).
func TestHelpStreams(t *testing.T) {
	cases := map[string]struct {
		reason     string
		args       []string
		wantStdout string
		wantUsage  bool
	}{
		"Top":       {reason: "claim --help prints the subcommands.", args: []string{"--help"}, wantStdout: "Usage: formspec-hooks claim <subcommand>"},
		"Keygen":    {reason: "claim keygen --help prints its synopsis and flags.", args: []string{"keygen", "--help"}, wantStdout: "Usage: formspec-hooks claim keygen --out FILE"},
		"Sign":      {reason: "claim sign --help prints its synopsis and flags.", args: []string{"sign", "--help"}, wantStdout: "Usage: formspec-hooks claim sign --key FILE"},
		"Verify":    {reason: "claim verify --help prints its synopsis and flags.", args: []string{"verify", "--help"}, wantStdout: "Usage: formspec-hooks claim verify --claim FILE"},
		"Digest":    {reason: "claim digest --help prints its synopsis.", args: []string{"digest", "--help"}, wantStdout: "Usage: formspec-hooks claim digest [CLAIM]"},
		"WrongFlag": {reason: "An unknown flag is a usage error.", args: []string{"sign", "--bogus"}, wantUsage: true},
		"NoCommand": {reason: "No subcommand is a usage error.", args: nil, wantUsage: true},
		"Unknown":   {reason: "An unknown subcommand is a usage error.", args: []string{"forge"}, wantUsage: true},
		"NoKey":     {reason: "sign without --key is a usage error.", args: []string{"sign"}, wantUsage: true},
		"BadNow":    {reason: "verify with an unparsable --now is a usage error.", args: []string{"verify", "--claim", "c", "--datastore", "d", "--secret", "s", "--now", "yesterday"}, wantUsage: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			_, isUsage := errors.AsType[*cliflag.UsageError](err)
			if isUsage != tc.wantUsage {
				t.Errorf("%s\nusage error: got %v (%v), want %v", tc.reason, isUsage, err, tc.wantUsage)
			}
			if !tc.wantUsage && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("%s\nerror: got %v, want flag.ErrHelp", tc.reason, err)
			}
			if tc.wantUsage && stdout.Len()+stderr.Len() > 0 {
				t.Errorf("%s\nprinted %q %q; want nothing (the caller reports usage errors)", tc.reason, stdout.String(), stderr.String())
			}
			if !strings.HasPrefix(stdout.String(), tc.wantStdout) {
				t.Errorf("%s\nstdout %q: want it to start with %q", tc.reason, stdout.String(), tc.wantStdout)
			}
		})
	}
}

// TestSignKeyFiles: sign reads PKCS#8 PEM keys, reads the old hex seed
// with a warning that says how to convert it, and refuses a public key
// given as --key, naming it as one, with nothing on stdout.
func TestSignKeyFiles(t *testing.T) {
	dir := files(t)
	cases := map[string]struct {
		reason string
		key    string
		signed bool
		// warning is in stderr ("" for no warning at all); err starts
		// the error ("" for none).
		warning, err string
	}{
		"PEM": {
			reason: "What keygen writes signs, without a warning.",
			key:    "owner.key", signed: true,
		},
		"OldHex": {
			reason: "An earlier keygen's hex seed still signs, with a warning giving the command that converts it.",
			key:    "owner.hex", signed: true,
			warning: "formspec-hooks claim keygen --from-hex " + filepath.Join(dir, "owner.hex") + " --out NEW.pem",
		},
		"PublicKey": {
			reason: "The public key keygen printed is refused as a public key, and no claim is printed.",
			key:    "owner.pub", err: "--key " + filepath.Join(dir, "owner.pub") + " holds a public key, not a private key",
		},
		"Claim": {
			reason: "Any other file is refused as no key.",
			key:    "claim.yaml", err: "--key " + filepath.Join(dir, "claim.yaml") + ": malformed private key",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := runCLI(t, claimYAML, "sign", "--key", filepath.Join(dir, tc.key))
			if signed := strings.Contains(out, "signature: "); signed != tc.signed {
				t.Errorf("%s\nsigned %v, want %v; stdout %q", tc.reason, signed, tc.signed, out)
			}
			if warned := strings.Contains(errOut, "warning: "); warned != (tc.warning != "") || !strings.Contains(errOut, tc.warning) {
				t.Errorf("%s\nstderr %q, want a warning containing %q", tc.reason, errOut, tc.warning)
			}
			if (err != nil) != (tc.err != "") || err != nil && !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s\nerror %v, want one starting %q", tc.reason, err, tc.err)
			}
		})
	}
}

// TestKeygenFromHex: --from-hex writes an earlier keygen's hex key as
// PKCS#8 PEM, the same key, and says when the file could have been a
// public key instead.
func TestKeygenFromHex(t *testing.T) {
	dir := files(t)
	cases := map[string]struct {
		reason      string
		from        string
		wantPublic  string
		wantWarning bool
	}{
		"OldSeed": {
			reason: "The owner's old key file becomes PEM and keeps the owner's public key.",
			from:   "owner.hex", wantPublic: claimstest.PublicHex(claimstest.Owner),
		},
		"PublicKey": {
			reason: "A file that is also a public key is converted as asked, with a warning to compare the public key printed.",
			from:   "owner.pub", wantWarning: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "converted.pem")
			stdout, stderr, err := runCLI(t, "", "keygen", "--from-hex", filepath.Join(dir, tc.from), "--out", out)
			if err != nil {
				t.Fatalf("keygen --from-hex: %v", err)
			}
			text, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			priv, oldHex, err := grant.ReadPrivateKey(text)
			if err != nil || oldHex {
				t.Fatalf("converted file: old hex %v, %v", oldHex, err)
			}
			if got := strings.TrimSpace(stdout); got != claimstest.PublicHex(priv) || tc.wantPublic != "" && got != tc.wantPublic {
				t.Errorf("%s\nprinted public key %s; the converted key's is %s, want %q", tc.reason, got, claimstest.PublicHex(priv), tc.wantPublic)
			}
			if warned := strings.Contains(stderr, "could also be a public key"); warned != tc.wantWarning {
				t.Errorf("%s\nwarning %v (%q), want %v", tc.reason, warned, stderr, tc.wantWarning)
			}
		})
	}
}

// TestKeysWithOpenSSL: a key openssl makes signs grants the Datastore's key
// verifies, and openssl reads the key keygen writes and derives the public
// key keygen printed. It needs openssl, which the tests do not install:
// TestMarshalPrivateKey holds the format without it.
func TestKeysWithOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not found: skipping the interoperability check (TestMarshalPrivateKey checks the format against RFC 8410's example)")
	}
	dir := t.TempDir()
	run := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(openssl, args...).Output()
		if err != nil {
			t.Fatalf("openssl %s: %v", strings.Join(args, " "), err)
		}
		return out
	}

	// keygen -> openssl.
	keyFile := filepath.Join(dir, "keygen.pem")
	pub, _, err := runCLI(t, "", "keygen", "--out", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	der := run("pkey", "-in", keyFile, "-pubout", "-outform", "DER")
	if got := hex.EncodeToString(der[len(der)-ed25519.PublicKeySize:]); got != strings.TrimSpace(pub) {
		t.Errorf("openssl derives public key %s from keygen's file; keygen printed %s", got, pub)
	}

	// openssl -> sign -> verify.
	sslKey := filepath.Join(dir, "openssl.pem")
	run("genpkey", "-algorithm", "ed25519", "-out", sslKey)
	der = run("pkey", "-in", sslKey, "-pubout", "-outform", "DER")
	ds := claimstest.Datastore()
	ds.Spec.OwnerPublicKey, ds.Spec.OwnerPublicKeys = hex.EncodeToString(der[len(der)-ed25519.PublicKeySize:]), nil
	dsYAML, err := yaml.Marshal(ds)
	if err != nil {
		t.Fatal(err)
	}
	world := files(t)
	if err := os.WriteFile(filepath.Join(world, "datastore.yaml"), dsYAML, 0o600); err != nil {
		t.Fatal(err)
	}
	signed, errOut, err := runCLI(t, claimYAML, "sign", "--key", sslKey)
	if err != nil {
		t.Fatalf("sign with openssl's key: %v\n%s", err, errOut)
	}
	claimFile := filepath.Join(dir, "signed.yaml")
	if err := os.WriteFile(claimFile, []byte(signed), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "", "verify", "--claim", claimFile, "--datastore", filepath.Join(world, "datastore.yaml"), "--secret", filepath.Join(world, "secret.yaml"))
	if err != nil || !strings.HasPrefix(out, "accepted: Granted") {
		t.Errorf("verify of a claim signed with openssl's key: %v\n%s", err, out)
	}
}
