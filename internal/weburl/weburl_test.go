package weburl

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	for name, tc := range map[string]struct {
		reason, raw string
		// wantErr is a part of the error; "" for none.
		wantErr string
	}{
		"http":                {reason: "A plain http address is taken.", raw: "http://formspec-ctl.formspec-system:7070"},
		"https with path":     {reason: "https with a path is taken.", raw: "https://cc.example/base"},
		"query":               {reason: "A query string is refused: a token pasted as ?token= would be logged and copied into pod specs.", raw: "https://cc.example/base?token=hunter2", wantErr: "must not carry a query string or a fragment"},
		"empty query":         {reason: "A bare ? is a query too.", raw: "https://cc.example/?", wantErr: "must not carry a query string or a fragment"},
		"fragment":            {reason: "A fragment is refused like a query.", raw: "https://cc.example#hunter2", wantErr: "must not carry a query string or a fragment"},
		"empty fragment":      {reason: "A bare # is a fragment too.", raw: "https://cc.example/#", wantErr: "must not carry a query string or a fragment"},
		"query in fragment":   {reason: "A ? after the # is still refused, without quoting either.", raw: "http://cc.example#a?token=hunter2", wantErr: "must not carry a query string or a fragment"},
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

func TestParseQueryIsErrQuery(t *testing.T) {
	_, err := Parse("--cluster-control-url", "https://cc.example/?token=x")
	if !errors.Is(err, ErrQuery) {
		t.Fatalf("Parse with a query: %v, want ErrQuery", err)
	}
}

func TestOrigin(t *testing.T) {
	for name, tc := range map[string]struct {
		reason, raw, want string
	}{
		"host":      {reason: "A bare address is itself.", raw: "https://cc.example", want: "https://cc.example"},
		"port":      {reason: "The port stays: it tells two listeners apart.", raw: "http://127.0.0.1:7070", want: "http://127.0.0.1:7070"},
		"path":      {reason: "A path goes.", raw: "https://cc.example/tenant-a/v1/deploy-status", want: "https://cc.example"},
		"query":     {reason: "A query goes, whatever it holds.", raw: "https://cc.example/v1?token=hunter2", want: "https://cc.example"},
		"userinfo":  {reason: "A user and password go.", raw: "https://ccuser:hunter2@cc.example:443/", want: "https://cc.example:443"},
		"fragment":  {reason: "A fragment goes.", raw: "https://cc.example/#hunter2", want: "https://cc.example"},
		"ipv6 host": {reason: "An IPv6 host keeps its brackets.", raw: "http://[::1]:8181/v1/observations", want: "http://[::1]:8181"},
	} {
		t.Run(name, func(t *testing.T) {
			u, err := url.Parse(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, Origin(u)); diff != "" {
				t.Errorf("%s\nOrigin(%q): -want, +got:\n%s", tc.reason, tc.raw, diff)
			}
		})
	}
}

func TestRedactError(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:7070: connect: connection refused")
	for name, tc := range map[string]struct {
		reason string
		err    error
		want   string
	}{
		"url error": {
			reason: "An http.Client error names the method and the origin, not the path or query it quoted.",
			err:    &url.Error{Op: "Get", URL: "http://127.0.0.1:7070/tenant-a/v1/deploy-status?token=hunter2", Err: refused},
			want:   `Get "http://127.0.0.1:7070": dial tcp 127.0.0.1:7070: connect: connection refused`,
		},
		"unparsable": {
			reason: "A URL that does not parse is left out rather than quoted.",
			err:    &url.Error{Op: "Post", URL: "http://cc.example/%zz?token=hunter2", Err: refused},
			want:   `Post "": dial tcp 127.0.0.1:7070: connect: connection refused`,
		},
		"other": {
			reason: "Any other error is returned as it is.",
			err:    refused,
			want:   refused.Error(),
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := RedactError(tc.err)
			if diff := cmp.Diff(tc.want, got.Error()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			if !errors.Is(got, refused) {
				t.Errorf("%s\n%v does not wrap the cause any more", tc.reason, got)
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	for name, tc := range map[string]struct {
		reason, raw string
		want        bool
	}{
		"127.0.0.1":      {reason: "The loopback address.", raw: "http://127.0.0.1:8480", want: true},
		"127.0.0.53":     {reason: "All of 127/8 is loopback.", raw: "http://127.0.0.53", want: true},
		"localhost":      {reason: "localhost is this host.", raw: "http://localhost:8480", want: true},
		"::1":            {reason: "The IPv6 loopback.", raw: "http://[::1]:8480", want: true},
		"private":        {reason: "A private address is another host on the network.", raw: "http://10.0.0.1:7070"},
		"service":        {reason: "A Service name is another pod.", raw: "http://formspec-ctl.formspec-system:7070"},
		"localhost.evil": {reason: "A name that only starts with localhost is anyone's.", raw: "http://localhost.example.com"},
		"unspecified":    {reason: "0.0.0.0 is not loopback: refuse rather than guess.", raw: "http://0.0.0.0:7070"},
	} {
		t.Run(name, func(t *testing.T) {
			u, err := url.Parse(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := IsLoopback(u); got != tc.want {
				t.Errorf("%s\nIsLoopback(%q) = %v, want %v", tc.reason, tc.raw, got, tc.want)
			}
		})
	}
}
