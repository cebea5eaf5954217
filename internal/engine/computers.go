package engine

import (
	"context"
	"errors"
	"path"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Computers and Commands. A Computer is recorded when it is created through
// the API or when a Session without one first launches. Commands run
// processes on a Computer outside any Turn; a CommandRunner (the
// supervisor's) carries them out, and their output is stored in order.

// CommandRunner runs Commands the engine admitted.
type CommandRunner interface {
	// StartCommand runs an admitted Command (status running).
	StartCommand(c store.Command)
	// CancelCommand stops a running Command.
	CancelCommand(id string)
	// Residency tells where a Computer's processes are now, and why it is
	// unavailable when it is.
	Residency(computerID string) (string, *helmrtype.Error)
	// RemoveComputer deletes a Computer's files (nothing runs on it).
	RemoveComputer(ctx context.Context, id string) error
}

type nopRunner struct{}

func (nopRunner) StartCommand(store.Command)                   {}
func (nopRunner) CancelCommand(string)                         {}
func (nopRunner) Residency(string) (string, *helmrtype.Error)  { return helmrtype.ResidencyCold, nil }
func (nopRunner) RemoveComputer(context.Context, string) error { return nil }

// SetCommandRunner sets who runs Commands; the supervisor.
func (e *Engine) SetCommandRunner(r CommandRunner) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runner = r
}

// SetLimitsOff records why this host does not enforce Templates' cpu,
// memory and process limits; every Computer's limits_off says it.
func (e *Engine) SetLimitsOff(why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.limitsOff = why
}

// SetCheckpointOff records why this host cannot checkpoint session
// processes; every Computer's checkpoint_off says it.
func (e *Engine) SetCheckpointOff(why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.checkpointOff = why
}

func (e *Engine) commandRunner() CommandRunner {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.runner == nil {
		return nopRunner{}
	}
	return e.runner
}

func (e *Engine) computerView(c *store.Computer) helmrtype.ComputerState {
	v := helmrtype.ComputerState{ID: c.ID, Template: c.Template, DeploymentID: c.DeploymentID, Key: c.Key,
		Status: c.Status, Residency: helmrtype.ResidencyCold, CreatedAt: c.CreatedAt, DeletedAt: c.DeletedAt, Implicit: c.Implicit}
	if c.Status == helmrtype.ComputerAvailable {
		v.Residency, v.Error = e.commandRunner().Residency(c.ID)
	}
	e.mu.RLock()
	v.LimitsOff, v.CheckpointOff = e.limitsOff, e.checkpointOff
	e.mu.RUnlock()
	return v
}

func (e *Engine) getComputerTx(ctx context.Context, tx store.Tx, id string) (*store.Computer, error) {
	c, err := tx.GetComputer(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("computer", id)
	}
	return c, err
}

// CreateComputer makes a Computer from a Template of a Deployment (the
// current one by default). Its filesystem is made when a process first
// runs on it.
func (e *Engine) CreateComputer(ctx context.Context, req helmrtype.ComputerCreateRequest) (_ *helmrtype.ComputerState, replayed bool, _ error) {
	if req.Template == "" {
		return nil, false, invalid("template is required")
	}
	if err := e.admitting(); err != nil {
		return nil, false, err
	}
	if len(req.Key) > 256 {
		return nil, false, invalid("key is longer than 256 bytes")
	}
	var out *helmrtype.ComputerState
	err := e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		var err error
		out, replayed, err = idempotent(ctx, tx, now, "computers.create", req.IdempotencyKey, req, func() (*helmrtype.ComputerState, error) {
			dep, err := e.pickDeployment(ctx, tx, req.DeploymentID)
			if err != nil {
				return nil, err
			}
			found := false
			for _, t := range dep.manifest.Templates {
				found = found || t.ID == req.Template
			}
			if !found {
				return nil, &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "template " + req.Template + " is not in deployment " + dep.row.ID,
					Details: map[string]any{"template": req.Template, "deployment_id": dep.row.ID}}
			}
			c := &store.Computer{ID: NewID(), Template: req.Template, DeploymentID: dep.row.ID, Key: req.Key,
				Status: helmrtype.ComputerAvailable, CreatedAt: now}
			if err := tx.InsertComputer(ctx, c); err != nil {
				if errors.Is(err, store.ErrDuplicate) {
					return nil, helmrtype.Errorf(helmrtype.CodeConflict, "a computer with key %q exists", req.Key)
				}
				return nil, err
			}
			v := e.computerView(c)
			return &v, nil
		})
		return err
	})
	return out, replayed, err
}

