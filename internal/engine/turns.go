package engine

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Launch is what the supervisor needs to start a Session's process.
type Launch struct {
	Session store.Session
	Binary  string
	// Digest is the binary's digest ("sha256:…").
	Digest string
	// Runtime is how the artifact runs: "" a native binary, "node" a Node
	// bundle (helmrtype.Manifest.Runtime).
	Runtime string
	// SourcesDigest is the digest of the Deployment's sources archive, which
	// the Template's Copy steps read; "" when it has none.
	SourcesDigest string
	Agent         helmrtype.AgentManifest
	// Template is the Agent's Template: the Computer's image and resources.
	Template helmrtype.TemplateManifest
	Recovery string
	// RecoveryReason says why a reconstructed process was started.
	RecoveryReason string
}

// ErrHeld is returned by PrepareLaunch when a hold applies to the Session:
// no process starts until it is resumed.
var ErrHeld = errors.New("engine: the session is held")

// PrepareLaunch assigns the Session a Computer when it has none and returns
// what its process needs; ErrHeld when a hold applies. For a process that
// reattaches (reattach true) holds do not matter and nothing is
// reconstructed.
func (e *Engine) PrepareLaunch(ctx context.Context, sessionID string, reattach bool) (*Launch, error) {
	var out *Launch
	err := e.store.Update(ctx, func(tx store.Tx) error {
		s, dep, a, err := e.sessionAgentTx(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		if !reattach {
			if held, err := e.heldTx(ctx, tx, s.ID); err != nil || held {
				if held {
					return ErrHeld
				}
				return err
			}
		}
		if s.ComputerID == "" {
			// A new Computer from the Agent's Template.
			s.ComputerID = NewID()
			if err := tx.UpdateSession(ctx, s); err != nil {
				return err
			}
		}
		tmpl, err := e.computerTemplateTx(ctx, tx, s, e.Now())
		if err != nil {
			return err
		}
		out = &Launch{Session: *s, Binary: dep.row.BinaryPath, Digest: dep.row.Digest, Runtime: dep.manifest.Runtime, SourcesDigest: dep.row.SourcesDigest,
			Agent: *a, Recovery: "initial", Template: tmpl}
		if reattach {
			return nil
		}
		// A launch after a resumed process_failed or recovery_gap hold is
		// a reconstruction: init runs again, and the process is told why.
		hs, err := tx.HoldsToRecover(ctx, sessionID)
		if err != nil {
			return err
		}
		now := e.Now()
		for i := range hs {
			h := &hs[i]
			out.Recovery = "reconstructed"
			out.RecoveryReason = "resumed after a " + h.Kind + " hold: " + h.Reason
			h.RecoveredAt = &now
			if err := tx.UpdateHold(ctx, h); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// StartNextTurn marks the Session's oldest queued Turn running and returns
// it with the messages already sent to it. It returns nil when a Turn is
// already running or none is queued.
func (e *Engine) StartNextTurn(ctx context.Context, sessionID string) (*store.Turn, []store.Message, error) {
	var turn *store.Turn
	var msgs []store.Message
	err := e.store.Update(ctx, func(tx store.Tx) error {
		var err error
		turn, msgs, err = e.startNextTx(ctx, tx, sessionID)
		return err
	})
	if err == nil && turn != nil {
		e.wake(sessionID)
	}
	return turn, msgs, err
}

func (e *Engine) startNextTx(ctx context.Context, tx store.Tx, sessionID string) (*store.Turn, []store.Message, error) {
	t, err := tx.ActiveTurn(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if t.Status == helmrtype.TurnRunning {
		return nil, nil, nil
	}
	if ok, err := e.startableTx(ctx, tx, sessionID); !ok || err != nil {
		return nil, nil, err
	}
	return e.startTurnTx(ctx, tx, t, true)
}

// CanStart reports whether the Session has a queued Turn that may start
// (no hold applies).
func (e *Engine) CanStart(ctx context.Context, sessionID string) (bool, error) {
	var ok bool
	err := e.store.View(ctx, func(tx store.Tx) error {
		t, err := tx.ActiveTurn(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil || t.Status != helmrtype.TurnQueued {
			return err
		}
		ok, err = e.startableTx(ctx, tx, sessionID)
		return err
	})
	return ok, err
}

// startableTx reports whether the Session's queued Turns may start: no
// hold applies to it.
func (e *Engine) startableTx(ctx context.Context, tx store.Tx, sessionID string) (bool, error) {
	held, err := e.heldTx(ctx, tx, sessionID)
	return !held, err
}

// startTurnTx marks a queued Turn running and returns the messages already
// sent to it. A Turn admitted in this same transaction can have none yet,
// so withMessages false skips reading them.
func (e *Engine) startTurnTx(ctx context.Context, tx store.Tx, t *store.Turn, withMessages bool) (*store.Turn, []store.Message, error) {
	sessionID := t.SessionID
	// With several nodes, only the Session's supervisor starts its Turns:
	// a node cut off past its lease (whose Session another node took over)
	// starts nothing, even before it learns so.
	if ok, err := e.supervisesTx(ctx, tx, sessionID); !ok || err != nil {
		return nil, nil, err
	}
	now := e.Now()
	t.Status, t.StartedAt = helmrtype.TurnRunning, &now
	if err := tx.UpdateTurn(ctx, t); err != nil {
		return nil, nil, err
	}
	noteTurn(tx, t)
	if _, err := e.appendEvent(ctx, tx, sessionID, t.ID, helmrtype.EventTurnRunning, nil, now); err != nil {
		return nil, nil, err
	}
	if !withMessages || !t.Messaged {
		return t, nil, nil
	}
	msgs, err := tx.PendingMessages(ctx, t.ID)
	if err != nil {
		return nil, nil, err
	}
	return t, msgs, nil
}

// runningTurnTx loads a Turn that process operations may change.
func (e *Engine) runningTurnTx(ctx context.Context, tx store.Tx, sessionID, turnID string) (*store.Turn, error) {
	t, err := e.getTurnTx(ctx, tx, sessionID, turnID)
	if err != nil {
		return nil, err
	}
	if t.Status != helmrtype.TurnRunning {
		if helmrtype.TurnTerminal(t.Status) {
			return nil, helmrtype.Errorf(helmrtype.CodeTurnSettled, "turn %s is %s", t.ID, t.Status)
		}
		return nil, helmrtype.Errorf(helmrtype.CodeTurnNotRunning, "turn %s is %s", t.ID, t.Status)
	}
	return t, nil
}

// AppendOutput appends Content to a running Turn's output and returns the
// output record's event sequence. op numbers the process's operations on the
// Turn; a repeated op is recognised and not applied twice (dup is true).
func (e *Engine) AppendOutput(ctx context.Context, sessionID, turnID string, op int64, content helmrtype.Content) (seq int64, dup bool, err error) {
	if op < 1 {
		return 0, false, invalid("output: op must be a positive number, one more than the Turn's previous operation")
	}
	if content == nil {
		content = helmrtype.Content{}
	}
	if err := content.Check(); err != nil {
		return 0, false, err
	}
	raw, err := json.Marshal(map[string]any{"content": content})
	if err != nil {
		return 0, false, err
	}
	size := int64(content.EncodedSize())
	err = e.store.Update(ctx, func(tx store.Tx) error {
		t, err := e.runningTurnTx(ctx, tx, sessionID, turnID)
		if err != nil {
			return err
		}
		if op <= t.LastOp {
			dup = true
			return nil
		}
		if t.OutputBytes+size > helmrtype.MaxTurnOutputBytes {
			return &helmrtype.Error{Code: helmrtype.CodeLimitExceeded, Message: "output: the turn's output budget of " +
				strconv.Itoa(helmrtype.MaxTurnOutputBytes) + " bytes would be exceeded",
				Details: map[string]any{"used": t.OutputBytes, "size": size}}
		}
		now := e.Now()
		if seq, err = e.appendEvent(ctx, tx, sessionID, turnID, helmrtype.EventTurnOutput, json.RawMessage(raw), now); err != nil {
			return err
		}
		t.OutputBytes += size
		t.LastOp = op
		return tx.UpdateTurn(ctx, t)
	})
	if err == nil && !dup {
		e.wake(sessionID)
	}
	return seq, dup, err
}

// Settlement is how a running Turn ended.
type Settlement struct {
	Status string // completed, failed or interrupted
	Result json.RawMessage
	// Response is the staged human response (a Content array); nil when the
	// handler staged none. It is published only when the Turn completes.
	Response json.RawMessage
	Error    *helmrtype.TurnError
}

// checkResponse validates a staged response against the spec's limits.
func checkResponse(raw json.RawMessage) *helmrtype.TurnError {
	if raw == nil {
		return nil
	}
	if len(raw) > helmrtype.MaxResponseBytes {
		return &helmrtype.TurnError{Code: helmrtype.CodeLimitExceeded, Message: "the response is " + strconv.Itoa(len(raw)) +
			" bytes of JSON; the limit is " + strconv.Itoa(helmrtype.MaxResponseBytes)}
	}
	c, err := helmrtype.ParseContent(raw, helmrtype.MaxResponseBytes, false)
	if err == nil {
		err = c.Check()
	}
	if err != nil {
		code := helmrtype.CodeOf(err)
		if code == helmrtype.CodeInternal {
			code = helmrtype.CodeOutputInvalid
		}
		return &helmrtype.TurnError{Code: code, Message: "the response: " + err.Error()}
	}
	return nil
}

// SettleTurn records a running Turn's end. A completed Turn publishes its
// staged response; other outcomes suppress it. A repeat (op at or below the
// Turn's last op) of a settle that took effect succeeds without effect. Messages never delivered are
// rejected. With startNext, the same transaction starts the Session's next
// queued Turn and returns it (nil when none).
func (e *Engine) SettleTurn(ctx context.Context, sessionID, turnID string, op int64, st Settlement, startNext bool) (*store.Turn, []store.Message, error) {
	switch st.Status {
	case helmrtype.TurnCompleted:
		if len(st.Result) == 0 {
			st.Result = json.RawMessage("null")
		}
		if len(st.Result) > helmrtype.MaxResultBytes || helmrtype.CheckJSON(st.Result) != nil {
			st = Settlement{Status: helmrtype.TurnFailed, Error: &helmrtype.TurnError{Code: helmrtype.CodeResultInvalid,
				Message: "the result is not JSON of at most " + strconv.Itoa(helmrtype.MaxResultBytes) + " bytes"}}
		} else if terr := checkResponse(st.Response); terr != nil {
			st = Settlement{Status: helmrtype.TurnFailed, Error: terr}
		}
	case helmrtype.TurnFailed, helmrtype.TurnInterrupted:
		if st.Error == nil {
			st.Error = &helmrtype.TurnError{Code: helmrtype.CodeHandlerFailed}
		}
	default:
		return nil, nil, invalid("a turn settles completed, failed or interrupted, not %q", st.Status)
	}
	var next *store.Turn
	var msgs []store.Message
	var closed bool
	err := e.store.Update(ctx, func(tx store.Tx) error {
		next, msgs, closed = nil, nil, false
		t, err := e.runningTurnTx(ctx, tx, sessionID, turnID)
		if helmrtype.CodeOf(err) == helmrtype.CodeTurnSettled && op > 0 {
			// A settle repeated after a reconnect, whose first try took
			// effect: acknowledged again, applied once.
			if prev, gerr := e.getTurnTx(ctx, tx, sessionID, turnID); gerr == nil && op <= prev.LastOp {
				return nil
			}
		}
		if err != nil {
			return err
		}
		if op > 0 && op <= t.LastOp {
			// A settle repeated after it took effect finds the Turn settled;
			// one at or below the last op of a running Turn breaks the
			// protocol.
			return invalid("turn.settle op %d is not above the turn's last op %d", op, t.LastOp)
		}
		if op > 0 {
			t.LastOp = op
		}
		queued, c, err := e.settleTx(ctx, tx, t, st)
		if err != nil {
			return err
		}
		closed = c
		if startNext && queued != nil {
			next, msgs, err = e.startTurnTx(ctx, tx, queued, true)
		}
		return err
	})
	if err == nil {
		// The settlement's waiters were woken at its commit (rememberTurns).
		e.wake(sessionID)
		if closed {
			e.afterClose(sessionID, helmrtype.SessionClosed)
		}
	}
	return next, msgs, err
}

// settleTx records a running Turn's end and returns the Session's oldest
// queued Turn that may start (nil when none: the Session is idle from now,
// or held), and whether the Session closed with it (a closing Session that
// drained).
func (e *Engine) settleTx(ctx context.Context, tx store.Tx, t *store.Turn, st Settlement) (*store.Turn, bool, error) {
	now := e.Now()
	if st.Status != helmrtype.TurnCompleted {
		// A Turn of a cancelled Session settles cancelled.
		s, err := e.getSessionTx(ctx, tx, t.SessionID)
		if err != nil {
			return nil, false, err
		}
		if s.Status == helmrtype.SessionClosed {
			st = Settlement{Status: helmrtype.TurnCancelled, Error: &helmrtype.TurnError{Code: helmrtype.CodeCancelled, Message: "the session was cancelled"}}
		}
	}
	t.Status, t.TerminalAt = st.Status, &now
	data := map[string]any{}
	if st.Status == helmrtype.TurnCompleted {
		t.Result = st.Result
		data["result"] = st.Result
		if st.Response != nil {
			t.Response, t.ResponseStaged = st.Response, true
			data["response"] = st.Response
		}
	} else {
		t.Result = nil
		t.Response, t.ResponseStaged = nil, false
		t.ErrorCode, t.ErrorMessage = string(st.Error.Code), st.Error.Message
		data["error"] = st.Error
	}
	if err := tx.UpdateTurn(ctx, t); err != nil {
		return nil, false, err
	}
	noteTurn(tx, t)
	if _, err := e.appendEvent(ctx, tx, t.SessionID, t.ID, helmrtype.TurnEventKind(st.Status), data, now); err != nil {
		return nil, false, err
	}
	// Its waits end with it, and its pending questions are withdrawn.
	if t.Waited {
		if err := e.endTurnWaitsTx(ctx, tx, t, now); err != nil {
			return nil, false, err
		}
	}
	if t.Messaged {
		msgs, err := tx.PendingMessages(ctx, t.ID)
		if err != nil {
			return nil, false, err
		}
		for i := range msgs {
			if err := e.rejectMessageTx(ctx, tx, &msgs[i], "turn_settled", "the turn settled before the message was delivered", now); err != nil {
				return nil, false, err
			}
		}
	}
	// The Session is idle when nothing is queued behind this Turn.
	next, err := tx.ActiveTurn(ctx, t.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		s, err := e.getSessionTx(ctx, tx, t.SessionID)
		if err != nil {
			return nil, false, err
		}
		setIdle(s, &now)
		if err := tx.SetSessionIdleSince(ctx, t.SessionID, s.IdleSince, s.IdleCloseAt); err != nil {
			return nil, false, err
		}
		closed := false
		if s.Status == helmrtype.SessionClosing { // read in this transaction: no second read for an open one
			if closed, err = e.closeIfDrainedTx(ctx, tx, t.SessionID, now); err != nil {
				return nil, false, err
			}
		}
		if !closed {
			e.armIdleClose(s)
		}
		return nil, closed, nil
	}
	if err != nil {
		return nil, false, err
	}
	if ok, err := e.startableTx(ctx, tx, t.SessionID); !ok || err != nil {
		return nil, false, err
	}
	return next, false, nil
}

// loseTurnTx settles a running Turn whose execution was lost (its process
// did not come back): interrupted with execution_lost, never replayed,
// and a recovery_gap hold on its Session.
func (e *Engine) loseTurnTx(ctx context.Context, tx store.Tx, t *store.Turn, why string) error {
	if _, _, err := e.settleTx(ctx, tx, t, Settlement{Status: helmrtype.TurnInterrupted, Error: &helmrtype.TurnError{
		Code: helmrtype.CodeExecutionLost, Message: why}}); err != nil {
		return err
	}
	_, err := e.placeHoldTx(ctx, tx, t.SessionID, helmrtype.HoldRecoveryGap, why, e.Now())
	return err
}

// FailRunningTurn settles the Session's running Turn, if any, when its
// process is gone, and records the process's end. status is failed, or
// interrupted for a Turn whose cancellation did not drain. With hold (a
// hold kind) the same transaction places that hold on the Session; a
// recovery_gap hold only when a Turn was running (a Turn that never
// started lost nothing).
func (e *Engine) FailRunningTurn(ctx context.Context, sessionID, status string, code helmrtype.Code, message, hold string) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		if ok, err := e.supervisesTx(ctx, tx, sessionID); !ok || err != nil {
			// Another node took the Session over: what this node's process
			// did is that node's to settle.
			return err
		}
		now := e.Now()
		data := map[string]any{"error": helmrtype.TurnError{Code: code, Message: message}}
		t, err := tx.ActiveTurn(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && t.Status != helmrtype.TurnRunning) {
			t, err = nil, nil
		}
		if err != nil {
			return err
		}
		if hold == helmrtype.HoldRecoveryGap && t == nil {
			hold = ""
		}
		if hold != "" {
			h, err := e.placeHoldTx(ctx, tx, sessionID, hold, message, now)
			if err != nil {
				return err
			}
			data["hold_id"] = h.ID
		}
		if _, err := e.appendEvent(ctx, tx, sessionID, "", helmrtype.EventProcessFailed, data, now); err != nil {
			return err
		}
		if t == nil {
			return nil
		}
		_, _, err = e.settleTx(ctx, tx, t, Settlement{Status: status, Error: &helmrtype.TurnError{Code: code, Message: message}})
		return err
	})
	if err == nil {
		e.wake(sessionID)
	}
	return err
}

// ProcessStopped records that a Session's process ended in an orderly way.
func (e *Engine) ProcessStopped(ctx context.Context, sessionID, reason string) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		_, err := e.appendEvent(ctx, tx, sessionID, "", helmrtype.EventProcessStopped, map[string]any{"reason": reason}, e.Now())
		return err
	})
	if err == nil {
		e.wake(sessionID)
	}
	return err
}

// Recover runs once when the control plane starts: Turns that were running
// when it stopped settle interrupted with execution_lost (they are never
// replayed), except in the Sessions of live, whose processes survived and
// may reattach. It returns the Sessions that still have queued Turns (with
// several nodes, those whose lease this node holds: others are another
// node's, and those of no node are found by the lease keeper's sweep).
func (e *Engine) Recover(ctx context.Context, live map[string]bool) ([]string, error) {
	var ids []string
	err := e.store.Update(ctx, func(tx store.Tx) error {
		running, err := tx.TurnsWithStatus(ctx, helmrtype.TurnRunning)
		if err != nil {
			return err
		}
		// With several nodes, this one settles only the Turns of Sessions
		// it still holds the lease of: others are another node's, and those
		// of no node are taken over one by one (TakeOver), under the lease.
		var leases map[string]string
		if e.node != "" {
			if leases, err = tx.Leases(ctx); err != nil {
				return err
			}
		}
		for i := range running {
			if live[running[i].SessionID] {
				continue
			}
			if e.node != "" {
				if leases[running[i].SessionID] != e.node {
					continue
				}
				// Read again under the Session's lock: the lease may have
				// expired and been taken since the snapshot.
				if ok, err := e.supervisesTx(ctx, tx, running[i].SessionID); err != nil || !ok {
					if err != nil {
						return err
					}
					continue
				}
				cur, err := tx.ActiveTurn(ctx, running[i].SessionID)
				if errors.Is(err, store.ErrNotFound) || (err == nil && (cur.ID != running[i].ID || cur.Status != helmrtype.TurnRunning)) {
					continue
				}
				if err != nil {
					return err
				}
				running[i] = *cur
			}
			if err := e.loseTurnTx(ctx, tx, &running[i], "the control plane stopped while the turn ran; it is not replayed"); err != nil {
				return err
			}
		}
		if ids, err = tx.SessionsWithWork(ctx); err != nil {
			return err
		}
		if e.node != "" {
			ids = slices.DeleteFunc(ids, func(id string) bool { return leases[id] != e.node })
		}
		// Deadlines of waits and Token expiries are kept in the store:
		// they fire in this control plane now.
		e.sched.stop()
		return e.scheduleRecovered(ctx, tx, "")
	})
	return ids, err
}

// RecordProcess stores the record of a launched session process, so that a
// restarted control plane can find it.
func (e *Engine) RecordProcess(ctx context.Context, p *store.Process) error {
	return e.store.Update(ctx, func(tx store.Tx) error { return tx.PutProcess(ctx, p) })
}

// ForgetProcess removes the record of a process that ended (only if it is
// still the record of that launch).
func (e *Engine) ForgetProcess(ctx context.Context, sessionID, launchID string) error {
	return e.store.Update(ctx, func(tx store.Tx) error { return tx.DeleteProcess(ctx, sessionID, launchID) })
}

// ProcessRecord returns the record of the Session's process, nil when it
// has none.
func (e *Engine) ProcessRecord(ctx context.Context, sessionID string) (*store.Process, error) {
	var out *store.Process
	err := e.store.View(ctx, func(tx store.Tx) error {
		p, err := tx.GetProcess(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		out = p
		return err
	})
	return out, err
}

// Processes returns the records of every session process believed running.
func (e *Engine) Processes(ctx context.Context) ([]store.Process, error) {
	var out []store.Process
	err := e.store.View(ctx, func(tx store.Tx) error {
		var err error
		out, err = tx.ListProcesses(ctx)
		return err
	})
	return out, err
}

// RunningTurn returns the Session's running Turn, nil when none runs.
func (e *Engine) RunningTurn(ctx context.Context, sessionID string) (*store.Turn, error) {
	var out *store.Turn
	err := e.store.View(ctx, func(tx store.Tx) error {
		t, err := tx.ActiveTurn(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err == nil && t.Status == helmrtype.TurnRunning {
			out = t
		}
		return err
	})
	return out, err
}

// QueuedWork reports whether the Session has a queued Turn.
func (e *Engine) QueuedWork(ctx context.Context, sessionID string) (bool, error) {
	var ok bool
	err := e.store.View(ctx, func(tx store.Tx) error {
		t, err := tx.ActiveTurn(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		ok = err == nil && t.Status == helmrtype.TurnQueued
		return err
	})
	return ok, err
}

// deadlineSkew is how much earlier than this node's clock a process's
// clock may see a Turn's deadline come.
const deadlineSkew = time.Second

// RecordDeadline records that a running Turn reached its max_turn_duration,
// or one that its process settled already on its own deadline (the SDK
// puts the deadline on the Turn's context, so its settlement may commit
// before the server's timer is recorded). The deadline must have come by
// this node's clock, give or take deadlineSkew.
func (e *Engine) RecordDeadline(ctx context.Context, sessionID, turnID string) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		t, err := e.runningTurnTx(ctx, tx, sessionID, turnID)
		if err != nil {
			settled, gerr := e.getTurnTx(ctx, tx, sessionID, turnID)
			if gerr != nil || settled.Status != helmrtype.TurnInterrupted || settled.ErrorCode != string(helmrtype.CodeDeadlineExceeded) {
				return err
			}
			t = settled
		}
		s, err := e.getSessionTx(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		d, err := helmrtype.ParseDuration(s.MaxTurnDuration)
		if s.MaxTurnDuration == "" || err != nil || t.StartedAt == nil || e.Now().Before(t.StartedAt.Add(d-deadlineSkew)) {
			return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "turn %s has not reached a max_turn_duration", turnID)
		}
		_, err = e.appendEvent(ctx, tx, sessionID, turnID, helmrtype.EventSessionDeadline, nil, e.Now())
		return err
	})
	if err == nil {
		e.wake(sessionID)
	}
	return err
}
