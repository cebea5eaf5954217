package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// SendMessage admits a message to exactly one Turn. It is delivered when the
// Turn runs and its handler has registered; a Turn that settles first
// rejects it.
func (e *Engine) SendMessage(ctx context.Context, sessionID, turnID string, req helmrtype.MessageRequest, caller Caller) (*helmrtype.MessageReceipt, error) {
	content, err := helmrtype.ParseContent(req.Content, helmrtype.MaxContentBytes, true)
	if err != nil {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: "message content: " + err.Error()}
	}
	raw, _ := json.Marshal(content)
	src, _ := json.Marshal(caller.Source)
	var out *helmrtype.MessageReceipt
	var replay bool
	err = e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		var err error
		out, replay, err = idempotent(ctx, tx, now, "messages:"+turnID, req.IdempotencyKey, req, func() (*helmrtype.MessageReceipt, error) {
			t, err := e.getTurnTx(ctx, tx, sessionID, turnID)
			if err != nil {
				return nil, err
			}
			if helmrtype.TurnTerminal(t.Status) {
				return nil, helmrtype.Errorf(helmrtype.CodeTurnSettled, "turn %s is %s and takes no messages", t.ID, t.Status)
			}
			m := &store.Message{ID: NewID(), SessionID: sessionID, TurnID: turnID, Content: raw, Source: src, Status: "admitted", CreatedAt: now}
			if err := tx.InsertMessage(ctx, m); err != nil {
				return nil, err
			}
			if _, err := e.appendEvent(ctx, tx, sessionID, turnID, helmrtype.EventMessageAdmitted,
				map[string]any{"message_id": m.ID, "content": json.RawMessage(raw), "source": caller.Source}, now); err != nil {
				return nil, err
			}
			return &helmrtype.MessageReceipt{ID: m.ID, Status: "accepted"}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if !replay {
		e.wake(sessionID)
		e.notify().TurnMessage(sessionID, turnID)
	}
	return out, nil
}

// PendingMessages returns the messages of a Turn not yet delivered.
func (e *Engine) PendingMessages(ctx context.Context, turnID string) ([]store.Message, error) {
	var out []store.Message
	err := e.store.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.PendingMessages(ctx, turnID)
		return err
	})
	return out, err
}

// MessageDelivered records that the Turn's handler accepted a message.
func (e *Engine) MessageDelivered(ctx context.Context, sessionID, messageID string) error {
	return e.messageOutcome(ctx, sessionID, messageID, func(tx store.Tx, m *store.Message, now time.Time) error {
		m.Status = "delivered"
		if err := tx.UpdateMessage(ctx, m); err != nil {
			return err
		}
		_, err := e.appendEvent(ctx, tx, sessionID, m.TurnID, helmrtype.EventMessageDelivered, map[string]any{"message_id": m.ID}, now)
		return err
	})
}

// MessageRejected records that a message was not delivered, with a reason
// such as message_rejected or callback_failed.
func (e *Engine) MessageRejected(ctx context.Context, sessionID, messageID, reason, message string) error {
	return e.messageOutcome(ctx, sessionID, messageID, func(tx store.Tx, m *store.Message, now time.Time) error {
		return e.rejectMessageTx(ctx, tx, m, reason, message, now)
	})
}

func (e *Engine) messageOutcome(ctx context.Context, sessionID, messageID string, fn func(store.Tx, *store.Message, time.Time) error) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		m, err := tx.GetMessage(ctx, messageID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && m.SessionID != sessionID) {
			return notFound("message", messageID)
		}
		if err != nil {
			return err
		}
		if m.Status != "admitted" {
			return nil // already settled: a repeated report
		}
		return fn(tx, m, e.Now())
	})
	if err == nil {
		e.wake(sessionID)
	}
	return err
}

func (e *Engine) rejectMessageTx(ctx context.Context, tx store.Tx, m *store.Message, reason, message string, now time.Time) error {
	m.Status = "rejected"
	if err := tx.UpdateMessage(ctx, m); err != nil {
		return err
	}
	data := map[string]any{"message_id": m.ID, "reason": reason, "delivery": "not_delivered"}
	if message != "" {
		data["message"] = message
	}
	_, err := e.appendEvent(ctx, tx, m.SessionID, m.TurnID, helmrtype.EventMessageRejected, data, now)
	return err
}

// InterruptTurn asks the running Turn to stop, without a hold. The receipt
// confirms acceptance, not that execution stopped.
func (e *Engine) InterruptTurn(ctx context.Context, sessionID, turnID string, req helmrtype.ControlRequest) (*helmrtype.TurnInterruptReceipt, error) {
	var out *helmrtype.TurnInterruptReceipt
	var replay bool
	err := e.store.Update(ctx, func(tx store.Tx) error {
		var err error
		out, replay, err = idempotent(ctx, tx, e.Now(), "turns.interrupt:"+turnID, req.IdempotencyKey, req, func() (*helmrtype.TurnInterruptReceipt, error) {
			t, err := e.runningTurnTx(ctx, tx, sessionID, turnID)
			if err != nil {
				return nil, err
			}
			// Recorded, so that a process that reattaches after a restart,
			// or a node that missed the notice, still stops it.
			if !t.InterruptRequested {
				t.InterruptRequested = true
				if err := tx.UpdateTurn(ctx, t); err != nil {
					return nil, err
				}
			}
			// The node that runs the Turn may be another one.
			if err := e.announceInterrupts(ctx, tx, []store.Turn{*t}); err != nil {
				return nil, err
			}
			return &helmrtype.TurnInterruptReceipt{ID: NewID(), SessionID: sessionID, TurnID: turnID, Status: "accepted"}, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if !replay {
		e.notify().TurnInterrupt(sessionID, turnID)
	}
	return out, nil
}
