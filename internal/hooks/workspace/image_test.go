package workspace

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseImage(t *testing.T) {
	type want struct {
		Repository, Version string
	}
	cases := map[string]struct {
		reason         string
		image, version string
		want           want
		wantErr        error
	}{
		"Bare":           {reason: "No tag anywhere: refused, never an implicit latest.", image: "formahub/formspec-resource", wantErr: ErrNoVersion},
		"BareWithFlag":   {reason: "A bare image takes --default-version.", image: "formahub/formspec-resource", version: "1.8.2", want: want{"formahub/formspec-resource", "1.8.2"}},
		"TaggedImage":    {reason: "The image's tag is the default version.", image: "formahub/formspec-resource:1.4.2", want: want{"formahub/formspec-resource", "1.4.2"}},
		"FlagWins":       {reason: "--default-version beats the image's tag.", image: "formahub/formspec-resource:1.4.2", version: "1.5.0", want: want{"formahub/formspec-resource", "1.5.0"}},
		"RegistryPort":   {reason: "A colon before the last slash is a port, not a tag: no version.", image: "registry.local:5000/formspec-resource", wantErr: ErrNoVersion},
		"PortAndTag":     {reason: "Port and tag together.", image: "registry.local:5000/formspec-resource:2.0", want: want{"registry.local:5000/formspec-resource", "2.0"}},
		"Digest":         {reason: "A digest cannot take a tag.", image: "formahub/formspec-resource@sha256:abc", wantErr: cmpopts.AnyError},
		"EmptyImage":     {reason: "An image is required.", image: "", wantErr: cmpopts.AnyError},
		"VersionNoImage": {reason: "A version alone is not enough.", image: "", version: "1.0", wantErr: cmpopts.AnyError},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			repo, version, err := ParseImage(tc.image, tc.version)
			if diff := cmp.Diff(tc.wantErr, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			if diff := cmp.Diff(tc.want, want{repo, version}); diff != "" {
				t.Errorf("%s\nimage: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
