package engine

import (
	"context"
	"errors"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// SessionCloser is told when a Session is closed, so that its idle process
// can be stopped. The supervisor implements it.
type SessionCloser interface {
	SessionClosed(sessionID string)
}

// cancelQueuedTx cancels a Session's queued Turns.
func (e *Engine) cancelQueuedTx(ctx context.Context, tx store.Tx, sessionID, why string, now time.Time) error {
	for after := int64(0); ; {
		page, err := tx.ListTurns(ctx, sessionID, after, 100)
		if err != nil {
			return err
		}
		for i := range page {
			t := &page[i]
			after = t.Sequence
			if t.Status != helmrtype.TurnQueued {
				continue
			}
			t.Status, t.TerminalAt = helmrtype.TurnCancelled, &now
			t.ErrorCode, t.ErrorMessage = string(helmrtype.CodeCancelled), why
			if err := tx.UpdateTurn(ctx, t); err != nil {
				return err
			}
			noteTurn(tx, t)
			if _, err := e.appendEvent(ctx, tx, sessionID, t.ID, helmrtype.EventTurnCancelled,
				map[string]any{"error": helmrtype.TurnError{Code: helmrtype.CodeCancelled, Message: why}}, now); err != nil {
				return err
			}
			msgs, err := tx.PendingMessages(ctx, t.ID)
			if err != nil {
				return err
			}
			for j := range msgs {
				if err := e.rejectMessageTx(ctx, tx, &msgs[j], "turn_cancelled", why, now); err != nil {
					return err
				}
			}
		}
		if len(page) < 100 {
			return nil
		}
	}
}

// convergeCloseTx moves a closing Session on: held queued Turns cannot
// drain and are cancelled; with no running or queued Turn left it is
// closed. It reports whether it closed the Session.
func (e *Engine) convergeCloseTx(ctx context.Context, tx store.Tx, sessionID string, now time.Time) error {
	_, err := e.closeIfDrainedTx(ctx, tx, sessionID, now)
	return err
}

func (e *Engine) closeIfDrainedTx(ctx context.Context, tx store.Tx, sessionID string, now time.Time) (bool, error) {
	s, err := e.getSessionTx(ctx, tx, sessionID)
	if err != nil || s.Status != helmrtype.SessionClosing {
		return false, err
	}
	held, err := e.heldTx(ctx, tx, s.ID)
	if err != nil {
		return false, err
	}
	if held {
		if err := e.cancelQueuedTx(ctx, tx, sessionID, "the session is closing and its queued turns are held", now); err != nil {
			return false, err
		}
	}
	t, err := tx.ActiveTurn(ctx, sessionID)
	if err == nil || !errors.Is(err, store.ErrNotFound) {
		return false, err // work left to drain
	}
	s.Status = helmrtype.SessionClosed
	if err := tx.UpdateSession(ctx, s); err != nil {
		return false, err
	}
	_ = t
	_, err = e.appendEvent(ctx, tx, sessionID, "", helmrtype.EventSessionClosed, nil, now)
	return err == nil, err
}

// CloseSession stops new admission and lets the Session drain the work
// that can run: queued Turns run in order unless a hold applies, in which
// case they are cancelled; pending questions are cancelled. The Session is
// closing until nothing is left, then closed. Closing a closing or closed
// Session returns its status and changes nothing.
func (e *Engine) CloseSession(ctx context.Context, sessionID string, req helmrtype.ControlRequest) (*helmrtype.SessionStatusReceipt, error) {
	var out *helmrtype.SessionStatusReceipt
	var rs []resolved
	err := e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		rs = nil
		var err error
		out, _, err = idempotent(ctx, tx, now, "sessions.close:"+sessionID, req.IdempotencyKey, req, func() (*helmrtype.SessionStatusReceipt, error) {
			s, err := e.getSessionTx(ctx, tx, sessionID)
			if err != nil {
				return nil, err
			}
			if s.Status != helmrtype.SessionOpen {
				return &helmrtype.SessionStatusReceipt{SessionID: sessionID, Status: s.Status}, nil
			}
			s.Status = helmrtype.SessionClosing
			if err := tx.UpdateSession(ctx, s); err != nil {
				return nil, err
			}
			if _, err := e.appendEvent(ctx, tx, sessionID, "", helmrtype.EventSessionClose, nil, now); err != nil {
				return nil, err
			}
			if rs, err = e.cancelPendingAsksTx(ctx, tx, sessionID, "the session is closing", now); err != nil {
				return nil, err
			}
			closed, err := e.closeIfDrainedTx(ctx, tx, sessionID, now)
			if err != nil {
				return nil, err
			}
			st := helmrtype.SessionClosing
			if closed {
				st = helmrtype.SessionClosed
			}
			return &helmrtype.SessionStatusReceipt{SessionID: sessionID, Status: st}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	e.announce(rs)
	e.afterClose(sessionID, out.Status)
	return out, nil
}

// afterClose wakes watchers and stops a closed Session's process.
func (e *Engine) afterClose(sessionID, status string) {
	e.wake(sessionID)
	if status == helmrtype.SessionClosed {
		if c, ok := e.notify().(SessionCloser); ok {
			c.SessionClosed(sessionID)
		}
	}
}

// cancelPendingAsksTx cancels the pending questions of the Session's
// running Turn, ending the waits on them.
func (e *Engine) cancelPendingAsksTx(ctx context.Context, tx store.Tx, sessionID, why string, now time.Time) ([]resolved, error) {
	t, err := tx.ActiveTurn(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && t.Status != helmrtype.TurnRunning) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	asks, err := tx.PendingAsks(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	var rs []resolved
	for i := range asks {
		a := &asks[i]
		a.Status, a.ResolvedAt = helmrtype.AskCancelled, &now
		if err := tx.UpdateAsk(ctx, a); err != nil {
			return nil, err
		}
		if _, err := e.appendEvent(ctx, tx, sessionID, t.ID, helmrtype.EventAskCancelled, map[string]any{"ask_id": a.ID, "reason": why}, now); err != nil {
			return nil, err
		}
		r, err := e.resolveTargetTx(ctx, tx, a.ID, askOutcome(a), now)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r...)
	}
	return rs, nil
}

// CancelSession cancels the work of the Session and every Session it owns:
// queued Turns are cancelled, running Turns are asked to stop (they settle
// cancelled), and each Session is closed. Cancelling a closed Session
// returns its status and changes nothing.
func (e *Engine) CancelSession(ctx context.Context, sessionID string, req helmrtype.ControlRequest) (*helmrtype.SessionStatusReceipt, error) {
	var out *helmrtype.SessionStatusReceipt
	var running []store.Turn
	var closed []string
	err := e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		running, closed = nil, nil
		var err error
		out, _, err = idempotent(ctx, tx, now, "sessions.cancel:"+sessionID, req.IdempotencyKey, req, func() (*helmrtype.SessionStatusReceipt, error) {
			s, err := e.getSessionTx(ctx, tx, sessionID)
			if err != nil {
				return nil, err
			}
			if s.Status == helmrtype.SessionClosed {
				return &helmrtype.SessionStatusReceipt{SessionID: sessionID, Status: s.Status}, nil
			}
			if _, err := e.appendEvent(ctx, tx, sessionID, "", helmrtype.EventSessionCancel, nil, now); err != nil {
				return nil, err
			}
			tree, err := treeTx(ctx, tx, sessionID)
			if err != nil {
				return nil, err
			}
			for _, id := range tree {
				cs, err := e.getSessionTx(ctx, tx, id)
				if err != nil {
					return nil, err
				}
				if cs.Status == helmrtype.SessionClosed {
					continue
				}
				if err := e.cancelQueuedTx(ctx, tx, id, "the session was cancelled", now); err != nil {
					return nil, err
				}
				cs.Status = helmrtype.SessionClosed
				if err := tx.UpdateSession(ctx, cs); err != nil {
					return nil, err
				}
				if _, err := e.appendEvent(ctx, tx, id, "", helmrtype.EventSessionCancelled, nil, now); err != nil {
					return nil, err
				}
				closed = append(closed, id)
			}
			if running, err = runningInTx(ctx, tx, tree); err != nil {
				return nil, err
			}
			if err := e.announceInterrupts(ctx, tx, running); err != nil {
				return nil, err
			}
			return &helmrtype.SessionStatusReceipt{SessionID: sessionID, Status: helmrtype.SessionClosed}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, t := range running {
		e.notify().TurnInterrupt(t.SessionID, t.ID)
	}
	for _, id := range closed {
		e.afterClose(id, helmrtype.SessionClosed)
	}
	return out, nil
}

// IdleHorizon is how far ahead the engine keeps timers for idle closes.
// A Session whose closeAfterIdle runs out later has its deadline only in
// the store (indexed), and SweepIdle arms its timer once it comes within
// the horizon: call SweepIdle more often than this.
const IdleHorizon = 2 * time.Minute

// idleDeadlineBatch is how many idle deadlines one read returns.
const idleDeadlineBatch = 500

// SweepIdle closes every open Session that has been idle (no queued or
// running Turn) for its closeAfterIdle, by the engine's clock, arms the
// timers of those whose close comes within IdleHorizon, and returns how
// many it closed. It reads only the deadlines due within the horizon
// from the store's index, never every Session. The control plane sweeps
// every 30 s (Sessions whose timer ran on a node that stopped are
// closed too); tests with an injected clock sweep after moving it.
func (e *Engine) SweepIdle(ctx context.Context) (int, error) {
	now := e.Now()
	var due []string
	err := e.forIdleDeadlines(ctx, now.Add(IdleHorizon), func(d store.IdleDeadline) {
		if now.Before(d.CloseAt) {
			e.armIdleCloseAt(d.SessionID, d.CloseAt)
		} else {
			due = append(due, d.SessionID)
		}
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range due {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		closed, err := e.closeIdle(ctx, id, now)
		if err != nil {
			return n, err
		}
		if closed {
			n++
		}
	}
	return n, nil
}

// forIdleDeadlines calls fn with the idle deadline of every open Session
// that closes by before, in pages read from the store's index, each in a
// read of its own.
func (e *Engine) forIdleDeadlines(ctx context.Context, before time.Time, fn func(store.IdleDeadline)) error {
	for after := (store.IdleDeadline{}); ; {
		var page []store.IdleDeadline
		err := e.store.View(ctx, func(tx store.Tx) error {
			var err error
			page, err = tx.IdleDeadlines(ctx, before, after, idleDeadlineBatch)
			return err
		})
		if err != nil {
			return err
		}
		for _, d := range page {
			fn(d)
		}
		if len(page) < idleDeadlineBatch {
			return nil
		}
		after = page[len(page)-1]
	}
}

// idleCloseAt is when an idle Session's closeAfterIdle runs out (false
// when it is busy or never closes after idling).
func idleCloseAt(s *store.Session) (time.Time, bool) {
	if s.IdleSince == nil {
		return time.Time{}, false
	}
	return idleDeadline(*s.IdleSince, s.CloseAfterIdle)
}

// idleDeadline is when a Session idle since since closes by its
// closeAfterIdle (false when it never does).
func idleDeadline(since time.Time, closeAfterIdle string) (time.Time, bool) {
	d, never, err := helmrtype.ParseRetention(closeAfterIdle)
	if err != nil || never {
		return time.Time{}, false
	}
	return since.Add(d), true
}

// setIdle marks s idle since since (busy with nil), with the deadline of
// its idle close that the store indexes.
func setIdle(s *store.Session, since *time.Time) {
	s.IdleSince, s.IdleCloseAt = since, nil
	if at, ok := idleCloseAt(s); ok {
		s.IdleCloseAt = &at
	}
}

// armIdleClose arms the timer that closes s when its closeAfterIdle runs
// out, replacing the one of an earlier idle period, when that is within
// IdleHorizon; a later one is armed by SweepIdle. Like a wait's deadline
// it is kept in the store (idle_close_at); what it runs checks the store
// again, so a Session that got work meanwhile stays.
func (e *Engine) armIdleClose(s *store.Session) {
	if at, ok := idleCloseAt(s); ok {
		e.armIdleCloseAt(s.ID, at)
	}
}

// armIdleCloseAt arms the idle close of Session id at at, when that is
// within IdleHorizon.
func (e *Engine) armIdleCloseAt(id string, at time.Time) {
	if at.After(e.Now().Add(IdleHorizon)) {
		return
	}
	e.sched.at(at, "idle:"+id, func() {
		ctx := context.Background()
		if _, err := e.closeIdle(ctx, id, e.Now()); err != nil {
			e.log.Error("close idle session", "session", id, "err", err)
		}
	})
}

// closeIdle closes one Session that is still open and idle past its
// closeAfterIdle (checked again in the transaction).
func (e *Engine) closeIdle(ctx context.Context, sessionID string, now time.Time) (bool, error) {
	var closed bool
	err := e.store.Update(ctx, func(tx store.Tx) error {
		closed = false
		s, err := e.getSessionTx(ctx, tx, sessionID)
		if err != nil || s.Status != helmrtype.SessionOpen || s.IdleSince == nil {
			return err
		}
		at, ok := idleCloseAt(s)
		if ok != (s.IdleCloseAt != nil) || (ok && !s.IdleCloseAt.Equal(at)) {
			// The stored deadline is not the true one (a Session idle
			// before deadlines were stored): store the true one.
			setIdle(s, s.IdleSince)
			if err := tx.SetSessionIdleSince(ctx, sessionID, s.IdleSince, s.IdleCloseAt); err != nil {
				return err
			}
		}
		if !ok {
			return nil
		}
		if now.Before(at) {
			// Early (clock skew between timer and clock): try again.
			defer e.armIdleClose(s)
			return nil
		}
		s.Status = helmrtype.SessionClosing
		if err := tx.UpdateSession(ctx, s); err != nil {
			return err
		}
		if _, err := e.appendEvent(ctx, tx, sessionID, "", helmrtype.EventSessionClose,
			map[string]any{"reason": "close_after_idle", "close_after_idle": s.CloseAfterIdle}, now); err != nil {
			return err
		}
		closed, err = e.closeIfDrainedTx(ctx, tx, sessionID, now)
		return err
	})
	if err == nil && closed {
		e.afterClose(sessionID, helmrtype.SessionClosed)
	}
	return closed, err
}
