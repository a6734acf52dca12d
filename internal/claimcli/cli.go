// Package claimcli is "formspec-hooks claim": the Datastore owner's tools to
// make a key pair, sign ResourceClaims, check a claim offline exactly as
// the resourceclaim hook would, and name a signed grant for revocation. It lives here, not in cmd/, so that it can
// be tested without building the server.
//
// Private keys leave this package only through the file keygen writes.
// Nothing is printed that a Secret or a private key contains.
package claimcli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/formspec/formspec-hooks/hooks/api/v1alpha1"
	"github.com/formspec/formspec-hooks/internal/cliflag"
	"github.com/formspec/formspec-hooks/internal/hooks/claims"
	"github.com/formspec/formspec-hooks/internal/hooks/claims/grant"
)

// ErrDenied is returned by verify when the claim would be denied, so the
// command exits non-zero.
var ErrDenied = errors.New("claim denied")

// Run runs "claim <keygen|sign|verify|digest> [flags]".
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return run(ctx, args, stdin, stdout, stderr, time.Now)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, now func() time.Time) error {
	if len(args) == 0 {
		return &cliflag.UsageError{Command: command, Err: errors.New("missing subcommand: keygen, sign, verify or digest")}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		// Asked for: usage is the answer, on stdout.
		fmt.Fprint(stdout, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "keygen":
		return keygen(args[1:], stdout, stderr)
	case "sign":
		return sign(args[1:], stdin, stdout, stderr, now)
	case "verify":
		return verify(args[1:], stdin, stdout, stderr, now)
	case "digest":
		return digest(args[1:], stdin, stdout, stderr)
	default:
		return &cliflag.UsageError{Command: command, Err: fmt.Errorf("unknown subcommand %q: want keygen, sign, verify or digest", args[0])}
	}
}

// program and command are this command's program and full name, for its
// usage and errors.
const (
	program = "formspec-hooks"
	command = program + " claim"
)

const usage = `Usage: formspec-hooks claim <subcommand> [flags]

Subcommands:
  keygen --out FILE [--from-hex OLD]     make an ed25519 key pair; write the private key to FILE (PKCS#8 PEM, mode 0600), print the public key
  sign --key FILE [--format v2|v1] [--expires-in DURATION] [CLAIM]
                                         sign a ResourceClaim (YAML file, or stdin when CLAIM is absent or -), print it signed;
                                         it expires 90 days after grantedAt unless it or --expires-in says otherwise
  verify --claim FILE --datastore FILE --secret FILE [--now RFC3339] [--accept-v1-grants]
                                         decide the claim as the hook would, and say why the Datastore is refused if it is; exit 1 when denied
  digest [CLAIM]                         print the digest of a signed claim's signature, which the Datastore's
                                         spec.grantPolicy.revokedSignatures lists to revoke it

In a cluster the claims are ResourceClaims of formspec.dev: kubectl get rclaim
(a bare "resourceclaim" is Kubernetes' own Dynamic Resource Allocation API).
Run 'formspec-hooks claim <subcommand> --help' for a subcommand's flags.
`

// flags returns the flag set of subcommand name; synopsis and summary head
// its --help.
func flags(name, synopsis, summary string) *flag.FlagSet {
	return cliflag.New(command+" "+name, "Usage: "+command+" "+name+" "+synopsis+"\n\n"+summary+"\n\nFlags:\n")
}

// parse parses a subcommand's flags; see cliflag.Parse.
func parse(fs *flag.FlagSet, args []string, stdout, _ io.Writer) error {
	return cliflag.Parse(fs, args, stdout)
}

func keygen(args []string, stdout, stderr io.Writer) error {
	fs := flags("keygen", "--out FILE [--from-hex OLD]", "Make an ed25519 key pair: write the private key to FILE (PKCS#8 PEM, the form\n`openssl genpkey -algorithm ed25519` writes; mode 0600) and print the public\nkey (hex) for the Datastore's spec.ownerPublicKey. With --from-hex, write the\nkey of OLD, a hex key file of an earlier version, instead of a new one.")
	out := fs.String("out", "", "file to write the private key to (PKCS#8 PEM, mode 0600); must not exist")
	fromHex := fs.String("from-hex", "", "convert this hex private key file, written by an earlier keygen, instead of making a new key")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return cliflag.Usagef(fs, "keygen needs --out FILE and no arguments: the private key is only ever written to a file")
	}
	var priv ed25519.PrivateKey
	var err error
	if *fromHex != "" {
		priv, err = readOldHexKey(*fromHex, stderr)
	} else {
		_, priv, err = grant.GenerateKey(nil)
	}
	if err != nil {
		return err
	}
	pemKey, err := grant.MarshalPrivateKey(priv)
	if err != nil {
		return err
	}
	// O_EXCL: overwriting a key file would lose the key every grant
	// already signed depends on.
	f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("cannot create key file: %w", err)
	}
	if _, err := f.Write(pemKey); err != nil {
		f.Close()
		return fmt.Errorf("cannot write key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write key file: %w", err)
	}
	fmt.Fprintln(stdout, grant.FormatPublicKey(priv.Public().(ed25519.PublicKey)))
	return nil
}

