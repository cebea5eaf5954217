package supervisor

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// The lifecycle driven event by event, with times of the test's choosing:
// no process, timer or store.

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// kinds lists the kinds of acts, for comparison.
func kinds(acts []action) []actionKind {
	var k []actionKind
	for _, a := range acts {
		k = append(k, a.kind)
	}
	return k
}

func want(t *testing.T, what string, acts []action, k ...actionKind) {
	t.Helper()
	if !slices.Equal(kinds(acts), k) {
		t.Fatalf("%s: actions %v, want %v", what, kinds(acts), k)
	}
}

// ready returns a lifecycle of a ready process under a freezer.
func ready() *lifecycle {
	l := &lifecycle{canFreeze: true, policy: policyOf(false, "", "never")}
	l.apply(event{kind: evReady, at: t0}, slot{})
	return l
}

func TestPhaseMoves(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from phase
		ev   event
		to   phase
	}{
		{phaseStarting, event{kind: evReady}, phaseReady},
		{phaseStarting, event{kind: evStop}, phaseStopping},
		{phaseStarting, event{kind: evExited}, phaseDead},
		{phaseReady, event{kind: evStop}, phaseStopping},
		{phaseReady, event{kind: evExited}, phaseDead},
		{phaseStopping, event{kind: evReady}, phaseStopping}, // a late ready does not revive it
		{phaseStopping, event{kind: evExited}, phaseDead},
		{phaseReattaching, event{kind: evReattached}, phaseStarting},
		{phaseReattaching, event{kind: evReattached, ready: true}, phaseReady},
		{phaseReattaching, event{kind: evStop}, phaseStopping},
		{phaseReady, event{kind: evReattached, ready: true}, phaseReady},
		{phaseStopping, event{kind: evReattached, ready: true}, phaseStopping}, // stopped while it reconnected
		{phaseDead, event{kind: evStop}, phaseDead},                            // a shutdown after the exit
		{phaseDead, event{kind: evReady}, phaseDead},
		{phaseReady, event{kind: evLeaseLost}, phaseLost},
		{phaseReattaching, event{kind: evLeaseLost}, phaseLost},
		{phaseLost, event{kind: evReady}, phaseLost}, // a lost process serves no more
		{phaseLost, event{kind: evReattached, ready: true}, phaseLost},
		{phaseLost, event{kind: evExited}, phaseDead},
		{phaseDead, event{kind: evLeaseLost}, phaseDead},
	} {
		l := &lifecycle{phase: c.from}
		c.ev.at = t0
		l.apply(c.ev, slot{})
		if l.phase != c.to {
			t.Errorf("%s + event %d: %s, want %s", c.from, c.ev.kind, l.phase, c.to)
		}
	}
}

// A wait past its idle timeout freezes the process; the wait's outcome
// thaws it; each is recorded once, naming the wait.
func TestWaitFreezesAndThaws(t *testing.T) {
	t.Parallel()
	l := ready()
	busy := slot{busy: true}
	acts := l.apply(event{kind: evWaitStarted, at: at(0), wait: "w1", idle: 30 * time.Second}, busy)
	want(t, "wait started", acts, actArmIdle)
	if acts[0].after != 30*time.Second {
		t.Fatalf("armed for %s, want 30s", acts[0].after)
	}
	// Activity at 10 s: the timer that fires at 30 s finds 10 s left.
	l.apply(event{kind: evActivity, at: at(10 * time.Second)}, busy)
	acts = l.apply(event{kind: evIdleDue, at: at(30 * time.Second)}, busy)
	want(t, "idle due early", acts, actArmIdle)
	if acts[0].after != 10*time.Second {
		t.Fatalf("re-armed for %s, want 10s", acts[0].after)
	}
	want(t, "idle due", l.apply(event{kind: evIdleDue, at: at(40 * time.Second)}, busy), actFreeze)
	if l.residency != resFreezing {
		t.Fatalf("residency %s, want freezing", l.residency)
	}
	acts = l.apply(event{kind: evFreezeDone, at: at(40 * time.Second)}, busy)
	want(t, "frozen", acts, actSuspended)
	if !slices.Equal(acts[0].waits, []string{"w1"}) || acts[0].why != "" {
		t.Fatalf("suspended %v %q, want [w1] \"\"", acts[0].waits, acts[0].why)
	}
	if got := l.apiResidency(); got != "parked" {
		t.Fatalf("api residency %s, want parked", got)
	}
	// A second timer call while frozen does nothing.
	want(t, "idle due while frozen", l.apply(event{kind: evIdleDue, at: at(time.Minute)}, busy))
	want(t, "outcome", l.apply(event{kind: evWaitEnded, at: at(time.Hour), wait: "w1"}, busy), actThaw)
	if got := l.apiResidency(); got != "restoring" {
		t.Fatalf("api residency %s, want restoring", got)
	}
	// More activity while the thaw runs is absorbed.
	want(t, "activity while thawing", l.apply(event{kind: evActivity, at: at(time.Hour)}, busy))
	acts = l.apply(event{kind: evThawDone, at: at(time.Hour)}, busy)
	want(t, "thawed", acts, actResumed, actStopIdle)
	if !slices.Equal(acts[0].waits, []string{"w1"}) {
		t.Fatalf("resumed %v, want [w1]", acts[0].waits)
	}
	if l.residency != resHot {
		t.Fatalf("residency %s, want hot", l.residency)
	}
}

