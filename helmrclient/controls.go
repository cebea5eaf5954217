package helmrclient

import (
	"context"
	"net/http"

	"github.com/helmr-go/helmr/helmrtype"
)

// ControlOptions are the optional fields of a Session control.
type ControlOptions struct {
	// IdempotencyKey identifies the request for retries; when empty a fresh
	// UUIDv7 is generated for this call.
	IdempotencyKey string
}

// Interrupt holds the Session and every Session it owns: running Turns are
// interrupted and queued Turns wait. The receipt's HoldID is what Resume
// releases. Acceptance is not confirmation that execution stopped.
func (s *SessionRef) Interrupt(ctx context.Context, opts ControlOptions) (*helmrtype.SessionControlReceipt, error) {
	key, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var out helmrtype.SessionControlReceipt
	if err := s.c.do(ctx, http.MethodPost, s.path()+"/interrupt", nil, helmrtype.ControlRequest{IdempotencyKey: key}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Resume releases exactly the hold holdID, placed on this Session (an
// inherited hold is resumed on the Session that owns it).
func (s *SessionRef) Resume(ctx context.Context, holdID string, opts ControlOptions) (*helmrtype.SessionControlReceipt, error) {
	key, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var out helmrtype.SessionControlReceipt
	req := helmrtype.ResumeRequest{HoldID: holdID, IdempotencyKey: key}
	if err := s.c.do(ctx, http.MethodPost, s.path()+"/resume", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Close stops new admission and lets the Session drain; the receipt's
// Status is closing or closed.
func (s *SessionRef) Close(ctx context.Context, opts ControlOptions) (*helmrtype.SessionStatusReceipt, error) {
	return s.statusControl(ctx, "/close", opts)
}

// Cancel cancels the queued and running work of the Session and the
// Sessions it owns and closes them; the receipt's Status is closed.
func (s *SessionRef) Cancel(ctx context.Context, opts ControlOptions) (*helmrtype.SessionStatusReceipt, error) {
	return s.statusControl(ctx, "/cancel", opts)
}

func (s *SessionRef) statusControl(ctx context.Context, verb string, opts ControlOptions) (*helmrtype.SessionStatusReceipt, error) {
	key, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	var out helmrtype.SessionStatusReceipt
	if err := s.c.do(ctx, http.MethodPost, s.path()+verb, nil, helmrtype.ControlRequest{IdempotencyKey: key}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