// readOldHexKey reads a key file of an earlier keygen for --from-hex. The
// person says it is a private key, so 64 hexadecimal characters are taken
// as a seed even when they also encode a public key; the printed public
// key then tells which it was.
func readOldHexKey(name string, stderr io.Writer) (ed25519.PrivateKey, error) {
	text, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read --from-hex file: %w", err)
	}
	priv, err := grant.ParsePrivateKey(string(text))
	if err != nil {
		return nil, fmt.Errorf("--from-hex %s: %w", name, err)
	}
	if _, _, err := grant.ReadPrivateKey(text); errors.Is(err, grant.ErrPublicKey) {
		fmt.Fprintf(stderr, "warning: %s could also be a public key; if the public key printed is not your Datastore's spec.ownerPublicKey, it was one\n", name)
	}
	return priv, nil
}

// readKey reads --key for sign. The old hex form is still read, with a
// warning saying how to convert it; a public key is named as such.
func readKey(name string, stderr io.Writer) (ed25519.PrivateKey, error) {
	text, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read key file: %w", err)
	}
	priv, oldHex, err := grant.ReadPrivateKey(text)
	switch {
	case errors.Is(err, grant.ErrPublicKey):
		hint := ""
		if _, hexErr := grant.ParsePrivateKey(string(text)); hexErr == nil {
			// One old hex seed in sixteen also encodes a public key.
			hint = fmt.Sprintf(" (if it is in fact a private key written by an earlier keygen, convert it: %s claim keygen --from-hex %s --out NEW.pem)", program, name)
		}
		return nil, fmt.Errorf("--key %s holds %w; give --key the private key file keygen --out wrote%s", name, err, hint)
	case err != nil:
		return nil, fmt.Errorf("--key %s: %w", name, err)
	case oldHex:
		fmt.Fprintf(stderr, "warning: %s holds a hex private key, the form of earlier versions; convert it to PKCS#8 PEM with: %s claim keygen --from-hex %s --out NEW.pem\n", name, program, name)
	}
	return priv, nil
}

// defaultLifetime is how long a grant lasts after its grantedAt when
// neither the claim (spec.expiresAt) nor --expires-in says: 90 days. A
// grant is a bearer credential for a Datastore's data, and one signed and
// forgotten should lapse by itself rather than last until someone revokes
// it; 90 days is the usual rotation period for credentials, and the
// example spec.grantPolicy.maxLifetime gives (2160h).
const defaultLifetime = 90 * 24 * time.Hour

