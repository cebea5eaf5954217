package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/helmr-go/helmr/internal/store"
)

// Computers, Commands and their output (migration 0005_computers).

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullBytes stores an empty byte slice as NULL.
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// bytesOrNil reads an empty byte slice back as nil.
func bytesOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// strs encodes a string list as a JSON array, nil as [].
func strs(v []string) (string, error) {
	if v == nil {
		return "[]", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// fromStrs decodes a JSON array of strings; an empty one reads back as nil.
func fromStrs(s string) ([]string, error) {
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("sqlitestore: string list %q: %w", s, err)
	}
	if len(v) == 0 {
		return nil, nil
	}
	return v, nil
}

func nullInt(p *int) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

// --- computers ---

const computerCols = `id, template, deployment_id, key, status, created_at, deleted_at, implicit`

func scanComputer(sc interface{ Scan(...any) error }) (*store.Computer, error) {
	var c store.Computer
	var key sql.NullString
	var created int64
	var deleted sql.NullInt64
	if err := sc.Scan(&c.ID, &c.Template, &c.DeploymentID, &key, &c.Status, &created, &deleted, &c.Implicit); err != nil {
		return nil, err
	}
	c.Key = key.String
	c.CreatedAt, c.DeletedAt = fromMicros(created), fromNullMicros(deleted)
	return &c, nil
}

func (t *tx) InsertComputer(ctx context.Context, c *store.Computer) error {
	return t.exec(ctx, `INSERT INTO computers(`+computerCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.Template, c.DeploymentID, nullString(c.Key), c.Status, micros(c.CreatedAt), nullMicros(c.DeletedAt), c.Implicit)
}

func (t *tx) GetComputer(ctx context.Context, id string) (*store.Computer, error) {
	return queryOne(ctx, t, scanComputer, `SELECT `+computerCols+` FROM computers WHERE id = ?`, id)
}

// GetComputerByKey's terms match the partial index computers_live_key (key
// = ? implies key IS NOT NULL), which SQLite then uses.
func (t *tx) GetComputerByKey(ctx context.Context, key string) (*store.Computer, error) {
	return queryOne(ctx, t, scanComputer, `SELECT `+computerCols+` FROM computers WHERE key = ? AND status <> 'deleted'`, key)
}

func (t *tx) ListComputers(ctx context.Context, afterID string, limit int) ([]store.Computer, error) {
	return queryAll(ctx, t, scanComputer, `SELECT `+computerCols+` FROM computers WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit)
}

func (t *tx) UpdateComputer(ctx context.Context, c *store.Computer) error {
	return t.updateRow(ctx, `UPDATE computers SET status = ?, deleted_at = ? WHERE id = ?`, c.Status, nullMicros(c.DeletedAt), c.ID)
}

// SetComputerStatus needs no lock of its own: the store has one writer.
func (t *tx) SetComputerStatus(ctx context.Context, id, from, to string) (bool, error) {
	if _, err := t.GetComputer(ctx, id); err != nil {
		return false, err
	}
	err := t.updateRow(ctx, `UPDATE computers SET status = ? WHERE id = ? AND status = ?`, to, id, from)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (t *tx) IdleImplicitComputers(ctx context.Context, afterID string, limit int) ([]store.Computer, error) {
	return queryAll(ctx, t, scanComputer, `SELECT `+computerCols+` FROM computers c INDEXED BY computers_implicit_live
 WHERE c.implicit = 1 AND c.status = 'available' AND c.id > ?
   AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.computer_id = c.id AND s.computer_id <> '' AND s.status <> 'closed')
   AND NOT EXISTS (SELECT 1 FROM commands m WHERE m.computer_id = c.id AND m.status IN ('queued', 'running'))
 ORDER BY c.id LIMIT ?`, afterID, limit)
}

// --- commands ---

const commandCols = `id, computer_id, argv, cwd, env, stdin, timeout_ms, status, exit_code, error, created_at, started_at, ended_at, node_id, cancel_requested`

func scanCommand(sc interface{ Scan(...any) error }) (*store.Command, error) {
	var c store.Command
	var argv, env string
	var stdin []byte
	var exit sql.NullInt64
	var created int64
	var started, ended sql.NullInt64
	var cancel int
	if err := sc.Scan(&c.ID, &c.ComputerID, &argv, &c.Cwd, &env, &stdin, &c.TimeoutMS, &c.Status, &exit, &c.Error,
		&created, &started, &ended, &c.NodeID, &cancel); err != nil {
		return nil, err
	}
	var err error
	if c.Argv, err = fromStrs(argv); err != nil {
		return nil, err
	}
	if c.Env, err = fromStrs(env); err != nil {
		return nil, err
	}
	c.Stdin = bytesOrNil(stdin)
	if exit.Valid {
		code := int(exit.Int64)
		c.ExitCode = &code
	}
	c.CreatedAt = fromMicros(created)
	c.StartedAt, c.EndedAt = fromNullMicros(started), fromNullMicros(ended)
	c.CancelRequested = cancel != 0
	return &c, nil
}

func (t *tx) InsertCommand(ctx context.Context, c *store.Command) error {
	argv, err := strs(c.Argv)
	if err != nil {
		return err
	}
	env, err := strs(c.Env)
	if err != nil {
		return err
	}
	return t.exec(ctx, `INSERT INTO commands(`+commandCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.ComputerID, argv, c.Cwd, env, nullBytes(c.Stdin), c.TimeoutMS, c.Status, nullInt(c.ExitCode), c.Error,
		micros(c.CreatedAt), nullMicros(c.StartedAt), nullMicros(c.EndedAt), c.NodeID, boolInt(c.CancelRequested))
}

func (t *tx) GetCommand(ctx context.Context, id string) (*store.Command, error) {
	return queryOne(ctx, t, scanCommand, `SELECT `+commandCols+` FROM commands WHERE id = ?`, id)
}

func (t *tx) UpdateCommand(ctx context.Context, c *store.Command) error {
	return t.updateRow(ctx, `UPDATE commands SET status = ?, exit_code = ?, error = ?, started_at = ?, ended_at = ? WHERE id = ?`,
		c.Status, nullInt(c.ExitCode), c.Error, nullMicros(c.StartedAt), nullMicros(c.EndedAt), c.ID)
}

func (t *tx) RequestCommandCancel(ctx context.Context, id string) (bool, error) {
	if _, err := t.GetCommand(ctx, id); err != nil {
		return false, err
	}
	err := t.updateRow(ctx, `UPDATE commands SET cancel_requested = 1 WHERE id = ? AND status IN ('queued', 'running')`, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

func (t *tx) ListCommands(ctx context.Context, computerID, afterID string, limit int) ([]store.Command, error) {
	return queryAll(ctx, t, scanCommand, `SELECT `+commandCols+` FROM commands INDEXED BY commands_computer
 WHERE computer_id = ? AND id > ? ORDER BY id LIMIT ?`, computerID, afterID, limit)
}

// UnfinishedCommands names its partial index, as the open-wait queries do.
func (t *tx) UnfinishedCommands(ctx context.Context) ([]store.Command, error) {
	return queryAll(ctx, t, scanCommand, `SELECT `+commandCols+` FROM commands INDEXED BY commands_unfinished
 WHERE status IN ('queued', 'running') ORDER BY created_at, id`)
}

// --- command output ---

const commandLogCols = `command_id, seq, stream, data, at`

func scanCommandLog(sc interface{ Scan(...any) error }) (*store.CommandLog, error) {
	var l store.CommandLog
	var data []byte
	var at int64
	if err := sc.Scan(&l.CommandID, &l.Sequence, &l.Stream, &data, &at); err != nil {
		return nil, err
	}
	l.Data, l.At = bytesOrNil(data), fromMicros(at)
	return &l, nil
}

func (t *tx) AppendCommandLog(ctx context.Context, l *store.CommandLog) error {
	data := l.Data
	if data == nil {
		data = []byte{}
	}
	return t.exec(ctx, `INSERT INTO command_logs(`+commandLogCols+`) VALUES (?, ?, ?, ?, ?)`,
		l.CommandID, l.Sequence, l.Stream, data, micros(l.At))
}

func (t *tx) ListCommandLogs(ctx context.Context, commandID string, after int64, limit int) ([]store.CommandLog, error) {
	return queryAll(ctx, t, scanCommandLog, `SELECT `+commandLogCols+` FROM command_logs
 WHERE command_id = ? AND seq > ? ORDER BY seq LIMIT ?`, commandID, after, limit)
}
