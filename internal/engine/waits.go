package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Wait statuses in the store.
const (
	waitWaiting  = "waiting"
	waitResolved = "resolved"
)

// WaitNotifier is told when waits start and end, to suspend and wake the
// waiting process. The supervisor implements it.
type WaitNotifier interface {
	WaitStarted(sessionID, turnID, waitID string, idle time.Duration)
	WaitResolved(sessionID, turnID, waitID string, o *helmrtype.WaitOutcome)
}

// opRepeat reports whether op was already applied to the Turn; it records
// op as the Turn's last otherwise (the caller updates the Turn).
func opRepeat(t *store.Turn, op int64) (bool, error) {
	if op < 1 {
		return false, invalid("op must be a positive number, one more than the Turn's previous operation")
	}
	if op <= t.LastOp {
		return true, nil
	}
	t.LastOp = op
	return false, nil
}

// StartWait records a durable wait of a running Turn. When the wait is
// already over (a Token completed, a question answered, a timer due) the
// outcome is returned at once and the wait is recorded resolved. A repeat
// of the same wait ID answers as the first did.
func (e *Engine) StartWait(ctx context.Context, sessionID, turnID string, op int64, req helmrtype.WaitStart) (*helmrtype.WaitOutcome, error) {
	idle, err := helmrtype.ParseIdleTimeout(req.IdleTimeout)
	if err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, invalid("wait.start needs an id")
	}
	var timeout time.Duration
	if req.Timeout != "" {
		if timeout, err = helmrtype.ParseDuration(req.Timeout); err != nil || timeout <= 0 {
			return nil, invalid("timeout %q: want a positive duration such as 30s or 15m", req.Timeout)
		}
	}
	var schema json.RawMessage
	if len(req.Schema) > 0 {
		if req.Kind != helmrtype.WaitToken {
			return nil, invalid("a schema is for token waits, not %s", req.Kind)
		}
		if schema, err = tokenSchema(req.Schema); err != nil {
			return nil, err
		}
	}
	var out *helmrtype.WaitOutcome
	var w *store.Wait
	err = e.store.Update(ctx, func(tx store.Tx) error {
		out, w = nil, nil
		if prev, err := tx.GetWait(ctx, req.ID); err == nil {
			if prev.SessionID != sessionID || prev.TurnID != turnID {
				return invalid("wait %s belongs to another turn", req.ID)
			}
			if prev.Status == waitResolved {
				out = &helmrtype.WaitOutcome{}
				return json.Unmarshal(prev.Outcome, out)
			}
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		t, err := e.runningTurnTx(ctx, tx, sessionID, turnID)
		if err != nil {
			return err
		}
		if _, err := opRepeat(t, op); err != nil {
			return err
		}
		t.Waited = true
		now := e.Now()
		nw := &store.Wait{ID: req.ID, SessionID: sessionID, TurnID: turnID, Kind: req.Kind, TargetID: req.TargetID,
			Status: waitWaiting, IdleTimeout: idle, CreatedAt: now}
		if timeout > 0 {
			d := now.Add(timeout)
			nw.Deadline = &d
		}
		switch req.Kind {
		case helmrtype.WaitTimer:
			if req.Until == nil {
				return invalid("a timer wait needs until")
			}
			u := req.Until.UTC().Truncate(time.Microsecond)
			nw.Deadline, nw.TargetID = &u, ""
		case helmrtype.WaitToken:
			tok, err := tx.GetToken(ctx, req.TargetID)
			if errors.Is(err, store.ErrNotFound) || (err == nil && tok.SessionID != sessionID) {
				return notFound("token", req.TargetID)
			}
			if err != nil {
				return err
			}
			if schema != nil && tok.Status == helmrtype.TokenPending {
				// The Token refuses completions its waiter would refuse.
				tok.Schema = schema
				if err := tx.UpdateToken(ctx, tok); err != nil {
					return err
				}
			}
			out = tokenOutcome(tok)
		case helmrtype.WaitAsk:
			a, err := tx.GetAsk(ctx, req.TargetID)
			if errors.Is(err, store.ErrNotFound) || (err == nil && a.TurnID != turnID) {
				return notFound("question", req.TargetID)
			}
			if err != nil {
				return err
			}
			out = askOutcome(a)
		default:
			return invalid("wait kind %q: want timer, token or ask", req.Kind)
		}
		if err := tx.UpdateTurn(ctx, t); err != nil {
			return err
		}
		if err := tx.InsertWait(ctx, nw); err != nil {
			return err
		}
		data := map[string]any{"wait_id": nw.ID, "kind": nw.Kind, "idle_timeout": helmrtype.FormatDuration(idle)}
		if nw.TargetID != "" {
			data["target_id"] = nw.TargetID
		}
		if nw.Deadline != nil {
			data["deadline"] = nw.Deadline
		}
		if _, err := e.appendEvent(ctx, tx, sessionID, turnID, helmrtype.EventWaitStarted, data, now); err != nil {
			return err
		}
		if out != nil {
			_, err := e.resolveWaitTx(ctx, tx, nw, out, now)
			return err
		}
		w = nw
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.wake(sessionID)
	if w != nil {
		if w.Deadline != nil {
			e.sched.at(*w.Deadline, "wait:"+w.ID, func() { e.waitDue(w.SessionID, w.ID) })
		}
		if n, ok := e.notify().(WaitNotifier); ok {
			n.WaitStarted(sessionID, turnID, w.ID, idle)
		}
	}
	return out, nil
}

// ResumeWait returns the outcome of a wait that is over, nil while it
// goes on. A reconnected process asks it for each wait it still blocks on.
func (e *Engine) ResumeWait(ctx context.Context, sessionID, waitID string) (*helmrtype.WaitOutcome, error) {
	var out *helmrtype.WaitOutcome
	err := e.store.View(ctx, func(tx store.Tx) error {
		w, err := tx.GetWait(ctx, waitID)
		if err != nil || w.SessionID != sessionID {
			return notFound("wait", waitID)
		}
		if w.Status == waitResolved {
			out = &helmrtype.WaitOutcome{}
			return json.Unmarshal(w.Outcome, out)
		}
		return nil
	})
	return out, err
}

// resolveWaitTx ends an open wait with o and records it. The wait is read
// again under its Session's lock first: two transactions racing to end it
// (a timer and a completion, on PostgreSQL) end it once; the loser gets
// false.
func (e *Engine) resolveWaitTx(ctx context.Context, tx store.Tx, w *store.Wait, o *helmrtype.WaitOutcome, now time.Time) (bool, error) {
	if _, err := tx.GetSession(ctx, w.SessionID); err != nil {
		return false, err
	}
	cur, err := tx.GetWait(ctx, w.ID)
	if err != nil {
		return false, err
	}
	if cur.Status != waitWaiting {
		return false, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return false, err
	}
	w.Status, w.Outcome, w.ResolvedAt = waitResolved, b, &now
	if err := tx.UpdateWait(ctx, w); err != nil {
		return false, err
	}
	data := map[string]any{"wait_id": w.ID, "kind": w.Kind, "status": o.Status}
	if o.Error != nil {
		data["error"] = o.Error
	}
	_, err = e.appendEvent(ctx, tx, w.SessionID, w.TurnID, helmrtype.EventWaitResolved, data, now)
	return err == nil, err
}

// resolveTx is resolveWaitTx for one wait, as the list to announce.
func (e *Engine) resolveTx(ctx context.Context, tx store.Tx, w *store.Wait, o *helmrtype.WaitOutcome, now time.Time) ([]resolved, error) {
	ok, err := e.resolveWaitTx(ctx, tx, w, o, now)
	if !ok || err != nil {
		return nil, err
	}
	return []resolved{{w, o}}, nil
}

// resolved is a wait ended in a transaction, announced after it commits.
type resolved struct {
	w *store.Wait
	o *helmrtype.WaitOutcome
}

// resolveTargetTx ends every open wait on targetID with o.
func (e *Engine) resolveTargetTx(ctx context.Context, tx store.Tx, targetID string, o *helmrtype.WaitOutcome, now time.Time) ([]resolved, error) {
	ws, err := tx.WaitsOn(ctx, targetID)
	if err != nil {
		return nil, err
	}
	out := make([]resolved, 0, len(ws))
	for i := range ws {
		r, err := e.resolveTx(ctx, tx, &ws[i], o, now)
		if err != nil {
			return nil, err
		}
		out = append(out, r...)
	}
	return out, nil
}

// announce tells watchers and the supervisor about waits that ended.
func (e *Engine) announce(rs []resolved) {
	n, _ := e.notify().(WaitNotifier)
	for _, r := range rs {
		e.sched.cancel("wait:" + r.w.ID)
		e.wake(r.w.SessionID)
		if n != nil {
			n.WaitResolved(r.w.SessionID, r.w.TurnID, r.w.ID, r.o)
		}
	}
}

// waitDue runs when a wait's deadline comes: a timer fires, another wait
// times out.
func (e *Engine) waitDue(sessionID, waitID string) {
	ctx := context.Background()
	var rs []resolved
	err := e.store.Update(ctx, func(tx store.Tx) error {
		rs = nil
		w, err := tx.GetWait(ctx, waitID)
		if err != nil || w.Status != waitWaiting {
			return err
		}
		now := e.Now()
		if w.Deadline != nil && now.Before(*w.Deadline) {
			// Early (clock skew between timer and clock): try again.
			at := *w.Deadline
			defer e.sched.at(at, "wait:"+w.ID, func() { e.waitDue(sessionID, waitID) })
			return nil
		}
		o := &helmrtype.WaitOutcome{Status: helmrtype.OutcomeResolved, Value: json.RawMessage("null")}
		if w.Kind != helmrtype.WaitTimer {
			o = &helmrtype.WaitOutcome{Status: helmrtype.OutcomeFailed, Error: helmrtype.Errorf(helmrtype.CodeWaitTimeout, "the wait timed out")}
		}
		rs, err = e.resolveTx(ctx, tx, w, o, now)
		return err
	})
	if err != nil {
		e.log.Error("wait deadline", "wait", waitID, "err", err)
		return
	}
	e.announce(rs)
}

// endTurnWaitsTx ends the open waits of a Turn that settles, and cancels
// its pending questions. Nothing is announced: the Turn's process is done
// with them, and their deadlines find them ended.
func (e *Engine) endTurnWaitsTx(ctx context.Context, tx store.Tx, t *store.Turn, now time.Time) error {
	ws, err := tx.OpenWaits(ctx, t.SessionID)
	if err != nil {
		return err
	}
	o := &helmrtype.WaitOutcome{Status: helmrtype.OutcomeFailed, Error: helmrtype.Errorf(helmrtype.CodeTurnSettled, "the turn settled")}
	for i := range ws {
		if ws[i].TurnID != t.ID {
			continue
		}
		if _, err := e.resolveWaitTx(ctx, tx, &ws[i], o, now); err != nil {
			return err
		}
	}
	asks, err := tx.PendingAsks(ctx, t.ID)
	if err != nil {
		return err
	}
	for i := range asks {
		a := &asks[i]
		a.Status, a.ResolvedAt = helmrtype.AskCancelled, &now
		if err := tx.UpdateAsk(ctx, a); err != nil {
			return err
		}
		if _, err := e.appendEvent(ctx, tx, a.SessionID, a.TurnID, helmrtype.EventAskCancelled,
			map[string]any{"ask_id": a.ID, "reason": "the turn " + t.Status}, now); err != nil {
			return err
		}
	}
	return nil
}

// RecordWaitEvent records a suspension or wake in the timeline: of a
// Turn's waits (waitIDs), or, without any, of an idle process (idle says
// why: "receive" for an Actor waiting in Receive, "hibernate" for
// hibernateAfterIdle).
func (e *Engine) RecordWaitEvent(ctx context.Context, sessionID, turnID, kind string, waitIDs []string, idle string) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		data := map[string]any{"wait_ids": waitIDs}
		if len(waitIDs) == 0 {
			data = map[string]any{"idle": idle}
		}
		_, err := e.appendEvent(ctx, tx, sessionID, turnID, kind, data, e.Now())
		return err
	})
	if err == nil {
		e.wake(sessionID)
	}
	return err
}

