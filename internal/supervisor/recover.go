package supervisor

import (
	"cmp"
	"context"
	"time"

	"github.com/coder/websocket"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/store"
)

// Recover takes charge after a restart: processes of the previous control
// plane that are still alive get ReattachWindow to reconnect and keep their
// running Turns; other running Turns settle interrupted (execution_lost).
// Sessions with queued Turns get processes. Until the survivors are
// adopted, the protocol endpoint answers 503 (they try again).
func (s *Supervisor) Recover(ctx context.Context) error {
	if s.clustered() {
		// Alive before anything: the other nodes fail the Commands of a
		// node without a heartbeat.
		if _, err := s.eng.RenewLeases(ctx, s.opts.LeaseTTL); err != nil {
			return err
		}
	}
	// Commands are not adopted across a restart: their outcome is lost.
	// (With several nodes, only this node's.)
	if n, err := s.eng.FailUnfinishedCommands(ctx); err != nil {
		return err
	} else if n > 0 {
		s.log.Warn("commands that ran when the control plane stopped are marked failed", "count", n)
	}
	recs, err := s.eng.Processes(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	var adopted, parked []*proc
	pk := s.parker()
	for _, r := range recs {
		if s.clustered() && r.NodeID != "" && r.NodeID != s.eng.Node() {
			continue // another node's
		}
		var ap *adoptedProcess
		if !r.Parked {
			ap, err = adopt(r.PID, r.StartID)
		}
		if r.Parked || err != nil {
			// Gone: parked (its images are its state; a checkpoint taken
			// just before the stop may not have been marked yet), or
			// lost.
			if pk == nil || !pk.Parked(r.ComputerID, r.SessionID) {
				if r.Parked {
					s.log.Warn("a parked session process cannot be restored here; its turn is lost", "session", r.SessionID,
						"why", cmp.Or(s.CheckpointOff(), "its checkpoint is gone"))
				}
				s.eng.ForgetProcess(ctx, r.SessionID, r.LaunchID)
				continue
			}
			if s.clustered() {
				if ok, err := s.eng.Reclaim(ctx, r.SessionID, r.LaunchID, s.opts.LeaseTTL); err != nil {
					return err
				} else if !ok {
					continue // another node took it over: it restores it
				}
			}
			live[r.SessionID] = true
			parked = append(parked, s.parkedProc(ctx, &r))
			continue
		}
		if s.clustered() {
			// Still this node's only if no other node took it over meanwhile.
			ok, err := s.eng.Reclaim(ctx, r.SessionID, r.LaunchID, s.opts.LeaseTTL)
			if err != nil {
				return err
			}
			if !ok {
				s.log.Warn("another node took the session over; ending its process here", "session", r.SessionID)
				ap.Kill()
				continue
			}
		}
		p := &proc{sessionID: r.SessionID, tokenHash: r.TokenHash, launchID: r.LaunchID, process: ap, life: lifecycle{phase: phaseReattaching}, leasedAt: s.clock.Now()}
		live[r.SessionID] = true
		adopted = append(adopted, p)
	}
	s.mu.Lock()
	for _, p := range append(adopted, parked...) {
		s.procs[p.sessionID] = p
		s.tokens[p.tokenHash] = p
	}
	s.adopted = true
	s.mu.Unlock()
	if len(parked) > 0 {
		s.log.Info("sessions parked before the restart are restored on demand", "count", len(parked))
	}
	for _, p := range parked {
		// A running Turn that no longer waits on anything open has work
		// to do (its wait ended while this node was down): restored now.
		p.mu.Lock()
		busy := p.running != "" && len(p.life.waits) == 0
		p.mu.Unlock()
		if busy {
			s.activity(p)
		}
	}
	for _, p := range adopted {
		s.attachFreezer(p, p.process.(*adoptedProcess).PID())
		s.armReattach(p, "session process did not reattach in time; ending it")
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.watch(p, p.process)
		}()
	}
	ids, err := s.eng.Recover(ctx, live)
	if err != nil {
		return err
	}
	if s.clustered() {
		lctx, stop := context.WithCancel(context.Background())
		s.stopLeases, s.leasesDone = stop, make(chan struct{})
		go s.keepLeases(lctx)
	}
	for _, id := range ids {
		s.SessionWork(id)
	}
	return nil
}

