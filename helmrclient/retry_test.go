package helmrclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// outage is a server that answers the first n requests 503 unavailable
// (with Retry-After when retryAfter is set), as a control plane whose
// database is unreachable does, and then ok. It records the bodies.
type outage struct {
	mu         sync.Mutex
	n          int
	retryAfter string
	ok         string // the 2xx answer's body
	okStatus   int
	bodies     []string
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	o.mu.Lock()
	o.bodies = append(o.bodies, string(b))
	down := len(o.bodies) <= o.n
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if down {
		if o.retryAfter != "" {
			w.Header().Set("Retry-After", o.retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":"unavailable","message":"the database is unreachable; try again"}}`)
		return
	}
	w.WriteHeader(o.okStatus)
	io.WriteString(w, o.ok)
}

func (o *outage) requests() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.bodies...)
}

// serve starts o on real HTTP and returns a client whose retries wait at
// most 20 ms (the Retry-After of 1 s is capped) and try 5 times in all.
func (o *outage) serve(t *testing.T) *Client {
	t.Helper()
	if o.okStatus == 0 {
		o.okStatus = http.StatusOK
	}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	return newTestClient(t, srv)
}

func TestRetryGetOn503WithRetryAfter(t *testing.T) {
	t.Parallel()
	o := &outage{n: 2, retryAfter: "1", ok: `{"id":"s1","agent":"a"}`}
	c := o.serve(t)
	s, err := c.Sessions.Get(context.Background(), "s1")
	if err != nil {
		t.Fatalf("Get after a short outage: %v", err)
	}
	if s.ID != "s1" || len(o.requests()) != 3 {
		t.Errorf("got %+v after %d requests; want s1 after 3", s, len(o.requests()))
	}
}

func TestRetryIdempotentPostOn503(t *testing.T) {
	t.Parallel()
	o := &outage{n: 1, retryAfter: "1", okStatus: http.StatusCreated,
		ok: `{"session":{"id":"s1","agent":"a"},"turn":{"id":"t1","session_id":"s1"}}`}
	c := o.serve(t)
	if _, err := c.Sessions.Create(context.Background(), "a", "hi", CreateOptions{}); err != nil {
		t.Fatalf("Create after a short outage: %v", err)
	}
	reqs := o.requests()
	if len(reqs) != 2 || reqs[0] != reqs[1] || !strings.Contains(reqs[0], `"idempotency_key":"`) {
		t.Errorf("requests %q: want the same body with its idempotency_key sent twice", reqs)
	}
}

func TestNoRetryWithoutIdempotencyOrRetryAfter(t *testing.T) {
	t.Parallel()
	// A POST with no idempotency key (completing a Token) is not sent twice.
	o := &outage{n: 1, retryAfter: "1", ok: `{}`}
	c := o.serve(t)
	_, err := c.Tokens.Complete(context.Background(), "tok1", map[string]any{"ok": true})
	var he *helmrtype.Error
	if !errors.As(err, &he) || he.Status != http.StatusServiceUnavailable || he.Code != helmrtype.CodeUnavailable || he.RetryAfter != time.Second {
		t.Fatalf("Complete during an outage: %v (%+v); want 503 unavailable with RetryAfter 1s", err, he)
	}
	if n := len(o.requests()); n != 1 {
		t.Errorf("a request without an idempotency key was sent %d times", n)
	}
	// A 503 without Retry-After is not retried, even for a GET.
	o2 := &outage{n: 1, ok: `{"id":"s1"}`}
	c2 := o2.serve(t)
	if _, err := c2.Sessions.Get(context.Background(), "s1"); !errors.Is(err, helmrtype.CodeUnavailable) {
		t.Fatalf("Get answered 503 without Retry-After: %v, want unavailable", err)
	}
	if n := len(o2.requests()); n != 1 {
		t.Errorf("a 503 without Retry-After was retried: %d requests", n)
	}
}

func TestRetryIsBounded(t *testing.T) {
	t.Parallel()
	o := &outage{n: 1000, retryAfter: "1", ok: `{}`}
	c := o.serve(t) // 5 attempts
	if _, err := c.Sessions.Get(context.Background(), "s1"); !errors.Is(err, helmrtype.CodeUnavailable) {
		t.Fatalf("Get during a long outage: %v, want unavailable", err)
	}
	if n := len(o.requests()); n != 5 {
		t.Errorf("%d requests, want 5 (the policy's attempts)", n)
	}
	// The context ends the wait for Retry-After at once.
	o2 := &outage{n: 1000, retryAfter: "30", ok: `{}`}
	srv := httptest.NewServer(o2)
	defer srv.Close()
	c2 := newTestClient(t, srv, WithRetry(time.Millisecond, time.Minute, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c2.Sessions.Get(ctx, "s1")
	if !errors.Is(err, helmrtype.CodeUnavailable) || time.Since(start) > 5*time.Second {
		t.Fatalf("Get with a 100ms context during an outage: %v after %v", err, time.Since(start))
	}
	if n := len(o2.requests()); n != 1 {
		t.Errorf("%d requests within the context, want 1 (Retry-After is 30s)", n)
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	p := retryPolicy{min: 100 * time.Millisecond, max: 10 * time.Second, attempts: 8}
	ra := func(d time.Duration) error {
		return &helmrtype.Error{Code: helmrtype.CodeUnavailable, Status: 503, RetryAfter: d}
	}
	for _, tc := range []struct {
		n    int
		err  error
		want time.Duration
	}{
		{0, ra(2 * time.Second), 2 * time.Second},
		{5, ra(2 * time.Second), 2 * time.Second},
		{0, ra(time.Hour), 10 * time.Second}, // capped
		{0, errors.New("connection refused"), 100 * time.Millisecond},
		{2, ra(0), 400 * time.Millisecond},
	} {
		if got := p.delay(tc.n, tc.err); got != tc.want {
			t.Errorf("delay(%d, %v) = %v, want %v", tc.n, tc.err, got, tc.want)
		}
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"2":                             2 * time.Second,
		" 3 ":                           3 * time.Second,
		"0":                             0,
		"-1":                            0,
		"soon":                          0,
		"Wed, 01 Jan 2025 00:00:05 GMT": 5 * time.Second,
		"Tue, 31 Dec 2024 23:59:00 GMT": 0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}
