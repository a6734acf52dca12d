package server

import (
	"net/http"
	"strings"

	"github.com/formspec/formspec-hooks/hooks/filereload"
)

// bearerToken extracts the token from an "Authorization: Bearer <token>"
// header; the scheme is case-insensitive (RFC 9110 §11.1).
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// requireToken rejects requests that do not carry one of the token file's
// tokens. The file is checked on every request (a stat; it is read again
// when it changed and once per re-validation period), so a rotated token
// works on the next request, and a file that becomes empty, unreadable or
// deleted refuses every token (see filereload).
func requireToken(tokens *filereload.Tokens, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok || !tokens.Check(token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="formspec-hooks"`)
			writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}
