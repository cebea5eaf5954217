package supervisor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/store"
)

// Parking (decision 0024). A process past its idle time that understands
// park, on a host that can checkpoint, is told to park: it closes its
// connection and waits parkPause before it dials again. Once the
// connection is closed its sandbox is checkpointed to disk and ended; the
// Session keeps its process record (marked parked) and its running Turn.
// Anything for it (a wait's outcome, a message, a Turn, a cancel) restores
// it; the restored process reconnects with resume, as after a
// control-plane restart, and its images are deleted. The decisions are the
// lifecycle's; this file carries them out.

// Parker is a Launcher that can park session processes.
type Parker interface {
	// CheckpointOff says why processes cannot be parked ("" when they can).
	CheckpointOff() string
	// Park checkpoints the Restorable process p of spec's Session and ends
	// it; on an error it runs on.
	Park(ctx context.Context, spec LaunchSpec, p Process) (computer.ParkStats, error)
	// Restore restores the Session's parked process.
	Restore(ctx context.Context, spec LaunchSpec) (Process, error)
	// Parked reports whether the Session has a parked process on the
	// Computer.
	Parked(computerID, sessionID string) bool
	// DropParked deletes the images of the Session's parked process.
	DropParked(computerID, sessionID string) error
}

// parkPause is how long a process told to park waits before it dials
// again: time enough for its checkpoint.
const parkPause = time.Second

// dumpRetries are the pauses before each try of a checkpoint.
var dumpRetries = [...]time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond}

// parkTimeout bounds the time from park to the process's close.
const parkTimeout = 10 * time.Second

// parker returns the launcher's Parker when processes can be parked here,
// nil otherwise.
func (s *Supervisor) parker() Parker {
	if pk, ok := s.launcher.(Parker); ok && pk.CheckpointOff() == "" {
		return pk
	}
	return nil
}

// CheckpointOff says why this supervisor cannot park processes ("" when it
// can): waiting processes are frozen instead, keeping their memory.
func (s *Supervisor) CheckpointOff() string {
	if pk, ok := s.launcher.(Parker); ok {
		return pk.CheckpointOff()
	}
	return "the launcher cannot checkpoint processes"
}

// spec is the LaunchSpec of the process's Session for a park or a restore.
func (p *proc) spec(l *engine.Launch) LaunchSpec {
	return LaunchSpec{SessionID: p.sessionID, ComputerID: l.Session.ComputerID, Agent: l.Session.Agent,
		Runtime: l.Runtime, Template: l.Template, Restorable: true}
}

// sendPark tells the process to park and gives it parkTimeout to close.
func (s *Supervisor) sendPark(p *proc) {
	p.mu.Lock()
	if p.parkTimer != nil {
		p.parkTimer.Stop()
	}
	p.parkTimer = s.clock.AfterFunc(parkTimeout, func() { s.step(p, event{kind: evParkTimeout}) })
	p.mu.Unlock()
	if err := s.send(p, &protocol.Msg{Type: protocol.TypePark, Pause: helmrtype.FormatDuration(parkPause)}); err != nil {
		s.log.Warn("tell a session process to park", "session", p.sessionID, "err", err)
		s.step(p, event{kind: evParkTimeout})
	}
}