func sign(args []string, stdin io.Reader, stdout, stderr io.Writer, now func() time.Time) error {
	fs := flags("sign", "--key FILE [--format v2|v1] [--expires-in DURATION] [CLAIM]", "Sign a ResourceClaim (a YAML file, or stdin when CLAIM is absent or -) and print\nit signed. An empty spec.grantedAt is set to the current time. A claim without\nspec.expiresAt gets one 90 days (2160h) after spec.grantedAt; --expires-in sets\nit instead, replacing the claim's, and --expires-in 0 signs a grant that never\nexpires. The signature's digest, which revokes the grant when listed in the\nDatastore's spec.grantPolicy.revokedSignatures, is printed on stderr.")
	keyFile := fs.String("key", "", "private key file: PKCS#8 PEM, as keygen or openssl genpkey -algorithm ed25519 write it")
	format := fs.String("format", v1alpha1.SignatureV2, "signature version: v2 (binds namespaces and expiry) or v1 (the original operator's)")
	expiresIn := fs.String("expires-in", "", "set spec.expiresAt this long after spec.grantedAt, replacing the claim's: a Go `duration` such as 720h (h is the largest unit), or 0 for no expiry (default: keep the claim's spec.expiresAt, or else 2160h)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *keyFile == "" || fs.NArg() > 1 {
		return cliflag.Usagef(fs, "sign needs --key FILE and at most one claim file")
	}
	if *format != v1alpha1.SignatureV1 && *format != v1alpha1.SignatureV2 {
		return cliflag.Usagef(fs, "--format must be v1 or v2, not %q", *format)
	}
	lifetime, replace := defaultLifetime, *expiresIn != ""
	if replace {
		var err error
		if lifetime, err = time.ParseDuration(*expiresIn); err != nil {
			return cliflag.Usagef(fs, "--expires-in is not a Go duration such as 2160h (h is the largest unit): %w", err)
		}
		// spec.expiresAt is written to the second, and must come after
		// spec.grantedAt.
		if lifetime < 0 || lifetime > 0 && lifetime < time.Second {
			return cliflag.Usagef(fs, "--expires-in must be 0 (no expiry) or at least 1s, not %s", lifetime)
		}
	}
	priv, err := readKey(*keyFile, stderr)
	if err != nil {
		return err
	}
	raw, err := readInput(fs.Arg(0), stdin)
	if err != nil {
		return err
	}
	// The claim is edited as a generic object so that every field the
	// user wrote, known to this version or not, comes back out.
	var obj map[string]any
	if err := yaml.Unmarshal(raw, &obj); err != nil {
		return fmt.Errorf("cannot decode the claim: %w", err)
	}
	spec, ok := obj["spec"].(map[string]any)
	if !ok || obj["kind"] != "ResourceClaim" {
		return errors.New("the input is not a ResourceClaim with a spec")
	}
	if s, _ := spec["grantedAt"].(string); s == "" {
		spec["grantedAt"] = now().UTC().Truncate(time.Second).Format(time.RFC3339)
	}
	spec["signatureVersion"] = *format
	delete(spec, "signature")
	claim, err := decode[v1alpha1.ResourceClaim](obj)
	if err != nil {
		return err
	}
	// The claim's own expiry is kept unless --expires-in was given: the
	// flag is the later and more deliberate choice.
	if replace || claim.Spec.ExpiresAt == "" {
		// Checked without the expiry about to be replaced, so that a
		// malformed grantedAt (or any other field) is reported as Sign
		// reports it.
		g := grant.Of(claim)
		g.ExpiresAt = ""
		times, err := g.Check(*format)
		if err != nil {
			return err
		}
		claim.Spec.ExpiresAt = ""
		if lifetime > 0 {
			claim.Spec.ExpiresAt = times.GrantedAt.Add(lifetime).UTC().Format(time.RFC3339)
		}
	}
	if claim.Spec.ExpiresAt == "" {
		delete(spec, "expiresAt")
	} else {
		spec["expiresAt"] = claim.Spec.ExpiresAt
	}
	sig, err := grant.Sign(grant.Of(claim), *format, priv)
	if err != nil {
		return err
	}
	sigBytes, err := grant.ParseSignature(sig)
	if err != nil {
		return err
	}
	spec["signature"] = sig
	if claim.Spec.ExpiresAt == "" {
		fmt.Fprintln(stderr, "warning: the grant never expires unless the Datastore sets spec.grantPolicy.maxLifetime; revoke it when it is no longer needed by listing its signature digest (below) in the Datastore's spec.grantPolicy.revokedSignatures")
	}
	if *format == v1alpha1.SignatureV1 && claim.Spec.ExpiresAt != "" {
		fmt.Fprintln(stderr, "warning: a v1 signature does not cover expiresAt; anyone who can edit the claim can remove it. Use --format v2.")
	}
	if claim.Namespace == "" {
		fmt.Fprintln(stderr, "warning: the claim has no metadata.namespace; it verifies only in the namespace it is applied to, which is the one v2 binds. Set it.")
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("cannot encode the claim: %w", err)
	}
	fmt.Fprintf(stderr, "signed %s with public key %s\n", *format, grant.FormatPublicKey(priv.Public().(ed25519.PublicKey)))
	printDigest(stderr, sigBytes)
	_, err = stdout.Write(out)
	return err
}

