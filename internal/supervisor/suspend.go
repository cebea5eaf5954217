package supervisor

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Hot wait and suspension. A Turn that waits (a timer, a Token, a question)
// keeps its process hot for the wait's idle timeout. When the process has
// open waits and has been quiet (no operation from it, nothing sent to it)
// for the longest idle timeout among them, its process tree is frozen: it
// uses no CPU. Anything for it (a wait's outcome, a message, a cancel, a
// shutdown) thaws it first. The wait's own deadlines run in the engine, so
// a frozen process still gets its timeout on time.

// activity marks the process busy now: a frozen process is thawed and the
// idle clock restarts.
func (s *Supervisor) activity(p *proc) {
	p.mu.Lock()
	if p.freeze == nil {
		p.mu.Unlock()
		return
	}
	p.lastActive = time.Now()
	wasFrozen := p.frozen
	p.frozen = false
	h, turn := p.freeze, p.running
	var ids []string
	if wasFrozen {
		ids = slices.Sorted(maps.Keys(p.waits))
	}
	if len(p.waits) > 0 || p.idleTimer != nil {
		s.armIdle(p)
	}
	p.mu.Unlock()
	if wasFrozen && h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Thaw(ctx); err != nil {
			s.log.Error("thaw session process", "session", p.sessionID, "err", err)
		}
		s.eng.RecordWaitEvent(ctx, p.sessionID, turn, helmrtype.EventWaitResumed, ids)
	}
}

// armIdle (re)starts the idle timer; p.mu is held.
func (s *Supervisor) armIdle(p *proc) {
	if p.idleTimer != nil {
		p.idleTimer.Stop()
		p.idleTimer = nil
	}
	if len(p.waits) == 0 || p.freeze == nil {
		return
	}
	idle := maxIdle(p.waits)
	p.idleTimer = time.AfterFunc(idle, func() { s.maybeSuspend(p) })
}

func maxIdle(waits map[string]time.Duration) time.Duration {
	var m time.Duration
	for _, d := range waits {
		m = max(m, d)
	}
	return m
}

// maybeSuspend freezes the process when it still waits and has been quiet
// for the idle timeout.
func (s *Supervisor) maybeSuspend(p *proc) {
	if s.isClosing() {
		return
	}
	p.mu.Lock()
	if len(p.waits) == 0 || p.frozen || p.freeze == nil || p.state != stateReady || p.cancelled {
		p.mu.Unlock()
		return
	}
	if left := maxIdle(p.waits) - time.Since(p.lastActive); left > 0 {
		p.idleTimer = time.AfterFunc(left, func() { s.maybeSuspend(p) })
		p.mu.Unlock()
		return
	}
	p.frozen = true
	h, turn := p.freeze, p.running
	ids := slices.Sorted(maps.Keys(p.waits))
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Freeze(ctx); err != nil {
		s.log.Error("freeze session process", "session", p.sessionID, "err", err)
		h.Thaw(ctx)
		p.mu.Lock()
		p.frozen = false
		p.mu.Unlock()
		return
	}
	s.log.Debug("session process suspended", "session", p.sessionID, "waits", ids)
	s.eng.RecordWaitEvent(ctx, p.sessionID, turn, helmrtype.EventWaitSuspended, ids)
}

// Suspended reports whether the Session's process is frozen now.
func (s *Supervisor) Suspended(sessionID string) bool {
	p := s.get(sessionID)
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

// attachFreezer puts a new or adopted process under the freezer; an
// adopted one may have been left frozen by the previous control plane, so
// it is thawed.
func (s *Supervisor) attachFreezer(p *proc, pid int) {
	if s.opts.Freezer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := s.opts.Freezer.Attach(ctx, p.sessionID, pid, pid)
	if err != nil {
		s.log.Warn("the session process cannot be suspended", "session", p.sessionID, "err", err)
		return
	}
	h.Thaw(ctx)
	p.mu.Lock()
	p.freeze = h
	p.mu.Unlock()
}

// releaseFreezer lets go of an ended process's freezer.
func (s *Supervisor) releaseFreezer(p *proc) {
	p.mu.Lock()
	h := p.freeze
	p.freeze = nil
	p.mu.Unlock()
	if h != nil {
		if err := h.Release(); err != nil {
			s.log.Debug("release freezer", "session", p.sessionID, "err", err)
		}
	}
}
