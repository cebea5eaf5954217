package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/helmr-go/helmr/internal/store"
)

// Process records, questions, tokens and waits (migration 0002_waits).

// updateRow runs an UPDATE by primary key and reports ErrNotFound when it
// matched no row.
func (t *tx) updateRow(ctx context.Context, q string, args ...any) error {
	res, err := t.q.exec(ctx, q, args...)
	if isUnique(err) {
		return store.ErrDuplicate
	}
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// queryAll runs q and scans every row with scan.
func queryAll[T any](ctx context.Context, t *tx, scan func(interface{ Scan(...any) error }) (*T, error), q string, args ...any) ([]T, error) {
	rows, err := t.q.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *v)
	}
	return out, rows.Err()
}

// queryOne runs q and returns its first row, ErrNotFound when it has none.
func queryOne[T any](ctx context.Context, t *tx, scan func(interface{ Scan(...any) error }) (*T, error), q string, args ...any) (*T, error) {
	vs, err := queryAll(ctx, t, scan, q, args...)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, store.ErrNotFound
	}
	return &vs[0], nil
}

// --- processes ---

const processCols = `session_id, launch_id, pid, start_id, token_hash, computer_id, recovery, launched_at, node_id, parked`

func scanProcess(sc interface{ Scan(...any) error }) (*store.Process, error) {
	var p store.Process
	var launched int64
	if err := sc.Scan(&p.SessionID, &p.LaunchID, &p.PID, &p.StartID, &p.TokenHash, &p.ComputerID, &p.Recovery, &launched, &p.NodeID, &p.Parked); err != nil {
		return nil, err
	}
	p.LaunchedAt = fromMicros(launched)
	return &p, nil
}

