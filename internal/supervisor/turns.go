package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// dispatch starts the next queued Turn when the process is ready and idle.
// A dispatch that finds another one in flight marks a recheck, so work
// admitted meanwhile is never missed.
func (s *Supervisor) dispatch(p *proc) {
	p.mu.Lock()
	if p.isParked() {
		p.mu.Unlock()
		// Restored when a Turn waits for it; it runs it once it
		// reconnects ready.
		if queued, err := s.eng.QueuedWork(s.ctx, p.sessionID); err == nil && queued {
			s.activity(p)
		}
		return
	}
	if p.life.phase != phaseReady {
		p.mu.Unlock()
		return
	}
	if p.running != "" {
		p.recheck = true
		p.mu.Unlock()
		return
	}
	// Reserve the slot so concurrent dispatches do not both start a Turn.
	p.running = "-"
	p.recheck = false
	p.mu.Unlock()
	t, msgs, err := s.eng.StartNextTurn(s.ctx, p.sessionID)
	s.started(p, t, msgs, err)
}

// started sends a Turn that the engine marked running to the process, whose
// slot the caller reserved ("-"). With no Turn it frees the slot, and
// dispatches again when work arrived meanwhile.
func (s *Supervisor) started(p *proc, t *store.Turn, msgs []store.Message, err error) {
	if t != nil {
		s.activity(p) // a suspended Actor is thawed before its Turn arrives
	}
	// Lock order everywhere: writeMu before mu. The write lock is held from
	// before the slot is published, so anything sent for this Turn goes out
	// after turn.start.
	p.writeMu.Lock()
	p.mu.Lock()
	if err != nil || t == nil {
		p.writeMu.Unlock()
		p.running = ""
		again := p.recheck && err == nil
		p.recheck = false
		closed := p.sessionClosed
		p.mu.Unlock()
		if closed {
			s.stopIdle(p)
			return
		}
		switch {
		case errors.Is(err, store.ErrUnavailable) && s.ctx.Err() == nil:
			// The store logs the outage once; the queued Turn is looked
			// for again shortly, as nothing else may announce it.
			s.clock.AfterFunc(time.Second, func() { s.dispatch(p) })
		case err != nil && s.ctx.Err() == nil:
			s.log.Error("start turn", "session", p.sessionID, "err", err)
		}
		if again {
			s.dispatch(p)
		}
		return
	}
	if p.life.phase == phaseDead {
		// The process ended while the Turn was being started: its exit
		// could not see the Turn, so it settles here.
		p.writeMu.Unlock()
		p.running = ""
		p.mu.Unlock()
		ctx := context.Background()
		// The hold comes from the exit's own handling.
		s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnFailed, helmrtype.CodeProcessExited,
			"the session process exited as the turn started", "")
		return
	}
	p.running = t.ID
	p.trace, p.spans = t.TraceParent, 0
	start := &protocol.TurnStart{ID: t.ID, Sequence: t.Sequence, CreatedAt: t.CreatedAt, Input: t.Input}
	var span trace.Span
	if t.TraceParent != "" {
		start.TraceParent = obs.TurnTraceParent(t.TraceParent, t.ID)
		_, span, _ = s.eng.Tracer().StartTurnChild(s.ctx, t.TraceParent, t.ID, obs.SpanDispatch,
			attribute.String(obs.AttrSessionID, t.SessionID), attribute.String(obs.AttrTurnID, t.ID))
	}
	json.Unmarshal(t.Source, &start.Source)
	start.Deadline = s.armDeadline(p, t)
	cancelReason, cancelPending := p.pendingCancel[t.ID]
	msgPending := p.pendingMsgs
	p.pendingCancel, p.pendingMsgs = nil, false
	p.sentMsgs = map[string]bool{}
	for i := range msgs {
		p.sentMsgs[msgs[i].ID] = true
	}
	p.mu.Unlock()
	err = s.write(p, &protocol.Msg{Type: protocol.TypeTurnStart, TurnID: t.ID, Turn: start})
	for i := range msgs {
		if err == nil {
			err = s.write(p, messageMsg(&msgs[i]))
		}
	}
	p.writeMu.Unlock()
	obs.EndSpan(span, "", "", err)
	if err != nil {
		// The process cannot take the Turn: end it; its exit settles the Turn.
		s.log.Warn("send turn", "session", p.sessionID, "err", err)
		p.kill()
		return
	}
	if msgPending {
		s.sendPending(p, t.ID)
	}
	if cancelPending {
		s.cancelTurn(p, t.ID, cancelReason)
	}
}

