package helmrclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// MaxWaitPerRequest is the longest wait one GET …/wait request asks for; the
// server caps a request there. Longer waits are made of several requests.
const MaxWaitPerRequest = 60 * time.Second

// TurnRef is a handle on one Turn of one Session; make it with
// SessionTurns.Ref, or get it from Create or Enqueue.
type TurnRef struct {
	c         *Client
	sessionID string
	id        string
	state     *helmrtype.TurnState
}

// turnRef makes a TurnRef with an optional known state.
func (c *Client) turnRef(sessionID, id string, state *helmrtype.TurnState) *TurnRef {
	return &TurnRef{c: c, sessionID: sessionID, id: id, state: state}
}

// ID is the Turn's ID.
func (t *TurnRef) ID() string { return t.id }

// SessionID is the ID of the Session the Turn belongs to.
func (t *TurnRef) SessionID() string { return t.sessionID }

// State is the TurnState returned by the call that made this handle
// (Create or Enqueue), or nil for a handle made by Ref. It is not refreshed;
// call Get for the current state.
func (t *TurnRef) State() *helmrtype.TurnState { return t.state }

// path is the Turn's URL path.
func (t *TurnRef) path() string {
	return "/v1/sessions/" + pathEscape(t.sessionID) + "/turns/" + pathEscape(t.id)
}

// Get returns the Turn's current state.
func (t *TurnRef) Get(ctx context.Context) (*helmrtype.TurnState, error) {
	var out helmrtype.TurnState
	if err := t.c.do(ctx, http.MethodGet, t.path(), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Wait blocks until the Turn settles and returns its outcome. It makes as
// many wait requests as it takes, retrying transient failures (see
// WithRetry), and ends early with ctx's error.
func (t *TurnRef) Wait(ctx context.Context) (*helmrtype.TurnOutcome, error) {
	if r := t.settled(); r != nil {
		return r.Outcome, nil
	}
	r, err := t.wait(ctx, time.Time{})
	if err != nil {
		return nil, err
	}
	return r.Outcome, nil
}

// WaitTimeout waits at most d for the Turn to settle: the result is
// {status:"settled", outcome} or {status:"timeout"}. A timeout never cancels
// the Turn. A d of zero or less reads the Turn's state once.
func (t *TurnRef) WaitTimeout(ctx context.Context, d time.Duration) (*helmrtype.TimedTurnWaitResult, error) {
	if r := t.settled(); r != nil {
		return r, nil
	}
	if d <= 0 {
		st, err := t.Get(ctx)
		if err != nil {
			return nil, err
		}
		if helmrtype.TurnTerminal(st.Status) {
			o := st.Outcome()
			return &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitSettled, Outcome: &o}, nil
		}
		return &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitTimeout}, nil
	}
	return t.wait(ctx, time.Now().Add(d))
}

// settled is the wait result of a handle whose State is already settled
// (an admission that waited), nil otherwise: a settled Turn never changes.
func (t *TurnRef) settled() *helmrtype.TimedTurnWaitResult {
	if t.state == nil || !helmrtype.TurnTerminal(t.state.Status) {
		return nil
	}
	o := t.state.Outcome()
	return &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitSettled, Outcome: &o}
}

// wait loops wait requests until the Turn settles or deadline (zero: none)
// passes.
func (t *TurnRef) wait(ctx context.Context, deadline time.Time) (*helmrtype.TimedTurnWaitResult, error) {
	failures := 0
	for {
		chunk := MaxWaitPerRequest
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitTimeout}, nil
			}
			chunk = min(chunk, left)
		}
		start := time.Now()
		r, err := t.waitOnce(ctx, chunk)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !transient(ctx, err) {
				return nil, err
			}
			failures++
			if p := t.c.retry; p.attempts > 0 && failures >= p.attempts {
				return nil, err
			}
			if err := sleep(ctx, t.c.retry.delay(failures-1, err)); err != nil {
				return nil, err
			}
			continue
		}
		failures = 0
		switch r.Status {
		case helmrtype.WaitSettled:
			if r.Outcome == nil {
				return nil, fmt.Errorf("helmrclient: wait on Turn %s: settled answer without an outcome", t.id)
			}
			return r, nil
		case helmrtype.WaitTimeout:
			// A server that answers timeout far sooner than asked would make
			// this a busy loop; pace it.
			if time.Since(start) < chunk/10 {
				if err := sleep(ctx, t.c.retry.min); err != nil {
					return nil, err
				}
			}
		default:
			return nil, fmt.Errorf("helmrclient: wait on Turn %s: unknown wait status %q", t.id, r.Status)
		}
	}
}

// waitOnce makes one GET …/wait request of at most d.
func (t *TurnRef) waitOnce(ctx context.Context, d time.Duration) (*helmrtype.TimedTurnWaitResult, error) {
	q := url.Values{"timeout": {formatWaitTimeout(d)}}
	var out helmrtype.TimedTurnWaitResult
	// No retry here: wait's own loop retries transient failures.
	if _, err := t.c.call(ctx, http.MethodGet, t.path()+"/wait", q, nil, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// formatWaitTimeout writes d, rounded up to a whole millisecond, as whole
// seconds ("30s") or milliseconds ("1500ms"), which both Helmr's and Go's
// duration parsers read.
func formatWaitTimeout(d time.Duration) string {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	if d < time.Millisecond {
		d = time.Millisecond
	}
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// SendOptions are the optional fields of a message to a Turn.
type SendOptions struct {
	// IdempotencyKey identifies the request for retries; when empty a fresh
	// UUIDv7 is generated for this call.
	IdempotencyKey string
}

// Send sends a message with content (text parts only) to exactly this Turn.
// The receipt confirms acceptance, not delivery.
func (t *TurnRef) Send(ctx context.Context, content helmrtype.InputContent, opts SendOptions) (*helmrtype.MessageReceipt, error) {
	raw, err := encodeInput(content)
	if err != nil {
		return nil, err
	}
	key, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var out helmrtype.MessageReceipt
	req := helmrtype.MessageRequest{Content: raw, IdempotencyKey: key}
	if err := t.c.do(ctx, http.MethodPost, t.path()+"/messages", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// InterruptOptions are the optional fields of a Turn interrupt.
type InterruptOptions struct {
	// IdempotencyKey identifies the request for retries; when empty a fresh
	// UUIDv7 is generated for this call.
	IdempotencyKey string
}

// Interrupt interrupts this running Turn without holding the Session. The
// receipt confirms acceptance, not that execution has stopped.
func (t *TurnRef) Interrupt(ctx context.Context, opts InterruptOptions) (*helmrtype.TurnInterruptReceipt, error) {
	key, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var out helmrtype.TurnInterruptReceipt
	req := helmrtype.ControlRequest{IdempotencyKey: key}
	if err := t.c.do(ctx, http.MethodPost, t.path()+"/interrupt", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