// GetComputer returns a Computer by ID.
func (e *Engine) GetComputer(ctx context.Context, id string) (*helmrtype.ComputerState, error) {
	var out helmrtype.ComputerState
	err := e.store.View(ctx, func(tx store.Tx) error {
		c, err := e.getComputerTx(ctx, tx, id)
		if err == nil {
			out = e.computerView(c)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetComputerByKey returns the Computer that has key and is not deleted.
func (e *Engine) GetComputerByKey(ctx context.Context, key string) (*helmrtype.ComputerState, error) {
	var out helmrtype.ComputerState
	err := e.store.View(ctx, func(tx store.Tx) error {
		c, err := tx.GetComputerByKey(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "no computer has key " + key, Details: map[string]any{"key": key}}
		}
		if err == nil {
			out = e.computerView(c)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListComputers lists Computers, oldest first.
func (e *Engine) ListComputers(ctx context.Context, cursor string, limit int) (*helmrtype.ComputerPage, error) {
	limit, err := pageLimit(limit, 50)
	if err != nil {
		return nil, err
	}
	page := &helmrtype.ComputerPage{Computers: []helmrtype.ComputerState{}}
	err = e.store.View(ctx, func(tx store.Tx) error {
		rows, err := tx.ListComputers(ctx, cursor, limit+1)
		if err != nil {
			return err
		}
		rows, page.NextCursor = trimPage(rows, limit, func(c *store.Computer) string { return c.ID })
		for i := range rows {
			page.Computers = append(page.Computers, e.computerView(&rows[i]))
		}
		return nil
	})
	return page, err
}

// ComputerMembers lists the Sessions, then the Commands, placed on a
// Computer. The cursor is "s:<id>" or "c:<id>".
func (e *Engine) ComputerMembers(ctx context.Context, id, cursor string, limit int) (*helmrtype.ComputerMemberPage, error) {
	limit, err := pageLimit(limit, 50)
	if err != nil {
		return nil, err
	}
	kind, after, _ := strings.Cut(cursor, ":")
	if cursor != "" && kind != "s" && kind != "c" {
		return nil, invalid("cursor is not valid")
	}
	page := &helmrtype.ComputerMemberPage{Members: []helmrtype.ComputerMember{}}
	err = e.store.View(ctx, func(tx store.Tx) error {
		if _, err := e.getComputerTx(ctx, tx, id); err != nil {
			return err
		}
		if kind != "c" {
			rows, err := tx.ListSessions(ctx, store.SessionFilter{ComputerID: id, AfterID: after, Limit: limit + 1})
			if err != nil {
				return err
			}
			for _, s := range rows {
				if len(page.Members) == limit {
					page.NextCursor = "s:" + page.Members[limit-1].ID
					return nil
				}
				page.Members = append(page.Members, helmrtype.ComputerMember{Kind: "session", ID: s.ID, Status: s.Status})
			}
			after = ""
		}
		rows, err := tx.ListCommands(ctx, id, after, limit+1)
		if err != nil {
			return err
		}
		for _, c := range rows {
			if len(page.Members) == limit {
				last := page.Members[limit-1]
				page.NextCursor = last.Kind[:1] + ":" + last.ID
				return nil
			}
			page.Members = append(page.Members, helmrtype.ComputerMember{Kind: "command", ID: c.ID, Status: c.Status})
		}
		return nil
	})
	return page, err
}

// DeleteComputer deletes a Computer that nothing uses: every Session on it
// closed and no Command running (else conflict). Its files are removed.
func (e *Engine) DeleteComputer(ctx context.Context, id string) (*helmrtype.ComputerState, error) {
	var c *store.Computer
	err := e.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if c, err = e.getComputerTx(ctx, tx, id); err != nil {
			return err
		}
		if c.Status == helmrtype.ComputerDeleted {
			return nil
		}
		if busy, err := e.computerBusyTx(ctx, tx, id); err != nil || busy != nil {
			if busy != nil {
				return busy
			}
			return err
		}
		c.Status = helmrtype.ComputerDeleting
		return tx.UpdateComputer(ctx, c)
	})
	if err != nil {
		return nil, err
	}
	if c.Status == helmrtype.ComputerDeleting {
		if err := e.removeComputer(ctx, c); err != nil {
			return nil, err
		}
	}
	v := e.computerView(c)
	return &v, nil
}

// placeSessionTx checks that a Session may be created on an existing
// Computer: it exists and is available.
func (e *Engine) placeSessionTx(ctx context.Context, tx store.Tx, computerID string) error {
	c, err := e.getComputerTx(ctx, tx, computerID)
	if err != nil {
		return err
	}
	// Lock the row (its status unchanged): the deletion of an idle
	// implicit Computer waits for this transaction, then sees what it
	// placed (see reapComputer).
	ok, err := tx.SetComputerStatus(ctx, c.ID, helmrtype.ComputerAvailable, helmrtype.ComputerAvailable)
	if err != nil {
		return err
	}
	if !ok {
		return helmrtype.Errorf(helmrtype.CodeConflict, "computer %s is %s", c.ID, c.Status)
	}
	return nil
}

// computerTemplateTx returns the Template a Computer was made from, and
// records the implicit Computer of a Session at its first launch (or one
// that a Session was given before Computers had records).
func (e *Engine) computerTemplateTx(ctx context.Context, tx store.Tx, s *store.Session, now time.Time) (helmrtype.TemplateManifest, error) {
	c, err := tx.GetComputer(ctx, s.ComputerID)
	if errors.Is(err, store.ErrNotFound) {
		c = &store.Computer{ID: s.ComputerID, Template: s.Template, DeploymentID: s.DeploymentID,
			Status: helmrtype.ComputerAvailable, CreatedAt: now, Implicit: true}
		if err := tx.InsertComputer(ctx, c); err != nil {
			return helmrtype.TemplateManifest{}, err
		}
	} else if err != nil {
		return helmrtype.TemplateManifest{}, err
	}
	if c.Status != helmrtype.ComputerAvailable {
		return helmrtype.TemplateManifest{}, helmrtype.Errorf(helmrtype.CodeConflict, "computer %s is %s", c.ID, c.Status)
	}
	return e.templateOfTx(ctx, tx, c)
}

// templateOfTx returns the Template a Computer was made from, from its
// Deployment's manifest.
func (e *Engine) templateOfTx(ctx context.Context, tx store.Tx, c *store.Computer) (helmrtype.TemplateManifest, error) {
	t, _, err := e.templateAndSourcesTx(ctx, tx, c)
	return t, err
}

// templateAndSourcesTx returns the Template a Computer was made from and
// its Deployment's sources digest.
func (e *Engine) templateAndSourcesTx(ctx context.Context, tx store.Tx, c *store.Computer) (helmrtype.TemplateManifest, string, error) {
	dep, err := e.deploymentTx(ctx, tx, c.DeploymentID)
	if err != nil {
		return helmrtype.TemplateManifest{}, "", err
	}
	for _, t := range dep.manifest.Templates {
		if t.ID == c.Template {
			return t, dep.row.SourcesDigest, nil
		}
	}
	return helmrtype.TemplateManifest{}, "", notFound("template", c.Template)
}

// ComputerTemplate returns the Template a Computer was made from and the
// digest of its Deployment's sources archive ("" when it has none), which
// the Template's Copy steps read.
func (e *Engine) ComputerTemplate(ctx context.Context, id string) (t helmrtype.TemplateManifest, sourcesDigest string, err error) {
	err = e.store.View(ctx, func(tx store.Tx) error {
		c, err := e.getComputerTx(ctx, tx, id)
		if err != nil {
			return err
		}
		t, sourcesDigest, err = e.templateAndSourcesTx(ctx, tx, c)
		return err
	})
	return t, sourcesDigest, err
}

func commandView(c *store.Command) helmrtype.CommandState {
	v := helmrtype.CommandState{ID: c.ID, ComputerID: c.ComputerID, Command: c.Argv, Cwd: c.Cwd, Status: c.Status,
		ExitCode: c.ExitCode, CreatedAt: c.CreatedAt, StartedAt: c.StartedAt, EndedAt: c.EndedAt}
	if c.Error != "" {
		code, msg, ok := strings.Cut(c.Error, ": ")
		if !ok {
			code, msg = string(helmrtype.CodeInternal), c.Error
		}
		v.Error = &helmrtype.Error{Code: helmrtype.Code(code), Message: msg}
	}
	return v
}

// ExecCommand admits a Command on a Computer and has the runner start it.
func (e *Engine) ExecCommand(ctx context.Context, computerID string, req helmrtype.CommandRequest) (_ *helmrtype.CommandState, replayed bool, _ error) {
	if len(req.Command) == 0 || req.Command[0] == "" {
		return nil, false, invalid("command is required: the program and its arguments")
	}
	if err := e.admitting(); err != nil {
		return nil, false, err
	}
	cwd := req.Cwd
	if strings.ContainsRune(cwd, 0) {
		return nil, false, invalid("cwd %q holds a NUL byte", req.Cwd)
	}
	if cwd == "" {
		cwd = "/workspace"
	}
	cwd = path.Clean("/" + cwd)
	if clean := cwd; clean != "/workspace" && !strings.HasPrefix(clean, "/workspace/") {
		return nil, false, invalid("cwd %q must be inside /workspace", req.Cwd)
	}
	timeout := helmrtype.DefaultCommandTimeout
	if req.Timeout != "" {
		d, err := helmrtype.ParseDuration(req.Timeout)
		if err != nil || d <= 0 {
			return nil, false, invalid("timeout %q: want a duration such as 30s or 5m", req.Timeout)
		}
		if d > helmrtype.MaxCommandTimeout {
			return nil, false, invalid("timeout %s is over the most, 15m", req.Timeout)
		}
		timeout = d
	}
	if len(req.Stdin) > helmrtype.MaxCommandStdin {
		return nil, false, &helmrtype.Error{Code: helmrtype.CodeLimitExceeded, Message: "stdin is over 1 MiB"}
	}
	var env []string
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, false, invalid("env %q is not a valid variable", k)
		}
		env = append(env, k+"="+v)
	}
	var out *helmrtype.CommandState
	var started *store.Command
	err := e.store.Update(ctx, func(tx store.Tx) error {
		now := e.Now()
		started = nil
		var err error
		out, replayed, err = idempotent(ctx, tx, now, "commands.exec:"+computerID, req.IdempotencyKey, req, func() (*helmrtype.CommandState, error) {
			if err := e.placeSessionTx(ctx, tx, computerID); err != nil {
				return nil, err
			}
			c := &store.Command{ID: NewID(), ComputerID: computerID, Argv: req.Command, Cwd: cwd, Env: env, NodeID: e.node,
				Stdin: []byte(req.Stdin), TimeoutMS: timeout.Milliseconds(), Status: helmrtype.CommandRunning, CreatedAt: now, StartedAt: &now}
			if err := tx.InsertCommand(ctx, c); err != nil {
				return nil, err
			}
			started = c
			v := commandView(c)
			return &v, nil
		})
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if started != nil {
		e.commandRunner().StartCommand(*started)
	}
	return out, replayed, nil
}

func (e *Engine) getCommandTx(ctx context.Context, tx store.Tx, id string) (*store.Command, error) {
	c, err := tx.GetCommand(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("command", id)
	}
	return c, err
}

// GetCommand returns a Command.
func (e *Engine) GetCommand(ctx context.Context, id string) (*helmrtype.CommandState, error) {
	var out helmrtype.CommandState
	err := e.store.View(ctx, func(tx store.Tx) error {
		c, err := e.getCommandTx(ctx, tx, id)
		if err == nil {
			out = commandView(c)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func commandKey(id string) string { return "command:" + id }

// WaitCommand waits up to timeout for a Command to end. It never cancels it.
func (e *Engine) WaitCommand(ctx context.Context, id string, timeout time.Duration) (*helmrtype.CommandWaitResult, error) {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		ch, stop := e.Watch(commandKey(id))
		c, err := e.GetCommand(ctx, id)
		if err != nil {
			stop()
			return nil, err
		}
		if helmrtype.CommandTerminal(c.Status) {
			stop()
			return &helmrtype.CommandWaitResult{Status: helmrtype.WaitSettled, Command: c}, nil
		}
		select {
		case <-ch:
			stop()
		case <-timer.C:
			stop()
			return &helmrtype.CommandWaitResult{Status: helmrtype.WaitTimeout}, nil
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		}
	}
}

// CancelCommand asks the runner to stop a running Command; cancelling an
// ended one returns it as it is. The request is recorded, so that the node
// running the Command stops it even if it missed the notice (see
// CommandCancelRequested).
func (e *Engine) CancelCommand(ctx context.Context, id string) (*helmrtype.CommandState, error) {
	c, err := e.GetCommand(ctx, id)
	if err != nil || helmrtype.CommandTerminal(c.Status) {
		return c, err
	}
	err = e.store.Update(ctx, func(tx store.Tx) error {
		set, err := tx.RequestCommandCancel(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return notFound("command", id)
		}
		if err != nil || !set || e.node == "" {
			return err
		}
		// The node that runs it may be another one.
		return tx.Announce(ctx, store.Notice{Kind: NoticeCommandCancel, CommandID: id})
	})
	if err != nil {
		return nil, err
	}
	e.commandRunner().CancelCommand(id)
	return c, nil
}

// CommandCancelRequested reports whether a cancel of the Command was
// accepted: a node that may have missed the notice asks it.
func (e *Engine) CommandCancelRequested(ctx context.Context, id string) (bool, error) {
	return read(ctx, e.store, func(tx store.Tx) (bool, error) {
		c, err := tx.GetCommand(ctx, id)
		return err == nil && c.CancelRequested, err
	})
}

// CommandOutput appends output chunks of a running Command, in order.
func (e *Engine) CommandOutput(ctx context.Context, id string, logs []store.CommandLog) error {
	if len(logs) == 0 {
		return nil
	}
	err := e.store.Update(ctx, func(tx store.Tx) error {
		for i := range logs {
			if err := tx.AppendCommandLog(ctx, &logs[i]); err != nil && !errors.Is(err, store.ErrDuplicate) {
				return err
			}
		}
		return nil
	})
	if err == nil {
		e.wake(commandKey(id))
	}
	return err
}

// FinishCommand records how a Command ended: status exited with its exit
// code, or cancelled, timed_out or failed with an error ("code: message").
func (e *Engine) FinishCommand(ctx context.Context, id, status string, exitCode *int, why string) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		c, err := e.getCommandTx(ctx, tx, id)
		if err != nil || helmrtype.CommandTerminal(c.Status) {
			return err
		}
		now := e.Now()
		c.Status, c.ExitCode, c.Error, c.EndedAt = status, exitCode, why, &now
		return tx.UpdateCommand(ctx, c)
	})
	if err == nil {
		e.wake(commandKey(id))
	}
	return err
}

// CommandLogs returns a Command's output after a sequence.
func (e *Engine) CommandLogs(ctx context.Context, id string, after int64, limit int) (*helmrtype.CommandLogPage, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 1 || limit > 1000 {
		return nil, invalid("limit must be between 1 and 1000")
	}
	page := &helmrtype.CommandLogPage{Records: []helmrtype.CommandLogRecord{}, NextAfter: after}
	err := e.store.View(ctx, func(tx store.Tx) error {
		c, err := e.getCommandTx(ctx, tx, id)
		if err != nil {
			return err
		}
		// Read the status first: a Command seen ended has all its output
		// stored, so an empty page after it means the end.
		ended := helmrtype.CommandTerminal(c.Status)
		rows, err := tx.ListCommandLogs(ctx, id, after, limit+1)
		if err != nil {
			return err
		}
		more := len(rows) > limit
		if more {
			rows = rows[:limit]
		}
		for _, r := range rows {
			page.Records = append(page.Records, helmrtype.CommandLogRecord{Sequence: r.Sequence, Stream: r.Stream, Data: r.Data, At: r.At})
			page.NextAfter = r.Sequence
		}
		page.Done = ended && !more
		return nil
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// FailUnfinishedCommands marks the Commands a previous control plane ran
// as failed: their processes are not adopted and their outcome is unknown.
func (e *Engine) FailUnfinishedCommands(ctx context.Context) (int, error) {
	return e.failCommands(ctx, "the control plane restarted while the command ran; its outcome is unknown",
		func(c *store.Command, _ map[string]bool) bool { return c.NodeID == "" || c.NodeID == e.node })
}

// FailCommandsOfDeadNodes marks failed (execution_lost) the unfinished
// Commands of nodes whose heartbeat expired: they stopped, and with them
// the Commands' processes or their outcome.
func (e *Engine) FailCommandsOfDeadNodes(ctx context.Context) (int, error) {
	return e.failCommands(ctx, "the control-plane node that ran the command stopped; its outcome is unknown",
		func(c *store.Command, live map[string]bool) bool {
			return c.NodeID != "" && c.NodeID != e.node && !live[c.NodeID]
		})
}

// failCommands marks failed the unfinished Commands that lost says are
// lost (given the live nodes).
func (e *Engine) failCommands(ctx context.Context, why string, lost func(*store.Command, map[string]bool) bool) (int, error) {
	var n int
	var ids []string
	err := e.store.Update(ctx, func(tx store.Tx) error {
		n, ids = 0, nil
		cmds, err := tx.UnfinishedCommands(ctx)
		if err != nil || len(cmds) == 0 {
			return err
		}
		live, err := tx.LiveNodes(ctx)
		if err != nil {
			return err
		}
		now := e.Now()
		for i := range cmds {
			c := &cmds[i]
			if !lost(c, live) {
				continue
			}
			c.Status, c.EndedAt = helmrtype.CommandFailed, &now
			c.Error = string(helmrtype.CodeExecutionLost) + ": " + why
			if err := tx.UpdateCommand(ctx, c); err != nil {
				return err
			}
			n++
			ids = append(ids, c.ID)
		}
		return nil
	})
	if err == nil {
		for _, id := range ids {
			e.wake(commandKey(id))
		}
	}
	return n, err
}