// printDigest prints the line sign and verify give a signature's digest
// in, the value spec.grantPolicy.revokedSignatures takes.
func printDigest(w io.Writer, sig []byte) {
	fmt.Fprintf(w, "signature digest (to revoke it): %s\n", grant.Digest(sig))
}

func verify(args []string, stdin io.Reader, stdout, stderr io.Writer, now func() time.Time) error {
	fs := flags("verify", "--claim FILE --datastore FILE --secret FILE [--now RFC3339]", "Decide the claim exactly as the resourceclaim hook would, offline. Prints\n\"accepted: ...\" and exits 0, or \"denied: <reason>: ...\" and exits 1.")
	claimFile := fs.String("claim", "", "ResourceClaim YAML file (- for stdin)")
	dsFile := fs.String("datastore", "", "Datastore YAML file")
	secretFile := fs.String("secret", "", "the Datastore's endpoint Secret YAML file")
	at := fs.String("now", "", "judge expiry and skew at this RFC 3339 time instead of the clock")
	acceptV1 := fs.Bool("accept-v1-grants", false, "judge as an install that accepts v1 grants for every Datastore (formspec-hooks serve --accept-v1-grants)")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if *claimFile == "" || *dsFile == "" || *secretFile == "" || fs.NArg() > 0 {
		return cliflag.Usagef(fs, "verify needs --claim, --datastore and --secret files and no arguments")
	}
	t := now()
	if *at != "" {
		var err error
		if t, err = time.Parse(time.RFC3339, *at); err != nil {
			return cliflag.Usagef(fs, "--now is not an RFC 3339 time: %w", err)
		}
	}
	claim, err := readObject[v1alpha1.ResourceClaim](*claimFile, stdin, "ResourceClaim")
	if err != nil {
		return err
	}
	ds, err := readObject[v1alpha1.Datastore](*dsFile, stdin, "Datastore")
	if err != nil {
		return err
	}
	secret, err := readObject[corev1.Secret](*secretFile, stdin, "Secret")
	if err != nil {
		return err
	}
	// kubectl folds stringData into data; a Secret file written by hand
	// usually has only stringData.
	for k, v := range secret.StringData {
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[k] = []byte(v)
	}
	// Namespaces default as kubectl apply would, to the claim's.
	if claim.Namespace == "" {
		fmt.Fprintln(stderr, "warning: the claim has no metadata.namespace; judged as namespace \"default\"")
		claim.Namespace = "default"
	}
	if ds.Namespace == "" {
		ds.Namespace = claim.Namespace
	}
	if secret.Namespace == "" {
		secret.Namespace = ds.Namespace
	}
	d := claims.Verify(claim, ds, secret, t, claims.Options{AcceptV1: *acceptV1})
	if !d.Allowed {
		fmt.Fprintf(stdout, "denied: %s: %s\n", d.Reason, d.Message)
		// The hook tells a claim whose signature does not verify nothing
		// about the Datastore; whoever runs this holds the Datastore's
		// files, so say what is wrong with it too (a weak owner key, for
		// one, under which a forged claim is merely InvalidSignature).
		if dd := claims.CheckDatastore(ds, secret); !dd.Allowed {
			fmt.Fprintf(stdout, "datastore refused: %s: %s\n", dd.Reason, dd.Message)
		}
		return fmt.Errorf("%w: %s", ErrDenied, d.Reason)
	}
	data := claims.Project(secret.Data, ds.Spec.Driver, claim.Spec.Permission)
	fmt.Fprintf(stdout, "accepted: %s: %s\n", d.Reason, d.Message)
	fmt.Fprintf(stdout, "secret %s%s would hold keys: %s\n", claim.Name, "-credentials", strings.Join(claims.SortedKeys(data), ", "))
	if sig, err := grant.ParseSignature(claim.Spec.Signature); err == nil {
		printDigest(stdout, sig)
	}
	return nil
}

