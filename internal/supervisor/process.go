package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
)

func (s *Supervisor) start(p *proc, token string) {
	defer s.wg.Done()
	ctx := s.ctx
	// The Session's previous process, read before the lease is taken: a
	// takeover forgets another node's record.
	prev, _ := s.eng.ProcessRecord(ctx, p.sessionID)
	if !s.takeOver(ctx, p.sessionID) {
		// Another node supervises the Session; the notices of this work
		// reach it.
		close(p.recorded)
		s.forget(p)
		return
	}
	p.mu.Lock()
	p.leasedAt = s.clock.Now()
	p.mu.Unlock()
	s.endPredecessor(ctx, p.sessionID, prev)
	if prev != nil && prev.Parked {
		if pk := s.parker(); pk != nil && pk.Parked(prev.ComputerID, p.sessionID) {
			// Parked by a node that stopped (or by this one before a
			// restart): restored, not launched anew; there is work for it.
			q := s.parkedProc(ctx, prev)
			s.mu.Lock()
			if s.procs[p.sessionID] == p {
				s.procs[p.sessionID] = q
			}
			delete(s.tokens, p.tokenHash)
			s.tokens[q.tokenHash] = q
			s.mu.Unlock()
			close(p.recorded)
			s.log.Info("restoring a session process parked by another node", "session", p.sessionID, "node", prev.NodeID)
			s.activity(q)
			return
		}
	}
	var bin string
	l, err := s.eng.PrepareLaunch(ctx, p.sessionID, false)
	if err == nil {
		p.mu.Lock()
		p.setLaunch(l)
		p.mu.Unlock()
		bin, err = s.resolveBinary(ctx, l)
	}
	var sourceDir string
	if err == nil {
		sourceDir, err = s.resolveSources(ctx, l.SourcesDigest)
	}
	if err == nil {
		var proc Process
		restorable := s.parker() != nil
		// Known before the process can say hello (which reads it).
		p.mu.Lock()
		p.restorable = restorable
		p.mu.Unlock()
		proc, err = s.launcher.Launch(ctx, LaunchSpec{SessionID: p.sessionID, ComputerID: l.Session.ComputerID,
			Agent: l.Session.Agent, Binary: bin, Runtime: l.Runtime, Socket: s.socket, Token: token,
			ReconnectWindow: s.opts.ReconnectWindow, Template: l.Template, SourceDir: sourceDir, Restorable: restorable})
		if err == nil {
			p.mu.Lock()
			p.process = proc
			killed := p.killed
			if p.life.phase == phaseStarting && p.conn == nil {
				p.helloTimer = s.clock.AfterFunc(helloTimeout, func() {
					p.mu.Lock()
					silent := p.life.phase == phaseStarting && p.conn == nil
					p.mu.Unlock()
					if silent {
						s.log.Warn("session process did not connect in time; ending it", "session", p.sessionID)
						p.kill()
					}
				})
			}
			p.mu.Unlock()
			if killed {
				proc.Kill()
			}
		}
	}
	if errors.Is(err, engine.ErrHeld) {
		// Held: no process until a resume asks for one. A resume that
		// committed meanwhile found this start in flight; look again.
		close(p.recorded)
		s.forget(p)
		if ok, err := s.eng.CanStart(context.Background(), p.sessionID); err == nil && ok {
			s.SessionWork(p.sessionID)
		}
		s.release(p.sessionID)
		return
	}
	if l != nil {
		s.computerLaunched(l.Session.ComputerID, err)
	}
	if err != nil {
		close(p.recorded)
		s.log.Error("launch session process", "session", p.sessionID, "err", err)
		s.eng.Metrics().ProcessesFailed.Inc()
		s.forget(p)
		// Nothing runs until someone looks: a process_failed hold, not a
		// launch loop.
		msg := fmt.Sprintf("the session process could not start: %v", err)
		s.eng.FailRunningTurn(context.Background(), p.sessionID, helmrtype.TurnFailed, helmrtype.CodeProcessExited, msg, helmrtype.HoldProcessFailed)
		s.release(p.sessionID)
		return
	}
	s.log.Debug("session process started", "session", p.sessionID)
	s.eng.Metrics().ProcessesStarted.Inc()
	if pid := pidOf(p.process); pid != 0 {
		s.attachFreezer(p, pid)
		s.record(p, l, pid)
	}
	close(p.recorded)
	p.mu.Lock()
	pr := p.process
	p.mu.Unlock()
	s.watch(p, pr)
}

