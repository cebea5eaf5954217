package supervisor

import (
	"context"
	"errors"
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
// Agent's idle timeout; a new Turn thaws it. The decisions are the
// lifecycle's (lifecycle.go); this file carries them out.

// slot returns the facts of the process's Turn slot the lifecycle reads;
// p.mu is held.
func (p *proc) slot() slot { return slot{busy: p.running != "", cancelling: p.cancelled} }

// step applies ev to the process's lifecycle and carries out what it
// returns: timers at once, under the lock; a Freeze, a Thaw and the wait
// events after it, in this goroutine (so a process is thawed before
// whatever woke it is sent). p.mu is not held.
func (s *Supervisor) step(p *proc, ev event) {
	p.mu.Lock()
	acts := s.applyLocked(p, ev)
	p.mu.Unlock()
	s.carry(p, acts)
}

// applyLocked applies ev and arms or stops the idle timer as it says; it
// returns the rest of the actions. p.mu is held.
func (s *Supervisor) applyLocked(p *proc, ev event) []action {
	if ev.at.IsZero() {
		ev.at = s.clock.Now()
	}
	acts := p.life.apply(ev, p.slot())
	rest := acts[:0:0]
	for _, a := range acts {
		switch a.kind {
		case actArmIdle:
			if p.idleTimer == nil {
				p.idleTimer = s.clock.AfterFunc(a.after, func() { s.idleDue(p) })
			} else {
				p.idleTimer.Reset(a.after)
			}
		case actStopIdle:
			if p.idleTimer != nil {
				p.idleTimer.Stop()
			}
		default:
			rest = append(rest, a)
		}
	}
	return rest
}

// carry carries out a transition's blocking actions; p.mu is not held.
func (s *Supervisor) carry(p *proc, acts []action) {
	for _, a := range acts {
		p.mu.Lock()
		h, turn := p.freeze, p.running
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		switch a.kind {
		case actFreeze:
			var err error
			if h != nil {
				err = h.Freeze(ctx)
			}
			if err != nil {
				s.log.Error("freeze session process", "session", p.sessionID, "err", err)
			}
			s.step(p, event{kind: evFreezeDone, err: err})
		case actThaw:
			var err error
			if h != nil {
				err = h.Thaw(ctx)
			}
			if err != nil {
				s.log.Error("thaw session process", "session", p.sessionID, "err", err)
			}
			s.step(p, event{kind: evThawDone, err: err})
		case actSuspended:
			s.log.Debug("session process suspended", "session", p.sessionID, "waits", a.waits)
			s.eng.RecordWaitEvent(ctx, p.sessionID, turn, helmrtype.EventWaitSuspended, a.waits, a.why)
		case actResumed:
			s.eng.RecordWaitEvent(ctx, p.sessionID, turn, helmrtype.EventWaitResumed, a.waits, a.why)
		case actPark:
			s.sendPark(p)
		case actDump:
			s.wg.Go(func() { s.dump(p) })
		case actRestore:
			s.wg.Go(func() { s.restore(p) })
		case actDropImages:
			s.wg.Go(func() { s.dropImages(p) })
		case actRestoreFailed:
			s.restoreFailed(p, a.err)
		case actResidency:
			s.recordResidency(ctx, p, turn, a.residency, a.err)
		}
		cancel()
	}
}

// recordResidency records a change of the process's residency on the
// Session's timeline, with the error of a failed park or restore.
func (s *Supervisor) recordResidency(ctx context.Context, p *proc, turn, residency string, failure error) {
	p.mu.Lock()
	l := p.launch
	p.mu.Unlock()
	if l == nil {
		return
	}
	var he *helmrtype.Error
	if failure != nil && !errors.As(failure, &he) {
		he = &helmrtype.Error{Code: helmrtype.CodeInternal, Message: failure.Error()}
	}
	if turn == "-" {
		turn = ""
	}
	if err := s.eng.RecordResidency(ctx, p.sessionID, turn, l.Session.ComputerID, residency, he); err != nil {
		s.log.Warn("record a residency change", "session", p.sessionID, "residency", residency, "err", err)
	}
}

// activity marks the process busy now: a frozen process is thawed and the
// idle clock restarts.
func (s *Supervisor) activity(p *proc) { s.step(p, event{kind: evActivity}) }

// idleDue is the idle timer's call: the process is frozen if it still
// waits and has been quiet for its idle time.
func (s *Supervisor) idleDue(p *proc) {
	if s.isClosing() {
		return
	}
	s.step(p, event{kind: evIdleDue})
}

// Suspended reports whether the Session's process is suspended now:
// frozen, or parked (checkpointed to disk, no process).
func (s *Supervisor) Suspended(sessionID string) bool {
	p := s.get(sessionID)
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.life.residency == resFrozen || p.life.residency == resParked
}

// attachFreezer puts a new or adopted process under the freezer; an
// adopted one may have been left frozen by the previous control plane, so
// it is thawed. The freezer's name is the launch's, unique per process:
// a Session may have an old process still being reaped as its new one
// starts.
func (s *Supervisor) attachFreezer(p *proc, pid int) {
	if s.opts.Freezer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h, err := s.opts.Freezer.Attach(ctx, "proc-"+p.launchID, pid, pid)
	if err != nil {
		s.log.Warn("the session process cannot be suspended", "session", p.sessionID, "err", err)
		return
	}
	h.Thaw(ctx)
	p.mu.Lock()
	p.freeze = h
	p.life.canFreeze = p.life.phase != phaseDead
	p.mu.Unlock()
}

// releaseFreezer lets go of an ended process's freezer.
func (s *Supervisor) releaseFreezer(p *proc) {
	p.mu.Lock()
	h := p.freeze
	p.freeze = nil
	p.life.canFreeze = false
	p.mu.Unlock()
	if h != nil {
		if err := h.Release(); err != nil {
			s.log.Debug("release freezer", "session", p.sessionID, "err", err)
		}
	}
}