// reattach takes back a process that survived a restart and reconnected.
// It keeps its state: init does not run again, its running Turn goes on and
// its unacknowledged operations arrive again (applied once, by op). A Turn
// the store started but the process never saw is sent to it now.
func (s *Supervisor) reattach(ctx context.Context, p *proc, r *protocol.Resume) {
	if r == nil {
		r = &protocol.Resume{}
	}
	l, err := s.eng.PrepareLaunch(ctx, p.sessionID, true)
	var t *store.Turn
	if err == nil {
		t, err = s.eng.RunningTurn(ctx, p.sessionID)
	}
	if err != nil {
		s.log.Error("reattach session process", "session", p.sessionID, "err", err)
		p.kill()
		return
	}
	if r.TurnID != "" && (t == nil || t.ID != r.TurnID) {
		// The process still settles a Turn the store settled (its ack was
		// lost in the restart): the repeated settle is acknowledged.
		if _, err := s.eng.GetTurn(ctx, p.sessionID, r.TurnID); err != nil {
			s.log.Warn("reattached process runs an unknown turn; ending it", "session", p.sessionID, "turn", r.TurnID)
			p.kill()
			return
		}
	}
	unseen := t != nil && t.ID != r.TurnID
	p.mu.Lock()
	l.Recovery = protocol.RecoveryReattached
	p.setLaunch(l)
	if p.helloTimer != nil {
		p.helloTimer.Stop()
		p.helloTimer = nil
	}
	acts := s.applyLocked(p, event{kind: evReattached, ready: r.Ready})
	p.sentMsgs = map[string]bool{}
	switch {
	case unseen:
		p.running = "-" // started below
	case t != nil:
		p.running = t.ID
		p.trace, p.spans = t.TraceParent, 0
		s.armDeadline(p, t)
	}
	p.mu.Unlock()
	s.carry(p, acts)
	if t != nil && !unseen {
		// Its open waits count for suspension again.
		if ws, err := s.eng.OpenWaitsOf(ctx, p.sessionID); err == nil {
			for _, w := range ws {
				if w.TurnID == t.ID {
					s.step(p, event{kind: evWaitStarted, wait: w.ID, idle: w.IdleTimeout})
				}
			}
		}
	}
	s.log.Info("session process reattached", "session", p.sessionID, "turn", r.TurnID)
	w := &protocol.Welcome{Agent: l.Session.Agent, SessionID: l.Session.ID, SessionKey: l.Session.Key,
		ParentID: l.Session.ParentSessionID, ComputerID: l.Session.ComputerID, DeploymentID: l.Session.DeploymentID,
		Recovery: protocol.Recovery{Kind: l.Recovery, Reason: l.RecoveryReason}, ServerTime: s.clock.Now().UTC()}
	s.send(p, &protocol.Msg{Type: protocol.TypeWelcome, Welcome: w})
	s.activity(p)
	switch {
	case unseen:
		msgs, err := s.eng.PendingMessages(ctx, t.ID)
		if due, derr := s.eng.InterruptDue(ctx, p.sessionID, t.ID); derr == nil && due {
			// Accepted before the restart: it follows turn.start.
			p.mu.Lock()
			if p.pendingCancel == nil {
				p.pendingCancel = map[string]string{}
			}
			p.pendingCancel[t.ID] = protocol.ReasonInterrupted
			p.mu.Unlock()
		}
		s.started(p, t, msgs, err)
	case t != nil:
		s.sendPending(p, t.ID)
		p.mu.Lock()
		reason, cancelled := p.pendingCancel[t.ID]
		p.pendingCancel = nil
		p.mu.Unlock()
		if !cancelled {
			// An interrupt or cancel accepted before the restart may not
			// have reached the process.
			if due, err := s.eng.InterruptDue(ctx, p.sessionID, t.ID); err == nil && due {
				reason, cancelled = protocol.ReasonInterrupted, true
			}
		}
		if cancelled {
			s.cancelTurn(p, t.ID, reason)
		}
	case r.Ready:
		s.dispatch(p)
	}
}

// Detach closes every protocol connection without stopping the processes:
// they keep running and reconnect to the next control plane on the same
// data directory (helmr server's stop, for restarts and upgrades).
func (s *Supervisor) Detach() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	s.parkAll(ctx)
	cancel()
	s.mu.Lock()
	s.detaching = true
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	s.cancel()
	for _, p := range procs {
		p.mu.Lock()
		p.stopTimers()
		conn := p.conn
		p.mu.Unlock()
		if conn != nil {
			conn.Close(websocket.StatusGoingAway, "the control plane is restarting")
		}
	}
	s.wg.Wait()
	s.conns.Wait()
	s.endLeases()
}

// Close asks every process to shut down, waits for them until ctx ends,
// then kills what is left.
func (s *Supervisor) Close(ctx context.Context) {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	s.parkAll(ctx)
	s.unrestore()
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.mu.Lock()
		p.expected = true
		acts := s.applyLocked(p, event{kind: evStop})
		p.mu.Unlock()
		s.carry(p, acts)
		s.send(p, &protocol.Msg{Type: protocol.TypeShutdown})
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		for _, p := range procs {
			p.kill()
		}
		<-done
	}
	s.cancel()
	s.endLeases()
}
