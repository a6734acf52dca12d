package server

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the hook server's Prometheus collectors in a registry of its
// own, so that nothing a dependency registers globally leaks onto the
// metrics endpoint.
type Metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	size      *prometheus.HistogramVec
	panics    *prometheus.CounterVec
	inFlight  prometheus.Gauge
	decisions *prometheus.CounterVec
	// inFlightBytes is the request-body memory held right now (see
	// Config.MaxInFlightBytes).
	inFlightBytes prometheus.Gauge
	refusals      refusalMetrics
}

// NewMetrics creates the collectors and registers them, with the Go runtime
// and process collectors, in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "formspec_hooks",
			Name:      "requests_total",
			Help:      "Hook requests answered, by hook and HTTP status code.",
		}, []string{"hook", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "formspec_hooks",
			Name:      "request_duration_seconds",
			Help:      "Time to answer a hook request, by hook.",
			// Hooks are pure computations; anything past a second is
			// close to Metacontroller's default hook timeout.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"hook"}),
		size: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "formspec_hooks",
			Name:      "request_size_bytes",
			Help:      "Size of hook request bodies as sent (Content-Length, else as read), by hook.",
			// 512 B to 8 MiB: from an empty node sync to the body limit.
			Buckets: prometheus.ExponentialBuckets(512, 4, 8),
		}, []string{"hook"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "formspec_hooks",
			Name:      "panics_total",
			Help:      "Panics recovered while serving a hook, by hook. Any value above zero is a bug.",
		}, []string{"hook"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "formspec_hooks",
			Name:      "in_flight_requests",
			Help:      "Hook requests being served right now.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "formspec_hooks",
			Name:      "decisions_total",
			Help:      "Decisions hooks made about users' objects, by hook, decision and reason.",
		}, []string{"hook", "decision", "reason"}),
		inFlightBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "formspec_hooks",
			Name:      "in_flight_request_bytes",
			Help:      "Request-body buffer bytes held by hook requests being served.",
		}),
		refusals: newRefusalMetrics(),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.duration, m.size, m.panics, m.inFlight, m.decisions, m.inFlightBytes,
	)
	m.registry.MustRegister(m.refusals.collectors()...)
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Record counts one decision; Metrics is the production Decisions.
func (m *Metrics) Record(hook, decision, reason string) {
	m.decisions.WithLabelValues(hook, decision, reason).Inc()
}

// Register adds collectors that live outside the transport, such as the
// reporter hand-off client's, to the same registry.
func (m *Metrics) Register(cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := m.registry.Register(c); err != nil {
			return fmt.Errorf("cannot register collector: %w", err)
		}
	}
	return nil
}

// watchCredentials exports formspec_hooks_credentials_file_ok{file}: 1
// while the file loads, 0 while it is broken, checked at each scrape.
func (m *Metrics) watchCredentials(files []Credential) error {
	for _, f := range files {
		g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace:   "formspec_hooks",
			Name:        "credentials_file_ok",
			Help:        "1 while a credentials file (tokens, TLS pair, client CA) loads, 0 while it is broken and refused.",
			ConstLabels: prometheus.Labels{"file": f.Name()},
		}, func() float64 {
			if f.Err() != nil {
				return 0
			}
			return 1
		})
		if err := m.registry.Register(g); err != nil {
			return fmt.Errorf("cannot watch credentials file %s: %w", f.Name(), err)
		}
	}
	if err := m.watchTokenCount(files); err != nil {
		return err
	}
	return m.watchExpiry(files)
}

// tokenCount is a credentials file of several tokens: the token file.
type tokenCount interface {
	Credential
	// Count is how many tokens the file holds; false while it is broken.
	Count() (int, bool)
}

var tokensDesc = prometheus.NewDesc("formspec_hooks_auth_tokens",
	"How many bearer tokens a token file holds, each accepted: 2 while a rotation accepts the old and the new one; absent while the file is broken.",
	[]string{"file"}, nil)

// watchTokenCount exports formspec_hooks_auth_tokens{file} for the token
// file, read at each scrape: a rotation waits for 2 on every replica
// before Metacontroller is told to send the new token.
func (m *Metrics) watchTokenCount(files []Credential) error {
	var tokens tokenCollector
	for _, f := range files {
		if c, ok := f.(tokenCount); ok {
			tokens = append(tokens, c)
		}
	}
	if len(tokens) == 0 {
		return nil
	}
	if err := m.registry.Register(tokens); err != nil {
		return fmt.Errorf("cannot watch the token file: %w", err)
	}
	return nil
}

type tokenCollector []tokenCount

func (tokenCollector) Describe(ch chan<- *prometheus.Desc) { ch <- tokensDesc }

func (c tokenCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c {
		if n, ok := f.Count(); ok {
			ch <- prometheus.MustNewConstMetric(tokensDesc, prometheus.GaugeValue, float64(n), f.Name())
		}
	}
}

// watchExpiry exports formspec_hooks_certificate_expiry_timestamp_seconds{file}
// for each file of files that holds certificates: when the first of them
// expires, in Unix seconds, read at each scrape. A broken file has no
// series (formspec_hooks_credentials_file_ok says it is broken), so that
// an alert on the expiry never sees a made-up time.
func (m *Metrics) watchExpiry(files []Credential) error {
	var certs []certificates
	for _, f := range files {
		if c, ok := f.(certificates); ok {
			certs = append(certs, c)
		}
	}
	if len(certs) == 0 {
		return nil
	}
	if err := m.registry.Register(expiryCollector(certs)); err != nil {
		return fmt.Errorf("cannot watch certificate expiry: %w", err)
	}
	return nil
}

var expiryDesc = prometheus.NewDesc("formspec_hooks_certificate_expiry_timestamp_seconds",
	"When a certificate file's first certificate expires (the serving certificate; the client CA bundle's earliest CA), in Unix seconds; absent while the file is broken.",
	[]string{"file"}, nil)

type expiryCollector []certificates

func (expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- expiryDesc }

func (c expiryCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range c {
		if t, ok := f.NotAfter(); ok {
			ch <- prometheus.MustNewConstMetric(expiryDesc, prometheus.GaugeValue, float64(t.Unix()), f.Name())
		}
	}
}
