// Package helmrclient is the typed Go client of the Helmr REST API (/v1):
// Sessions, Turns, the Session event timeline (pages and a live SSE stream
// that resumes after a dropped connection), Agents and Deployments.
//
// It uses only net/http. Every call takes a context first; a call returns
// a *helmrtype.Error for an API error, so that
//
//	errors.Is(err, helmrtype.CodeNotFound)
//
// works, and the transport's error (wrapped as net/http wraps it) otherwise.
// Create, enqueue, send and interrupt calls generate a fresh UUIDv7
// idempotency key per call when none is given; pass one explicitly to make a
// retry safe.
package helmrclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/helmr-go/helmr/helmrtype"
)

// DefaultUserAgent is the User-Agent header sent when WithUserAgent is not used.
const DefaultUserAgent = "helmr-go-client"

// Client calls one Helmr control plane with one API key. It is safe for
// concurrent use; build it with New.
type Client struct {
	// Sessions creates, reads and lists Sessions.
	Sessions *Sessions
	// Computers creates, reads and deletes Computers and runs Commands on them.
	Computers *Computers
	// Commands reads, waits for, cancels and follows Commands.
	Commands *Commands
	// Agents reads the Agents of a Deployment.
	Agents *Agents
	// Deployments reads and uploads Deployments.
	Deployments *Deployments
	// Tokens reads, completes and cancels Tokens.
	Tokens *Tokens
	// Keys creates, lists and revokes API keys (admin keys only).
	Keys *Keys
	// Slack connects Slack apps and maps Slack users (docs/slack.md).
	Slack *Slack
	// Inbox lists and answers the questions of every Session.
	Inbox *Inbox
	// Schedules reads the Schedules of cron triggers.
	Schedules *Schedules

	base      *url.URL
	baseErr   error
	apiKey    string
	http      *http.Client
	userAgent string
	retry     retryPolicy
	idle      time.Duration
}

// retryPolicy says how long-lived calls (event streams, untimed waits) retry
// transient failures, and how other calls retry an answer 503 with
// Retry-After to an idempotent request.
type retryPolicy struct {
	min, max time.Duration
	attempts int // consecutive failures before giving up; 0 = never
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with hc. A Timeout on hc
// limits every request, including long waits (up to 60 s each) and event
// streams; prefer contexts for deadlines.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithRetry sets how event streams and untimed waits retry transient
// failures (transport errors, 429, 502, 503, 504): the delay starts at min
// and doubles up to max, and the call gives up after attempts consecutive
// failures (0 retries forever, until the context ends). The default is
// 250ms, 10s and 8 attempts.
//
// Every other call that is idempotent (a GET, or a request with an
// idempotency key: the Client gives create, enqueue, send and control
// calls one when none is set) is retried under the same policy when it is answered
// 503 with a Retry-After header, as the control plane answers while its
// database is unreachable: it waits as Retry-After says, at most max, and
// tries at most attempts times in all. Other requests, and other errors,
// are not retried. A delay the server's Retry-After asks for also
// replaces the backoff of event streams and waits.
func WithRetry(min, max time.Duration, attempts int) Option {
	return func(c *Client) {
		if min <= 0 {
			min = time.Millisecond
		}
		if max < min {
			max = min
		}
		c.retry = retryPolicy{min: min, max: max, attempts: attempts}
	}
}

// WithStreamIdleTimeout sets how long an event stream may receive nothing,
// not even a keep-alive comment, before it treats the connection as dead and
// reconnects. The default is 60s.
func WithStreamIdleTimeout(d time.Duration) Option {
	return func(c *Client) {
		if d > 0 {
			c.idle = d
		}
	}
}

// New returns a Client for the control plane at baseURL (for example
// "http://127.0.0.1:7070", without /v1) that authenticates with apiKey.
// An invalid baseURL makes every call return an error.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{
		apiKey:    apiKey,
		http:      &http.Client{},
		userAgent: DefaultUserAgent,
		retry:     retryPolicy{min: 250 * time.Millisecond, max: 10 * time.Second, attempts: 8},
		idle:      60 * time.Second,
	}
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	switch {
	case err != nil:
		c.baseErr = fmt.Errorf("helmrclient: base URL %q: %w", baseURL, err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		c.baseErr = fmt.Errorf("helmrclient: base URL %q: want http://host[:port] or https://host[:port]", baseURL)
	default:
		c.base = u
	}
	for _, o := range opts {
		o(c)
	}
	c.Sessions = &Sessions{c: c}
	c.Agents = &Agents{c: c}
	c.Deployments = &Deployments{c: c}
	c.Tokens = &Tokens{c: c}
	c.Keys = &Keys{c: c}
	c.Slack = &Slack{c: c}
	c.Inbox = &Inbox{c: c}
	c.Schedules = &Schedules{c: c}
	c.Computers = &Computers{c: c}
	c.Commands = &Commands{c: c}
	return c
}

