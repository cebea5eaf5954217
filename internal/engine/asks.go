package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// askOutcome is the outcome of a wait on a question, nil while pending.
func askOutcome(a *store.Ask) *helmrtype.WaitOutcome {
	switch a.Status {
	case helmrtype.AskResponded:
		o := &helmrtype.WaitOutcome{Status: helmrtype.OutcomeResolved, Value: a.Answer}
		if len(a.RespondedBy) > 0 {
			o.RespondedBy = &helmrtype.Responder{}
			json.Unmarshal(a.RespondedBy, o.RespondedBy)
		}
		return o
	case helmrtype.AskCancelled:
		return &helmrtype.WaitOutcome{Status: helmrtype.OutcomeFailed, Error: helmrtype.Errorf(helmrtype.CodeAskNotPending, "the question was cancelled")}
	}
	return nil
}

func askState(a *store.Ask) (helmrtype.AskState, error) {
	st := helmrtype.AskState{ID: a.ID, SessionID: a.SessionID, TurnID: a.TurnID, Status: a.Status, Answer: a.Answer,
		ResponseID: a.ResponseID, CreatedAt: a.CreatedAt}
	if err := json.Unmarshal(a.Question, &st.Question); err != nil {
		return st, err
	}
	if len(a.RespondedBy) > 0 {
		st.RespondedBy = &helmrtype.Responder{}
		if err := json.Unmarshal(a.RespondedBy, st.RespondedBy); err != nil {
			return st, err
		}
	}
	switch a.Status {
	case helmrtype.AskResponded:
		st.RespondedAt = a.ResolvedAt
	case helmrtype.AskCancelled:
		st.CancelledAt = a.ResolvedAt
	}
	return st, nil
}

