package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

// Process records, questions, tokens and waits (migration 0002_waits).
//
// Session locks (see tx): calls that name a Session themselves take its
// lock, as their counterparts for Turns and messages do: PutProcess,
// GetProcess and DeleteProcess; InsertAsk, InsertToken and InsertWait;
// GetTokenByKey (so that a get-or-create by key sees a concurrent create);
// OpenWaits of one Session. Gets and Updates by row ID, and the listings
// across Sessions or by Turn or target, take none, as GetMessage and
// UpdateMessage take none.

// updateRow runs an UPDATE by primary key and reports ErrNotFound when it
// matched no row.
func (t *tx) updateRow(ctx context.Context, q string, args ...any) error {
	if err := t.write(); err != nil {
		return err
	}
	tag, err := t.q.Exec(ctx, q, args...)
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// collect scans every row of rows with scan.
func collect[T any](rows pgx.Rows, err error, scan func(pgx.Row) (*T, error)) ([]T, error) {
	if err != nil {
		return nil, mapErr(err)
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

// scanOne scans a single row, ErrNotFound when there is none.
func scanOne[T any](row pgx.Row, scan func(pgx.Row) (*T, error)) (*T, error) {
	v, err := scan(row)
	if err != nil {
		return nil, mapErr(err)
	}
	return v, nil
}

// --- processes ---

const processCols = `session_id, launch_id, pid, start_id, token_hash, computer_id, recovery, launched_at, node_id, parked`

func scanProcess(row pgx.Row) (*store.Process, error) {
	var p store.Process
	var pid int64
	if err := row.Scan(&p.SessionID, &p.LaunchID, &pid, &p.StartID, &p.TokenHash, &p.ComputerID, &p.Recovery, &p.LaunchedAt, &p.NodeID, &p.Parked); err != nil {
		return nil, err
	}
	p.PID = int(pid)
	p.LaunchedAt = utc(p.LaunchedAt)
	return &p, nil
}

func (t *tx) PutProcess(ctx context.Context, p *store.Process) error {
	return t.exec(ctx, p.SessionID, `INSERT INTO processes(`+processCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
 ON CONFLICT (session_id) DO UPDATE SET launch_id = excluded.launch_id, pid = excluded.pid, start_id = excluded.start_id,
 token_hash = excluded.token_hash, computer_id = excluded.computer_id, recovery = excluded.recovery, launched_at = excluded.launched_at,
 node_id = excluded.node_id, parked = excluded.parked`,
		p.SessionID, p.LaunchID, int64(p.PID), p.StartID, p.TokenHash, p.ComputerID, p.Recovery, p.LaunchedAt, p.NodeID, p.Parked)
}

func (t *tx) GetProcess(ctx context.Context, sessionID string) (*store.Process, error) {
	return scanOne(t.row(ctx, sessionID, `SELECT `+processCols+` FROM processes WHERE session_id = $1`, sessionID), scanProcess)
}

func (t *tx) DeleteProcess(ctx context.Context, sessionID, launchID string) error {
	return t.exec(ctx, sessionID, `DELETE FROM processes WHERE session_id = $1 AND launch_id = $2`, sessionID, launchID)
}

func (t *tx) ListProcesses(ctx context.Context) ([]store.Process, error) {
	rows, err := t.q.Query(ctx, `SELECT `+processCols+` FROM processes ORDER BY session_id`)
	return collect(rows, err, scanProcess)
}

// --- questions ---

const askCols = `id, session_id, turn_id, status, question, answer, responded_by, response_id, created_at, resolved_at`

func scanAsk(row pgx.Row) (*store.Ask, error) {
	var a store.Ask
	var question, answer, respondedBy []byte
	if err := row.Scan(&a.ID, &a.SessionID, &a.TurnID, &a.Status, &question, &answer, &respondedBy, &a.ResponseID, &a.CreatedAt, &a.ResolvedAt); err != nil {
		return nil, err
	}
	a.Question, a.Answer, a.RespondedBy = raw(question), raw(answer), raw(respondedBy)
	a.CreatedAt = utc(a.CreatedAt)
	a.ResolvedAt = utcPtr(a.ResolvedAt)
	return &a, nil
}

func (t *tx) InsertAsk(ctx context.Context, a *store.Ask) error {
	return t.insert(ctx, []string{a.SessionID}, `INSERT INTO asks(`+askCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		a.ID, a.SessionID, a.TurnID, a.Status, blob(a.Question), blob(a.Answer), blob(a.RespondedBy), a.ResponseID, a.CreatedAt, a.ResolvedAt)
}

func (t *tx) GetAsk(ctx context.Context, id string) (*store.Ask, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+askCols+` FROM asks WHERE id = $1`, id), scanAsk)
}

func (t *tx) UpdateAsk(ctx context.Context, a *store.Ask) error {
	return t.updateRow(ctx, `UPDATE asks SET status = $1, answer = $2, responded_by = $3, response_id = $4, resolved_at = $5 WHERE id = $6`,
		a.Status, blob(a.Answer), blob(a.RespondedBy), a.ResponseID, a.ResolvedAt, a.ID)
}

func (t *tx) ListAsks(ctx context.Context, turnID, afterID string, limit int) ([]store.Ask, error) {
	rows, err := t.q.Query(ctx, `SELECT `+askCols+` FROM asks WHERE turn_id = $1 AND id > $2 ORDER BY id LIMIT $3`, turnID, afterID, limit)
	return collect(rows, err, scanAsk)
}

func (t *tx) PendingAsks(ctx context.Context, turnID string) ([]store.Ask, error) {
	rows, err := t.q.Query(ctx, `SELECT `+askCols+` FROM asks WHERE turn_id = $1 AND status = 'pending' ORDER BY id`, turnID)
	return collect(rows, err, scanAsk)
}

// --- tokens ---

const tokenCols = `id, session_id, turn_id, status, tags, metadata, data, secret_hash, idempotency_key, created_at, expires_at, resolved_at, schema`

func scanToken(row pgx.Row) (*store.Token, error) {
	var tk store.Token
	var tags, metadata, data, schema []byte
	if err := row.Scan(&tk.ID, &tk.SessionID, &tk.TurnID, &tk.Status, &tags, &metadata, &data, &tk.SecretHash, &tk.IdempotencyKey,
		&tk.CreatedAt, &tk.ExpiresAt, &tk.ResolvedAt, &schema); err != nil {
		return nil, err
	}
	tk.Tags, tk.Metadata, tk.Data, tk.Schema = raw(tags), raw(metadata), raw(data), raw(schema)
	tk.CreatedAt = utc(tk.CreatedAt)
	tk.ExpiresAt = utcPtr(tk.ExpiresAt)
	tk.ResolvedAt = utcPtr(tk.ResolvedAt)
	return &tk, nil
}

func (t *tx) InsertToken(ctx context.Context, tk *store.Token) error {
	// ON CONFLICT DO NOTHING (added by insert) covers the partial unique
	// index on (session_id, idempotency_key) as well as the primary key.
	return t.insert(ctx, []string{tk.SessionID}, `INSERT INTO tokens(`+tokenCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		tk.ID, tk.SessionID, tk.TurnID, tk.Status, blob(tk.Tags), blob(tk.Metadata), blob(tk.Data), tk.SecretHash, tk.IdempotencyKey,
		tk.CreatedAt, tk.ExpiresAt, tk.ResolvedAt, blob(tk.Schema))
}

func (t *tx) GetToken(ctx context.Context, id string) (*store.Token, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = $1`, id), scanToken)
}

func (t *tx) GetTokenByKey(ctx context.Context, sessionID, key string) (*store.Token, error) {
	return scanOne(t.row(ctx, sessionID, `SELECT `+tokenCols+` FROM tokens WHERE session_id = $1 AND idempotency_key = $2 AND idempotency_key <> ''`,
		sessionID, key), scanToken)
}

func (t *tx) UpdateToken(ctx context.Context, tk *store.Token) error {
	return t.updateRow(ctx, `UPDATE tokens SET status = $1, tags = $2, metadata = $3, data = $4, expires_at = $5, resolved_at = $6, schema = $7 WHERE id = $8`,
		tk.Status, blob(tk.Tags), blob(tk.Metadata), blob(tk.Data), tk.ExpiresAt, tk.ResolvedAt, blob(tk.Schema), tk.ID)
}

func (t *tx) ListTokensByStatus(ctx context.Context, status, beforeID string, limit int) ([]store.Token, error) {
	rows, err := t.q.Query(ctx, `SELECT `+tokenCols+` FROM tokens WHERE ($1 = '' OR status = $1) AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`,
		status, beforeID, limit)
	return collect(rows, err, scanToken)
}

func (t *tx) ExpiringTokens(ctx context.Context) ([]store.Token, error) {
	rows, err := t.q.Query(ctx, `SELECT `+tokenCols+` FROM tokens WHERE status = 'pending' AND expires_at IS NOT NULL ORDER BY expires_at, id`)
	return collect(rows, err, scanToken)
}

// --- waits ---

const waitCols = `id, session_id, turn_id, kind, target_id, status, deadline, idle_timeout_ns, outcome, created_at, resolved_at`

func scanWait(row pgx.Row) (*store.Wait, error) {
	var w store.Wait
	var idle int64
	var outcome []byte
	if err := row.Scan(&w.ID, &w.SessionID, &w.TurnID, &w.Kind, &w.TargetID, &w.Status, &w.Deadline, &idle, &outcome, &w.CreatedAt, &w.ResolvedAt); err != nil {
		return nil, err
	}
	w.Deadline = utcPtr(w.Deadline)
	w.IdleTimeout = time.Duration(idle)
	w.Outcome = raw(outcome)
	w.CreatedAt = utc(w.CreatedAt)
	w.ResolvedAt = utcPtr(w.ResolvedAt)
	return &w, nil
}

func (t *tx) InsertWait(ctx context.Context, w *store.Wait) error {
	return t.insert(ctx, []string{w.SessionID}, `INSERT INTO waits(`+waitCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		w.ID, w.SessionID, w.TurnID, w.Kind, w.TargetID, w.Status, w.Deadline, int64(w.IdleTimeout), blob(w.Outcome), w.CreatedAt, w.ResolvedAt)
}

func (t *tx) GetWait(ctx context.Context, id string) (*store.Wait, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+waitCols+` FROM waits WHERE id = $1`, id), scanWait)
}

func (t *tx) UpdateWait(ctx context.Context, w *store.Wait) error {
	return t.updateRow(ctx, `UPDATE waits SET status = $1, deadline = $2, idle_timeout_ns = $3, outcome = $4, resolved_at = $5 WHERE id = $6`,
		w.Status, w.Deadline, int64(w.IdleTimeout), blob(w.Outcome), w.ResolvedAt, w.ID)
}

func (t *tx) OpenWaits(ctx context.Context, sessionID string) ([]store.Wait, error) {
	if sessionID == "" {
		rows, err := t.q.Query(ctx, `SELECT `+waitCols+` FROM waits WHERE status = 'waiting' ORDER BY created_at, id`)
		return collect(rows, err, scanWait)
	}
	rows, err := t.query(ctx, sessionID, `SELECT `+waitCols+` FROM waits WHERE status = 'waiting' AND session_id = $1 ORDER BY created_at, id`, sessionID)
	return collect(rows, err, scanWait)
}

func (t *tx) WaitsOn(ctx context.Context, targetID string) ([]store.Wait, error) {
	rows, err := t.q.Query(ctx, `SELECT `+waitCols+` FROM waits WHERE status = 'waiting' AND target_id = $1 ORDER BY created_at, id`, targetID)
	return collect(rows, err, scanWait)
}
