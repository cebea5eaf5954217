package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Several control-plane nodes share one database (PostgreSQL). Each
// Session with a live process is supervised by one node, which holds the
// Session's lease and renews it; the store tells every node about the
// changes the others commit (store.Listener), and Remote applies them here:
// event streams and waiters wake on any node.

// NoticeTurnInterrupt is the Kind of the notice that asks the node running
// a Turn to interrupt it (an interrupt without a hold appends no event).
const NoticeTurnInterrupt = "turn.interrupt"

// NoticeCommandCancel is the Kind of the notice that asks the node running
// a Command to cancel it.
const NoticeCommandCancel = "command.cancel"

// lostOnNode is why a Turn that ran on a node that stopped is interrupted.
const lostOnNode = "the control-plane node that supervised the session stopped while the turn ran; it is not replayed"

// Node is this control plane's node ID ("" for a single node).
func (e *Engine) Node() string { return e.node }

// TakeOver makes this node the supervisor of the Session's process, unless
// another node holds an unexpired lease (ok false). When the lease was not
// this node's (new, expired, or another node's that expired), the process
// that ran before is gone for good: its running Turn settles interrupted
// (execution_lost) with a recovery_gap hold, as after a restart where the
// process did not reattach, and the Session's wait deadlines fire here.
func (e *Engine) TakeOver(ctx context.Context, sessionID string, ttl time.Duration) (ok bool, err error) {
	var settled *helmrtype.TurnState
	var fresh bool
	err = e.store.Update(ctx, func(tx store.Tx) error {
		ok, fresh, settled = false, false, nil
		holder, f, err := tx.AcquireLease(ctx, sessionID, e.node, ttl)
		if err != nil || holder != e.node {
			return err
		}
		ok, fresh = true, f
		if !fresh {
			return nil
		}
		p, err := tx.GetProcess(ctx, sessionID)
		switch {
		case err == nil && p.Parked:
			// Parked by its node: this node restores it from its images,
			// and its running Turn goes on.
			return e.scheduleRecovered(ctx, tx, sessionID)
		case err == nil && p.NodeID != e.node:
			if err := tx.DeleteProcess(ctx, sessionID, p.LaunchID); err != nil {
				return err
			}
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return err
		}
		t, err := tx.ActiveTurn(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && t.Status != helmrtype.TurnRunning) {
			return e.scheduleRecovered(ctx, tx, sessionID)
		}
		if err != nil {
			return err
		}
		if err := e.loseTurnTx(ctx, tx, t, lostOnNode); err != nil {
			return err
		}
		ts := turnState(t)
		settled = &ts
		return e.scheduleRecovered(ctx, tx, sessionID)
	})
	if err != nil {
		return false, err
	}
	if settled != nil {
		e.log.Warn("took over a session whose node stopped; its running turn is lost", "session", sessionID, "turn", settled.ID)
		e.wake(sessionID)
	}
	return ok, nil
}

// Reclaim takes back the lease of a process this node launched before it
// restarted (its record names launchID): ok is false when another node
// took the Session over meanwhile (a takeover removes the record, and may
// have let the lease go since), and the process must not be adopted.
func (e *Engine) Reclaim(ctx context.Context, sessionID, launchID string, ttl time.Duration) (ok bool, err error) {
	err = e.store.Update(ctx, func(tx store.Tx) error {
		ok = false
		holder, _, err := tx.AcquireLease(ctx, sessionID, e.node, ttl)
		if err != nil || holder != e.node {
			return err
		}
		p, err := tx.GetProcess(ctx, sessionID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if ok = err == nil && p.LaunchID == launchID; !ok {
			return tx.ReleaseLease(ctx, sessionID, e.node)
		}
		return nil
	})
	return ok, err
}

// RenewLeases records this node's heartbeat, extends its leases, and
// returns their Sessions.
func (e *Engine) RenewLeases(ctx context.Context, ttl time.Duration) ([]string, error) {
	var ids []string
	var prev string
	err := e.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if prev, err = tx.Heartbeat(ctx, e.node, e.incarnation, ttl); err != nil {
			return err
		}
		ids, err = tx.RenewLeases(ctx, e.node, ttl)
		// The Slack bridge's leases are renewed here too, but they are
		// not the supervisor's.
		ids = slices.DeleteFunc(ids, func(id string) bool { return strings.HasPrefix(id, slackLeasePrefix) })
		return err
	})
	if err != nil {
		return nil, err
	}
	// Another incarnation at the first heartbeat is this node's previous
	// run; later, another process that runs with this node ID.
	if first := !e.beat.Swap(true); !first && prev != "" && prev != e.incarnation {
		e.log.Error("another running control plane uses this node's ID: give each node its own data directory or --node-id; sessions may run twice",
			"node", e.node)
	}
	return ids, nil
}

// ReleaseLease ends this node's lease of the Session.
func (e *Engine) ReleaseLease(ctx context.Context, sessionID string) error {
	return e.store.Update(ctx, func(tx store.Tx) error { return tx.ReleaseLease(ctx, sessionID, e.node) })
}

// UnleasedWork returns up to limit Sessions with work that no node
// supervises (their node stopped, or it never took them).
func (e *Engine) UnleasedWork(ctx context.Context, limit int) ([]string, error) {
	return read(ctx, e.store, func(tx store.Tx) ([]string, error) { return tx.UnleasedWork(ctx, limit) })
}

