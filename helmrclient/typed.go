package helmrclient

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Contract is an Agent's invocation contract: its ID, input type I and result
// type R. The SDK's Agent definitions implement it, so a typed call infers I
// and R from the definition; Ref builds one from an ID alone.
type Contract[I, R any] interface {
	// AgentID is the authored Agent identifier.
	AgentID() string
	// InvocationTypes carries the input and result types; its values are
	// zero and never used.
	InvocationTypes() (I, R)
}

// agentRef is the Contract that Ref returns.
type agentRef[I, R any] struct{ id string }

// AgentID returns the ID given to Ref.
func (a agentRef[I, R]) AgentID() string { return a.id }

// InvocationTypes returns zero values; only their types matter.
func (agentRef[I, R]) InvocationTypes() (i I, r R) { return i, r }

// Ref returns a Contract for Agent agentID with the stated input and result
// types. It checks nothing against the deployed Agent: the types are the
// caller's claim.
func Ref[I, R any](agentID string) Contract[I, R] { return agentRef[I, R]{id: agentID} }

// TypedCreateReceipt is CreateReceipt with a typed handle on the initial Turn.
type TypedCreateReceipt[R any] struct {
	// Session is a handle on the created Session.
	Session *SessionRef
	// Turn is a handle on the initial Turn whose outcome carries R.
	Turn *TypedTurnRef[R]
	// Receipt is the API object exactly as returned.
	Receipt helmrtype.SessionCreateReceipt
	// Replayed is true when the server answered an idempotent replay.
	Replayed bool
}

// Create creates a Session of Agent a with input as its initial Turn (input
// is always sent, even when it is I's zero value). Its Turn handle's Wait
// decodes the result as R.
func Create[I, R any](ctx context.Context, c *Client, a Contract[I, R], input I, opts CreateOptions) (*TypedCreateReceipt[R], error) {
	raw, err := encodeInput(any(input))
	if err != nil {
		return nil, err
	}
	if raw == nil {
		raw = json.RawMessage("null")
	}
	r, err := c.Sessions.Create(ctx, a.AgentID(), raw, opts)
	if err != nil {
		return nil, err
	}
	out := &TypedCreateReceipt[R]{Session: r.Session, Receipt: r.Receipt, Replayed: r.Replayed}
	if r.Turn != nil {
		out.Turn = TypedTurn[R](r.Turn)
	}
	return out, nil
}

// Enqueue admits a new Turn with input on Session s, a Session of Agent a,
// and returns a handle whose Wait decodes the result as R. It does not check
// that s belongs to a.
func Enqueue[I, R any](ctx context.Context, s *SessionRef, a Contract[I, R], input I, opts EnqueueOptions) (*TypedTurnRef[R], error) {
	raw, err := encodeInput(any(input))
	if err != nil {
		return nil, err
	}
	t, err := s.Enqueue(ctx, raw, opts)
	if err != nil {
		return nil, err
	}
	return TypedTurn[R](t), nil
}

// TypedTurn wraps t so that its waits decode the result as R.
func TypedTurn[R any](t *TurnRef) *TypedTurnRef[R] { return &TypedTurnRef[R]{TurnRef: t} }

// TypedTurnRef is a TurnRef whose Wait and WaitTimeout decode the result as R.
type TypedTurnRef[R any] struct {
	*TurnRef
}

// TypedOutcome is a settled Turn's outcome with its result decoded.
type TypedOutcome[R any] struct {
	// Status is completed, failed, interrupted or cancelled.
	Status string
	// Result is the decoded machine result; meaningful only when HasResult.
	Result R
	// HasResult is true for a completed Turn whose payload is retained.
	HasResult bool
	// Response is the Turn's human response, when it staged one.
	Response helmrtype.Content
	// Error is the error of a failed or interrupted Turn.
	Error *helmrtype.TurnError
	// PayloadExpiredAt is set when the result and response are no longer kept.
	PayloadExpiredAt *time.Time
	// Raw is the outcome as the server sent it.
	Raw helmrtype.TurnOutcome
}

// TypedTimedWaitResult is a timed wait's result with a typed outcome: Status
// is "settled" (Outcome set) or "timeout".
type TypedTimedWaitResult[R any] struct {
	Status  string
	Outcome *TypedOutcome[R]
}

// Wait blocks until the Turn settles, as TurnRef.Wait, and decodes the
// result. When the result does not decode as R it returns the outcome
// (without Result) and the decoding error.
func (t *TypedTurnRef[R]) Wait(ctx context.Context) (*TypedOutcome[R], error) {
	o, err := t.TurnRef.Wait(ctx)
	if err != nil {
		return nil, err
	}
	return decodeOutcome[R](t.id, *o)
}

// WaitTimeout waits at most d, as TurnRef.WaitTimeout, and decodes the result
// of a settled Turn.
func (t *TypedTurnRef[R]) WaitTimeout(ctx context.Context, d time.Duration) (*TypedTimedWaitResult[R], error) {
	r, err := t.TurnRef.WaitTimeout(ctx, d)
	if err != nil {
		return nil, err
	}
	out := &TypedTimedWaitResult[R]{Status: r.Status}
	if r.Outcome == nil {
		return out, nil
	}
	out.Outcome, err = decodeOutcome[R](t.id, *r.Outcome)
	return out, err
}

// decodeOutcome types o.
func decodeOutcome[R any](turnID string, o helmrtype.TurnOutcome) (*TypedOutcome[R], error) {
	out := &TypedOutcome[R]{
		Status:           o.Status,
		Response:         o.Response,
		Error:            o.Error,
		PayloadExpiredAt: o.PayloadExpiredAt,
		Raw:              o,
	}
	if o.Status != helmrtype.TurnCompleted || o.PayloadExpiredAt != nil {
		return out, nil
	}
	raw := o.Result
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	if err := json.Unmarshal(raw, &out.Result); err != nil {
		return out, fmt.Errorf("helmrclient: result of Turn %s does not decode as %T: %w", turnID, out.Result, err)
	}
	out.HasResult = true
	return out, nil
}
