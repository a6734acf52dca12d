package v1alpha1

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidArtifactHash checks ValidArtifactHash against the pattern the
// admission policy matches with, case by case.
func TestValidArtifactHash(t *testing.T) {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	pattern := regexp.MustCompile(ArtifactHashPattern)
	cases := map[string]struct {
		reason string
		hash   string
		want   bool
	}{
		"Digest":       {reason: "sha256: and 64 lowercase hex digits", hash: "sha256:" + hex64, want: true},
		"Empty":        {reason: "no hash is not a hash", hash: ""},
		"Short":        {reason: "a prefix of a digest names no binary", hash: "sha256:9b2c"},
		"OneShort":     {reason: "63 digits", hash: "sha256:" + hex64[1:]},
		"OneLong":      {reason: "65 digits", hash: "sha256:" + hex64 + "0"},
		"Uppercase":    {reason: "one spelling per digest: capitals would roll the same binary again", hash: "sha256:" + strings.ToUpper(hex64)},
		"NoPrefix":     {reason: "the algorithm is part of the value", hash: hex64},
		"OtherAlgo":    {reason: "sha512 is not what the pods' hash is", hash: "sha512:" + hex64},
		"NotHex":       {reason: "g is no hex digit", hash: "sha256:" + hex64[:63] + "g"},
		"Newline":      {reason: "nothing after the digest", hash: "sha256:" + hex64 + "\n"},
		"PrefixInside": {reason: "the prefix starts the value", hash: " sha256:" + hex64[1:]},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ValidArtifactHash(tc.hash); got != tc.want {
				t.Errorf("%s: ValidArtifactHash(%q) = %v, want %v", tc.reason, tc.hash, got, tc.want)
			}
			if got := pattern.MatchString(tc.hash); got != tc.want {
				t.Errorf("%s: ArtifactHashPattern matches %q: %v, want %v", tc.reason, tc.hash, got, tc.want)
			}
		})
	}
}
