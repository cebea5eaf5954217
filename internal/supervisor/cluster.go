package supervisor

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/store"
)

// Several control-plane nodes on one database (the engine has a node ID).
// A node launches a Session's process only under the Session's lease
// (engine.TakeOver), renews its leases every LeaseTTL/3, and releases a
// lease when the process ends. Work committed by other nodes arrives as
// notices (Notice); Sessions with work and no live lease (their node died,
// or never took them) are found by a sweep on the same tick and taken over.

// DefaultLeaseTTL is the default of Options.LeaseTTL.
const DefaultLeaseTTL = 15 * time.Second

// sweepLimit bounds the Sessions one sweep takes over.
const sweepLimit = 100

// clustered reports whether this supervisor shares its database with other
// nodes.
func (s *Supervisor) clustered() bool { return s.eng.Node() != "" }

// takeOver acquires the Session's lease before its process launches; false
// when another node supervises it (or the store failed: the sweep retries).
func (s *Supervisor) takeOver(ctx context.Context, sessionID string) bool {
	if !s.clustered() {
		return true
	}
	s.waitReleased(sessionID)
	ok, err := s.eng.TakeOver(ctx, sessionID, s.opts.LeaseTTL)
	if err != nil && ctx.Err() == nil {
		s.log.Error("take the session's lease", "session", sessionID, "err", err)
	}
	return ok && err == nil
}

