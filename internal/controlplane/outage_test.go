package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// logBuffer collects a control plane's log lines, written from many
// goroutines while the test reads them.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// count is how many lines hold s.
func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, l := range strings.Split(b.b.String(), "\n") {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// answer is what the outage test reads of an HTTP answer.
type answer struct {
	status     int
	retryAfter string
	err        *helmrtype.Error
}

// TestDatabaseOutage stops the PostgreSQL server under a running control
// plane for a few seconds: every route answers 503 unavailable with
// Retry-After, /readyz too, the log says once that the database is
// unreachable (not once per request), and once it is back, requests
// succeed and the log says it is reachable again. The PostgreSQL server is
// the test's own (pgtest.Start), so halting it disturbs no other test.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	pg, err := pgtest.Start()
	if errors.Is(err, pgtest.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop() })
	ctx := context.Background()
	name, err := pg.CreateDurableDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	cp, err := Open(ctx, Config{DataDir: t.TempDir(), Database: pg.DatabaseURL(name), UnsafeNoSandbox: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	key, err := cp.Engine.CreateAPIKey(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	sctx, stop := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() { defer close(served); cp.Serve(sctx, ln) }()
	defer func() {
		stop()
		<-served
		cp.Close(ctx)
	}()

	do := func(method, path, body string) answer {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(rctx, method, base+path, rd)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
		if resp.StatusCode/100 != 2 {
			var env helmrtype.ErrorEnvelope
			b, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(b, &env); err != nil || env.Error == nil {
				t.Fatalf("%s %s: %d %s: not the error envelope", method, path, resp.StatusCode, b)
			}
			a.err = env.Error
		}
		return a
	}

	if a := do("GET", "/v1/sessions", ""); a.status != http.StatusOK {
		t.Fatalf("before the outage: GET /v1/sessions answered %d %v", a.status, a.err)
	}
	if a := do("GET", "/readyz", ""); a.status != http.StatusOK {
		t.Fatalf("before the outage: /readyz answered %d %v", a.status, a.err)
	}

	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	halted := time.Now()
	requests := []struct{ method, path, body string }{
		{"GET", "/v1/sessions", ""},
		{"GET", "/v1/agents", ""},
		{"GET", "/v1/sessions/0190b3a0-0000-7000-8000-000000000000", ""},
		{"POST", "/v1/sessions", `{"agent":"nobody","idempotency_key":"k1"}`},
		{"GET", "/readyz", ""},
	}
	n := 0
	for time.Since(halted) < 3*time.Second {
		for _, r := range requests {
			a := do(r.method, r.path, r.body)
			n++
			if a.status != http.StatusServiceUnavailable || a.retryAfter == "" || a.err.Code != helmrtype.CodeUnavailable {
				t.Fatalf("during the outage: %s %s answered %d, Retry-After %q, %+v; want 503 with Retry-After and code unavailable",
					r.method, r.path, a.status, a.retryAfter, a.err)
			}
			if r.path != "/readyz" && a.err.Message != "the database is unreachable; try again" {
				t.Errorf("during the outage: %s %s said %q", r.method, r.path, a.err.Message)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if c := logs.count(`msg="the database is unreachable"`); c != 1 {
		t.Errorf("%d requests during the outage logged %d 'unreachable' lines, want 1:\n%s", n, c, logs.String())
	}
	if c := logs.count(`msg="request failed"`); c != 0 {
		t.Errorf("requests during the outage logged %d 'request failed' lines, want none", c)
	}

	// A client's GET sent during the outage retries on 503 with
	// Retry-After and succeeds once the database is back.
	type listed struct {
		page *helmrtype.SessionPage
		err  error
	}
	clientDone := make(chan listed, 1)
	go func() {
		page, err := helmrclient.New(base, key).Sessions.List(ctx, helmrclient.SessionListOptions{})
		clientDone <- listed{page, err}
	}()
	time.Sleep(200 * time.Millisecond) // its first try meets the outage

	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-clientDone:
		if r.err != nil {
			t.Errorf("a client's GET during the outage: %v; want it retried until the database is back", r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a client's GET during the outage did not end 20 s after the database came back")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := do("GET", "/v1/sessions", "")
		if a.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after PostgreSQL came back, GET /v1/sessions still answers %d %+v", a.status, a.err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if a := do("GET", "/readyz", ""); a.status != http.StatusOK {
		t.Errorf("after the outage: /readyz answered %d %+v", a.status, a.err)
	}
	if c := logs.count(`msg="the database is reachable again"`); c != 1 {
		t.Errorf("logged %d 'reachable again' lines after the outage, want 1:\n%s", c, logs.String())
	}
	if c := logs.count(`msg="the database is unreachable"`); c != 1 {
		t.Errorf("logged %d 'unreachable' lines in all, want 1", c)
	}
	t.Logf("%d requests during the outage; the log said:\n%s", n, grepLines(logs.String(), "the database is"))
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
