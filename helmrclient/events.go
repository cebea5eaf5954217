package helmrclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// SessionEvents reads a Session's ordered event timeline; reach it as
// SessionRef.Events.
type SessionEvents struct {
	c         *Client
	sessionID string
}

// EventListOptions selects one page of events: those with a sequence above
// After (default 0), at most Limit of them (1–1000; 0 uses the server's
// default of 100).
type EventListOptions struct {
	After int64
	Limit int
}

// query checks o and encodes it.
func (o EventListOptions) query() (url.Values, error) {
	if o.After < 0 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "after %d: want 0 or more", o.After)
	}
	if o.Limit < 0 || o.Limit > 1000 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "limit %d: want 1–1000", o.Limit)
	}
	q := url.Values{}
	if o.After > 0 {
		q.Set("after", strconv.FormatInt(o.After, 10))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q, nil
}

// path is the URL path of the Session's events.
func (e *SessionEvents) path() string {
	return "/v1/sessions/" + pathEscape(e.sessionID) + "/events"
}

// List returns one page of events. A page's end (has_more false) is not the
// end of a Turn: continue from next_after.
func (e *SessionEvents) List(ctx context.Context, opts EventListOptions) (*helmrtype.SessionEventPage, error) {
	q, err := opts.query()
	if err != nil {
		return nil, err
	}
	var out helmrtype.SessionEventPage
	if err := e.c.do(ctx, http.MethodGet, e.path(), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Stream follows the timeline live over Server-Sent Events, starting after
// sequence after. Each range over the result opens its own stream:
//
//	for ev, err := range session.Events.Stream(ctx, 0) {
//		if err != nil { … } // the stream has ended
//		…
//	}
//
// When the connection drops (or stays silent past the idle timeout), it
// reconnects with Last-Event-ID and backoff (see WithRetry) and yields every
// record exactly once, in sequence order. The stream does not end by itself:
// it ends with a non-nil error, which is ctx's error when ctx ends, an API
// error (for example not_found), or the last failure after too many failed
// reconnects. Breaking out of the loop closes the connection.
func (e *SessionEvents) Stream(ctx context.Context, after int64) iter.Seq2[helmrtype.SessionEvent, error] {
	return func(yield func(helmrtype.SessionEvent, error) bool) {
		s := &eventStream{c: e.c, path: e.path(), last: after}
		s.run(ctx, yield)
	}
}

// eventStream is the state of one followed stream.
type eventStream struct {
	c    *Client
	path string
	// last is the highest sequence yielded (or the starting point).
	last int64
	// retry is the reconnection delay the server asked for, 0 when none.
	retry time.Duration
}

// connection is how one connection ended.
type connection struct {
	stopped   bool  // the consumer stopped the iteration
	connected bool  // the server answered 2xx with an event stream
	delivered bool  // at least one new record was yielded
	err       error // why it ended; errStreamEnded for a clean end
}

// errStreamEnded is the cause of a reconnect after the server ended the
// stream cleanly.
var errStreamEnded = errors.New("helmrclient: event stream ended")

// errStreamIdle is the cause of a reconnect after the idle timeout.
var errStreamIdle = errors.New("helmrclient: event stream idle; reconnecting")

// protocolError is a stream the client cannot follow; it is not retried.
type protocolError struct{ msg string }

func (e *protocolError) Error() string { return "helmrclient: event stream: " + e.msg }

func (s *eventStream) run(ctx context.Context, yield func(helmrtype.SessionEvent, error) bool) {
	failures, pause := 0, 0
	for {
		c := s.connect(ctx, yield)
		if c.stopped {
			return
		}
		if ctx.Err() != nil {
			yield(helmrtype.SessionEvent{}, ctx.Err())
			return
		}
		var pe *protocolError
		if errors.As(c.err, &pe) || !transient(ctx, c.err) {
			yield(helmrtype.SessionEvent{}, c.err)
			return
		}
		if c.connected {
			failures = 0
		} else {
			failures++
			if p := s.c.retry; p.attempts > 0 && failures >= p.attempts {
				yield(helmrtype.SessionEvent{}, fmt.Errorf("helmrclient: event stream: giving up after %d failed connections: %w", failures, c.err))
				return
			}
		}
		if c.delivered {
			pause = 0
		}
		p := s.c.retry
		if s.retry > 0 {
			p.min = s.retry
			p.max = max(p.max, s.retry)
		}
		d := p.delay(pause, c.err)
		pause++
		if err := sleep(ctx, d); err != nil {
			yield(helmrtype.SessionEvent{}, err)
			return
		}
	}
}

// connect opens one connection from s.last and yields its new records.
func (s *eventStream) connect(ctx context.Context, yield func(helmrtype.SessionEvent, error) bool) (c connection) {
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{"after": {strconv.FormatInt(s.last, 10)}}
	req, err := s.c.newRequest(connCtx, http.MethodGet, s.path, q, nil)
	if err != nil {
		c.err = &protocolError{msg: err.Error()}
		return c
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Cache-Control", "no-cache")
	if s.last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(s.last, 10))
	}
	resp, err := s.c.http.Do(req)
	if err != nil {
		c.err = err
		return c
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		c.err = decodeError(resp)
		return c
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		c.err = &protocolError{msg: fmt.Sprintf("the server answered %q, not text/event-stream", resp.Header.Get("Content-Type"))}
		return c
	}
	c.connected = true

	var idle atomic.Bool
	watchdog := time.AfterFunc(s.c.idle, func() {
		idle.Store(true)
		cancel()
	})
	defer watchdog.Stop()
	touch := func() { watchdog.Reset(s.c.idle) }

	r := newSSEReader(resp.Body)
	for {
		ev, err := r.next(touch)
		if r.retry > 0 {
			s.retry = r.retry
		}
		if err != nil {
			switch {
			case idle.Load():
				c.err = errStreamIdle
			case errors.Is(err, io.EOF):
				c.err = errStreamEnded
			case errors.Is(err, errSSELineTooLong):
				c.err = &protocolError{msg: err.Error()}
			default:
				c.err = err
			}
			return c
		}
		switch ev.typ {
		case "", "message":
		case "error":
			c.err = errorFromBody(http.StatusInternalServerError, []byte(ev.data))
			return c
		default:
			continue // an event kind this client does not know
		}
		if ev.data == "" {
			continue
		}
		var rec helmrtype.SessionEvent
		if err := json.Unmarshal([]byte(ev.data), &rec); err != nil {
			c.err = &protocolError{msg: fmt.Sprintf("record after sequence %d: %v", s.last, err)}
			return c
		}
		if rec.Sequence <= s.last {
			continue // already yielded before a reconnect
		}
		s.last = rec.Sequence
		c.delivered = true
		watchdog.Stop()
		if !yield(rec, nil) {
			c.stopped = true
			return c
		}
		touch()
	}
}