// endPredecessor ends the Session's previous process when no supervisor
// here runs it and it still lives on this host: one left behind by a node
// that was killed or cut off, whose lease this node now holds. Two
// processes of one Session on one Computer are what the lease exists to
// prevent. One on another host cannot be reached from here: it ends by
// itself once its reconnect window is over (a clustered node bounds that
// window by its lease TTL).
func (s *Supervisor) endPredecessor(ctx context.Context, sessionID string, rec *store.Process) {
	if rec == nil || rec.StartID == "" || rec.Parked {
		return
	}
	if !onThisHost(rec.StartID) {
		s.log.Info("the session's previous process ran on another host; it ends itself when its reconnect window is over",
			"session", sessionID, "node", rec.NodeID)
		return
	}
	ap, err := adopt(rec.PID, rec.StartID)
	if err != nil {
		return // gone already
	}
	s.log.Warn("ending a session process its node left behind", "session", sessionID, "node", rec.NodeID, "pid", rec.PID)
	ap.Kill()
	select {
	case <-ap.Done():
	case <-time.After(5 * time.Second):
		s.log.Error("a session process left behind did not end", "session", sessionID, "pid", rec.PID)
	}
}

// computerLaunched notes how the last launch on a Computer went: after a
// failure the Computer is unavailable, with that error, until a launch
// succeeds.
func (s *Supervisor) computerLaunched(computerID string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.unavailable, computerID)
		return
	}
	s.unavailable[computerID] = &helmrtype.Error{Code: helmrtype.CodeProcessExited,
		Message: fmt.Sprintf("the computer's process could not start: %v", err)}
}

// pidOf is the process's ID, 0 when its launcher does not tell.
func pidOf(p Process) int {
	if pp, ok := p.(interface{ PID() int }); ok {
		return pp.PID()
	}
	return 0
}

// record stores the process's record, so that a restarted control plane
// can reattach it. Without one the process cannot outlive this one.
func (s *Supervisor) record(p *proc, l *engine.Launch, pid int) {
	sid, err := startID(pid)
	if err == nil {
		err = s.eng.RecordProcess(s.ctx, &store.Process{SessionID: p.sessionID, LaunchID: p.launchID, PID: pid,
			StartID: sid, TokenHash: p.tokenHash, ComputerID: l.Session.ComputerID, Recovery: l.Recovery, LaunchedAt: s.eng.Now(),
			NodeID: s.eng.Node()})
	}
	if err != nil && s.ctx.Err() == nil {
		s.log.Warn("record session process; it cannot reattach after a restart", "session", p.sessionID, "err", err)
	}
}

// watch waits for the process to end, unless this control plane detaches
// from it first.
func (s *Supervisor) watch(p *proc, pr Process) {
	select {
	case <-pr.Done():
	case <-s.ctx.Done():
		s.mu.Lock()
		detaching := s.detaching
		s.mu.Unlock()
		if detaching {
			return
		}
		<-pr.Done()
	}
	// A process that ended because it was checkpointed did not exit: it
	// is parked (park.go).
	p.mu.Lock()
	dumping := p.dumping
	p.mu.Unlock()
	if dumping != nil {
		<-dumping
	}
	p.mu.Lock()
	parked := p.process != pr
	p.mu.Unlock()
	if !parked {
		s.exited(p)
	}
}

func (s *Supervisor) forget(p *proc) {
	s.mu.Lock()
	if s.procs[p.sessionID] == p {
		delete(s.procs, p.sessionID)
	}
	delete(s.tokens, p.tokenHash)
	s.mu.Unlock()
}