func (t *tx) PutProcess(ctx context.Context, p *store.Process) error {
	return t.exec(ctx, `INSERT INTO processes(`+processCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
 ON CONFLICT(session_id) DO UPDATE SET launch_id = excluded.launch_id, pid = excluded.pid, start_id = excluded.start_id,
 token_hash = excluded.token_hash, computer_id = excluded.computer_id, recovery = excluded.recovery, launched_at = excluded.launched_at,
 node_id = excluded.node_id, parked = excluded.parked`,
		p.SessionID, p.LaunchID, p.PID, p.StartID, p.TokenHash, p.ComputerID, p.Recovery, micros(p.LaunchedAt), p.NodeID, p.Parked)
}

func (t *tx) GetProcess(ctx context.Context, sessionID string) (*store.Process, error) {
	return queryOne(ctx, t, scanProcess, `SELECT `+processCols+` FROM processes WHERE session_id = ?`, sessionID)
}

func (t *tx) DeleteProcess(ctx context.Context, sessionID, launchID string) error {
	return t.exec(ctx, `DELETE FROM processes WHERE session_id = ? AND launch_id = ?`, sessionID, launchID)
}

func (t *tx) ListProcesses(ctx context.Context) ([]store.Process, error) {
	return queryAll(ctx, t, scanProcess, `SELECT `+processCols+` FROM processes ORDER BY session_id`)
}

// --- questions ---

const askCols = `id, session_id, turn_id, status, question, answer, responded_by, response_id, created_at, resolved_at`

func scanAsk(sc interface{ Scan(...any) error }) (*store.Ask, error) {
	var a store.Ask
	var question, answer, respondedBy []byte
	var created int64
	var resolved sql.NullInt64
	if err := sc.Scan(&a.ID, &a.SessionID, &a.TurnID, &a.Status, &question, &answer, &respondedBy, &a.ResponseID, &created, &resolved); err != nil {
		return nil, err
	}
	a.Question, a.Answer, a.RespondedBy = raw(question), raw(answer), raw(respondedBy)
	a.CreatedAt = fromMicros(created)
	a.ResolvedAt = fromNullMicros(resolved)
	return &a, nil
}

func (t *tx) InsertAsk(ctx context.Context, a *store.Ask) error {
	return t.exec(ctx, `INSERT INTO asks(`+askCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.SessionID, a.TurnID, a.Status, blob(a.Question), blob(a.Answer), blob(a.RespondedBy), a.ResponseID,
		micros(a.CreatedAt), nullMicros(a.ResolvedAt))
}

func (t *tx) GetAsk(ctx context.Context, id string) (*store.Ask, error) {
	return queryOne(ctx, t, scanAsk, `SELECT `+askCols+` FROM asks WHERE id = ?`, id)
}

func (t *tx) UpdateAsk(ctx context.Context, a *store.Ask) error {
	return t.updateRow(ctx, `UPDATE asks SET status = ?, answer = ?, responded_by = ?, response_id = ?, resolved_at = ? WHERE id = ?`,
		a.Status, blob(a.Answer), blob(a.RespondedBy), a.ResponseID, nullMicros(a.ResolvedAt), a.ID)
}

func (t *tx) ListAsks(ctx context.Context, turnID, afterID string, limit int) ([]store.Ask, error) {
	return queryAll(ctx, t, scanAsk, `SELECT `+askCols+` FROM asks WHERE turn_id = ? AND id > ? ORDER BY id LIMIT ?`, turnID, afterID, limit)
}

func (t *tx) PendingAsks(ctx context.Context, turnID string) ([]store.Ask, error) {
	return queryAll(ctx, t, scanAsk, `SELECT `+askCols+` FROM asks WHERE turn_id = ? AND status = 'pending' ORDER BY id`, turnID)
}

// --- tokens ---

const tokenCols = `id, session_id, turn_id, status, tags, metadata, data, secret_hash, idempotency_key, created_at, expires_at, resolved_at, schema`

func scanToken(sc interface{ Scan(...any) error }) (*store.Token, error) {
	var tk store.Token
	var tags, metadata, data, schema []byte
	var created int64
	var expires, resolved sql.NullInt64
	if err := sc.Scan(&tk.ID, &tk.SessionID, &tk.TurnID, &tk.Status, &tags, &metadata, &data, &tk.SecretHash, &tk.IdempotencyKey,
		&created, &expires, &resolved, &schema); err != nil {
		return nil, err
	}
	tk.Tags, tk.Metadata, tk.Data, tk.Schema = raw(tags), raw(metadata), raw(data), raw(schema)
	tk.CreatedAt = fromMicros(created)
	tk.ExpiresAt = fromNullMicros(expires)
	tk.ResolvedAt = fromNullMicros(resolved)
	return &tk, nil
}

func (t *tx) InsertToken(ctx context.Context, tk *store.Token) error {
	return t.exec(ctx, `INSERT INTO tokens(`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tk.ID, tk.SessionID, tk.TurnID, tk.Status, blob(tk.Tags), blob(tk.Metadata), blob(tk.Data), tk.SecretHash, tk.IdempotencyKey,
		micros(tk.CreatedAt), nullMicros(tk.ExpiresAt), nullMicros(tk.ResolvedAt), blob(tk.Schema))
}

func (t *tx) GetToken(ctx context.Context, id string) (*store.Token, error) {
	return queryOne(ctx, t, scanToken, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id)
}

func (t *tx) GetTokenByKey(ctx context.Context, sessionID, key string) (*store.Token, error) {
	return queryOne(ctx, t, scanToken, `SELECT `+tokenCols+` FROM tokens WHERE session_id = ? AND idempotency_key = ? AND idempotency_key <> ''`, sessionID, key)
}

func (t *tx) UpdateToken(ctx context.Context, tk *store.Token) error {
	return t.updateRow(ctx, `UPDATE tokens SET status = ?, tags = ?, metadata = ?, data = ?, expires_at = ?, resolved_at = ?, schema = ? WHERE id = ?`,
		tk.Status, blob(tk.Tags), blob(tk.Metadata), blob(tk.Data), nullMicros(tk.ExpiresAt), nullMicros(tk.ResolvedAt), blob(tk.Schema), tk.ID)
}

func (t *tx) ListTokensByStatus(ctx context.Context, status, beforeID string, limit int) ([]store.Token, error) {
	q := `SELECT ` + tokenCols + ` FROM tokens WHERE (? = '' OR status = ?) AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`
	return queryAll(ctx, t, scanToken, q, status, status, beforeID, beforeID, limit)
}

func (t *tx) ExpiringTokens(ctx context.Context) ([]store.Token, error) {
	return queryAll(ctx, t, scanToken, `SELECT `+tokenCols+` FROM tokens INDEXED BY tokens_expiring
 WHERE status = 'pending' AND expires_at IS NOT NULL ORDER BY expires_at, id`)
}

// --- waits ---

const waitCols = `id, session_id, turn_id, kind, target_id, status, deadline, idle_timeout_ns, outcome, created_at, resolved_at`

func scanWait(sc interface{ Scan(...any) error }) (*store.Wait, error) {
	var w store.Wait
	var deadline, resolved sql.NullInt64
	var idle, created int64
	var outcome []byte
	if err := sc.Scan(&w.ID, &w.SessionID, &w.TurnID, &w.Kind, &w.TargetID, &w.Status, &deadline, &idle, &outcome, &created, &resolved); err != nil {
		return nil, err
	}
	w.Deadline = fromNullMicros(deadline)
	w.IdleTimeout = time.Duration(idle)
	w.Outcome = raw(outcome)
	w.CreatedAt = fromMicros(created)
	w.ResolvedAt = fromNullMicros(resolved)
	return &w, nil
}

func (t *tx) InsertWait(ctx context.Context, w *store.Wait) error {
	return t.exec(ctx, `INSERT INTO waits(`+waitCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.SessionID, w.TurnID, w.Kind, w.TargetID, w.Status, nullMicros(w.Deadline), int64(w.IdleTimeout), blob(w.Outcome),
		micros(w.CreatedAt), nullMicros(w.ResolvedAt))
}

func (t *tx) GetWait(ctx context.Context, id string) (*store.Wait, error) {
	return queryOne(ctx, t, scanWait, `SELECT `+waitCols+` FROM waits WHERE id = ?`, id)
}

func (t *tx) UpdateWait(ctx context.Context, w *store.Wait) error {
	return t.updateRow(ctx, `UPDATE waits SET status = ?, deadline = ?, idle_timeout_ns = ?, outcome = ?, resolved_at = ? WHERE id = ?`,
		w.Status, nullMicros(w.Deadline), int64(w.IdleTimeout), blob(w.Outcome), nullMicros(w.ResolvedAt), w.ID)
}

// The open-wait queries name their partial index, as the turn queries do:
// without statistics SQLite may prefer a scan.

func (t *tx) OpenWaits(ctx context.Context, sessionID string) ([]store.Wait, error) {
	if sessionID == "" {
		return queryAll(ctx, t, scanWait, `SELECT `+waitCols+` FROM waits INDEXED BY waits_open WHERE status = 'waiting' ORDER BY created_at, id`)
	}
	return queryAll(ctx, t, scanWait, `SELECT `+waitCols+` FROM waits INDEXED BY waits_open
 WHERE status = 'waiting' AND session_id = ? ORDER BY created_at, id`, sessionID)
}

func (t *tx) WaitsOn(ctx context.Context, targetID string) ([]store.Wait, error) {
	return queryAll(ctx, t, scanWait, `SELECT `+waitCols+` FROM waits INDEXED BY waits_open_target
 WHERE status = 'waiting' AND target_id = ? ORDER BY created_at, id`, targetID)
}