// dump checkpoints a process whose connection closed to park.
func (s *Supervisor) dump(p *proc) {
	pk := s.parker()
	p.mu.Lock()
	pr, l := p.process, p.launch
	if p.parkTimer != nil {
		p.parkTimer.Stop()
	}
	done := make(chan struct{})
	p.dumping = done
	p.mu.Unlock()
	var err error
	var stats computer.ParkStats
	switch {
	case pk == nil || pr == nil || l == nil:
		err = errors.New("this process cannot be checkpointed")
	default:
		// Its end of the connection may still be open for a moment after
		// the close reached this end (a checkpoint then fails, the
		// process untouched): tried again shortly, within its pause.
		for i, wait := range dumpRetries {
			if i > 0 {
				time.Sleep(wait)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			stats, err = pk.Park(ctx, p.spec(l), pr)
			cancel()
			if err == nil {
				break
			}
		}
	}
	p.mu.Lock()
	if err == nil {
		p.process = nil // its end is no exit (watch)
	}
	p.dumping = nil
	p.mu.Unlock()
	close(done)
	if err != nil {
		s.log.Warn("a session process could not be parked; it is frozen instead", "session", p.sessionID, "err", err)
	} else {
		s.log.Info("session process parked", "session", p.sessionID, "took", stats.Took, "bytes", stats.Bytes)
		s.releaseFreezer(p)
		s.markParked(p, true)
	}
	s.step(p, event{kind: evDumpDone, err: err})
}

// markParked records in the process's record whether it is parked, so
// that a restarted node, or another node, restores it.
func (s *Supervisor) markParked(p *proc, parked bool) {
	ctx := context.Background()
	rec, err := s.eng.ProcessRecord(ctx, p.sessionID)
	if err == nil && rec != nil && rec.LaunchID == p.launchID {
		rec.Parked = parked
		err = s.eng.RecordProcess(ctx, rec)
	}
	if err != nil {
		s.log.Warn("record the session process as parked", "session", p.sessionID, "err", err)
	}
}

// restore brings a parked process back; it reconnects by itself.
func (s *Supervisor) restore(p *proc) {
	if s.isClosing() {
		return // stays parked for the next start
	}
	ctx := context.Background()
	pk := s.parker()
	p.mu.Lock()
	l := p.launch
	p.mu.Unlock()
	var err error
	if l == nil {
		// A database outage is waited out, not taken for a lost process.
		if l, err = retrying(s.ctx, s, p, func() (*engine.Launch, error) { return s.eng.PrepareLaunch(ctx, p.sessionID, true) }); err == nil {
			p.mu.Lock()
			p.setLaunch(l)
			p.mu.Unlock()
		}
	}
	var pr Process
	if err == nil && pk == nil {
		err = fmt.Errorf("checkpoints are off here: %s", s.CheckpointOff())
	}
	if err == nil {
		// This node's copy of the Deployment's binary and its protocol
		// socket: the restored process may have been parked by another.
		spec := p.spec(l)
		spec.Socket = s.socket
		if spec.Binary, err = s.resolveBinary(ctx, l); err == nil {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			pr, err = pk.Restore(rctx, spec)
			cancel()
		}
	}
	if err != nil {
		s.step(p, event{kind: evRestoreDone, err: err})
		return
	}
	if s.isClosing() {
		// The stop came during the restore: parked again (its record
		// still says so), from the images that still hold it.
		p.mu.Lock()
		s.applyLocked(p, event{kind: evUnrestore})
		p.mu.Unlock()
		pr.Kill()
		return
	}
	pid := pidOf(pr)
	p.mu.Lock()
	p.process, p.restorable = pr, true
	p.leasedAt = s.clock.Now()
	p.mu.Unlock()
	s.armReattach(p, "a restored session process did not reconnect in time; ending it")
	s.log.Info("session process restored", "session", p.sessionID, "pid", pid)
	if pid != 0 {
		s.attachFreezer(p, pid)
		s.record(p, l, pid)
	}
	s.step(p, event{kind: evRestoreDone})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watch(p, pr)
	}()
}

// armReattach gives a process that is to reconnect (one that outlived
// the previous control plane, or was restored) ReattachWindow to do so;
// one that does not is ended, with why in the log.
func (s *Supervisor) armReattach(p *proc, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.helloTimer != nil {
		p.helloTimer.Stop()
	}
	p.helloTimer = s.clock.AfterFunc(s.opts.ReattachWindow, func() {
		p.mu.Lock()
		silent := p.life.phase == phaseReattaching
		p.mu.Unlock()
		if silent {
			s.log.Warn(why, "session", p.sessionID)
			p.kill()
		}
	})
}

// restoreFailed ends a process that cannot be restored: its Session gets
// a process_failed hold with the reason, and its next process is
// reconstructed (init runs again).
func (s *Supervisor) restoreFailed(p *proc, err error) {
	ctx := context.Background()
	s.log.Error("a parked session process could not be restored", "session", p.sessionID, "err", err)
	s.eng.Metrics().ProcessesFailed.Inc()
	p.mu.Lock()
	l := p.launch
	p.mu.Unlock()
	if pk, ok := s.launcher.(Parker); ok && l != nil {
		pk.DropParked(l.Session.ComputerID, p.sessionID)
	}
	s.eng.ForgetProcess(ctx, p.sessionID, p.launchID)
	msg := fmt.Sprintf("the session process could not be restored from its checkpoint: %v", err)
	s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnFailed, helmrtype.CodeProcessExited, msg, helmrtype.HoldProcessFailed)
	s.forget(p)
	s.release(p.sessionID)
}