// Remote applies a change another node committed: the Session's event
// streams and watchers wake, and waiters of a Turn that settled get its
// state.
func (e *Engine) Remote(ctx context.Context, n store.Notice) {
	switch n.Kind {
	case store.NoticeCommand:
		e.wake(commandKey(n.CommandID))
		return
	case NoticeCommandCancel:
		e.commandRunner().CancelCommand(n.CommandID)
		return
	case NoticeSchedules:
		if err := e.ArmSchedules(ctx); err != nil {
			e.log.Error("arm the schedules", "err", err)
		}
		return
	}
	e.wake(n.SessionID)
	switch n.Kind {
	case helmrtype.EventTurnCompleted, helmrtype.EventTurnFailed, helmrtype.EventTurnInterrupted, helmrtype.EventTurnCancelled:
		e.wakeSettled(ctx, n.SessionID, n.TurnID)
	}
}

// wakeSettled wakes the waiters of a Turn if it settled (on another node:
// this one's memory of it is dropped, so that the next wait reads it).
func (e *Engine) wakeSettled(ctx context.Context, sessionID, turnID string) {
	key := turnKey(sessionID, turnID)
	e.memory.forget(key)
	if !e.turns.watched(key) {
		return
	}
	t, err := e.GetTurn(ctx, sessionID, turnID)
	if err == nil && helmrtype.TurnTerminal(t.Status) {
		e.turns.wake(key, t)
	}
}

// Resync wakes every watcher, after notices from other nodes may have been
// missed (the store's connection was lost): streams read again, and Turn
// waiters get the state of Turns that settled.
func (e *Engine) Resync(ctx context.Context) {
	e.memory.reset() // settlements elsewhere may have gone unseen
	if err := e.ArmSchedules(ctx); err != nil {
		e.log.Error("arm the schedules", "err", err)
	}
	for _, id := range e.hub.keys() {
		e.wake(id)
	}
	for _, key := range e.turns.keys() {
		sid, tid, _ := strings.Cut(key, "\x00")
		e.wakeSettled(ctx, sid, tid)
	}
}

// PutBinary keeps a Deployment's binary in the store, for the nodes that
// did not receive it.
func (e *Engine) PutBinary(ctx context.Context, digest string, data []byte) error {
	return e.store.Update(ctx, func(tx store.Tx) error { return tx.PutBinary(ctx, digest, data) })
}

// GetBinary returns a Deployment's binary kept in the store.
func (e *Engine) GetBinary(ctx context.Context, digest string) ([]byte, error) {
	return read(ctx, e.store, func(tx store.Tx) ([]byte, error) { return tx.GetBinary(ctx, digest) })
}

// supervisesTx reports whether this node is the Session's recorded
// supervisor (always true for a single node); LeaseHolder takes the
// Session's lock, so the answer holds for the transaction.
// Supervises reports whether this node holds the Session's lease (always
// true for a node alone on its database).
func (e *Engine) Supervises(ctx context.Context, sessionID string) (bool, error) {
	return read(ctx, e.store, func(tx store.Tx) (bool, error) { return e.supervisesTx(ctx, tx, sessionID) })
}

func (e *Engine) supervisesTx(ctx context.Context, tx store.Tx, sessionID string) (bool, error) {
	if e.node == "" {
		return true, nil
	}
	holder, err := tx.LeaseHolder(ctx, sessionID)
	return holder == e.node, err
}

// announceInterrupts tells the nodes that run these Turns to interrupt
// them (the event of a tree-wide control names only its root Session).
func (e *Engine) announceInterrupts(ctx context.Context, tx store.Tx, running []store.Turn) error {
	if e.node == "" {
		return nil
	}
	for _, t := range running {
		if err := tx.Announce(ctx, store.Notice{Kind: NoticeTurnInterrupt, SessionID: t.SessionID, TurnID: t.ID}); err != nil {
			return err
		}
	}
	return nil
}

// announceWork tells the nodes that supervise these Sessions to look for
// work (a resume releases a hold over a whole tree).
func (e *Engine) announceWork(ctx context.Context, tx store.Tx, ids []string) error {
	if e.node == "" {
		return nil
	}
	for _, id := range ids {
		if err := tx.Announce(ctx, store.Notice{Kind: helmrtype.EventSessionResume, SessionID: id}); err != nil {
			return err
		}
	}
	return nil
}

// InterruptDue reports whether the process running the Session's Turn
// turnID should stop it: the Turn is no longer the running one (it was
// settled), an interrupt of the Turn was accepted, an interrupt hold
// applies to the Session (its own or an ancestor's), or the Session was
// cancelled. A node that may have missed the notice asks it (Resync), and
// so does a restarted control plane when a process reattaches.
func (e *Engine) InterruptDue(ctx context.Context, sessionID, turnID string) (bool, error) {
	return read(ctx, e.store, func(tx store.Tx) (bool, error) {
		t, err := tx.ActiveTurn(ctx, sessionID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && (t.ID != turnID || t.Status != helmrtype.TurnRunning || t.InterruptRequested)) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		s, err := e.getSessionTx(ctx, tx, sessionID)
		if err != nil || s.Status == helmrtype.SessionClosed {
			return err == nil, err
		}
		hs, err := e.holdsTx(ctx, tx, sessionID)
		return slices.ContainsFunc(hs, func(h store.Hold) bool { return h.Kind == helmrtype.HoldInterrupt }), err
	})
}

// read runs fn in a Read (its callers need no common snapshot) and
// returns its value.
func read[T any](ctx context.Context, s store.Store, fn func(store.Tx) (T, error)) (T, error) {
	var v T
	err := s.Read(ctx, func(tx store.Tx) error {
		var err error
		v, err = fn(tx)
		return err
	})
	return v, err
}

// turnKey names a Turn's watchers.
func turnKey(sessionID, turnID string) string { return sessionID + "\x00" + turnID }
