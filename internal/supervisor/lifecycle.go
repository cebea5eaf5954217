package supervisor

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// The life of one session process is an explicit state machine. It has a
// phase (starting → ready → stopping → dead; a process that outlived the
// previous control plane, or was parked, is reattaching until it
// reconnects) and a residency: hot → parking → parked → restoring → hot
// where the host can checkpoint (the process closes its connection, is
// checkpointed to disk and ended, and is restored on demand), else hot →
// freezing → frozen → thawing → hot. Every change of either goes through
// lifecycle.apply: it takes one event, with the time it happened and the
// facts of the process's Turn slot, and returns the actions the supervisor
// carries out (step): arm or stop the idle timer, freeze, thaw, record a
// wait event. apply never blocks, reads no clock and starts nothing, so a
// unit test drives it without processes, timers or a store.

// phase is where a session process is in its life.
type phase uint8

const (
	// phaseStarting: launched (or reattached without having finished
	// init); init runs until the process says ready.
	phaseStarting phase = iota
	// phaseReady: the process serves Turns, one at a time.
	phaseReady
	// phaseStopping: the process was asked to stop, said it stops, or was
	// retired after a failed cleanup; it takes no new Turn.
	phaseStopping
	// phaseDead: the process has ended.
	phaseDead
	// phaseReattaching: a process that survived a control-plane restart
	// and has not reconnected yet.
	phaseReattaching
	// phaseLost: another node took the Session over (this one was cut off
	// past its lease): the process is ended without touching the Session,
	// whose Turn that node settles.
	phaseLost
)

var phaseNames = [...]string{"starting", "ready", "stopping", "dead", "reattaching", "lost"}

func (p phase) String() string { return phaseNames[p] }

// residency is where a process's execution is: hot (it runs), or frozen by
// the freezer, with the two moves between them.
type residency uint8

const (
	resHot residency = iota
	// resFreezing: a Freeze is in progress.
	resFreezing
	// resFrozen: the process tree is frozen; it uses no CPU.
	resFrozen
	// resThawing: a Thaw is in progress.
	resThawing
	// resParking: the process was told to park; once its connection
	// closes it is checkpointed.
	resParking
	// resParked: the process is checkpointed to disk and ended.
	resParked
	// resRestoring: the process is being restored, until it reconnects.
	resRestoring
)

var residencyNames = [...]string{"hot", "freezing", "frozen", "thawing", "parking", "parked", "restoring"}

func (r residency) String() string { return residencyNames[r] }

// eventKind names what happened to a process.
type eventKind uint8

const (
	// evReady: the process finished init.
	evReady eventKind = iota
	// evStop: the process was asked to stop, said it stops, or was retired.
	evStop
	// evReattached: a survivor reconnected; ready says whether it had
	// finished init.
	evReattached
	// evExited: the process ended.
	evExited
	// evLeaseLost: another node holds the Session's lease now.
	evLeaseLost
	// evActivity: something for or from the process; it is busy now.
	evActivity
	// evIdleDue: the idle timer fired.
	evIdleDue
	// evFreezeDone and evThawDone: a Freeze or a Thaw returned, with err.
	evFreezeDone
	evThawDone
	// evWaitStarted and evWaitEnded: a wait of the running Turn started
	// (with its idle timeout) or ended. Both count as activity.
	evWaitStarted
	evWaitEnded
	// evTurnEnded: the running Turn settled; its waits are gone.
	evTurnEnded
	// evParkNow: the control plane stops; a process that waits or is
	// idle is parked at once.
	evParkNow
	// evDisconnected: the process's connection closed.
	evDisconnected
	// evParkTimeout: a process told to park did not close its connection
	// in time.
	evParkTimeout
	// evUnrestore: a restored process that has not reconnected is ended
	// as the control plane stops; its images still hold it.
	evUnrestore
	// evDumpDone and evRestoreDone: a checkpoint or a restore returned,
	// with err.
	evDumpDone
	evRestoreDone
	// evStoreWait and evStoreBack: a write of the process waits for the
	// store (the database is unreachable; it is tried again), or is done
	// waiting. The process is busy meanwhile: it waits for the write's
	// ack, and is neither frozen nor parked. evStoreBack counts as
	// activity.
	evStoreWait
	evStoreBack
	// evCallStarted and evCallEnded: a runtime MCP call (such as
	// wait_turn) is in flight or done; the process is busy meanwhile.
	// evCallEnded counts as activity.
	evCallStarted
	evCallEnded
)

// event is one input of the lifecycle.
type event struct {
	kind eventKind
	// at is when it happened (by the supervisor's clock).
	at time.Time
	// err is a Freeze's or a Thaw's outcome.
	err error
	// ready: a reattached process had finished init.
	ready bool
	// wait and idle: the wait of evWaitStarted and evWaitEnded, and its
	// idle timeout.
	wait string
	idle time.Duration
}

