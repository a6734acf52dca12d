package reporter

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/hooks/filereload"
)

// outcome is what the reporter does after a call to Cluster Control.
type outcome int

const (
	// sent: 2xx, the report is done.
	sent outcome = iota
	// retry: network error, timeout, 408, 409, 425, 429 or 5xx, or 401/403
	// to a call sent without a token because the token file has not
	// appeared yet; the report is kept and retried after a backoff.
	retry
	// rejected: any other 4xx; retrying the same bytes cannot succeed, so
	// the report is dropped and counted.
	rejected
)

// result describes one call.
type result struct {
	outcome    outcome
	status     int           // 0 for a network error
	retryAfter time.Duration // from Retry-After, 429 and 503 only
	err        error
}

// label is the result label of the sends metric.
func (r result) label() string {
	switch {
	case r.outcome == sent:
		return "ok"
	case r.status == 0:
		return "network_error"
	case r.status == http.StatusTooManyRequests:
		return "throttled"
	case r.status >= 500:
		return "server_error"
	case r.status == http.StatusUnauthorized || r.status == http.StatusForbidden:
		// Refused credentials, even when the report is kept because the
		// token file has not appeared yet.
		return "rejected"
	case r.outcome == retry:
		return "conflict"
	default:
		return "rejected"
	}
}

// ccClient calls Cluster Control.
type ccClient struct {
	base    *url.URL
	http    *http.Client
	token   *fileToken
	timeout time.Duration
	now     func() time.Time
	// noToken is told each time a call goes out without a token because
	// the token file is missing or empty.
	noToken func(error)
}

// errorBodyLimit bounds how much of an error answer is read for the log:
// one stable line is all Cluster Control is supposed to send.
const errorBodyLimit = 1024

// responseLimit bounds a deploy-status answer: a directive is ~200 bytes,
// so 8 MiB is tens of thousands of workspaces.
const responseLimit = 8 << 20

// do sends body (nil for a GET) to path and, on 2xx with out non-nil,
// decodes the answer into out.
func (c *ccClient) do(ctx context.Context, method, path string, body []byte, idemKey string, out any) result {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.JoinPath(path).String(), rd)
	if err != nil {
		return result{outcome: rejected, err: fmt.Errorf("cannot build request: %w", err)}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set(ccapi.HeaderIdempotencyKey, idemKey)
	}
	anonymous := false
	if c.token != nil {
		tok, err := c.token.get()
		switch {
		case err == nil:
			req.Header.Set("Authorization", "Bearer "+tok)
		case errors.Is(err, errNoToken):
			// The Secret behind the file is optional: call without a token
			// until it appears, and say so.
			anonymous = true
			if c.noToken != nil {
				c.noToken(err)
			}
		default:
			// A token file that cannot be read now may be mid-rotation;
			// treat it like a network hiccup rather than lose the report.
			return result{outcome: retry, err: err}
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return result{outcome: retry, err: fmt.Errorf("cannot reach cluster control: %w", err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if out != nil {
			if err := json.NewDecoder(io.LimitReader(resp.Body, responseLimit)).Decode(out); err != nil {
				return result{outcome: retry, status: resp.StatusCode, err: fmt.Errorf("cannot decode answer from cluster control: %w", err)}
			}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, responseLimit))
		return result{outcome: sent, status: resp.StatusCode}
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyLimit))
	res := result{status: resp.StatusCode, err: fmt.Errorf("cluster control answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		res.outcome = retry
		res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), c.now())
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly:
		// 409 is "a request with this Idempotency-Key is still in flight":
		// the earlier attempt may yet fail, so try again later.
		res.outcome = retry
	case http.StatusUnauthorized, http.StatusForbidden:
		// Refused because the token has not been mounted yet: the same
		// report will be accepted once it is, so keep it rather than drop
		// a state that may not change again for a long time.
		res.outcome = rejected
		if anonymous {
			res.outcome = retry
		}
	default:
		if resp.StatusCode >= 500 {
			res.outcome = retry
		} else {
			res.outcome = rejected
		}
	}
	return res
}