// Activity that arrives while a Freeze runs is not lost: the process is
// thawed as soon as the Freeze returns (the freeze and thaw never race).
func TestActivityDuringFreeze(t *testing.T) {
	t.Parallel()
	l := ready()
	busy := slot{busy: true}
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	want(t, "idle due", l.apply(event{kind: evIdleDue, at: at(time.Second)}, busy), actFreeze)
	want(t, "activity while freezing", l.apply(event{kind: evActivity, at: at(time.Second)}, busy))
	want(t, "freeze done", l.apply(event{kind: evFreezeDone, at: at(time.Second)}, busy), actSuspended, actThaw)
	want(t, "thaw done", l.apply(event{kind: evThawDone, at: at(2 * time.Second)}, busy), actResumed, actArmIdle)
}

// A failed Freeze leaves the process hot and records nothing.
func TestFreezeFails(t *testing.T) {
	t.Parallel()
	l := ready()
	busy := slot{busy: true}
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	l.apply(event{kind: evIdleDue, at: at(time.Second)}, busy)
	want(t, "freeze failed", l.apply(event{kind: evFreezeDone, at: at(time.Second), err: errors.New("no")}, busy), actThaw)
	want(t, "thaw done", l.apply(event{kind: evThawDone, at: at(time.Second)}, busy), actArmIdle)
	if l.residency != resHot {
		t.Fatalf("residency %s, want hot", l.residency)
	}
}

// What keeps a process hot: no freezer, a runtime MCP call in flight, a
// cancel being drained, a phase other than ready, no wait and no policy.
func TestNotSuspended(t *testing.T) {
	t.Parallel()
	busy := slot{busy: true}

	l := ready()
	l.canFreeze = false
	want(t, "no freezer", l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy))
	want(t, "no freezer, due", l.apply(event{kind: evIdleDue, at: at(time.Hour)}, busy))

	l = ready()
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	want(t, "call started", l.apply(event{kind: evCallStarted, at: at(0)}, busy), actStopIdle)
	want(t, "call in flight, due", l.apply(event{kind: evIdleDue, at: at(time.Hour)}, busy))
	want(t, "call ended", l.apply(event{kind: evCallEnded, at: at(time.Hour)}, busy), actArmIdle)

	l = ready()
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	want(t, "cancelling, due", l.apply(event{kind: evIdleDue, at: at(time.Hour)}, slot{busy: true, cancelling: true}))

	l = ready()
	l.apply(event{kind: evStop, at: at(0)}, slot{})
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	want(t, "stopping, due", l.apply(event{kind: evIdleDue, at: at(time.Hour)}, busy))

	l = ready() // hibernateAfterIdle never, not an Actor
	want(t, "idle, no policy", l.apply(event{kind: evActivity, at: at(0)}, slot{}), actStopIdle)

	l = ready()
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	want(t, "turn ended", l.apply(event{kind: evTurnEnded, at: at(0)}, slot{}), actStopIdle)
	if len(l.waits) != 0 {
		t.Fatalf("waits %v after the Turn ended", l.waits)
	}
}

// An idle process hibernates after the shorter of an Actor's idle timeout
// and the Session's hibernateAfterIdle, and says which it waits in.
func TestIdlePolicy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		policy *idlePolicy
		after  time.Duration
		why    string
	}{
		{policyOf(true, "30s", "never"), 30 * time.Second, "receive"},
		{policyOf(true, "30s", "10s"), 10 * time.Second, "receive"},
		{policyOf(false, "", "1m"), time.Minute, "hibernate"},
	} {
		l := &lifecycle{canFreeze: true, policy: c.policy}
		acts := l.apply(event{kind: evReady, at: at(0)}, slot{})
		want(t, "ready", acts, actArmIdle)
		if acts[0].after != c.after {
			t.Errorf("armed for %s, want %s", acts[0].after, c.after)
		}
		want(t, "busy", l.apply(event{kind: evActivity, at: at(0)}, slot{busy: true}), actStopIdle)
		want(t, "due", l.apply(event{kind: evIdleDue, at: at(c.after)}, slot{}), actFreeze)
		acts = l.apply(event{kind: evFreezeDone, at: at(c.after)}, slot{})
		want(t, "frozen", acts, actSuspended)
		if acts[0].why != c.why || len(acts[0].waits) != 0 {
			t.Errorf("suspended %v %q, want [] %q", acts[0].waits, acts[0].why, c.why)
		}
	}
}