// Ask records a question a running Turn asks a person. Only root Sessions
// may ask. The question counts toward the Turn's output budget. A repeat
// (same op) is acknowledged without effect.
func (e *Engine) Ask(ctx context.Context, sessionID, turnID string, op int64, id string, q *helmrtype.Question) error {
	if id == "" {
		return invalid("ask needs an id")
	}
	if err := q.Check(); err != nil {
		return err
	}
	raw, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return e.store.Update(ctx, func(tx store.Tx) error {
		t, err := e.runningTurnTx(ctx, tx, sessionID, turnID)
		if err != nil {
			return err
		}
		if rep, err := opRepeat(t, op); rep || err != nil {
			return err
		}
		s, err := e.getSessionTx(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		if s.ParentSessionID != "" {
			return helmrtype.Errorf(helmrtype.CodeForbidden, "only root sessions may ask people; this session has a parent, so report the need to the ownership root")
		}
		if t.OutputBytes+int64(len(raw)) > helmrtype.MaxTurnOutputBytes {
			return &helmrtype.Error{Code: helmrtype.CodeLimitExceeded, Message: "the question would exceed the turn's output budget",
				Details: map[string]any{"used": t.OutputBytes, "size": len(raw)}}
		}
		t.OutputBytes += int64(len(raw))
		t.Waited = true
		if err := tx.UpdateTurn(ctx, t); err != nil {
			return err
		}
		now := e.Now()
		if err := tx.InsertAsk(ctx, &store.Ask{ID: id, SessionID: sessionID, TurnID: turnID, Status: helmrtype.AskPending,
			Question: raw, CreatedAt: now}); err != nil {
			if errors.Is(err, store.ErrDuplicate) {
				return invalid("question %s exists", id)
			}
			return err
		}
		_, err = e.appendEvent(ctx, tx, sessionID, turnID, helmrtype.EventAskCreated, map[string]any{"ask_id": id, "question": json.RawMessage(raw)}, now)
		return err
	})
}

// GetAsk returns one question of a Turn.
func (e *Engine) GetAsk(ctx context.Context, sessionID, turnID, askID string) (*helmrtype.AskState, error) {
	var out helmrtype.AskState
	err := e.store.View(ctx, func(tx store.Tx) error {
		a, err := e.askTx(ctx, tx, sessionID, turnID, askID)
		if err != nil {
			return err
		}
		out, err = askState(a)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func (e *Engine) askTx(ctx context.Context, tx store.Tx, sessionID, turnID, askID string) (*store.Ask, error) {
	a, err := tx.GetAsk(ctx, askID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (a.SessionID != sessionID || a.TurnID != turnID)) {
		return nil, notFound("question", askID)
	}
	return a, err
}

// ListAsks returns a Turn's questions, oldest first, a page at a time.
func (e *Engine) ListAsks(ctx context.Context, sessionID, turnID, cursor string, limit int) (*helmrtype.AskPage, error) {
	limit, err := pageLimit(limit, 100)
	if err != nil {
		return nil, err
	}
	out := &helmrtype.AskPage{Asks: []helmrtype.AskState{}}
	err = e.store.View(ctx, func(tx store.Tx) error {
		if _, err := e.getTurnTx(ctx, tx, sessionID, turnID); err != nil {
			return err
		}
		rows, err := tx.ListAsks(ctx, turnID, cursor, limit+1)
		if err != nil {
			return err
		}
		rows, out.NextCursor = trimPage(rows, limit, func(a *store.Ask) string { return a.ID })
		for i := range rows {
			st, err := askState(&rows[i])
			if err != nil {
				return err
			}
			out.Asks = append(out.Asks, st)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RespondAsk answers a pending question. A retry with the same response ID
// and answer returns the same result; any other answer to an answered
// question is a conflict, and a cancelled question takes no answer.
func (e *Engine) RespondAsk(ctx context.Context, sessionID, turnID, askID string, req helmrtype.AskRespond, by helmrtype.Responder) (*helmrtype.AskState, error) {
	if req.ResponseID == "" || len(req.ResponseID) > 256 {
		return nil, invalid("response_id is required (at most 256 bytes): reuse it to retry safely")
	}
	var out helmrtype.AskState
	var rs []resolved
	err := e.store.Update(ctx, func(tx store.Tx) error {
		rs = nil
		a, err := e.askTx(ctx, tx, sessionID, turnID, askID)
		if err != nil {
			return err
		}
		var q helmrtype.Question
		if err := json.Unmarshal(a.Question, &q); err != nil {
			return err
		}
		answer, err := q.CheckAnswer(req.Answer)
		if err != nil {
			return err
		}
		switch a.Status {
		case helmrtype.AskCancelled:
			return helmrtype.Errorf(helmrtype.CodeAskNotPending, "question %s was cancelled; it takes no answer", askID)
		case helmrtype.AskResponded:
			// Both answers are canonical (CheckAnswer): bytes compare.
			if a.ResponseID == req.ResponseID && bytes.Equal(answer, a.Answer) {
				out, err = askState(a)
				return err
			}
			return helmrtype.Errorf(helmrtype.CodeConflict, "question %s is already answered", askID)
		}
		now := e.Now()
		byRaw, _ := json.Marshal(by)
		a.Status, a.Answer, a.RespondedBy, a.ResponseID, a.ResolvedAt = helmrtype.AskResponded, answer, byRaw, req.ResponseID, &now
		if err := tx.UpdateAsk(ctx, a); err != nil {
			return err
		}
		if _, err := e.appendEvent(ctx, tx, sessionID, turnID, helmrtype.EventAskResponded,
			map[string]any{"ask_id": askID, "answer": json.RawMessage(answer), "responded_by": by}, now); err != nil {
			return err
		}
		if rs, err = e.resolveTargetTx(ctx, tx, askID, askOutcome(a), now); err != nil {
			return err
		}
		out, err = askState(a)
		return err
	})
	if err != nil {
		return nil, err
	}
	e.wake(sessionID)
	e.announce(rs)
	return &out, nil
}

// ListAllAsks returns the questions of every Session with the status
// (pending, responded or cancelled; "" for all), newest first, a page at
// a time: the inbox of the people who answer them.
func (e *Engine) ListAllAsks(ctx context.Context, status, cursor string, limit int) (*helmrtype.AskPage, error) {
	switch status {
	case "", helmrtype.AskPending, helmrtype.AskResponded, helmrtype.AskCancelled:
	default:
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "status must be pending, responded or cancelled",
			Details: map[string]any{"status": status}}
	}
	limit, err := pageLimit(limit, 100)
	if err != nil {
		return nil, err
	}
	rows, err := read(ctx, e.store, func(tx store.Tx) ([]store.Ask, error) { return tx.ListAsksByStatus(ctx, status, cursor, limit+1) })
	if err != nil {
		return nil, err
	}
	out := &helmrtype.AskPage{Asks: []helmrtype.AskState{}}
	rows, out.NextCursor = trimPage(rows, limit, func(a *store.Ask) string { return a.ID })
	for i := range rows {
		st, err := askState(&rows[i])
		if err != nil {
			return nil, err
		}
		out.Asks = append(out.Asks, st)
	}
	return out, nil
}

// GetAskByID returns a question by its ID alone, whatever its Session
// and Turn.
func (e *Engine) GetAskByID(ctx context.Context, askID string) (*helmrtype.AskState, error) {
	a, err := read(ctx, e.store, func(tx store.Tx) (*store.Ask, error) { return tx.GetAsk(ctx, askID) })
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("question", askID)
	}
	if err != nil {
		return nil, err
	}
	st, err := askState(a)
	if err != nil {
		return nil, err
	}
	return &st, nil
}