// Health checks GET /healthz: nil when the control plane process answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// Ready checks GET /readyz: nil when the control plane is ready to serve.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
}

// idempotencyKey returns key, or a fresh UUIDv7 when key is empty.
func idempotencyKey(key string) (string, error) {
	if key != "" {
		return key, nil
	}
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("helmrclient: idempotency key: %w", err)
	}
	return id.String(), nil
}

// endpoint builds the absolute URL of path (already escaped) and query.
func (c *Client) endpoint(path string, q url.Values) (string, error) {
	if c.baseErr != nil {
		return "", c.baseErr
	}
	u := *c.base
	u.RawPath = ""
	u.Path = strings.TrimRight(u.Path, "/")
	raw := u.String() + path
	if len(q) > 0 {
		raw += "?" + q.Encode()
	}
	return raw, nil
}

// newRequest builds a request with the auth and user agent headers set.
func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Request, error) {
	raw, err := c.endpoint(path, q)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, raw, body)
	if err != nil {
		return nil, err
	}
	if c.apiKey != "" && strings.HasPrefix(path, "/v1/") {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	return req, nil
}

// do sends a JSON request (in may be nil) and decodes a 2xx JSON answer into
// out (which may be nil).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) error {
	_, err := c.doStatus(ctx, method, path, q, in, out)
	return err
}

// doStatus is do that also returns the HTTP status of the answer. An
// answer 503 with Retry-After to an idempotent request (see idempotent) is
// retried under the Client's retry policy.
func (c *Client) doStatus(ctx context.Context, method, path string, q url.Values, in, out any) (int, error) {
	return c.call(ctx, method, path, q, in, out, true)
}

// call sends a JSON request (in may be nil) and decodes a 2xx JSON answer
// into out (which may be nil); with retry, it sends an idempotent request
// again after an answer that asks for it (retryable), waiting as the
// answer's Retry-After says (capped by the policy's max), at most
// attempts times in all, and never past ctx.
func (c *Client) call(ctx context.Context, method, path string, q url.Values, in, out any, retry bool) (int, error) {
	var b []byte
	if in != nil {
		var err error
		if b, err = json.Marshal(in); err != nil {
			return 0, fmt.Errorf("helmrclient: encode %s %s: %w", method, path, err)
		}
	}
	for attempt := 1; ; attempt++ {
		var body io.Reader
		if in != nil {
			body = bytes.NewReader(b)
		}
		req, err := c.newRequest(ctx, method, path, q, body)
		if err != nil {
			return 0, err
		}
		if in != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		status, err := c.send(req, out)
		p := c.retry
		if !retry || !retryable(err) || !idempotent(method, b) || p.attempts > 0 && attempt >= p.attempts {
			return status, err
		}
		if sleep(ctx, p.delay(attempt-1, err)) != nil {
			return status, err
		}
	}
}

// retryable reports whether err is an answer that asks for the request to
// be sent again: 503 with a Retry-After header, as the control plane
// answers while its database is unreachable.
func retryable(err error) bool {
	var he *helmrtype.Error
	return errors.As(err, &he) && he.Status == http.StatusServiceUnavailable && he.RetryAfter > 0
}