func (s *Supervisor) exited(p *proc) {
	// While the exit is recorded, the Session's lease is not idle.
	s.mu.Lock()
	s.exiting[p.sessionID]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.exiting[p.sessionID]--; s.exiting[p.sessionID] <= 0 {
			delete(s.exiting, p.sessionID)
		}
		s.mu.Unlock()
	}()
	// Messages the process sent before it ended are still in the socket:
	// let the connection drain first, so that its last words (init.failed,
	// a settlement) count before the exit does.
	p.mu.Lock()
	served := p.served
	p.mu.Unlock()
	if served != nil {
		select {
		case <-served:
		case <-time.After(drainTimeout):
		}
	}
	p.mu.Lock()
	wasReady := p.life.phase == phaseReady || p.life.phase == phaseStopping
	lost := p.life.phase == phaseLost
	s.applyLocked(p, event{kind: evExited})
	running := p.running
	drainKilled := p.drainKilled
	expected := p.expected
	initError := p.initError
	retired := p.retired
	p.stopTimers()
	conn := p.conn
	p.mu.Unlock()
	if conn != nil {
		conn.CloseNow()
	}
	s.releaseFreezer(p)
	if !lost && s.clustered() {
		// Ended by the node that took the Session over while this one was
		// cut off (it ends a process left behind on its host), before a
		// renewal here noticed.
		if ok, err := s.eng.Supervises(context.Background(), p.sessionID); err == nil && !ok {
			s.log.Warn("another node took the session over; its process here ended", "session", p.sessionID)
			lost = true
		}
	}
	if lost {
		s.forget(p)
		return // the node that took the Session over settles what it ran
	}
	defer s.release(p.sessionID)
	// The store records the end (and its hold) before the Session lets go
	// of this process: a new one started in between would find no hold and
	// start as initial, not reconstructed.
	relaunch := false
	defer func() {
		s.forget(p)
		if relaunch {
			s.relaunchIfWork(p.sessionID)
		}
	}()
	ctx := context.Background()
	s.eng.ForgetProcess(ctx, p.sessionID, p.launchID)
	why := "the session process exited"
	if err := p.process.Err(); err != nil {
		why = err.Error()
	}
	// A process that ends other than by an orderly stop places a hold on
	// its Session: nothing more runs there until a resume, which starts a
	// reconstructed process. Its running Turn is never replayed.
	failed := helmrtype.HoldProcessFailed
	switch {
	case s.isClosing() && running == "":
		// Shutting down: queued work stays queued for the next start.
	case p.launch == nil:
		// A process that survived a restart and never reattached: what it
		// ran is lost (a recovery_gap hold only when a Turn ran); queued
		// work gets a new process.
		s.log.Warn("session process did not reattach", "session", p.sessionID, "why", why)
		s.eng.Metrics().ProcessesFailed.Inc()
		s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnInterrupted, helmrtype.CodeExecutionLost,
			"the control plane restarted and the session process did not reattach; the turn is not replayed", helmrtype.HoldRecoveryGap)
		relaunch = true
	case initError != "":
		// init failed: the Turn that would have run failed with its error.
		s.eng.Metrics().ProcessesFailed.Inc()
		s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnFailed, helmrtype.CodeHandlerFailed, initError, failed)
	case expected && running == "" && retired == "":
		s.eng.ProcessStopped(ctx, p.sessionID, "stopped")
		relaunch = true
	case !wasReady:
		s.log.Warn("session process ended before it was ready", "session", p.sessionID, "why", why)
		s.eng.Metrics().ProcessesFailed.Inc()
		s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnFailed, helmrtype.CodeProcessExited, why+" before it was ready", failed)
	default:
		status, code, msg := helmrtype.TurnFailed, helmrtype.CodeProcessExited, why
		switch {
		case running != "" && drainKilled:
			// A cancelled Turn that did not drain in time: its process was
			// ended, and the Turn is interrupted.
			status, code = helmrtype.TurnInterrupted, helmrtype.CodeCleanupFailed
			msg = "the turn did not drain within the cleanup period; " + why
		case running != "":
			msg = why + " while the turn ran"
			// A provider's coded error (a disk limit) keeps its code.
			if he := (*helmrtype.Error)(nil); errors.As(p.process.Err(), &he) {
				code, msg = he.Code, he.Message+" (while the turn ran)"
			}
		case retired != "":
			code, msg = helmrtype.CodeCleanupFailed, retired
		}
		s.log.Warn("session process ended", "session", p.sessionID, "why", why)
		hold := failed
		if s.isClosing() {
			hold = "" // a shutdown, not a failure of the Session
		} else {
			s.eng.Metrics().ProcessesFailed.Inc()
		}
		s.eng.FailRunningTurn(ctx, p.sessionID, status, code, msg, hold)
	}
}

func (s *Supervisor) relaunchIfWork(sessionID string) {
	ids, err := s.eng.QueuedWork(context.Background(), sessionID)
	if err == nil && ids {
		s.SessionWork(sessionID)
	}
}

func (p *proc) stopTimers() {
	for _, t := range []*Timer{&p.helloTimer, &p.retireTimer, &p.killTimer, &p.deadline, &p.idleTimer, &p.parkTimer} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
}