// RecordResidency records a change of the residency of the Session's
// process on its Computer (computer.residency), with the error of a park or
// a restore that failed.
func (e *Engine) RecordResidency(ctx context.Context, sessionID, turnID, computerID, residency string, failure *helmrtype.Error) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		_, err := e.appendEvent(ctx, tx, sessionID, turnID, helmrtype.EventComputerResidency,
			helmrtype.ComputerResidencyEvent{ComputerID: computerID, Residency: residency, Error: failure}, e.Now())
		return err
	})
	if err == nil {
		e.wake(sessionID)
	}
	return err
}

// OpenWaitsOf returns the open waits of a Session (all Sessions when
// empty).
func (e *Engine) OpenWaitsOf(ctx context.Context, sessionID string) ([]store.Wait, error) {
	var out []store.Wait
	err := e.store.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.OpenWaits(ctx, sessionID)
		return err
	})
	return out, err
}

// scheduleRecovered arms the deadlines of open waits (of one Session, or
// of all for "") and Token expiries kept in the store, and (for "") the
// idle closes of idle Sessions: at start, and when a node takes a Session
// over. Arming one again replaces it.
func (e *Engine) scheduleRecovered(ctx context.Context, tx store.Tx, sessionID string) error {
	ws, err := tx.OpenWaits(ctx, sessionID)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if w.Deadline != nil {
			sid, id := w.SessionID, w.ID
			e.sched.at(*w.Deadline, "wait:"+id, func() { e.waitDue(sid, id) })
		}
	}
	toks, err := tx.ExpiringTokens(ctx)
	if err != nil {
		return err
	}
	for _, t := range toks {
		id := t.ID
		e.sched.at(*t.ExpiresAt, "token:"+id, func() { e.expireToken(id) })
	}
	if sessionID != "" {
		return nil
	}
	// Idle closes due within the horizon; SweepIdle arms later ones.
	horizon := e.Now().Add(IdleHorizon)
	for after := (store.IdleDeadline{}); ; {
		page, err := tx.IdleDeadlines(ctx, horizon, after, idleDeadlineBatch)
		if err != nil {
			return err
		}
		for _, d := range page {
			e.armIdleCloseAt(d.SessionID, d.CloseAt)
		}
		if len(page) < idleDeadlineBatch {
			return nil
		}
		after = page[len(page)-1]
	}
}

// CancelWait withdraws an open wait its process no longer blocks on (its
// handler's context ended first). A repeat, or a wait already over, is
// acknowledged without effect.
func (e *Engine) CancelWait(ctx context.Context, sessionID, turnID string, op int64, waitID string) error {
	var rs []resolved
	err := e.store.Update(ctx, func(tx store.Tx) error {
		rs = nil
		t, err := e.runningTurnTx(ctx, tx, sessionID, turnID)
		if err != nil {
			return err
		}
		if rep, err := opRepeat(t, op); rep || err != nil {
			return err
		}
		if err := tx.UpdateTurn(ctx, t); err != nil {
			return err
		}
		w, err := tx.GetWait(ctx, waitID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (w.TurnID != turnID || w.Status != waitWaiting)) {
			return nil
		}
		if err != nil {
			return err
		}
		o := &helmrtype.WaitOutcome{Status: helmrtype.OutcomeFailed, Error: helmrtype.Errorf(helmrtype.CodeWaitCancelled, "the waiter stopped waiting")}
		rs, err = e.resolveTx(ctx, tx, w, o, e.Now())
		return err
	})
	if err == nil {
		e.announce(rs)
	}
	return err
}