func messageMsg(m *store.Message) *protocol.Msg {
	im := &protocol.InboundMessage{ID: m.ID}
	json.Unmarshal(m.Content, &im.Content)
	json.Unmarshal(m.Source, &im.Source)
	return &protocol.Msg{Type: protocol.TypeMessage, TurnID: m.TurnID, Message: im}
}

// sendPending sends the Turn's admitted messages not yet sent to this process.
func (s *Supervisor) sendPending(p *proc, turnID string) {
	msgs, err := s.eng.PendingMessages(s.ctx, turnID)
	if err != nil {
		return
	}
	p.mu.Lock()
	var fresh []store.Message
	for _, m := range msgs {
		if p.running == turnID && !p.sentMsgs[m.ID] {
			p.sentMsgs[m.ID] = true
			fresh = append(fresh, m)
		}
	}
	p.mu.Unlock()
	for i := range fresh {
		s.send(p, messageMsg(&fresh[i]))
	}
}

// armDeadline starts the timer of the Turn's max_turn_duration, if the
// Agent has one, and returns the deadline; p.mu is held.
func (s *Supervisor) armDeadline(p *proc, t *store.Turn) *time.Time {
	d := p.launch.Agent.MaxTurnDuration
	if d == "" || t.StartedAt == nil {
		return nil
	}
	dur, err := helmrtype.ParseDuration(d)
	if err != nil {
		return nil
	}
	at := t.StartedAt.Add(dur)
	turnID := t.ID
	if p.deadline != nil {
		p.deadline.Stop() // armed before a park, or before a reattachment
	}
	p.deadline = s.clock.AfterFunc(at.Sub(s.clock.Now()), func() { s.deadlineReached(p, turnID) })
	return &at
}

func (s *Supervisor) deadlineReached(p *proc, turnID string) {
	s.eng.RecordDeadline(context.Background(), p.sessionID, turnID)
	s.cancelTurn(p, turnID, protocol.ReasonDeadline)
}

// cancelTurn asks the process to cancel a running Turn and ends the process
// if the Turn has not settled within the cleanup period.
func (s *Supervisor) cancelTurn(p *proc, turnID, reason string) {
	p.mu.Lock()
	if p.running == "-" || p.life.phase == phaseReattaching {
		// A start (or a reattach) is in flight: it applies the cancel if it
		// is this Turn.
		if p.pendingCancel == nil {
			p.pendingCancel = map[string]string{}
		}
		p.pendingCancel[turnID] = reason
		parked := p.isParked()
		p.mu.Unlock()
		if parked {
			s.activity(p) // restored: the cancel follows its reconnection
		}
		return
	}
	if p.running != turnID || p.cancelled {
		p.mu.Unlock()
		return
	}
	p.cancelled = true
	p.killTimer = s.clock.AfterFunc(CleanupPeriod+killGrace, func() {
		p.mu.Lock()
		still := p.running == turnID
		if still {
			p.drainKilled = true
		}
		p.mu.Unlock()
		if still {
			s.log.Warn("turn did not drain within the cleanup period; ending its process", "session", p.sessionID, "turn", turnID)
			p.kill()
		}
	})
	p.mu.Unlock()
	s.activity(p)
	s.send(p, &protocol.Msg{Type: protocol.TypeCancel, TurnID: turnID, Reason: reason})
}
