package ccclient

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/formspec/formspec-hooks/internal/weburl"
)

// ErrPlainHTTP is a Cluster Control URL that would carry the bearer token
// across a network in clear.
var ErrPlainHTTP = errors.New("is plain http:// to a host off the loopback, and --token-file is set: the bearer token would cross the network readable by anyone on the path, who could then call Cluster Control as this reporter and forge its directives; use https:// (with --ca-file for a private CA), or accept that with --insecure-http")

// ParseURL checks a Cluster Control URL, raw, naming it name in its
// errors: an http or https URL without user, password, query or fragment
// (weburl.Parse), and, while calls carry a token, not plain http:// to a
// host off the loopback unless insecure says so.
//
// Only the token makes plain HTTP a refusal: it is a credential that
// outlives the call, and whoever reads it can post reports and, with a
// path to the reporter, forge the directives that roll and idle
// workspaces. On the loopback (make run's demo) nothing crosses a network.
func ParseURL(name, raw string, token, insecure bool) (*url.URL, error) {
	u, err := weburl.Parse(name, raw)
	if err != nil {
		return nil, err
	}
	if PlainHTTP(u) && token && !insecure {
		return nil, fmt.Errorf("%s %w", name, ErrPlainHTTP)
	}
	return u, nil
}

// PlainHTTP reports whether calls to u cross a network unencrypted.
func PlainHTTP(u *url.URL) bool {
	return u.Scheme == "http" && !weburl.IsLoopback(u)
}

// AnnouncePlainHTTP warns, once at start, that calls to Cluster Control
// cross a network in clear, and returns the gauge that says so for as
// long as the process runs: an alert can find every reporter left so.
func AnnouncePlainHTTP(log *slog.Logger, u *url.URL, token bool) prometheus.Collector {
	insecure := PlainHTTP(u)
	switch {
	case insecure && token:
		log.Warn("--insecure-http: the bearer token goes to Cluster Control in plain HTTP; anyone on the path can read it, report as this reporter and forge directives; use https://",
			"clusterControl", weburl.Origin(u))
	case insecure:
		log.Warn("Cluster Control is plain http:// off the loopback and no --token-file is set: anyone on the path can read the reports and forge directives; use https://",
			"clusterControl", weburl.Origin(u))
	}
	value := 0.0
	if insecure {
		value = 1
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "formspec_reporter_insecure_http",
		Help: "1 while the reporter calls Cluster Control in plain HTTP off the loopback (with a token only under --insecure-http), 0 over https or on the loopback.",
	}, func() float64 { return value })
}