// slot is what the lifecycle needs to know of the process's Turn slot,
// which the dispatch code owns.
type slot struct {
	// busy: a Turn runs or is being started.
	busy bool
	// cancelling: a cancel was sent for the running Turn.
	cancelling bool
}

// actionKind names what the supervisor must do after a transition.
type actionKind uint8

const (
	// actArmIdle: (re)start the idle timer to fire after action.after.
	actArmIdle actionKind = iota
	// actStopIdle: stop the idle timer.
	actStopIdle
	// actFreeze: freeze the process tree, then report evFreezeDone.
	actFreeze
	// actThaw: thaw the process tree, then report evThawDone.
	actThaw
	// actSuspended and actResumed: record wait.suspended or wait.resumed
	// with action.waits and action.why.
	actSuspended
	actResumed
	// actPark: tell the process to park (and time it out).
	actPark
	// actDump: checkpoint the process, then report evDumpDone.
	actDump
	// actRestore: restore the process, then report evRestoreDone.
	actRestore
	// actDropImages: delete the process's checkpoint images.
	actDropImages
	// actResidency: record computer.residency with action.residency and
	// action.err.
	actResidency
	// actRestoreFailed: the process cannot be restored (action.err): its
	// Session gets a process_failed hold.
	actRestoreFailed
)

// action is one thing the supervisor does after a transition.
type action struct {
	kind      actionKind
	after     time.Duration
	waits     []string
	why       string
	residency string
	err       error
}

// idlePolicy is how long an idle process (ready, no Turn) stays hot: an
// Actor's idle timeout and the Session's hibernateAfterIdle.
type idlePolicy struct {
	actor     bool
	actorIdle time.Duration
	// hibernate is the Session's hibernateAfterIdle; never: it has none.
	hibernate time.Duration
	never     bool
}

// lifecycle is the state of one session process; its owner's lock guards
// it.
type lifecycle struct {
	phase     phase
	residency residency
	// canFreeze: the process is under a freezer.
	canFreeze bool
	// canPark: the process understands park and the host can checkpoint
	// it (cleared after a checkpoint of it failed).
	canPark bool
	// policy is known once the process's launch is (nil before).
	policy *idlePolicy
	// waits are the open waits of the running Turn, with their idle
	// timeouts.
	waits map[string]time.Duration
	// calls counts runtime MCP calls in flight; storeWaits the writes
	// that wait for an unreachable store.
	calls, storeWaits int
	// lastActive is when the process was last busy.
	lastActive time.Time
	// wake: activity arrived while a Freeze was in progress; the process
	// is thawed as soon as the Freeze returns.
	wake bool
	// suspendedWaits and suspendedWhy are what the last wait.suspended
	// named, for the wait.resumed that follows it.
	suspendedWaits []string
	suspendedWhy   string
}

// phaseMoves lists the phases each phase may move to; any other move is
// refused (the phase stays).
var phaseMoves = map[phase][]phase{
	phaseStarting:    {phaseReady, phaseStopping, phaseDead, phaseLost},
	phaseReady:       {phaseStopping, phaseDead, phaseReattaching, phaseLost},
	phaseStopping:    {phaseDead, phaseLost},
	phaseReattaching: {phaseStarting, phaseReady, phaseStopping, phaseDead, phaseLost},
	phaseLost:        {phaseDead},
	phaseDead:        nil,
}

// move changes the phase when the move is allowed, and says whether it
// was.
func (l *lifecycle) move(to phase) bool {
	if slices.Contains(phaseMoves[l.phase], to) {
		l.phase = to
		return true
	}
	return false
}