// A process that ends while frozen or freezing is left to its exit: the
// idle timer stops, and a Freeze that returns after the exit thaws (so
// that its freezer can be released).
func TestExitWhileFreezing(t *testing.T) {
	t.Parallel()
	l := ready()
	busy := slot{busy: true}
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	l.apply(event{kind: evIdleDue, at: at(time.Second)}, busy)
	want(t, "exit", l.apply(event{kind: evExited, at: at(time.Second)}, busy), actStopIdle)
	want(t, "freeze done after the exit", l.apply(event{kind: evFreezeDone, at: at(time.Second)}, busy), actThaw)
	if l.phase != phaseDead {
		t.Fatalf("phase %s, want dead", l.phase)
	}
}

// parkable returns a lifecycle of a ready process that can be parked.
func parkable() *lifecycle {
	l := ready()
	l.canPark = true
	return l
}

// residencies lists the residencies the actions record.
func residencies(acts []action) []string {
	var r []string
	for _, a := range acts {
		if a.kind == actResidency {
			r = append(r, a.residency)
		}
	}
	return r
}

// A wait past its idle timeout parks the process: told to park, it closes
// its connection, is checkpointed and ended; the wait's outcome restores
// it, and once it reconnects its images go. Each residency is recorded in
// order, and wait.suspended and wait.resumed frame the park.
func TestWaitParksAndRestores(t *testing.T) {
	t.Parallel()
	l := parkable()
	busy := slot{busy: true}
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w1", idle: 30 * time.Second}, busy)
	acts := l.apply(event{kind: evIdleDue, at: at(30 * time.Second)}, busy)
	want(t, "idle due", acts, actResidency, actPark)
	if got := l.apiResidency(); got != "parking" {
		t.Fatalf("api residency %s, want parking", got)
	}
	want(t, "connection closed", l.apply(event{kind: evDisconnected, at: at(31 * time.Second)}, busy), actDump)
	if l.phase != phaseReattaching {
		t.Fatalf("phase %s after the close, want reattaching", l.phase)
	}
	acts = l.apply(event{kind: evDumpDone, at: at(31 * time.Second)}, busy)
	want(t, "dumped", acts, actSuspended, actResidency)
	if !slices.Equal(acts[0].waits, []string{"w1"}) || acts[1].residency != "parked" || l.apiResidency() != "parked" {
		t.Fatalf("dumped: %+v, residency %s", acts, l.apiResidency())
	}
	want(t, "idle due while parked", l.apply(event{kind: evIdleDue, at: at(time.Hour)}, busy))
	acts = l.apply(event{kind: evWaitEnded, at: at(time.Hour), wait: "w1"}, busy)
	want(t, "outcome", acts, actResidency, actRestore)
	if acts[0].residency != "restoring" {
		t.Fatalf("recorded %s, want restoring", acts[0].residency)
	}
	want(t, "activity while restoring", l.apply(event{kind: evActivity, at: at(time.Hour)}, busy))
	want(t, "restored", l.apply(event{kind: evRestoreDone, at: at(time.Hour)}, busy))
	acts = l.apply(event{kind: evReattached, at: at(time.Hour), ready: true}, busy)
	want(t, "reconnected", acts, actResumed, actResidency, actDropImages, actStopIdle)
	if acts[1].residency != "running" || l.phase != phaseReady || l.residency != resHot {
		t.Fatalf("reconnected: %+v, phase %s, residency %s", acts, l.phase, l.residency)
	}
}

// Activity while a park is under way restores the process as soon as its
// checkpoint is taken.
func TestActivityDuringPark(t *testing.T) {
	t.Parallel()
	l := parkable()
	l.apply(event{kind: evActivity, at: at(0)}, slot{})
	l.policy = policyOf(false, "", "1m")
	l.apply(event{kind: evIdleDue, at: at(time.Minute)}, slot{})
	want(t, "activity while parking", l.apply(event{kind: evActivity, at: at(time.Minute)}, slot{}))
	l.apply(event{kind: evDisconnected, at: at(time.Minute)}, slot{})
	acts := l.apply(event{kind: evDumpDone, at: at(time.Minute)}, slot{})
	want(t, "dumped", acts, actSuspended, actResidency, actResidency, actRestore)
	if !slices.Equal(residencies(acts), []string{"parked", "restoring"}) || acts[0].why != "hibernate" {
		t.Fatalf("dumped: %+v", acts)
	}
}

