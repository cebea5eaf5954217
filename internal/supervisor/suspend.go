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
// a frozen process still gets its timeout on time. An Actor waiting in
// Receive (ready, no running Turn) is suspended the same way after its
// Agent's idle timeout; a new Turn thaws it.

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
	var idleWhy string
	if wasFrozen {
		ids = slices.Sorted(maps.Keys(p.waits))
		idleWhy = p.idleWhy()
	}
	s.armIdle(p)
	p.mu.Unlock()
	if wasFrozen && h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.mu.Lock()
		p.restoring = true
		p.mu.Unlock()
		err := h.Thaw(ctx)
		p.mu.Lock()
		p.restoring = false
		p.mu.Unlock()
		if err != nil {
			s.log.Error("thaw session process", "session", p.sessionID, "err", err)
		}
		s.eng.RecordWaitEvent(ctx, p.sessionID, turn, helmrtype.EventWaitResumed, ids, idleWhy)
	}
}

// armIdle (re)starts the idle timer, or stops it when the process does not
// wait; p.mu is held.
func (s *Supervisor) armIdle(p *proc) {
	idle, ok := p.idleFor()
	switch {
	case !ok || p.freeze == nil:
		if p.idleTimer != nil {
			p.idleTimer.Stop()
		}
	case p.idleTimer == nil:
		p.idleTimer = time.AfterFunc(idle, func() { s.maybeSuspend(p) })
	default:
		p.idleTimer.Reset(idle)
	}
}

// idleFor is how long the process stays hot in its current state: the
// longest idle timeout of its open waits; for an idle process (ready, no
// Turn) the shorter of an Actor's idle timeout and the Session's
// hibernateAfterIdle. ok is false when it may not be suspended. p.mu is
// held.
func (p *proc) idleFor() (idle time.Duration, ok bool) {
	if p.mcpCalls > 0 {
		return 0, false // a runtime MCP call (such as wait_turn) is in flight
	}
	for _, d := range p.waits {
		idle, ok = max(idle, d), true
	}
	if ok || p.running != "" || p.state != stateReady || p.launch == nil {
		return idle, ok
	}
	if p.launch.Agent.Actor {
		idle, _ = helmrtype.ParseIdleTimeout(p.launch.Agent.IdleTimeout) // checked with the manifest
		ok = true
	}
	if h, never, err := helmrtype.ParseRetention(p.launch.Session.HibernateAfterIdle); err == nil && !never && (!ok || h < idle) {
		idle, ok = h, true
	}
	return idle, ok
}

// idleWhy names what an idle process waits in: "" with open waits,
// "receive" for an Actor, else "hibernate". p.mu is held.
func (p *proc) idleWhy() string {
	switch {
	case len(p.waits) > 0:
		return ""
	case p.launch != nil && p.launch.Agent.Actor:
		return "receive"
	}
	return "hibernate"
}

// maybeSuspend freezes the process when it still waits and has been quiet
// for the idle timeout.
func (s *Supervisor) maybeSuspend(p *proc) {
	if s.isClosing() {
		return
	}
	p.mu.Lock()
	idle, waiting := p.idleFor()
	if !waiting || p.frozen || p.freeze == nil || p.state != stateReady || p.cancelled {
		p.mu.Unlock()
		return
	}
	if left := idle - time.Since(p.lastActive); left > 0 {
		if p.idleTimer == nil {
			p.idleTimer = time.AfterFunc(left, func() { s.maybeSuspend(p) })
		} else {
			p.idleTimer.Reset(left)
		}
		p.mu.Unlock()
		return
	}
	p.frozen, p.parking = true, true
	h, turn := p.freeze, p.running
	ids := slices.Sorted(maps.Keys(p.waits))
	why := p.idleWhy()
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := h.Freeze(ctx)
	p.mu.Lock()
	p.parking = false
	p.mu.Unlock()
	if err != nil {
		s.log.Error("freeze session process", "session", p.sessionID, "err", err)
		h.Thaw(ctx)
		p.mu.Lock()
		p.frozen = false
		p.mu.Unlock()
		return
	}
	s.log.Debug("session process suspended", "session", p.sessionID, "waits", ids)
	s.eng.RecordWaitEvent(ctx, p.sessionID, turn, helmrtype.EventWaitSuspended, ids, why)
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