// dropImages deletes the images of a process that reconnected after its
// restore.
func (s *Supervisor) dropImages(p *proc) {
	p.mu.Lock()
	l := p.launch
	p.mu.Unlock()
	s.markParked(p, false)
	if pk, ok := s.launcher.(Parker); ok && l != nil {
		if err := pk.DropParked(l.Session.ComputerID, p.sessionID); err != nil {
			s.log.Warn("delete a restored process's checkpoint", "session", p.sessionID, "err", err)
		}
	}
}

// parkedProc returns the proc of a Session whose process is parked (its
// record rec), to restore on demand.
func (s *Supervisor) parkedProc(ctx context.Context, rec *store.Process) *proc {
	p := &proc{sessionID: rec.SessionID, tokenHash: rec.TokenHash, launchID: rec.LaunchID,
		life: lifecycle{phase: phaseReattaching, residency: resParked, canPark: true}, leasedAt: s.clock.Now()}
	if l, err := s.eng.PrepareLaunch(ctx, rec.SessionID, true); err == nil {
		p.setLaunch(l)
	}
	if t, err := s.eng.RunningTurn(ctx, rec.SessionID); err == nil && t != nil {
		p.running = t.ID
	}
	// Its open waits: their outcomes restore it (resumeWaits).
	if ws, err := s.eng.OpenWaitsOf(ctx, rec.SessionID); err == nil {
		for _, w := range ws {
			if p.life.waits == nil {
				p.life.waits = map[string]time.Duration{}
			}
			p.life.waits[w.ID] = w.IdleTimeout
		}
	}
	// Its wait.suspended was recorded when it was parked: wait.resumed
	// follows its reconnection.
	p.life.suspendedWaits = slices.Sorted(maps.Keys(p.life.waits))
	if len(p.life.waits) == 0 {
		p.life.suspendedWaits, p.life.suspendedWhy = nil, p.life.idleWhy()
	}
	return p
}

// isParked reports whether the process is parked (no process, images on
// disk); p.mu is held.
func (p *proc) isParked() bool { return p.life.residency == resParked && p.process == nil }

// parkAll parks, as the control plane stops, every process that waits or
// is idle and can be parked, and waits for their checkpoints until ctx
// ends; it returns the Sessions parked then (these and those parked
// before). Running Turns that do not wait
// go on as before (a stop or a detach).
func (s *Supervisor) parkAll(ctx context.Context) []string {
	var parking []*proc
	for _, p := range s.snapshot() {
		p.mu.Lock()
		acts := s.applyLocked(p, event{kind: evParkNow})
		p.mu.Unlock()
		if len(acts) > 0 {
			parking = append(parking, p)
			s.carry(p, acts)
		}
	}
	for _, p := range parking {
		for {
			p.mu.Lock()
			res := p.life.residency
			p.mu.Unlock()
			if res != resParking || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Those parked now, and those parked before.
	var parked []string
	for _, p := range s.snapshot() {
		if p.parked() {
			parked = append(parked, p.sessionID)
		}
	}
	slices.Sort(parked)
	if len(parked) > 0 {
		s.log.Info("parked the waiting and idle sessions: they are restored on demand after the next start",
			"count", len(parked), "sessions", parked)
	}
	s.mu.Lock()
	s.parkedAtStop = parked
	s.mu.Unlock()
	return parked
}

// ParkedAtStop returns the Sessions that the stop (Close or Detach)
// parked.
func (s *Supervisor) ParkedAtStop() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.parkedAtStop)
}

// unrestore ends, as the control plane stops its processes, those that
// were restored and have not reconnected: no shutdown can reach them. They
// are parked again, from the images that still hold them.
func (s *Supervisor) unrestore() {
	for _, p := range s.snapshot() {
		p.mu.Lock()
		pr := p.process
		restoring := pr != nil && p.life.residency == resRestoring && p.life.phase == phaseReattaching
		if restoring {
			p.process = nil // its end is no exit (watch)
			s.applyLocked(p, event{kind: evUnrestore})
		}
		p.mu.Unlock()
		if restoring {
			pr.Kill()
			s.markParked(p, true)
		}
	}
}

// discardParked lets go of a parked process that will never be restored
// (its Session closed): its images and its record go.
func (s *Supervisor) discardParked(p *proc) {
	ctx := context.Background()
	p.mu.Lock()
	l := p.launch
	p.mu.Unlock()
	if pk, ok := s.launcher.(Parker); ok && l != nil {
		pk.DropParked(l.Session.ComputerID, p.sessionID)
	}
	s.eng.ForgetProcess(ctx, p.sessionID, p.launchID)
	s.eng.ProcessStopped(ctx, p.sessionID, "stopped")
	s.forget(p)
	s.release(p.sessionID)
}