// apply is the transition function: it changes the lifecycle for ev and
// returns what the supervisor must do.
func (l *lifecycle) apply(ev event, s slot) []action {
	switch ev.kind {
	case evReady:
		l.move(phaseReady)
		return l.active(ev.at, s)
	case evStop:
		l.move(phaseStopping)
		if l.residency == resParked {
			return nil // stays parked: a stop does not restore it
		}
		return l.active(ev.at, s)
	case evReattached:
		if l.phase == phaseReattaching {
			if ev.ready {
				l.move(phaseReady)
			} else {
				l.move(phaseStarting)
			}
		}
		var acts []action
		if l.residency == resRestoring {
			// Restored and back: its images have served.
			l.residency = resHot
			acts = append(l.resumed(), action{kind: actResidency, residency: helmrtype.ResidencyRunning}, action{kind: actDropImages})
		}
		return append(acts, l.active(ev.at, s)...)
	case evLeaseLost:
		l.move(phaseLost)
		return []action{{kind: actStopIdle}}
	case evExited:
		l.move(phaseDead)
		l.canFreeze, l.wake = false, false
		return []action{{kind: actStopIdle}}
	case evActivity:
		return l.active(ev.at, s)
	case evWaitStarted:
		if l.waits == nil {
			l.waits = map[string]time.Duration{}
		}
		l.waits[ev.wait] = ev.idle
		return l.active(ev.at, s)
	case evWaitEnded:
		delete(l.waits, ev.wait)
		return l.active(ev.at, s)
	case evTurnEnded:
		l.waits = nil
		return l.active(ev.at, s)
	case evCallStarted:
		l.calls++
		return l.arm(ev.at, s)
	case evStoreWait:
		l.storeWaits++
		return l.arm(ev.at, s)
	case evStoreBack:
		l.storeWaits = max(0, l.storeWaits-1)
		return l.active(ev.at, s)
	case evCallEnded:
		l.calls = max(0, l.calls-1)
		return l.active(ev.at, s)
	case evIdleDue:
		return l.idleDue(ev.at, s)
	case evParkNow:
		if !l.canPark || l.residency != resHot || l.phase != phaseReady || s.cancelling || l.calls > 0 ||
			(s.busy && len(l.waits) == 0) {
			return nil // a Turn that runs and does not wait goes on
		}
		return l.park()
	case evDisconnected:
		if l.residency != resParking {
			return nil
		}
		// Closed as told: the next connection is a reattachment.
		l.move(phaseReattaching)
		return []action{{kind: actDump}}
	case evParkTimeout:
		if l.residency != resParking || l.phase == phaseReattaching {
			return nil
		}
		// It did not close its connection: it is not parked again, and
		// is frozen instead the next time.
		l.canPark, l.residency, l.wake, l.lastActive = false, resHot, false, ev.at
		l.suspendedWaits, l.suspendedWhy = nil, ""
		return append([]action{{kind: actResidency, residency: helmrtype.ResidencyRunning,
			err: errors.New("the session process did not close its connection to be parked")}}, l.arm(ev.at, s)...)
	case evDumpDone:
		if l.residency != resParking {
			return nil
		}
		if ev.err != nil {
			// It runs on (in its pause before it reconnects): frozen
			// instead where it can be, and not parked again.
			l.canPark = false
			acts := []action{{kind: actResidency, residency: helmrtype.ResidencyRunning, err: ev.err}}
			if l.wake || !l.canFreeze {
				l.residency, l.wake, l.lastActive = resHot, false, ev.at
				l.suspendedWaits, l.suspendedWhy = nil, ""
				return acts
			}
			l.residency = resFreezing
			return append(acts, action{kind: actFreeze})
		}
		acts := []action{{kind: actSuspended, waits: l.suspendedWaits, why: l.suspendedWhy},
			{kind: actResidency, residency: helmrtype.ResidencyParked}}
		l.residency = resParked
		if l.wake {
			l.wake = false
			l.residency = resRestoring
			acts = append(acts, action{kind: actResidency, residency: helmrtype.ResidencyRestoring}, action{kind: actRestore})
		}
		return acts
	case evUnrestore:
		if l.residency == resRestoring && l.phase == phaseReattaching {
			l.residency = resParked
		}
		return nil
	case evRestoreDone:
		if l.residency != resRestoring || ev.err == nil {
			return nil // restored: it reconnects (evReattached)
		}
		l.residency = resHot
		l.move(phaseDead)
		return []action{{kind: actRestoreFailed, err: ev.err}}
	case evFreezeDone:
		if l.residency != resFreezing {
			return nil
		}
		if ev.err != nil {
			// Left hot: a failed Freeze thaws what it froze (the Thaw is
			// harmless on a tree that is not frozen), and the next try
			// is a whole idle time later.
			l.residency, l.wake = resThawing, false
			l.lastActive = ev.at
			l.suspendedWaits, l.suspendedWhy = nil, ""
			return []action{{kind: actThaw}}
		}
		if l.phase == phaseDead {
			// Ended meanwhile: thawed for its freezer's release; nothing
			// is recorded of a process that is gone.
			l.residency, l.wake = resThawing, false
			l.suspendedWaits, l.suspendedWhy = nil, ""
			return []action{{kind: actThaw}}
		}
		acts := []action{{kind: actSuspended, waits: l.suspendedWaits, why: l.suspendedWhy}}
		if l.wake {
			l.wake = false
			l.residency = resThawing
			return append(acts, action{kind: actThaw})
		}
		l.residency = resFrozen
		return acts
	case evThawDone:
		if l.residency != resThawing {
			return nil
		}
		l.residency = resHot
		return append(l.resumed(), l.arm(ev.at, s)...)
	}
	return nil
}

// resumed returns the wait.resumed that follows a wait.suspended, if one
// was recorded, and forgets it.
func (l *lifecycle) resumed() []action {
	if l.suspendedWaits == nil && l.suspendedWhy == "" {
		return nil
	}
	a := action{kind: actResumed, waits: l.suspendedWaits, why: l.suspendedWhy}
	l.suspendedWaits, l.suspendedWhy = nil, ""
	return []action{a}
}

