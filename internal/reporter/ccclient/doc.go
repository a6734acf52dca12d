// Package ccclient is the reporter's client of Cluster Control: one call
// and what its answer means (transport.go), the bearer token and the TLS
// files it is made with, each re-read as it rotates (token.go, tls.go),
// retry delays and Retry-After (backoff.go), and the refusal to send the
// token in clear off the loopback (plainhttp.go). It knows nothing of
// what the reports say; the reporter's loops decide what to send.
package ccclient
