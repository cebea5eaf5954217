package helmrclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// newTestClient returns a Client for srv with quick retries, and closes its
// idle connections when the test ends.
func newTestClient(t *testing.T, srv *httptest.Server, opts ...Option) *Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	opts = append([]Option{WithHTTPClient(&http.Client{Transport: tr}), WithRetry(5*time.Millisecond, 20*time.Millisecond, 5)}, opts...)
	return New(srv.URL, "sk_test", opts...)
}

// sseFrame writes one record as the server does.
func sseFrame(w http.ResponseWriter, seq int64) {
	ev := helmrtype.SessionEvent{
		SessionID: "s1",
		Sequence:  seq,
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Kind:      helmrtype.EventTurnOutput,
		Data:      json.RawMessage(fmt.Sprintf(`{"n":%d}`, seq)),
	}
	b, _ := json.Marshal(ev)
	fmt.Fprintf(w, "id: %d\ndata: %s\n\n", seq, b)
}

// connRecord is what one stream connection asked for.
type connRecord struct {
	lastEventID string
	after       string
	accept      string
	auth        string
}

func TestStreamResumesWithoutLossOrRepeat(t *testing.T) {
	var (
		mu    sync.Mutex
		conns []connRecord
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/sessions/s1/events" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		n := len(conns)
		conns = append(conns, connRecord{
			lastEventID: r.Header.Get("Last-Event-ID"),
			after:       r.URL.Query().Get("after"),
			accept:      r.Header.Get("Accept"),
			auth:        r.Header.Get("Authorization"),
		})
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fl := w.(http.Flusher)
		switch n {
		case 0:
			// Records 1–4, then the connection drops mid-frame.
			for s := int64(1); s <= 4; s++ {
				sseFrame(w, s)
			}
			fmt.Fprint(w, ": ping\n\nid: 5\ndata: {\"sequ")
			fl.Flush()
			panic(http.ErrAbortHandler)
		case 1:
			// Resumes, but replays an overlap (3, 4) that the client must
			// drop, then 5–7, then drops.
			for s := int64(3); s <= 7; s++ {
				sseFrame(w, s)
			}
			fl.Flush()
			panic(http.ErrAbortHandler)
		default:
			// 8–10, then keep-alives until the client leaves.
			for s := int64(8); s <= 10; s++ {
				sseFrame(w, s)
				fl.Flush()
			}
			for {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(5 * time.Millisecond):
					fmt.Fprint(w, ": ping\n\n")
					fl.Flush()
				}
			}
		}
	}))
	defer srv.Close()
	c := newTestClient(t, srv)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []int64
	var endErr error
	for ev, err := range c.Sessions.Ref("s1").Events.Stream(ctx, 0) {
		if err != nil {
			endErr = err
			break
		}
		if want := fmt.Sprintf(`{"n":%d}`, ev.Sequence); string(ev.Data) != want {
			t.Errorf("record %d data = %s; want %s", ev.Sequence, ev.Data, want)
		}
		got = append(got, ev.Sequence)
		if ev.Sequence == 10 {
			cancel()
		}
	}
	if !errors.Is(endErr, context.Canceled) {
		t.Errorf("stream ended with %v; want context.Canceled", endErr)
	}
	want := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sequences = %v; want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 3 {
		t.Fatalf("%d connections; want 3", len(conns))
	}
	wantConns := []connRecord{
		{lastEventID: "", after: "0"},
		{lastEventID: "4", after: "4"},
		{lastEventID: "7", after: "7"},
	}
	for i, cr := range conns {
		if cr.lastEventID != wantConns[i].lastEventID || cr.after != wantConns[i].after {
			t.Errorf("connection %d: Last-Event-ID %q after %q; want %q, %q", i, cr.lastEventID, cr.after, wantConns[i].lastEventID, wantConns[i].after)
		}
		if cr.accept != "text/event-stream" {
			t.Errorf("connection %d: Accept %q", i, cr.accept)
		}
		if cr.auth != "Bearer sk_test" {
			t.Errorf("connection %d: Authorization %q", i, cr.auth)
		}
	}
}

func TestStreamStartsAfter(t *testing.T) {
	var lastID, after string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastID, after = r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		from, _ := strconv.ParseInt(after, 10, 64)
		sseFrame(w, from+1)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c := newTestClient(t, srv)
	for ev, err := range c.Sessions.Ref("s1").Events.Stream(context.Background(), 41) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Sequence != 42 {
			t.Errorf("first record %d; want 42", ev.Sequence)
		}
		break // closes the connection; the handler returns
	}
	if lastID != "41" || after != "41" {
		t.Errorf("Last-Event-ID %q after %q; want 41, 41", lastID, after)
	}
}

func TestStreamReconnectsWhenIdle(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if first {
			sseFrame(w, 1)
		} else {
			sseFrame(w, 2)
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // then silence: no keep-alives
	}))
	defer srv.Close()
	c := newTestClient(t, srv, WithStreamIdleTimeout(50*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []int64
	for ev, err := range c.Sessions.Ref("s1").Events.Stream(ctx, 0) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.Sequence)
		if len(got) == 2 {
			break
		}
	}
	if fmt.Sprint(got) != "[1 2]" {
		t.Errorf("sequences = %v; want [1 2]", got)
	}
}

func TestStreamAPIErrorEndsStream(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":"not_found","message":"no Session s1"}}`)
	}))
	defer srv.Close()
	c := newTestClient(t, srv)
	var endErr error
	for _, err := range c.Sessions.Ref("s1").Events.Stream(context.Background(), 0) {
		endErr = err
	}
	if !errors.Is(endErr, helmrtype.CodeNotFound) {
		t.Errorf("stream ended with %v; want not_found", endErr)
	}
	if calls != 1 {
		t.Errorf("%d requests; an API error must not be retried", calls)
	}
}

func TestStreamGivesUpAfterAttempts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c := newTestClient(t, srv, WithRetry(time.Millisecond, 2*time.Millisecond, 3))
	var endErr error
	for _, err := range c.Sessions.Ref("s1").Events.Stream(context.Background(), 0) {
		endErr = err
	}
	if !errors.Is(endErr, helmrtype.CodeUnavailable) {
		t.Errorf("stream ended with %v; want unavailable", endErr)
	}
}

func TestStreamRefusesNonEventStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"records":[]}`)
	}))
	defer srv.Close()
	c := newTestClient(t, srv)
	var endErr error
	for _, err := range c.Sessions.Ref("s1").Events.Stream(context.Background(), 0) {
		endErr = err
	}
	var pe *protocolError
	if !errors.As(endErr, &pe) {
		t.Errorf("stream ended with %v; want a protocol error", endErr)
	}
}