// active marks the process busy at: a frozen process is thawed, one being
// frozen is thawed once the Freeze returns, and the idle clock restarts.
func (l *lifecycle) active(at time.Time, s slot) []action {
	l.lastActive = at
	switch l.residency {
	case resFrozen:
		l.residency = resThawing
		return []action{{kind: actThaw}}
	case resFreezing, resParking:
		l.wake = true
		return nil
	case resParked:
		l.residency = resRestoring
		return []action{{kind: actResidency, residency: helmrtype.ResidencyRestoring}, {kind: actRestore}}
	case resThawing, resRestoring:
		return nil
	}
	if !l.canFreeze && !l.canPark {
		return nil
	}
	return l.arm(at, s)
}

// arm returns the idle timer's action for a hot process: armed for what
// is left of its idle time, or stopped when it may not be suspended.
func (l *lifecycle) arm(at time.Time, s slot) []action {
	if l.residency != resHot {
		return nil
	}
	idle, ok := l.idleFor(s)
	if !ok || (!l.canFreeze && !l.canPark) {
		return []action{{kind: actStopIdle}}
	}
	return []action{{kind: actArmIdle, after: max(0, idle-at.Sub(l.lastActive))}}
}

// idleDue freezes a hot process that still may be suspended and has been
// quiet for its idle time; one that became busy meanwhile is armed again
// for what is left.
func (l *lifecycle) idleDue(at time.Time, s slot) []action {
	idle, ok := l.idleFor(s)
	if !ok || (!l.canFreeze && !l.canPark) || l.residency != resHot || l.phase != phaseReady || s.cancelling {
		return nil
	}
	if left := idle - at.Sub(l.lastActive); left > 0 {
		return []action{{kind: actArmIdle, after: left}}
	}
	if l.canPark {
		return l.park()
	}
	l.wake = false
	l.suspendedWaits = slices.Sorted(maps.Keys(l.waits))
	l.suspendedWhy = l.idleWhy()
	l.residency = resFreezing
	return []action{{kind: actFreeze}}
}

// park starts parking a hot process: it is told to park.
func (l *lifecycle) park() []action {
	l.wake = false
	l.suspendedWaits = slices.Sorted(maps.Keys(l.waits))
	l.suspendedWhy = l.idleWhy()
	l.residency = resParking
	return []action{{kind: actResidency, residency: helmrtype.ResidencyParking}, {kind: actPark}}
}

// idleFor is how long the process stays hot in its current state: the
// longest idle timeout of its open waits; for an idle process (ready, no
// Turn) the shorter of an Actor's idle timeout and the Session's
// hibernateAfterIdle. ok is false when it may not be suspended.
func (l *lifecycle) idleFor(s slot) (idle time.Duration, ok bool) {
	if l.calls > 0 || l.storeWaits > 0 {
		return 0, false // a runtime MCP call (such as wait_turn) is in flight, or a write waits for the store
	}
	for _, d := range l.waits {
		idle, ok = max(idle, d), true
	}
	if ok || s.busy || l.phase != phaseReady || l.policy == nil {
		return idle, ok
	}
	if l.policy.actor {
		idle, ok = l.policy.actorIdle, true
	}
	if !l.policy.never && (!ok || l.policy.hibernate < idle) {
		idle, ok = l.policy.hibernate, true
	}
	return idle, ok
}

// idleWhy names what an idle process waits in: "" with open waits,
// "receive" for an Actor, else "hibernate".
func (l *lifecycle) idleWhy() string {
	switch {
	case len(l.waits) > 0:
		return ""
	case l.policy != nil && l.policy.actor:
		return "receive"
	}
	return "hibernate"
}

// apiResidency is the residency a Computer shows for this process.
func (l *lifecycle) apiResidency() string {
	switch l.residency {
	case resThawing, resRestoring:
		return helmrtype.ResidencyRestoring
	case resFreezing, resParking:
		return helmrtype.ResidencyParking
	case resFrozen, resParked:
		return helmrtype.ResidencyParked
	}
	if l.phase == phaseStarting {
		return helmrtype.ResidencyStarting
	}
	return helmrtype.ResidencyRunning
}

// policyOf returns the idle policy of an Agent and a Session as the
// manifest and the Session record state them (both were checked when they
// were accepted).
func policyOf(actor bool, actorIdle, hibernateAfterIdle string) *idlePolicy {
	p := &idlePolicy{actor: actor, never: true}
	if actor {
		p.actorIdle, _ = helmrtype.ParseIdleTimeout(actorIdle)
	}
	if h, never, err := helmrtype.ParseRetention(hibernateAfterIdle); err == nil && !never {
		p.hibernate, p.never = h, false
	}
	return p
}