// idempotent reports whether a request may be sent again without doing
// twice what it does: a GET, or a JSON body with an idempotency_key, which
// the server answers with the first request's receipt.
func idempotent(method string, body []byte) bool {
	if method == http.MethodGet {
		return true
	}
	var k struct {
		IdempotencyKey string `json:"idempotency_key"`
	}
	return json.Unmarshal(body, &k) == nil && k.IdempotencyKey != ""
}

// send sends req and decodes a 2xx JSON answer into out.
func (c *Client) send(req *http.Request, out any) (int, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, decodeError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("helmrclient: decode answer of %s %s: %w", req.Method, req.URL.Path, err)
	}
	return resp.StatusCode, nil
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 1 << 20

// decodeError turns a non-2xx answer into a *helmrtype.Error with Status set.
// A body that is not the error envelope still gives a typed error, with a
// code derived from the status.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := errorFromBody(resp.StatusCode, b)
	e.RequestID = resp.Header.Get("X-Request-Id")
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return e
}

// parseRetryAfter reads a Retry-After header: a number of seconds or an
// HTTP date (after now). 0 when absent, malformed or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func errorFromBody(status int, b []byte) *helmrtype.Error {
	var env helmrtype.ErrorEnvelope
	if err := json.Unmarshal(b, &env); err == nil && env.Error != nil && (env.Error.Code != "" || env.Error.Message != "") {
		e := env.Error
		if e.Code == "" {
			e.Code = codeForStatus(status)
		}
		e.Status = status
		return e
	}
	msg := strings.TrimSpace(string(b))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &helmrtype.Error{
		Code:    codeForStatus(status),
		Message: fmt.Sprintf("HTTP %d: %s", status, msg),
		Status:  status,
	}
}

// codeForStatus is the code given to an error answer without an envelope.
func codeForStatus(status int) helmrtype.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusMethodNotAllowed:
		return helmrtype.CodeInvalidRequest
	case http.StatusUnauthorized:
		return helmrtype.CodeUnauthorized
	case http.StatusForbidden:
		return helmrtype.CodeForbidden
	case http.StatusNotFound:
		return helmrtype.CodeNotFound
	case http.StatusConflict:
		return helmrtype.CodeConflict
	case http.StatusRequestEntityTooLarge:
		return helmrtype.CodeLimitExceeded
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return helmrtype.CodeUnavailable
	}
	return helmrtype.CodeInternal
}

// transient reports whether a long-lived call should retry after err.
func transient(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var he *helmrtype.Error
	if errors.As(err, &he) {
		switch he.Status {
		case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return he.Code == helmrtype.CodeUnavailable
	}
	// Everything else is the transport's: refused, reset, EOF, a dropped
	// stream. A context error of the caller was excluded above.
	return true
}

// sleep waits d or until ctx ends, whichever is first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// delay is the pause before retry number n (0-based) after err under p:
// what the answer's Retry-After asked for, capped at p.max, or else the
// backoff.
func (p retryPolicy) delay(n int, err error) time.Duration {
	var he *helmrtype.Error
	if errors.As(err, &he) && he.RetryAfter > 0 {
		return min(he.RetryAfter, p.max)
	}
	return p.backoff(n)
}

// backoff is the delay before retry number n (0-based) under p.
func (p retryPolicy) backoff(n int) time.Duration {
	d := p.min
	for i := 0; i < n && d < p.max; i++ {
		d *= 2
	}
	if d > p.max {
		d = p.max
	}
	return d
}

// ListOptions pages through a cursor-paged list: Cursor is the previous
// page's next_cursor ("" for the first page) and Limit the page size (1–100;
// 0 uses the server's default).
type ListOptions struct {
	Cursor string
	Limit  int
}

// values writes o into q.
func (o ListOptions) values(q url.Values) {
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Limit != 0 {
		q.Set("limit", fmt.Sprint(o.Limit))
	}
}

// pathEscape escapes one path segment (an ID).
func pathEscape(s string) string { return url.PathEscape(s) }
