package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/hooks/claims/claimstest"
	"github.com/formspec/formspec-hooks/hooks/claims/grant"
	"github.com/formspec/formspec-hooks/hooks/cliflag"
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

func TestSignVerify(t *testing.T) {
	dir := files(t)
	p := func(name string) string { return filepath.Join(dir, name) }
	cases := map[string]struct {
		reason  string
		key     string
		format  string
		edit    func(signed string) string
		want    string
		wantErr error
	}{
		"V2": {
			reason: "A claim signed by the owner verifies.",
			key:    "owner.key", format: "v2", edit: func(s string) string { return s },
			want: "accepted: Granted",
		},
		"V1": {
			reason: "v1 still works.",
			key:    "owner.key", format: "v1", edit: func(s string) string { return s },
			want: "accepted: Granted",
		},
		"Stranger": {
			reason: "Another key is denied.",
			key:    "stranger.key", format: "v2", edit: func(s string) string { return s },
			want: "denied: InvalidSignature", wantErr: ErrDenied,
		},
		"Tampered": {
			reason: "Editing the signed claim is denied.",
			key:    "owner.key", format: "v2", edit: func(s string) string { return strings.Replace(s, "permission: read", "permission: admin", 1) },
			want: "denied: InvalidSignature", wantErr: ErrDenied,
		},
		"CopiedNamespace": {
			reason: "Moving a v2 claim to team-b is denied.",
			key:    "owner.key", format: "v2", edit: func(s string) string { return strings.Replace(s, "namespace: team-a", "namespace: team-b", 1) },
			want: "denied: InvalidSignature", wantErr: ErrDenied,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			signed, errOut, err := runCLI(t, claimYAML, "sign", "--key", p(tc.key), "--format", tc.format)
			if err != nil {
				t.Fatalf("sign: %v\n%s", err, errOut)
			}
			seed := grant.FormatPrivateKey(claimstest.Owner)
			if strings.Contains(signed+errOut, seed) {
				t.Fatalf("sign printed the private key")
			}
			if !strings.Contains(signed, "team: a") {
				t.Errorf("sign dropped fields of the input:\n%s", signed)
			}
			claimFile := filepath.Join(t.TempDir(), "signed.yaml")
			if err := os.WriteFile(claimFile, []byte(tc.edit(signed)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, _, err := runCLI(t, "", "verify", "--claim", claimFile, "--datastore", p("datastore.yaml"), "--secret", p("secret.yaml"))
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nverify err: -want, +got:\n%s", tc.reason, diff)
			}
			if !strings.HasPrefix(out, tc.want) {
				t.Errorf("%s\nverify printed %q, want a line starting %q", tc.reason, out, tc.want)
			}
			if strings.Contains(out, claimstest.Password) {
				t.Errorf("verify printed a Secret value")
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
