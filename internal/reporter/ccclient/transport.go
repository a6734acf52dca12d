package ccclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	ccapi "github.com/formspec/formspec-hooks/hooks/api/clustercontrol"
	"github.com/formspec/formspec-hooks/internal/weburl"
)

// Outcome is what the reporter does after a call to Cluster Control.
type Outcome int

const (
	// Sent: 2xx, the report is done.
	Sent Outcome = iota
	// Retry: network error, timeout, 408, 409, 425, 429 or 5xx, or 401/403
	// to a call sent without a token because the token file has not
	// appeared yet; the report is kept and retried after a backoff.
	Retry
	// Rejected: any other 4xx; retrying the same bytes cannot succeed, so
	// the report is dropped and counted.
	Rejected
)

// Result describes one call.
type Result struct {
	Outcome    Outcome
	Status     int           // 0 for a network error
	RetryAfter time.Duration // from Retry-After, 429 and 503 only
	Err        error
}

// Label is the result label of the sends metric.
func (r Result) Label() string {
	switch {
	case r.Outcome == Sent:
		return "ok"
	case r.Status == 0:
		return "network_error"
	case r.Status == http.StatusTooManyRequests:
		return "throttled"
	case r.Status >= 500:
		return "server_error"
	case r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden:
		// Refused credentials, even when the report is kept because the
		// token file has not appeared yet.
		return "rejected"
	case r.Outcome == Retry:
		return "conflict"
	default:
		return "rejected"
	}
}

// Client calls Cluster Control.
type Client struct {
	// Base is Cluster Control's URL, every path joined onto it.
	Base *url.URL
	HTTP *http.Client
	// Token is nil when no token file is set: calls carry no
	// Authorization.
	Token *FileToken
	// Timeout bounds one call.
	Timeout time.Duration
	Now     func() time.Time
	// NoToken is told each time a call goes out without a token because
	// the token file is missing or empty.
	NoToken func(error)
}

// errorBodyLimit bounds how much of an error answer is read for the log:
// one stable line is all Cluster Control is supposed to send.
const errorBodyLimit = 1024

// tokenFragment is the shortest run of a token's characters that
// errorBody hides when it finds it alone: a proxy may cut the token it
// echoes. Eight characters of a random token are not found in an error
// page by chance.
const tokenFragment = 8

// errorBody reads an error answer for the log: at most errorBodyLimit
// bytes (more only to end a token the limit would cut), with the token
// that was sent, and every run of at least tokenFragment of its
// characters, shown as [token]. A proxy in front of Cluster Control may
// echo the request's headers in its error page, whole or cut; the token
// must not reach the log either way.
func errorBody(body io.Reader, token string) string {
	if token == "" {
		raw, _ := io.ReadAll(io.LimitReader(body, errorBodyLimit))
		return strings.TrimSpace(string(raw))
	}
	// Read a token's length past the limit, so that a token the limit
	// falls in is read whole and hidden whole.
	raw, _ := io.ReadAll(io.LimitReader(body, errorBodyLimit+int64(len(token))))
	page := string(raw)
	spans := tokenSpans(page, token)
	end := min(len(page), errorBodyLimit)
	for _, sp := range spans {
		if sp[0] < end && end < sp[1] {
			end = sp[1]
		}
	}
	var b strings.Builder
	at := 0
	for _, sp := range spans {
		if sp[0] >= end {
			break
		}
		b.WriteString(page[at:sp[0]])
		b.WriteString("[token]")
		at = sp[1]
	}
	if at < end {
		b.WriteString(page[at:end])
	}
	return strings.TrimSpace(b.String())
}

// tokenSpans lists, in order, the runs of page that are the token or a
// part of it at least tokenFragment long (the whole token when it is
// shorter), each as its start and end.
func tokenSpans(page, token string) [][2]int {
	least := min(tokenFragment, len(token))
	var spans [][2]int
	for i := 0; i+least <= len(page); {
		if !strings.Contains(token, page[i:i+least]) {
			i++
			continue
		}
		n := least
		for i+n < len(page) && n < len(token) && strings.Contains(token, page[i:i+n+1]) {
			n++
		}
		spans = append(spans, [2]int{i, i + n})
		i += n
	}
	return spans
}

// responseLimit bounds a deploy-status answer: a directive is ~200 bytes,
// so 8 MiB is tens of thousands of workspaces.
const responseLimit = 8 << 20

// Do sends body (nil for a GET) to path and, on 2xx with out non-nil,
// decodes the answer into out.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, idemKey string, out any) Result {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base.JoinPath(path).String(), rd)
	if err != nil {
		return Result{Outcome: Rejected, Err: fmt.Errorf("cannot build request: %w", weburl.RedactError(err))}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set(ccapi.HeaderIdempotencyKey, idemKey)
	}
	anonymous, sentToken := false, ""
	if c.Token != nil {
		tok, err := c.Token.get()
		switch {
		case err == nil:
			req.Header.Set("Authorization", "Bearer "+tok)
			sentToken = tok
		case errors.Is(err, errNoToken):
			// The Secret behind the file is optional: call without a token
			// until it appears, and say so.
			anonymous = true
			if c.NoToken != nil {
				c.NoToken(err)
			}
		default:
			// A token file that cannot be read now may be mid-rotation;
			// treat it like a network hiccup rather than lose the report.
			return Result{Outcome: Retry, Err: err}
		}
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		// The client's error quotes the whole URL; only its origin may be
		// logged (weburl).
		return Result{Outcome: Retry, Err: fmt.Errorf("cannot reach cluster control: %w", weburl.RedactError(err))}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if out != nil {
			if err := json.NewDecoder(io.LimitReader(resp.Body, responseLimit)).Decode(out); err != nil {
				return Result{Outcome: Retry, Status: resp.StatusCode, Err: fmt.Errorf("cannot decode answer from cluster control: %w", err)}
			}
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, responseLimit))
		return Result{Outcome: Sent, Status: resp.StatusCode}
	}
	msg := errorBody(resp.Body, sentToken)
	res := Result{Status: resp.StatusCode, Err: fmt.Errorf("cluster control answered %s: %s", resp.Status, msg)}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		res.Outcome = Retry
		res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), c.Now())
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly:
		// 409 is "a request with this Idempotency-Key is still in flight":
		// the earlier attempt may yet fail, so try again later.
		res.Outcome = Retry
	case http.StatusUnauthorized, http.StatusForbidden:
		// Refused because the token has not been mounted yet: the same
		// report will be accepted once it is, so keep it rather than drop
		// a state that may not change again for a long time.
		res.Outcome = Rejected
		if anonymous {
			res.Outcome = Retry
		}
	default:
		if resp.StatusCode >= 500 {
			res.Outcome = Retry
		} else {
			res.Outcome = Rejected
		}
	}
	return res
}

// IdempotencyKey derives the key from the body: retries of one report share
// it, and two different reports (the body carries observedAt and
// reportedAt) never do.
func IdempotencyKey(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}
