package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Implicit Computers. A Session created without a Computer gets one of
// its own at its first launch, recorded as implicit. Once every Session on
// it is closed and none of its Commands runs, and it stays so for a grace
// period, ReapIdleComputers deletes it as DeleteComputer does. Computers
// created through the API are never deleted this way.

// DefaultImplicitComputerGrace is how long an implicit Computer that
// nothing uses is kept before it is deleted, unless configured otherwise.
const DefaultImplicitComputerGrace = 10 * time.Minute

// idleBatch is how many idle Computers one read lists.
const idleBatch = 100

// errComputerBusy rolls back a claim of a Computer that is in use again.
var errComputerBusy = errors.New("engine: computer in use")

// idleComputers remembers since when this engine has seen each implicit
// Computer idle. It is kept in memory: after a restart the grace starts
// again, which only keeps a Computer longer.
type idleComputers struct {
	mu    sync.Mutex
	since map[string]time.Time
}

// ReapIdleComputers deletes the implicit Computers that this engine has
// seen unused (every Session on them closed, no Command running) for at
// least grace, files and cgroups included, and returns how many it
// deleted. Several nodes may run it at once on one database: each
// Computer's deletion starts with a store transition that one of them
// wins.
func (e *Engine) ReapIdleComputers(ctx context.Context, grace time.Duration) (int, error) {
	if grace <= 0 {
		return 0, invalid("implicit computer grace must be positive, got %v", grace)
	}
	var idle []store.Computer
	for after := ""; ; {
		var page []store.Computer
		err := e.store.Read(ctx, func(tx store.Tx) error {
			var err error
			page, err = tx.IdleImplicitComputers(ctx, after, idleBatch)
			return err
		})
		if err != nil {
			return 0, err
		}
		idle = append(idle, page...)
		if len(page) < idleBatch {
			break
		}
		after = page[len(page)-1].ID
	}
	now := e.Now()
	var due []string
	e.idle.mu.Lock()
	seen := make(map[string]time.Time, len(idle))
	for _, c := range idle {
		t, ok := e.idle.since[c.ID]
		if !ok {
			t = now
		}
		seen[c.ID] = t
		if now.Sub(t) >= grace {
			due = append(due, c.ID)
		}
	}
	e.idle.since = seen
	e.idle.mu.Unlock()
	n := 0
	for _, id := range due {
		ok, err := e.reapComputer(ctx, id)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// reapComputer deletes an idle implicit Computer unless another node
// claimed it first or it is in use again; it reports whether it did.
func (e *Engine) reapComputer(ctx context.Context, id string) (bool, error) {
	var c *store.Computer
	err := e.store.Update(ctx, func(tx store.Tx) error {
		c = nil
		ok, err := tx.SetComputerStatus(ctx, id, helmrtype.ComputerAvailable, helmrtype.ComputerDeleting)
		if err != nil || !ok {
			return err
		}
		// The row is this transaction's now: a Session placed or a Command
		// started on the Computer meanwhile committed first (placement
		// locks the row too) and is seen here.
		if busy, err := e.computerBusyTx(ctx, tx, id); err != nil || busy != nil {
			if busy != nil {
				return errComputerBusy
			}
			return err
		}
		c, err = tx.GetComputer(ctx, id)
		return err
	})
	if errors.Is(err, errComputerBusy) || (err == nil && c == nil) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := e.removeComputer(ctx, c); err != nil {
		return false, err
	}
	e.log.Info("deleted an implicit computer nothing used", "computer_id", id, "template", c.Template)
	return true, nil
}

// computerBusyTx returns a conflict error naming what uses a Computer: a
// Session on it that is not closed, or a Command of it that has not
// ended; nil when nothing does.
func (e *Engine) computerBusyTx(ctx context.Context, tx store.Tx, id string) (*helmrtype.Error, error) {
	sessions, err := tx.ListSessions(ctx, store.SessionFilter{ComputerID: id,
		Statuses: []string{helmrtype.SessionOpen, helmrtype.SessionClosing}, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(sessions) > 0 {
		return &helmrtype.Error{Code: helmrtype.CodeConflict, Message: "computer " + id + " has Sessions that are not closed (such as " + sessions[0].ID + "); close them first",
			Details: map[string]any{"session_id": sessions[0].ID}}, nil
	}
	cmds, err := tx.UnfinishedCommands(ctx)
	if err != nil {
		return nil, err
	}
	for _, cmd := range cmds {
		if cmd.ComputerID == id {
			return &helmrtype.Error{Code: helmrtype.CodeConflict, Message: "computer " + id + " runs command " + cmd.ID + "; cancel it first",
				Details: map[string]any{"command_id": cmd.ID}}, nil
		}
	}
	return nil, nil
}

// removeComputer removes the files and cgroups of a Computer in status
// deleting, through the runner, then records it deleted.
func (e *Engine) removeComputer(ctx context.Context, c *store.Computer) error {
	if err := e.commandRunner().RemoveComputer(ctx, c.ID); err != nil {
		return err
	}
	return e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		c.Status, c.DeletedAt = helmrtype.ComputerDeleted, &now
		return tx.UpdateComputer(ctx, c)
	})
}
