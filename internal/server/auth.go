package server

import (
	"net/http"
	"strings"

	"github.com/formspec/formspec-hooks/internal/filereload"
	"github.com/prometheus/client_golang/prometheus"
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
// tokens. The file is checked on every request (filereload: a look at its
// inotify events, a stat after a change; it is read again when it changed
// and once per re-validation period), so a rotated token works on the
// next request, and a file that becomes empty, unreadable or deleted
// refuses every token (see filereload).
//
// Every refusal is counted in failures by reason, so that a botched token
// rotation shows in Prometheus; the request log only samples them.
func requireToken(tokens *filereload.Tokens, failures *prometheus.CounterVec, next http.Handler) http.Handler {
	for _, reason := range []string{authMissing, authInvalid, authUnavailable} {
		// Exported at 0 from the start, so that an alert on an increase
		// sees the first failure.
		failures.WithLabelValues(reason)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r)
		if !ok || !tokens.Check(token) {
			reason := authInvalid
			switch {
			case !ok:
				reason = authMissing
			case tokens.Err() != nil:
				reason = authUnavailable
			}
			failures.WithLabelValues(reason).Inc()
			w.Header().Set("WWW-Authenticate", `Bearer realm="formspec-hooks"`)
			writeError(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}
