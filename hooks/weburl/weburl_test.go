package weburl

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for name, tc := range map[string]struct {
		reason, raw string
		// wantErr is a part of the error; "" for none.
		wantErr string
	}{
		"http":                {reason: "A plain http address is taken.", raw: "http://formspec-ctl.formspec-system:7070"},
		"https with path":     {reason: "https with a path and query is taken.", raw: "https://cc.example/base?x=1"},
		"user and password":   {reason: "A password before @ is refused.", raw: "https://ccuser:hunter2@cc.example:7070", wantErr: "must not carry a user or password"},
		"user only":           {reason: "A user name alone is refused too: it still ends up in logs.", raw: "http://ccuser@cc.example", wantErr: "must not carry a user or password"},
		"no scheme, userinfo": {reason: "Without a scheme, user:password@host parses as an opaque URL whose scheme is the user; it is refused without naming it.", raw: "ccuser:hunter2@cc.example", wantErr: "it has no http:// or https://"},
		"bad escape":          {reason: "An address that does not parse is refused without quoting url.Error, which repeats the whole URL.", raw: "https://ccuser:hunter2@cc.example/%zz", wantErr: "it does not parse"},
		"ftp":                 {reason: "Another scheme is named.", raw: "ftp://x", wantErr: "not ftp"},
		"relative":            {reason: "A path alone has no scheme.", raw: "/v1", wantErr: "it has no http:// or https://"},
		"no host":             {reason: "A scheme without a host is refused.", raw: "http://", wantErr: "it has no host"},
	} {
		t.Run(name, func(t *testing.T) {
			u, err := Parse("--cluster-control-url", tc.raw)
			if tc.wantErr == "" {
				if err != nil || u == nil || u.String() != tc.raw {
					t.Fatalf("%s\nParse(%q) = %v, %v; want the URL back", tc.reason, tc.raw, u, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s\nParse(%q) = %v; want an error containing %q", tc.reason, tc.raw, u, tc.wantErr)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "--cluster-control-url ") || !strings.Contains(msg, tc.wantErr) {
				t.Errorf("%s\nerror %q: want it to start with the flag and contain %q", tc.reason, msg, tc.wantErr)
			}
			for _, secret := range []string{"hunter2", "ccuser", "cc.example"} {
				if strings.Contains(msg, secret) {
					t.Errorf("%s\nerror %q repeats %q from the address", tc.reason, msg, secret)
				}
			}
		})
	}
}

func TestParseUserinfoIsErrUserinfo(t *testing.T) {
	_, err := Parse("reporter URL", "http://a:b@127.0.0.1:8181")
	if !errors.Is(err, ErrUserinfo) {
		t.Fatalf("Parse with a password: %v, want ErrUserinfo", err)
	}
}