// digest prints the digest of a claim's signature alone on its line, for
// scripts and for the Datastore's spec.grantPolicy.revokedSignatures. The
// signature is only parsed, not verified: revoking needs no key, and a
// grant signed by a key since removed can still be listed.
func digest(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	// No flags, so no "Flags:" heading (see flags).
	fs := cliflag.New(command+" digest", "Usage: "+command+" digest [CLAIM]\n\nPrint the digest of a signed ResourceClaim's spec.signature (a YAML file, or\nstdin when CLAIM is absent or -): sha256: and the hex SHA-256 of its 64 bytes,\nthe same for the padded and the unpadded spelling. Listed in the Datastore's\nspec.grantPolicy.revokedSignatures, it revokes that grant. The signature is\nnot checked against any key.\n")
	if err := parse(fs, args, stdout, stderr); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return cliflag.Usagef(fs, "digest takes at most one claim file")
	}
	claim, err := readObject[v1alpha1.ResourceClaim](fs.Arg(0), stdin, "ResourceClaim")
	if err != nil {
		return err
	}
	// Errors name the field and never quote it, as package grant's do.
	if claim.Spec.Signature == "" {
		return fmt.Errorf("spec.signature: %w: empty, the claim is not signed", grant.ErrMalformedSignature)
	}
	sig, err := grant.ParseSignature(claim.Spec.Signature)
	if err != nil {
		return fmt.Errorf("spec.signature: %w", err)
	}
	fmt.Fprintln(stdout, grant.Digest(sig))
	return nil
}

func readInput(name string, stdin io.Reader) ([]byte, error) {
	if name == "" || name == "-" {
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("cannot read stdin: %w", err)
		}
		return b, nil
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, err)
	}
	return b, nil
}

func readObject[T any](name string, stdin io.Reader, kind string) (*T, error) {
	raw, err := readInput(name, stdin)
	if err != nil {
		return nil, err
	}
	if name == "" || name == "-" {
		name = "stdin"
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(raw, &head); err != nil {
		// The YAML decoder's errors quote the offending line, which could
		// be a Secret value.
		return nil, fmt.Errorf("cannot decode %s: not valid YAML", name)
	}
	if head.Kind != kind {
		return nil, fmt.Errorf("%s holds a %q, want a %s", name, head.Kind, kind)
	}
	out := new(T)
	if err := yaml.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("cannot decode %s as a %s", name, kind)
	}
	return out, nil
}

func decode[T any](obj map[string]any) (*T, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot encode: %w", err)
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("cannot decode the claim: %w", err)
	}
	return out, nil
}
