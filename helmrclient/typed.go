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
// that s belongs to a; a handle from Attach does.
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

// TypedSessionRef is a handle on an existing Session that Attach checked
// to be of Agent a's ID and pinned to one Deployment: its enqueue takes I,
// and its Turn reads and waits decode I and R.
type TypedSessionRef[I, R any] struct {
	*SessionRef
	// Session is the Session's state as Attach read it.
	Session helmrtype.Session
}

// Attach returns a typed handle on Session sessionID after checking, with
// one read, that it is a Session of Agent a and pinned to Deployment
// deploymentID: a's types hold only for the code deployed there. A
// Session of another Agent or Deployment is a conflict error
// (helmrtype.CodeConflict, its Details naming the actual "agent" or
// "deployment_id"); a missing one is helmrtype.CodeNotFound; an empty
// sessionID or deploymentID is helmrtype.CodeInvalidRequest.
func Attach[I, R any](ctx context.Context, c *Client, a Contract[I, R], sessionID, deploymentID string) (*TypedSessionRef[I, R], error) {
	if sessionID == "" {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "attach: a Session ID is required")
	}
	if deploymentID == "" {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest,
			"attach: a Deployment ID is required: the typed contract holds for one Deployment's code")
	}
	ref := c.Sessions.Ref(sessionID)
	s, err := ref.Get(ctx)
	if err != nil {
		return nil, err
	}
	if s.Agent != a.AgentID() {
		return nil, &helmrtype.Error{Code: helmrtype.CodeConflict,
			Message: fmt.Sprintf("session %s is of agent %q, not %q", sessionID, s.Agent, a.AgentID()),
			Details: map[string]any{"agent": s.Agent}}
	}
	if s.DeploymentID != deploymentID {
		return nil, &helmrtype.Error{Code: helmrtype.CodeConflict,
			Message: fmt.Sprintf("session %s is pinned to deployment %s, not %s", sessionID, s.DeploymentID, deploymentID),
			Details: map[string]any{"deployment_id": s.DeploymentID}}
	}
	return &TypedSessionRef[I, R]{SessionRef: ref, Session: *s}, nil
}

// Enqueue admits a new Turn with input at the end of the Session's queue,
// as SessionRef.Enqueue, and returns a handle whose waits decode R.
func (s *TypedSessionRef[I, R]) Enqueue(ctx context.Context, input I, opts EnqueueOptions) (*TypedTurnRef[R], error) {
	raw, err := encodeInput(any(input))
	if err != nil {
		return nil, err
	}
	t, err := s.SessionRef.Enqueue(ctx, raw, opts)
	if err != nil {
		return nil, err
	}
	return TypedTurn[R](t), nil
}

// Turn returns a handle on Turn id of the Session, without a network
// request, whose waits decode R.
func (s *TypedSessionRef[I, R]) Turn(id string) *TypedTurnRef[R] {
	return TypedTurn[R](s.SessionRef.Turns.Ref(id))
}

// TypedTurnState is a Turn's state with its input decoded as I and its
// result as R.
type TypedTurnState[I, R any] struct {
	// Input is the decoded input; meaningful only when HasInput.
	Input I
	// HasInput is true while the Turn's input is kept (not expired).
	HasInput bool
	// Result is the decoded result; meaningful only when HasResult.
	Result R
	// HasResult is true for a completed Turn whose payload is kept.
	HasResult bool
	// Raw is the Turn's state as the server sent it (status, timings,
	// response, error, payload_expired_at).
	Raw helmrtype.TurnState
}

// GetTurn reads Turn id of the Session and decodes its input and result.
// When one does not decode it returns the state read and the error.
func (s *TypedSessionRef[I, R]) GetTurn(ctx context.Context, id string) (*TypedTurnState[I, R], error) {
	st, err := s.SessionRef.Turns.Ref(id).Get(ctx)
	if err != nil {
		return nil, err
	}
	out := &TypedTurnState[I, R]{Raw: *st}
	if len(st.Input) > 0 {
		if err := json.Unmarshal(st.Input, &out.Input); err != nil {
			return out, fmt.Errorf("helmrclient: input of Turn %s does not decode as %T: %w", id, out.Input, err)
		}
		out.HasInput = true
	}
	if st.Status == helmrtype.TurnCompleted && st.PayloadExpiredAt == nil {
		raw := st.Result
		if len(raw) == 0 {
			raw = json.RawMessage("null")
		}
		if err := json.Unmarshal(raw, &out.Result); err != nil {
			return out, fmt.Errorf("helmrclient: result of Turn %s does not decode as %T: %w", id, out.Result, err)
		}
		out.HasResult = true
	}
	return out, nil
}
