package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/formspec/formspec-hooks/internal/hooks/metacontroller"
)

// Toy hooks: the transport is tested with these, never with real hook logic.

// echoHook answers with a status built from a map, so that a response whose
// key order depended on map iteration would show up as differing bytes.
func echoHook(_ context.Context, req *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	status := map[string]any{}
	for i := range 32 {
		status[fmt.Sprintf("key-%02d", i)] = i
	}
	status["parentBytes"] = len(req.Parent)
	status["html"] = "<a & b>"
	return &metacontroller.CompositeResponse{Status: status, Children: []any{}}, nil
}

func failingHook(context.Context, *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	return nil, errors.New("cannot decode Deployment \"ws\": unexpected token at offset 1234")
}

func panickingHook(context.Context, *metacontroller.CompositeRequest) (*metacontroller.CompositeResponse, error) {
	panic("index out of range")
}

const validBody = `{"parent":{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"ws","namespace":"team-a"}},"children":{},"related":{}}`

// testRouter serves the toy hooks with cfg's limits.
func testRouter(t testing.TB, cfg Config) http.Handler {
	t.Helper()
	cfg.Routes = []Route{
		HookRoute("/v1/echo/sync", echoHook),
		HookRoute("/v1/fail/sync", failingHook),
		HookRoute("/v1/panic/sync", panickingHook),
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return srv.Handler()
}

type request struct {
	method      string
	path        string
	contentType string
	body        string
	header      map[string]string
}

func do(h http.Handler, r request) *httptest.ResponseRecorder {
	if r.method == "" {
		r.method = http.MethodPost
	}
	req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// reply is the part of a response the tests compare.
type reply struct {
	Code        int
	ContentType string
	Body        string
}

func replyOf(rec *httptest.ResponseRecorder, withBody bool) reply {
	got := reply{Code: rec.Code, ContentType: rec.Header().Get("Content-Type")}
	if withBody {
		got.Body = rec.Body.String()
	}
	return got
}

const jsonType = "application/json"

// errBody is the one error-body format (httpserve.WriteError).
func errBody(msg string) string {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return string(b) + "\n"
}

func TestHandlerErrors(t *testing.T) {
	secret := `"data":{"password":"czNjcjN0"}`
	cases := map[string]struct {
		reason string
		req    request
		want   reply
	}{
		"MalformedJSON": {
			reason: "A body that is not JSON is the caller's fault, and its bytes (which may hold a Secret) are not echoed.",
			req:    request{path: "/v1/echo/sync", contentType: "application/json", body: `{"parent":{` + secret},
			want:   reply{Code: 400, ContentType: jsonType, Body: errBody("invalid JSON request body")},
		},
		"TrailingGarbage": {
			reason: "Two JSON values in one body are not one request.",
			req:    request{path: "/v1/echo/sync", contentType: "application/json", body: validBody + `{}`},
			want:   reply{Code: 400, ContentType: jsonType, Body: errBody("invalid JSON request body")},
		},
		"WrongContentType": {
			reason: "Only application/json is decoded.",
			req:    request{path: "/v1/echo/sync", contentType: "text/plain", body: validBody},
			want:   reply{Code: 400, ContentType: jsonType, Body: errBody("content type must be application/json")},
		},
		"NoContentType": {
			reason: "A missing content type is as wrong as a different one.",
			req:    request{path: "/v1/echo/sync", body: validBody},
			want:   reply{Code: 400, ContentType: jsonType, Body: errBody("content type must be application/json")},
		},
		"Oversized": {
			reason: "A body over the limit gets 413 naming the limit, not the size sent.",
			req:    request{path: "/v1/echo/sync", contentType: "application/json", body: `{"parent":{"pad":"` + strings.Repeat("x", 2048) + `"}}`},
			want:   reply{Code: 413, ContentType: jsonType, Body: errBody("request body exceeds 1024 bytes")},
		},
		"MissingParent": {
			reason: "A request Validate rejects is a 400 with Validate's stable message.",
			req:    request{path: "/v1/echo/sync", contentType: "application/json", body: `{"children":{}}`},
			want:   reply{Code: 400, ContentType: jsonType, Body: errBody("invalid request: request has no parent object")},
		},
		"NullParent": {
			reason: "An explicit null parent is as missing as an absent one.",
			req:    request{path: "/v1/echo/sync", contentType: "application/json", body: `{"parent":null}`},
			want:   reply{Code: 400, ContentType: jsonType, Body: errBody("invalid request: request has no parent object")},
		},
		"HookError": {
			reason: "A hook error is a bug: 500 with a line that does not carry the error's varying details.",
			req:    request{path: "/v1/fail/sync", contentType: "application/json", body: validBody},
			want:   reply{Code: 500, ContentType: jsonType, Body: errBody("hook fail-sync failed")},
		},
		"Panic": {
			reason: "A panicking hook is recovered into a 500 with one line.",
			req:    request{path: "/v1/panic/sync", contentType: "application/json", body: validBody},
			want:   reply{Code: 500, ContentType: jsonType, Body: errBody("internal error in hook panic-sync")},
		},
		"UnknownPath": {
			reason: "Unknown paths get a one-line 404.",
			req:    request{path: "/v1/nope/sync", contentType: "application/json", body: validBody},
			want:   reply{Code: 404, ContentType: jsonType, Body: errBody("no such hook")},
		},
		"TooManyObjects": {
			reason: "Children and related objects together over the limit are refused before the hook runs, so its work stays bounded.",
			req:    request{path: "/v1/echo/sync", contentType: "application/json", body: `{"parent":{},"children":{"A.v1":{"a":{},"b":{}}},"related":{"B.v1":{"c":{}}}}`},
			want:   reply{Code: 413, ContentType: jsonType, Body: errBody("request carries more than 2 objects")},
		},
		"WrongMethod": {
			reason: "Hooks are POST only.",
			req:    request{method: http.MethodGet, path: "/v1/echo/sync"},
			want:   reply{Code: 405, ContentType: jsonType, Body: errBody("method not allowed")},
		},
	}
	h := testRouter(t, Config{MaxBodyBytes: 1024, MaxObjects: 2})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := replyOf(do(h, tc.req), true)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nresponse: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestHandlerSuccess(t *testing.T) {
	cases := map[string]struct {
		reason      string
		contentType string
	}{
		"PlainJSON":   {reason: "The usual content type.", contentType: "application/json"},
		"WithCharset": {reason: "Parameters on the media type are allowed.", contentType: "application/json; charset=utf-8"},
		"UpperCase":   {reason: "Media types are case-insensitive.", contentType: "Application/JSON"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := do(testRouter(t, Config{}), request{path: "/v1/echo/sync", contentType: tc.contentType, body: validBody})
			if diff := cmp.Diff(reply{Code: 200, ContentType: "application/json"}, replyOf(rec, false)); diff != "" {
				t.Errorf("%s\nresponse: -want, +got:\n%s", tc.reason, diff)
			}
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("response is not JSON: %v", err)
			}
			if diff := cmp.Diff("<a & b>", got["status"].(map[string]any)["html"]); diff != "" {
				t.Errorf("status.html: -want, +got:\n%s", diff)
			}
			if !strings.HasSuffix(rec.Body.String(), "}\n") {
				t.Errorf("body does not end in a newline: %q", rec.Body.String())
			}
		})
	}
}

func TestHandlerETag(t *testing.T) {
	h := testRouter(t, Config{})
	first := do(h, request{path: "/v1/echo/sync", contentType: "application/json", body: validBody})
	etag := first.Header().Get("ETag")
	if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 3 {
		t.Fatalf("ETag %q is not a quoted strong tag", etag)
	}

	for i := range 20 {
		again := do(h, request{path: "/v1/echo/sync", contentType: "application/json", body: validBody})
		if diff := cmp.Diff(first.Body.String(), again.Body.String()); diff != "" {
			t.Fatalf("request %d: body differs from the first: -want, +got:\n%s", i, diff)
		}
		if diff := cmp.Diff(etag, again.Header().Get("ETag")); diff != "" {
			t.Fatalf("request %d: ETag differs from the first: -want, +got:\n%s", i, diff)
		}
	}

	other := do(h, request{path: "/v1/echo/sync", contentType: "application/json", body: `{"parent":{"name":"other"}}`})
	if other.Header().Get("ETag") == etag {
		t.Errorf("different bodies share ETag %s", etag)
	}

	cases := map[string]struct {
		reason      string
		ifNoneMatch string
		want        reply
	}{
		"Match": {
			reason:      "The tag of the body that would be sent gets 304 without a body.",
			ifNoneMatch: etag,
			want:        reply{Code: 304},
		},
		"MatchInList": {
			reason:      "If-None-Match is a list; any member may match.",
			ifNoneMatch: `"stale", ` + etag,
			want:        reply{Code: 304},
		},
		"WeakMatch": {
			reason:      "If-None-Match uses the weak comparison.",
			ifNoneMatch: "W/" + etag,
			want:        reply{Code: 304},
		},
		"Star": {
			reason:      "* is no cached body: the client gets the full answer.",
			ifNoneMatch: "*",
			want:        reply{Code: 200, ContentType: "application/json", Body: first.Body.String()},
		},
		"NoMatch": {
			reason:      "A stale tag gets the full body.",
			ifNoneMatch: `"stale"`,
			want:        reply{Code: 200, ContentType: "application/json", Body: first.Body.String()},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := do(h, request{path: "/v1/echo/sync", contentType: "application/json", body: validBody, header: map[string]string{"If-None-Match": tc.ifNoneMatch}})
			if diff := cmp.Diff(tc.want, replyOf(rec, true)); diff != "" {
				t.Errorf("%s\nresponse: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(etag, rec.Header().Get("ETag")); diff != "" {
				t.Errorf("%s\nETag: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func BenchmarkHandler(b *testing.B) {
	var children strings.Builder
	children.WriteString(`{"Deployment.apps/v1":{`)
	for i := range 50 {
		if i > 0 {
			children.WriteString(",")
		}
		fmt.Fprintf(&children, `"team-a/ws-%d":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"ws-%d","namespace":"team-a"},"spec":{"replicas":2},"status":{"readyReplicas":2}}`, i, i)
	}
	children.WriteString(`}}`)
	body := `{"parent":{"apiVersion":"formspec.dev/v1alpha1","kind":"Workspace","metadata":{"name":"ws","namespace":"team-a"}},"children":` + children.String() + `,"related":{}}`

	h := testRouter(b, Config{})
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/echo/sync", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("code %d: %s", rec.Code, rec.Body)
		}
	}
}
