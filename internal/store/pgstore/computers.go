package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

// Computers, Commands and their output (migration 0005_computers). None of
// these calls names a Session, so none takes a Session lock: a Computer's
// key is kept unique by the partial unique index computers_live_key, which
// the ON CONFLICT DO NOTHING of insert covers.

// nullString stores "" as NULL.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// nullBytes stores an empty byte slice as NULL.
func nullBytes(b []byte) []byte {
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
		return nil, fmt.Errorf("pgstore: string list %q: %w", s, err)
	}
	if len(v) == 0 {
		return nil, nil
	}
	return v, nil
}

// --- computers ---

const computerCols = `id, template, deployment_id, key, status, created_at, deleted_at, implicit`

func scanComputer(row pgx.Row) (*store.Computer, error) {
	var c store.Computer
	var key *string
	if err := row.Scan(&c.ID, &c.Template, &c.DeploymentID, &key, &c.Status, &c.CreatedAt, &c.DeletedAt, &c.Implicit); err != nil {
		return nil, err
	}
	if key != nil {
		c.Key = *key
	}
	c.CreatedAt, c.DeletedAt = utc(c.CreatedAt), utcPtr(c.DeletedAt)
	return &c, nil
}

func (t *tx) InsertComputer(ctx context.Context, c *store.Computer) error {
	return t.insert(ctx, nil, `INSERT INTO computers(`+computerCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		c.ID, c.Template, c.DeploymentID, nullString(c.Key), c.Status, c.CreatedAt, c.DeletedAt, c.Implicit)
}

func (t *tx) GetComputer(ctx context.Context, id string) (*store.Computer, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+computerCols+` FROM computers WHERE id = $1`, id), scanComputer)
}

func (t *tx) GetComputerByKey(ctx context.Context, key string) (*store.Computer, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+computerCols+` FROM computers WHERE key = $1 AND status <> 'deleted'`, key), scanComputer)
}

func (t *tx) ListComputers(ctx context.Context, afterID string, limit int) ([]store.Computer, error) {
	rows, err := t.q.Query(ctx, `SELECT `+computerCols+` FROM computers WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	return collect(rows, err, scanComputer)
}

// UpdateComputer writes Status and DeletedAt. (Giving a deleted Computer a
// live status again while another live Computer has its key violates
// computers_live_key: that reports ErrDuplicate, but unlike a refused
// insert it fails the PostgreSQL transaction.)
func (t *tx) UpdateComputer(ctx context.Context, c *store.Computer) error {
	return t.updateRow(ctx, `UPDATE computers SET status = $1, deleted_at = $2 WHERE id = $3`, c.Status, c.DeletedAt, c.ID)
}

// SetComputerStatus is one UPDATE: in READ COMMITTED a second transaction
// changing the same row waits for the first to end, then sees its status
// and changes nothing, so one node wins a race.
func (t *tx) SetComputerStatus(ctx context.Context, id, from, to string) (bool, error) {
	if err := t.write(); err != nil {
		return false, err
	}
	var set, exists bool
	err := t.one(ctx, `WITH u AS (UPDATE computers SET status = $2 WHERE id = $1 AND status = $3 RETURNING 1)
 SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM computers WHERE id = $1)`, []any{id, to, from}, &set, &exists)
	if err == nil && !exists {
		err = store.ErrNotFound
	}
	return set, err
}

func (t *tx) IdleImplicitComputers(ctx context.Context, afterID string, limit int) ([]store.Computer, error) {
	rows, err := t.q.Query(ctx, `SELECT `+computerCols+` FROM computers c
 WHERE c.implicit AND c.status = 'available' AND c.id > $1
   AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.computer_id = c.id AND s.computer_id <> '' AND s.status <> 'closed')
   AND NOT EXISTS (SELECT 1 FROM commands m WHERE m.computer_id = c.id AND m.status IN ('queued', 'running'))
 ORDER BY c.id LIMIT $2`, afterID, limit)
	return collect(rows, err, scanComputer)
}

// --- commands ---

const commandCols = `id, computer_id, argv, cwd, env, stdin, timeout_ms, status, exit_code, error, created_at, started_at, ended_at, node_id, cancel_requested`

func scanCommand(row pgx.Row) (*store.Command, error) {
	var c store.Command
	var argv, env string
	var stdin []byte
	var exit *int64
	if err := row.Scan(&c.ID, &c.ComputerID, &argv, &c.Cwd, &env, &stdin, &c.TimeoutMS, &c.Status, &exit, &c.Error,
		&c.CreatedAt, &c.StartedAt, &c.EndedAt, &c.NodeID, &c.CancelRequested); err != nil {
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
	if exit != nil {
		code := int(*exit)
		c.ExitCode = &code
	}
	c.CreatedAt = utc(c.CreatedAt)
	c.StartedAt, c.EndedAt = utcPtr(c.StartedAt), utcPtr(c.EndedAt)
	return &c, nil
}

// exitCode stores an exit code as bigint, nil as NULL.
func exitCode(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
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
	return t.insert(ctx, nil, `INSERT INTO commands(`+commandCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`,
		c.ID, c.ComputerID, argv, c.Cwd, env, nullBytes(c.Stdin), c.TimeoutMS, c.Status, exitCode(c.ExitCode), c.Error,
		c.CreatedAt, c.StartedAt, c.EndedAt, c.NodeID, c.CancelRequested)
}

