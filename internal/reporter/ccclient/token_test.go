package ccclient

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestTokenFileIsReRead checks that a rotated token is used without a
// restart, and that a token file gone missing or empty sends no token at
// all rather than the last one read (a revoked token is never sent again).
func TestTokenFileIsReRead(t *testing.T) {
	p := writeFile(t, "token", "first\n")
	tok, err := NewFileToken(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		reason  string
		write   *string
		remove  bool
		want    string
		wantErr error
	}{
		{reason: "initial token", want: "first"},
		{reason: "rotated token (different size, so the change is seen even within one mtime tick)", write: ptr("second-token"), want: "second-token"},
		{reason: "an emptied file sends no token", write: ptr(""), wantErr: errNoToken},
		{reason: "a token written again is sent", write: ptr("third-token\n"), want: "third-token"},
		{reason: "two tokens are not guessed between", write: ptr("a\nb\n"), wantErr: cmpopts.AnyError},
		{reason: "a removed file sends no token", remove: true, wantErr: errNoToken},
	}
	for _, s := range steps {
		if s.write != nil {
			if err := os.WriteFile(p, []byte(*s.write), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if s.remove {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		got, err := tok.get()
		if diff := cmp.Diff(s.wantErr, err, cmpopts.EquateErrors()); diff != "" {
			t.Errorf("%s: error: -want, +got:\n%s", s.reason, diff)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("%s: token: -want, +got:\n%s", s.reason, diff)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestTokenFileAtStart covers the token file as the reporter finds it at
// start. The Secret behind it is optional, so missing and empty are normal.
func TestTokenFileAtStart(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		reason    string
		path      string
		wantNew   error
		wantGet   error
		wantToken string
	}{
		"Present": {
			reason:    "A token file is read at start.",
			path:      writeFile(t, "token", "s3cret\n"),
			wantToken: "s3cret",
		},
		"Missing": {
			reason:  "A missing file (optional Secret not created) is not fatal; calls carry no token.",
			path:    filepath.Join(dir, "nope"),
			wantGet: errNoToken,
		},
		"Empty": {
			reason:  "An empty file is treated like a missing one.",
			path:    writeFile(t, "token", " \n"),
			wantGet: errNoToken,
		},
		"Unreadable": {
			reason:  "A path that exists but cannot be read as a file is a broken pod spec and stops the reporter at start.",
			path:    dir,
			wantNew: cmpopts.AnyError,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tok, err := NewFileToken(tc.path, nil)
			if diff := cmp.Diff(tc.wantNew, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nnewFileToken: -want, +got:\n%s", tc.reason, diff)
			}
			if err != nil {
				return
			}
			got, err := tok.get()
			if diff := cmp.Diff(tc.wantGet, err, cmpopts.EquateErrors()); diff != "" {
				t.Errorf("%s\nget error: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantToken, got); diff != "" {
				t.Errorf("%s\nget token: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestErrorBodyHidesToken checks that an error page echoing the request's
// headers, as some proxies' do, does not carry the bearer token into the
// error the reporter logs, and that the rest of the page still does.
func TestErrorBodyHidesToken(t *testing.T) {
	const token = "s3cret-bearer-token"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad gateway; you sent Authorization: "+r.Header.Get("Authorization"), http.StatusBadGateway)
	}))
	defer srv.Close()
	tok, err := NewFileToken(writeFile(t, "token", token+"\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Base: u, HTTP: srv.Client(), Token: tok, Timeout: 5 * time.Second, Now: time.Now}
	res := c.Do(t.Context(), http.MethodGet, "/v1/deploy-status", nil, "", nil)
	if res.Err == nil || res.Status != http.StatusBadGateway {
		t.Fatalf("do: status %d, err %v; want 502 and an error", res.Status, res.Err)
	}
	if msg := res.Err.Error(); strings.Contains(msg, token) || !strings.Contains(msg, "you sent Authorization: Bearer [token]") {
		t.Errorf("error %q: want the page without the token, which shows as [token]", msg)
	}
}

// TestErrorBodyHidesTokenCut checks that a token in an error page is
// hidden however the page holds it: where the read limit falls inside
// it, where a proxy cut it, and more than once; and that a page without
// it is left as it was.
func TestErrorBodyHidesTokenCut(t *testing.T) {
	const token = "s3cret-bearer-token-0123456789abcdef"
	pad := strings.Repeat("x", errorBodyLimit-len("Authorization: Bearer ")-10)
	cases := map[string]struct {
		page string
		want string // what the logged page must hold
	}{
		"the limit falls in the token": {
			page: pad + "Authorization: Bearer " + token + " and more",
			want: "Authorization: Bearer [token]",
		},
		"a proxy cut the token": {
			page: "you sent Authorization: Bearer " + token[:20] + "...",
			want: "you sent Authorization: Bearer [token]...",
		},
		"the token's end alone": {
			page: "header value ended with " + token[10:] + "; try again",
			want: "header value ended with [token]; try again",
		},
		"twice": {
			page: token + " / " + token,
			want: "[token] / [token]",
		},
		"no token": {
			page: "upstream connect error or disconnect/reset before headers",
			want: "upstream connect error or disconnect/reset before headers",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := errorBody(strings.NewReader(tc.page), token)
			if !strings.Contains(got, tc.want) {
				t.Errorf("errorBody = %q, want it to hold %q", got, tc.want)
			}
			for i := 0; i+tokenFragment <= len(token); i++ {
				if part := token[i : i+tokenFragment]; strings.Contains(got, part) {
					t.Fatalf("errorBody = %q holds %q, a part of the token", got, part)
				}
			}
			if len(got) > errorBodyLimit+len("[token]") {
				t.Errorf("errorBody kept %d bytes, more than the limit of %d", len(got), errorBodyLimit)
			}
		})
	}
}
