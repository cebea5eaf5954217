package engine

import (
	"context"
	"errors"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Holds. A hold on a Session stops its queued Turns (and those of every
// Session it owns, recursively) from starting until it is released; a
// running Turn goes on unless the control that placed the hold also
// interrupted it.

// lineageTx is the Session's ID and its ancestors' (parent, grandparent, …):
// the Sessions whose holds apply to it. A Session's parent never changes,
// so parents are remembered once read.
func (e *Engine) lineageTx(ctx context.Context, tx store.Tx, sessionID string) ([]string, error) {
	ids := []string{sessionID}
	for id := sessionID; ; {
		p, err := e.parentOf(ctx, tx, id)
		if err != nil || p == "" {
			return ids, err
		}
		ids = append(ids, p)
		if len(ids) > 64 {
			return nil, errors.New("engine: session ancestry deeper than 64")
		}
		id = p
	}
}

// parentOf is a Session's parent ("" for a root, or an unknown Session).
func (e *Engine) parentOf(ctx context.Context, tx store.Tx, id string) (string, error) {
	if p, ok := e.parents.Load(id); ok {
		return p.(string), nil
	}
	s, err := tx.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	e.parents.Store(id, s.ParentSessionID)
	return s.ParentSessionID, nil
}

// holdsTx returns the holds that apply to the Session.
func (e *Engine) holdsTx(ctx context.Context, tx store.Tx, sessionID string) ([]store.Hold, error) {
	ids, err := e.lineageTx(ctx, tx, sessionID)
	if err != nil {
		return nil, err
	}
	return tx.ActiveHolds(ctx, ids)
}

// heldTx reports whether any hold applies to the Session.
func (e *Engine) heldTx(ctx context.Context, tx store.Tx, sessionID string) (bool, error) {
	hs, err := e.holdsTx(ctx, tx, sessionID)
	return len(hs) > 0, err
}

// treeTx is the Session's ID and those of every Session it owns,
// recursively, parents before children.
func treeTx(ctx context.Context, tx store.Tx, sessionID string) ([]string, error) {
	ids := []string{sessionID}
	for i := 0; i < len(ids); i++ {
		after := ""
		for {
			page, err := tx.ListSessions(ctx, store.SessionFilter{ParentSessionID: ids[i], AfterID: after, Limit: 100})
			if err != nil {
				return nil, err
			}
			for _, c := range page {
				ids = append(ids, c.ID)
			}
			if len(page) < 100 {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	return ids, nil
}

func holdView(h *store.Hold) helmrtype.Hold {
	id, sid := h.ID, h.SessionID
	return helmrtype.Hold{ID: &id, SessionID: &sid, Kind: h.Kind, CreatedAt: h.CreatedAt, CanRelease: h.CanRelease, Reason: h.Reason}
}

// placeHoldTx places a hold on the Session and records it.
func (e *Engine) placeHoldTx(ctx context.Context, tx store.Tx, sessionID, kind, reason string, now time.Time) (*store.Hold, error) {
	return e.placeHoldByTx(ctx, tx, sessionID, kind, reason, "", now)
}

// placeHoldByTx places a hold issued by a Session through runtime MCP
// (issuer "" for any other hold).
func (e *Engine) placeHoldByTx(ctx context.Context, tx store.Tx, sessionID, kind, reason, issuer string, now time.Time) (*store.Hold, error) {
	h := &store.Hold{ID: NewID(), SessionID: sessionID, Kind: kind, CanRelease: kind != helmrtype.HoldStoragePressure,
		Reason: reason, CreatedAt: now, IssuerSessionID: issuer}
	if err := tx.InsertHold(ctx, h); err != nil {
		return nil, err
	}
	return h, nil
}

// runningInTx returns the running Turns of the given Sessions.
func runningInTx(ctx context.Context, tx store.Tx, ids []string) ([]store.Turn, error) {
	var out []store.Turn
	for _, id := range ids {
		t, err := tx.ActiveTurn(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if t.Status == helmrtype.TurnRunning {
			out = append(out, *t)
		}
	}
	return out, nil
}

// InterruptSession holds the Session and every Session it owns: their
// running Turns are interrupted and their queued Turns wait until the hold
// is released with ResumeSession. The receipt says the control is accepted,
// not that execution has stopped.
func (e *Engine) InterruptSession(ctx context.Context, sessionID string, req helmrtype.ControlRequest) (*helmrtype.SessionControlReceipt, error) {
	return e.interruptSession(ctx, sessionID, req, "")
}

// interruptSession is InterruptSession with the hold's issuer: the Session
// that asked through runtime MCP, or "".
func (e *Engine) interruptSession(ctx context.Context, sessionID string, req helmrtype.ControlRequest, issuer string) (*helmrtype.SessionControlReceipt, error) {
	var out *helmrtype.SessionControlReceipt
	var replay bool
	var running []store.Turn
	err := e.store.Update(ctx, func(tx store.Tx) error {
		running = nil
		now := e.Now()
		var err error
		out, replay, err = idempotent(ctx, tx, now, "sessions.interrupt:"+sessionID, req.IdempotencyKey, req, func() (*helmrtype.SessionControlReceipt, error) {
			s, err := e.getSessionTx(ctx, tx, sessionID)
			if err != nil {
				return nil, err
			}
			h, err := e.placeHoldByTx(ctx, tx, sessionID, helmrtype.HoldInterrupt, "", issuer, now)
			if err != nil {
				return nil, err
			}
			if _, err := e.appendEvent(ctx, tx, sessionID, "", helmrtype.EventSessionInterrupt, map[string]any{"hold_id": h.ID}, now); err != nil {
				return nil, err
			}
			tree, err := treeTx(ctx, tx, sessionID)
			if err != nil {
				return nil, err
			}
			if running, err = runningInTx(ctx, tx, tree); err != nil {
				return nil, err
			}
			if err := e.announceInterrupts(ctx, tx, running); err != nil {
				return nil, err
			}
			// A closing Session cannot drain held Turns: they are cancelled.
			for _, id := range tree {
				if err := e.convergeCloseTx(ctx, tx, id, now); err != nil {
					return nil, err
				}
			}
			_ = s
			return &helmrtype.SessionControlReceipt{ID: NewID(), SessionID: sessionID, Status: "accepted", HoldID: h.ID}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if !replay {
		e.wake(sessionID)
		for _, t := range running {
			e.notify().TurnInterrupt(t.SessionID, t.ID)
		}
	}
	return out, nil
}

// ResumeSession releases exactly the hold holdID, which must be an active,
// releasable hold placed on this Session (an inherited hold is resumed on
// its owner). Queued Turns of the Session and of the Sessions it owns start
// again when no other hold applies.
func (e *Engine) ResumeSession(ctx context.Context, sessionID string, req helmrtype.ResumeRequest) (*helmrtype.SessionControlReceipt, error) {
	return e.resumeSession(ctx, sessionID, req, "")
}

// resumeSession is ResumeSession; a non-empty issuer (a Session acting
// through runtime MCP) may release only the holds it placed.
func (e *Engine) resumeSession(ctx context.Context, sessionID string, req helmrtype.ResumeRequest, issuer string) (*helmrtype.SessionControlReceipt, error) {
	if req.HoldID == "" {
		return nil, invalid("hold_id is required: resume releases one exact hold (see the Session's holds)")
	}
	var out *helmrtype.SessionControlReceipt
	var replay bool
	var tree []string
	err := e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		var err error
		out, replay, err = idempotent(ctx, tx, now, "sessions.resume:"+sessionID, req.IdempotencyKey, req, func() (*helmrtype.SessionControlReceipt, error) {
			if _, err := e.getSessionTx(ctx, tx, sessionID); err != nil {
				return nil, err
			}
			h, err := tx.GetHold(ctx, req.HoldID)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return nil, helmrtype.Errorf(helmrtype.CodeNotFound, "no hold %s", req.HoldID)
			case err != nil:
				return nil, err
			case h.SessionID != sessionID:
				return nil, &helmrtype.Error{Code: helmrtype.CodeConflict,
					Message: "hold " + h.ID + " belongs to session " + h.SessionID + "; resume it there",
					Details: map[string]any{"hold_session_id": h.SessionID}}
			case issuer != "" && h.IssuerSessionID != issuer:
				return nil, helmrtype.Errorf(helmrtype.CodeForbidden, "hold %s was not placed by session %s; runtime MCP resumes only the holds its caller placed", h.ID, issuer)
			case h.ReleasedAt != nil:
				return nil, helmrtype.Errorf(helmrtype.CodeConflict, "hold %s was already released", h.ID)
			case !h.CanRelease:
				return nil, helmrtype.Errorf(helmrtype.CodeConflict, "hold %s (%s) cannot be released by resume", h.ID, h.Kind)
			}
			h.ReleasedAt = &now
			if err := tx.UpdateHold(ctx, h); err != nil {
				return nil, err
			}
			if _, err := e.appendEvent(ctx, tx, sessionID, "", helmrtype.EventSessionResume, map[string]any{"hold_id": h.ID}, now); err != nil {
				return nil, err
			}
			if tree, err = treeTx(ctx, tx, sessionID); err != nil {
				return nil, err
			}
			if err := e.announceWork(ctx, tx, tree); err != nil {
				return nil, err
			}
			return &helmrtype.SessionControlReceipt{ID: NewID(), SessionID: sessionID, Status: "accepted", HoldID: h.ID}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if !replay {
		for _, id := range tree {
			e.wake(id)
			e.notify().SessionWork(id)
		}
	}
	return out, nil
}

// PlaceHold places a hold of kind on the Session (process_failed,
// recovery_gap, storage_pressure: placed by the runtime, not a client).
func (e *Engine) PlaceHold(ctx context.Context, sessionID, kind, reason string) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		_, err := e.placeHoldTx(ctx, tx, sessionID, kind, reason, e.Now())
		return err
	})
	if err == nil {
		e.wake(sessionID)
	}
	return err
}