// A checkpoint that fails leaves the process frozen instead, says why, and
// is not tried again for this process; one that cannot be frozen either
// stays hot.
func TestDumpFails(t *testing.T) {
	t.Parallel()
	busy := slot{busy: true}
	l := parkable()
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	l.apply(event{kind: evIdleDue, at: at(time.Second)}, busy)
	l.apply(event{kind: evDisconnected, at: at(time.Second)}, busy)
	acts := l.apply(event{kind: evDumpDone, at: at(time.Second), err: errors.New("criu said no")}, busy)
	want(t, "dump failed", acts, actResidency, actFreeze)
	if acts[0].err == nil || acts[0].residency != "running" || l.canPark {
		t.Fatalf("dump failed: %+v, canPark %v", acts, l.canPark)
	}
	want(t, "frozen", l.apply(event{kind: evFreezeDone, at: at(time.Second)}, busy), actSuspended)

	l = parkable()
	l.canFreeze = false
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	l.apply(event{kind: evIdleDue, at: at(time.Second)}, busy)
	l.apply(event{kind: evDisconnected, at: at(time.Second)}, busy)
	want(t, "dump failed, no freezer", l.apply(event{kind: evDumpDone, at: at(time.Second), err: errors.New("no")}, busy), actResidency)
	if l.residency != resHot {
		t.Fatalf("residency %s, want hot", l.residency)
	}
}

// A process that does not close its connection when told to park stays
// hot and is frozen, not parked, the next time.
func TestParkTimeout(t *testing.T) {
	t.Parallel()
	busy := slot{busy: true}
	l := parkable()
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	l.apply(event{kind: evIdleDue, at: at(time.Second)}, busy)
	acts := l.apply(event{kind: evParkTimeout, at: at(10 * time.Second)}, busy)
	want(t, "timed out", acts, actResidency, actArmIdle)
	if acts[0].err == nil || l.canPark || l.residency != resHot {
		t.Fatalf("timed out: %+v, canPark %v, residency %s", acts, l.canPark, l.residency)
	}
	want(t, "next idle", l.apply(event{kind: evIdleDue, at: at(11 * time.Second)}, busy), actFreeze)
}

// A restored process that has not reconnected when the control plane
// stops is parked again.
func TestUnrestore(t *testing.T) {
	t.Parallel()
	l := parkable()
	l.residency, l.phase = resParked, phaseReattaching
	l.apply(event{kind: evActivity, at: at(0)}, slot{})
	want(t, "unrestore", l.apply(event{kind: evUnrestore, at: at(0)}, slot{}))
	if l.residency != resParked || l.phase != phaseReattaching {
		t.Fatalf("residency %s phase %s, want parked reattaching", l.residency, l.phase)
	}
}

// A process whose write waits for an unreachable store is not suspended
// meanwhile; once the write went through its idle time starts again.
func TestStoreWaitKeepsTheProcessHot(t *testing.T) {
	t.Parallel()
	busy := slot{busy: true}
	l := parkable()
	l.apply(event{kind: evWaitStarted, at: at(0), wait: "w", idle: time.Second}, busy)
	want(t, "store down", l.apply(event{kind: evStoreWait, at: at(0)}, busy), actStopIdle)
	want(t, "idle due while the store is down", l.apply(event{kind: evIdleDue, at: at(time.Hour)}, busy))
	want(t, "store back", l.apply(event{kind: evStoreBack, at: at(time.Hour)}, busy), actArmIdle)
	want(t, "idle due after", l.apply(event{kind: evIdleDue, at: at(time.Hour + time.Second)}, busy), actResidency, actPark)
}

// A restore that fails ends the process: its Session gets a hold.
func TestRestoreFails(t *testing.T) {
	t.Parallel()
	l := parkable()
	l.residency, l.phase = resParked, phaseReattaching // as recovered after a restart
	want(t, "work", l.apply(event{kind: evActivity, at: at(0)}, slot{}), actResidency, actRestore)
	acts := l.apply(event{kind: evRestoreDone, at: at(0), err: errors.New("image corrupt")}, slot{})
	want(t, "restore failed", acts, actRestoreFailed)
	if l.phase != phaseDead {
		t.Fatalf("phase %s, want dead", l.phase)
	}
}
