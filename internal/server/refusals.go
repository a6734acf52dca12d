package server

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/formspec/formspec-hooks/internal/httpserve"
	"github.com/formspec/formspec-hooks/internal/lograte"
)

// refusalMetrics count what the server refuses, every one: a client
// retrying a botched token or CA rotation thousands of times a second
// shows in Prometheus at once, while the log only samples it.
type refusalMetrics struct {
	auth      *prometheus.CounterVec
	handshake *prometheus.CounterVec
	malformed *prometheus.CounterVec
	http2     *prometheus.CounterVec
}

// Reasons of formspec_hooks_auth_failures_total.
const (
	authMissing     = "missing"     // no "Authorization: Bearer" header
	authInvalid     = "invalid"     // a token the token file does not hold
	authUnavailable = "unavailable" // the token file is broken: every token is refused
)

func newRefusalMetrics() refusalMetrics {
	return refusalMetrics{
		auth: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "formspec_hooks",
			Name:      "auth_failures_total",
			Help:      "Hook requests refused with 401, by reason: missing (no bearer token), invalid (not in the token file), unavailable (the token file is broken).",
		}, []string{"reason"}),
		handshake: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "formspec_hooks",
			Name:      "tls_handshake_errors_total",
			Help:      "Failed TLS handshakes, by listener and reason (rejected-by-client: the client does not trust the serving certificate; client-certificate: none, or not signed by the client CA; not-tls; timeout; closed; server-certificate; other).",
		}, []string{"listener", "reason"}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "formspec_hooks",
			Name:      "malformed_requests_total",
			Help:      "Requests refused before any handler because they could not be parsed, by listener and reason (malformed, headers-too-large, transfer-encoding).",
		}, []string{"listener", "reason"}),
		http2: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "formspec_hooks",
			Name:      "http2_errors_total",
			Help:      "HTTP/2 requests and connections ended below the handlers, by listener and reason: streams-per-client and streams-max (a request over the connection caps, answered 429), or the error Go's HTTP/2 server counted (conn_enhance_your_calm_too_many_early_resets: a rapid reset; others: frames that break the protocol).",
		}, []string{"listener", "reason"}),
	}
}

func (r refusalMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.auth, r.handshake, r.malformed, r.http2}
}

// handshakeReasons, malformedReasons and http2Reasons are exported at 0 for every
// listener from the start, so that an alert on an increase sees the first
// one.
var (
	handshakeReasons = []string{"rejected-by-client", "client-certificate", "not-tls", "timeout", "closed", "server-certificate", "other"}
	malformedReasons = []string{"malformed", "headers-too-large", "transfer-encoding"}
	http2Reasons     = []string{httpserve.HTTP2StreamsPerClient, httpserve.HTTP2StreamsMax, httpserve.HTTP2RapidReset}
)

// refused is httpserve.Config.Refused for the named listener.
func (r refusalMetrics) refused(listener string) func(httpserve.Refusal) {
	for _, reason := range handshakeReasons {
		r.handshake.WithLabelValues(listener, reason)
	}
	for _, reason := range malformedReasons {
		r.malformed.WithLabelValues(listener, reason)
	}
	for _, reason := range http2Reasons {
		r.http2.WithLabelValues(listener, reason)
	}
	return func(x httpserve.Refusal) {
		switch x.Kind {
		case httpserve.RefusedHandshake:
			r.handshake.WithLabelValues(listener, x.Reason).Inc()
		case httpserve.RefusedRequest:
			r.malformed.WithLabelValues(listener, x.Reason).Inc()
		case httpserve.RefusedHTTP2:
			r.http2.WithLabelValues(listener, x.Reason).Inc()
		}
	}
}

// requestLog writes the one line per hook request, sampling refusals:
// a 4xx is the caller's mistake and arrives as often as the caller
// retries, so at most one line per hook and status code is written every
// httpserve.RefusalLogInterval, with the count of those held back. Every
// 5xx (a bug, or an overloaded server) is written.
type requestLog struct {
	logger  *slog.Logger
	limiter *lograte.Limiter
}

func newRequestLog(logger *slog.Logger) *requestLog {
	return &requestLog{logger: logger, limiter: lograte.New(logger, httpserve.RefusalLogInterval)}
}

func (l *requestLog) log(ctx context.Context, hook string, code int, args ...any) {
	switch {
	case code >= 500:
		l.logger.Log(ctx, slog.LevelInfo, "hook request", args...)
	case code >= 400:
		l.limiter.Log(ctx, hook+"/"+strconv.Itoa(code), slog.LevelInfo, "hook request", args...)
	default:
		l.logger.Log(ctx, slog.LevelDebug, "hook request", args...)
	}
}