func (t *tx) GetCommand(ctx context.Context, id string) (*store.Command, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+commandCols+` FROM commands WHERE id = $1`, id), scanCommand)
}

func (t *tx) UpdateCommand(ctx context.Context, c *store.Command) error {
	return t.updateRow(ctx, `UPDATE commands SET status = $1, exit_code = $2, error = $3, started_at = $4, ended_at = $5 WHERE id = $6`,
		c.Status, exitCode(c.ExitCode), c.Error, c.StartedAt, c.EndedAt, c.ID)
}

func (t *tx) RequestCommandCancel(ctx context.Context, id string) (bool, error) {
	if err := t.write(); err != nil {
		return false, err
	}
	var set, exists bool
	err := t.one(ctx, `WITH u AS (UPDATE commands SET cancel_requested = true WHERE id = $1 AND status IN ('queued', 'running') RETURNING 1)
 SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM commands WHERE id = $1)`, []any{id}, &set, &exists)
	if err == nil && !exists {
		err = store.ErrNotFound
	}
	return set, err
}

func (t *tx) ListCommands(ctx context.Context, computerID, afterID string, limit int) ([]store.Command, error) {
	rows, err := t.q.Query(ctx, `SELECT `+commandCols+` FROM commands WHERE computer_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		computerID, afterID, limit)
	return collect(rows, err, scanCommand)
}

func (t *tx) UnfinishedCommands(ctx context.Context) ([]store.Command, error) {
	rows, err := t.q.Query(ctx, `SELECT `+commandCols+` FROM commands WHERE status IN ('queued', 'running') ORDER BY created_at, id`)
	return collect(rows, err, scanCommand)
}

// --- command output ---

const commandLogCols = `command_id, seq, stream, data, at`

func scanCommandLog(row pgx.Row) (*store.CommandLog, error) {
	var l store.CommandLog
	var data []byte
	if err := row.Scan(&l.CommandID, &l.Sequence, &l.Stream, &data, &l.At); err != nil {
		return nil, err
	}
	l.Data, l.At = bytesOrNil(data), utc(l.At)
	return &l, nil
}

func (t *tx) AppendCommandLog(ctx context.Context, l *store.CommandLog) error {
	data := l.Data
	if data == nil {
		data = []byte{}
	}
	return t.insert(ctx, nil, `INSERT INTO command_logs(`+commandLogCols+`) VALUES ($1, $2, $3, $4, $5)`,
		l.CommandID, l.Sequence, l.Stream, data, l.At)
}

func (t *tx) ListCommandLogs(ctx context.Context, commandID string, after int64, limit int) ([]store.CommandLog, error) {
	rows, err := t.q.Query(ctx, `SELECT `+commandLogCols+` FROM command_logs WHERE command_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		commandID, after, limit)
	return collect(rows, err, scanCommandLog)
}