// waitReleased waits for a release of the Session's lease in flight, so
// that a launch never takes the lease just before an older release drops it.
func (s *Supervisor) waitReleased(sessionID string) {
	s.mu.Lock()
	ch := s.releasing[sessionID]
	s.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// release gives the Session's lease up once it has no process here, then
// looks for work that arrived meanwhile: another node that admitted it saw
// the lease held and left it to this one.
func (s *Supervisor) release(sessionID string) {
	if !s.clustered() {
		return
	}
	s.mu.Lock()
	if _, ok := s.procs[sessionID]; ok || s.releasing[sessionID] != nil || s.detaching {
		s.mu.Unlock()
		return
	}
	ch := make(chan struct{})
	s.releasing[sessionID] = ch
	s.mu.Unlock()
	err := s.eng.ReleaseLease(context.Background(), sessionID)
	s.mu.Lock()
	delete(s.releasing, sessionID)
	close(ch)
	s.mu.Unlock()
	if err != nil {
		s.log.Warn("release the session's lease; it expires by itself", "session", sessionID, "err", err)
		return
	}
	if ok, err := s.eng.CanStart(context.Background(), sessionID); err == nil && ok {
		s.SessionWork(sessionID)
	}
}

// keepLeases renews this node's leases and sweeps for Sessions to take
// over, every LeaseTTL/3, until ctx ends. It runs until the supervisor has
// stopped its processes, so that their leases hold meanwhile.
func (s *Supervisor) keepLeases(ctx context.Context) {
	defer close(s.leasesDone)
	s.log.Info("node of a shared database: sessions are leased, other nodes' changes are heard",
		"node", s.eng.Node(), "lease_ttl", s.opts.LeaseTTL)
	t := time.NewTicker(s.opts.LeaseTTL / 3)
	defer t.Stop()
	for {
		s.renew(ctx)
		if !s.isClosing() {
			s.sweep(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// endLeases stops the lease keeper. Leases of processes left running (a
// detach) expire unless this node starts again in time to renew them.
func (s *Supervisor) endLeases() {
	if s.stopLeases != nil {
		s.stopLeases()
		<-s.leasesDone
		s.leaseWork.Wait()
		s.stopLeases = nil
	}
}

// renew extends this node's leases. A process whose lease is no longer
// this node's was taken over by another node (this one was cut off longer
// than the TTL): it is ended without touching its Session, whose Turn the
// other node settled. (A lease this node released is never missed: a
// launch waits for the release before it takes the lease again.)
func (s *Supervisor) renew(ctx context.Context) {
	began := s.clock.Now()
	held, err := s.eng.RenewLeases(ctx, s.opts.LeaseTTL)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("renew session leases", "err", err)
		}
		return
	}
	have := make(map[string]bool, len(held))
	for _, id := range held {
		have[id] = true
	}
	s.mu.Lock()
	var missing []*proc
	for id, p := range s.procs {
		if !have[id] {
			missing = append(missing, p)
		}
	}
	var idle []string // leases without a process here (from before a restart)
	for _, id := range held {
		if _, ok := s.procs[id]; !ok && s.releasing[id] == nil && s.exiting[id] == 0 {
			idle = append(idle, id)
		}
	}
	s.mu.Unlock()
	// Releases and kills (a thaw may take seconds) run aside, so that the
	// next renewal is on time.
	for _, id := range idle {
		s.leaseWork.Go(func() { s.release(id) })
	}
	for _, p := range missing {
		p.mu.Lock()
		// A launch that took its lease after this renewal began is not lost.
		lost := !p.leasedAt.IsZero() && p.leasedAt.Before(began)
		if lost {
			s.applyLocked(p, event{kind: evLeaseLost})
		}
		p.mu.Unlock()
		if lost {
			p.mu.Lock()
			parked := p.isParked()
			p.mu.Unlock()
			if parked {
				// Nothing runs here: the node that took it over restores
				// it from its images.
				s.log.Warn("another node took a parked session over", "session", p.sessionID)
				s.forget(p)
				continue
			}
			s.log.Warn("another node took the session over; ending its process here", "session", p.sessionID)
			s.leaseWork.Go(p.kill)
		}
	}
}

// sweep takes over Sessions with work that no node supervises, and fails
// the Commands of nodes that stopped.
func (s *Supervisor) sweep(ctx context.Context) {
	if n, err := s.eng.FailCommandsOfDeadNodes(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("fail the commands of stopped nodes", "err", err)
	} else if n > 0 {
		s.log.Warn("commands of a stopped node are marked failed", "count", n)
	}
	ids, err := s.eng.UnleasedWork(ctx, sweepLimit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("look for sessions without a node", "err", err)
		}
		return
	}
	for _, id := range ids {
		if s.get(id) == nil {
			s.SessionWork(id)
		}
	}
}

// Notice applies a change another node committed to the Session's process
// here, if this node runs it: new work, a message, an interrupt (every
// interrupt and cancel announces each running Turn), a wait's outcome,
// the Session's close. It returns at once: the work runs aside, so that the
// listener reads on.
func (s *Supervisor) Notice(n store.Notice) {
	var act func(p *proc)
	switch n.Kind {
	case helmrtype.EventTurnQueued, helmrtype.EventSessionResume:
		act = s.dispatch
	case helmrtype.EventMessageAdmitted:
		act = func(*proc) { s.TurnMessage(n.SessionID, n.TurnID) }
	case engine.NoticeTurnInterrupt:
		act = func(p *proc) { s.cancelTurn(p, n.TurnID, protocol.ReasonInterrupted) }
	case helmrtype.EventWaitResolved:
		act = s.resumeWaits
	case helmrtype.EventSessionClosed, helmrtype.EventSessionCancelled:
		act = func(*proc) { s.SessionClosed(n.SessionID) }
	default:
		return
	}
	if p := s.get(n.SessionID); p != nil {
		go act(p)
	}
}

// resumeWaits hands the process the outcomes of its waits that ended.
func (s *Supervisor) resumeWaits(p *proc) {
	p.mu.Lock()
	turn := p.running
	ids := slices.Collect(maps.Keys(p.life.waits))
	p.mu.Unlock()
	for _, id := range ids {
		if o, err := s.eng.ResumeWait(s.ctx, p.sessionID, id); err == nil && o != nil {
			s.WaitResolved(p.sessionID, turn, id, o)
		}
	}
}

// Resync catches up after notices from other nodes may have been missed:
// every process here looks for work, messages and wait outcomes again, and
// a Command here whose cancel was accepted meanwhile stops.
func (s *Supervisor) Resync() {
	s.mu.Lock()
	cmds := make([]string, 0, len(s.cmds))
	for id := range s.cmds {
		cmds = append(cmds, id)
	}
	s.mu.Unlock()
	for _, id := range cmds {
		if req, err := s.eng.CommandCancelRequested(s.ctx, id); err == nil && req {
			s.CancelCommand(id)
		}
	}
	for _, p := range s.snapshot() {
		p.mu.Lock()
		running := p.running
		p.mu.Unlock()
		if running == "" {
			s.dispatch(p)
			continue
		}
		if running != "-" {
			// A Turn settled, interrupted or cancelled meanwhile stops here.
			if due, err := s.eng.InterruptDue(s.ctx, p.sessionID, running); err == nil && due {
				s.cancelTurn(p, running, protocol.ReasonInterrupted)
				continue
			}
			s.TurnMessage(p.sessionID, running)
			s.resumeWaits(p)
		}
	}
}
