package supervisor

import (
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/store"
)

// SessionWork starts or wakes the Session's process when it has queued Turns.
func (s *Supervisor) SessionWork(sessionID string) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	p, ok := s.procs[sessionID]
	if !ok {
		token, hash := engine.NewSecret("hlmr_proc_")
		p = &proc{sessionID: sessionID, tokenHash: hash, launchID: engine.NewID(), recorded: make(chan struct{})}
		s.procs[sessionID] = p
		s.tokens[p.tokenHash] = p
		s.wg.Add(1)
		s.mu.Unlock()
		go s.start(p, token)
		return
	}
	s.mu.Unlock()
	s.dispatch(p)
}

// parked reports whether the process is parked now.
func (p *proc) parked() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.isParked()
}

// Reserve holds the Session's process for a Turn being admitted when it is
// ready and idle, so that admission and start share one transaction.
func (s *Supervisor) Reserve(sessionID string) engine.Reservation {
	p := s.get(sessionID)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life.phase != phaseReady || p.running != "" {
		return nil
	}
	p.running, p.recheck = "-", false
	return reservation{s: s, p: p}
}

type reservation struct {
	s *Supervisor
	p *proc
}

func (r reservation) Started(t *store.Turn, msgs []store.Message) { r.s.started(r.p, t, msgs, nil) }

// TurnMessage delivers admitted messages when the Turn runs now.
func (s *Supervisor) TurnMessage(sessionID, turnID string) {
	p := s.get(sessionID)
	if p == nil {
		return
	}
	if p.parked() {
		// Restored for the message, which it gets once it reconnects.
		if msgs, err := s.eng.PendingMessages(s.ctx, turnID); err == nil && len(msgs) > 0 {
			s.activity(p)
		}
		return
	}
	p.mu.Lock()
	running := p.running == turnID && p.life.phase == phaseReady
	if p.running == "-" {
		p.pendingMsgs = true // a start is in flight: started sends them
	}
	p.mu.Unlock()
	if running {
		s.activity(p)
		s.sendPending(p, turnID)
	}
}

// TurnInterrupt cancels the Turn if the Session's process runs it.
func (s *Supervisor) TurnInterrupt(sessionID, turnID string) {
	if p := s.get(sessionID); p != nil {
		s.cancelTurn(p, turnID, protocol.ReasonInterrupted)
	}
}

// WaitStarted notes a wait of the process's running Turn, for suspension.
func (s *Supervisor) WaitStarted(sessionID, turnID, waitID string, idle time.Duration) {
	p := s.get(sessionID)
	if p == nil {
		return
	}
	s.step(p, event{kind: evWaitStarted, wait: waitID, idle: idle})
}

// WaitResolved wakes the process if it is suspended and hands it the
// outcome.
func (s *Supervisor) WaitResolved(sessionID, turnID, waitID string, o *helmrtype.WaitOutcome) {
	p := s.get(sessionID)
	if p == nil {
		return
	}
	s.step(p, event{kind: evWaitEnded, wait: waitID})
	s.sendResolved(p, turnID, waitID, o)
}

// SessionClosed stops the closed Session's process once it is idle.
func (s *Supervisor) SessionClosed(sessionID string) {
	p := s.get(sessionID)
	if p == nil {
		return
	}
	p.mu.Lock()
	p.sessionClosed = true
	parked := p.isParked()
	p.mu.Unlock()
	if parked {
		s.discardParked(p) // never restored: its images and record go
		return
	}
	s.stopIdle(p)
}

// stopIdle asks an idle, ready process to shut down.
func (s *Supervisor) stopIdle(p *proc) {
	p.mu.Lock()
	if p.life.phase != phaseReady || p.running != "" {
		p.mu.Unlock()
		return
	}
	p.expected = true
	acts := s.applyLocked(p, event{kind: evStop})
	p.mu.Unlock()
	s.carry(p, acts)
	s.send(p, &protocol.Msg{Type: protocol.TypeShutdown})
}