// fileToken is the bearer token for Cluster Control, read from a token file
// (filereload's format, exactly one token) under filereload's rules: re-read
// when it changes, nothing kept from it once it is broken, so a revoked
// token is never sent again.
//
// The file may be missing or empty: the Secret behind it is optional, so a
// default install runs without one, and the kubelet fills the mount in when
// the Secret is created later. Until then get reports errNoToken and calls
// go out without Authorization. A file that exists but cannot be read
// (permissions, a directory) is a mistake in the pod spec that will not fix
// itself, and stops the reporter at start.
type fileToken struct {
	tokens *filereload.Tokens
}

// errNoToken is get's answer while the token file is missing or empty.
var errNoToken = errors.New("no bearer token yet")

func newFileToken(path string, logger *slog.Logger) (*fileToken, error) {
	t := &fileToken{tokens: filereload.NewTokens(path, filereload.Options{Name: "cluster-control-token", Logger: logger})}
	if _, err := t.get(); err != nil && !errors.Is(err, errNoToken) {
		return nil, err
	}
	return t, nil
}

// get returns the current token. A stat per request is cheap next to the
// request itself and catches Kubernetes' symlink swap of a mounted Secret.
func (t *fileToken) get() (string, error) {
	tok, err := t.tokens.Single()
	switch {
	case err == nil:
		return tok, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, filereload.ErrEmpty):
		return "", fmt.Errorf("%w: %w", errNoToken, err)
	default:
		return "", err
	}
}

// Name identifies the token file in metrics.
func (t *fileToken) Name() string { return t.tokens.Name() }

// Err is nil while the token file is usable: holding one token, or missing
// or empty (the optional Secret is not there yet, and calls go out without
// a token as documented). A file that is there but cannot be read or holds
// more than one token is broken.
func (t *fileToken) Err() error {
	if _, err := t.get(); err != nil && !errors.Is(err, errNoToken) {
		return err
	}
	return nil
}

// credential is a credentials file the reporter reads, watched by the
// formspec_reporter_credentials_file_ok gauge.
type credential interface {
	// Name identifies the file; never secret.
	Name() string
	// Err is nil while the file loads.
	Err() error
}

// newHTTPClient builds the client towards Cluster Control: optional CA
// bundle and client certificate on top of Go's defaults. Both are read
// under filereload's rules for every new connection, so rotating them needs
// no restart, and a broken file fails the handshake instead of presenting
// or trusting stale material. It also returns the files it reads.
func newHTTPClient(caFile, certFile, keyFile string, logger *slog.Logger) (*http.Client, []credential, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	var files []credential
	if (certFile == "") != (keyFile == "") {
		return nil, nil, fmt.Errorf("client certificate and key must be given together")
	}
	if certFile != "" {
		pair := filereload.NewKeyPair(certFile, keyFile, filereload.Options{Name: "cluster-control-client-cert", Logger: logger})
		if err := pair.Err(); err != nil {
			return nil, nil, err
		}
		files = append(files, pair)
		tlsCfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return pair.Get()
		}
	}
	if caFile != "" {
		roots := filereload.NewCertPool(caFile, filereload.Options{Name: "cluster-control-ca", Logger: logger})
		pool, err := roots.Get()
		if err != nil {
			return nil, nil, err
		}
		files = append(files, roots)
		// Through an HTTPS proxy the transport does the handshake itself
		// with this config: the bundle as it was at start.
		tlsCfg.RootCAs = pool
		tr.DialTLSContext = dialTLSWith(tlsCfg, roots)
	}
	tr.TLSClientConfig = tlsCfg
	return &http.Client{Transport: tr}, files, nil
}

// dialTLSWith dials TLS connections that verify the server, in Go's usual
// way, against the CA bundle as roots holds it at dial time: a client's
// RootCAs cannot change under a running transport, so each connection gets
// a config of its own.
func dialTLSWith(base *tls.Config, roots *filereload.Reloader[*x509.CertPool]) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		pool, err := roots.Get()
		if err != nil {
			return nil, err
		}
		cfg := base.Clone()
		cfg.RootCAs = pool
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, fmt.Errorf("cannot dial %q: %w", addr, err)
			}
			cfg.ServerName = host
		}
		d := &tls.Dialer{Config: cfg}
		return d.DialContext(ctx, network, addr)
	}
}
