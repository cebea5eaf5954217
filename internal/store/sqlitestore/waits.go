package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/helmr-go/helmr/internal/store"
)

// Times: micros in SQLite.
type tcol = int64
type tpcol = sql.NullInt64

func ts(v time.Time) any        { return micros(v) }
func tsp(v *time.Time) any      { return nullMicros(v) }
func fromT(v tcol) time.Time    { return fromMicros(v) }
func fromTP(v tpcol) *time.Time { return fromNullMicros(v) }
func (t *tx) put(ctx context.Context, sessionID, q string, args ...any) error {
	return t.exec(ctx, q, args...)
}
func (t *tx) set(ctx context.Context, sessionID, q string, args ...any) error {
	return t.exec(ctx, q, args...)
}
func (t *tx) rows(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.q.query(ctx, q, args...)
}

const processCols = `session_id, launch_id, pid, start_id, token_hash, computer_id, recovery, launched_at`

func (t *tx) PutProcess(ctx context.Context, p *store.Process) error {
	if err := t.set(ctx, p.SessionID, `DELETE FROM processes WHERE session_id = ?`, p.SessionID); err != nil {
		return err
	}
	return t.put(ctx, p.SessionID, `INSERT INTO processes(`+processCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		p.SessionID, p.LaunchID, p.PID, p.StartID, p.TokenHash, p.ComputerID, p.Recovery, ts(p.LaunchedAt))
}

func (t *tx) queryProcesses(ctx context.Context, q string, args ...any) ([]store.Process, error) {
	rows, err := t.rows(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Process
	for rows.Next() {
		var p store.Process
		var at tcol
		if err := rows.Scan(&p.SessionID, &p.LaunchID, &p.PID, &p.StartID, &p.TokenHash, &p.ComputerID, &p.Recovery, &at); err != nil {
			return nil, err
		}
		p.LaunchedAt = fromT(at)
		out = append(out, p)
	}
	return out, rows.Err()
}

func (t *tx) GetProcess(ctx context.Context, sessionID string) (*store.Process, error) {
	ps, err := t.queryProcesses(ctx, `SELECT `+processCols+` FROM processes WHERE session_id = ?`, sessionID)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, store.ErrNotFound
	}
	return &ps[0], nil
}

func (t *tx) DeleteProcess(ctx context.Context, sessionID, launchID string) error {
	return t.set(ctx, sessionID, `DELETE FROM processes WHERE session_id = ? AND launch_id = ?`, sessionID, launchID)
}

func (t *tx) ListProcesses(ctx context.Context) ([]store.Process, error) {
	return t.queryProcesses(ctx, `SELECT `+processCols+` FROM processes ORDER BY session_id`)
}

const askCols = `id, session_id, turn_id, status, question, answer, responded_by, response_id, created_at, resolved_at`

func (t *tx) InsertAsk(ctx context.Context, a *store.Ask) error {
	return t.put(ctx, a.SessionID, `INSERT INTO asks(`+askCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.SessionID, a.TurnID, a.Status, blob(a.Question), blob(a.Answer), blob(a.RespondedBy), a.ResponseID, ts(a.CreatedAt), tsp(a.ResolvedAt))
}

func (t *tx) queryAsks(ctx context.Context, q string, args ...any) ([]store.Ask, error) {
	rows, err := t.rows(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Ask
	for rows.Next() {
		var a store.Ask
		var question, answer, by []byte
		var created tcol
		var resolved tpcol
		if err := rows.Scan(&a.ID, &a.SessionID, &a.TurnID, &a.Status, &question, &answer, &by, &a.ResponseID, &created, &resolved); err != nil {
			return nil, err
		}
		a.Question, a.Answer, a.RespondedBy = raw(question), raw(answer), raw(by)
		a.CreatedAt, a.ResolvedAt = fromT(created), fromTP(resolved)
		out = append(out, a)
	}
	return out, rows.Err()
}

func (t *tx) GetAsk(ctx context.Context, id string) (*store.Ask, error) {
	as, err := t.queryAsks(ctx, `SELECT `+askCols+` FROM asks WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(as) == 0 {
		return nil, store.ErrNotFound
	}
	return &as[0], nil
}

func (t *tx) UpdateAsk(ctx context.Context, a *store.Ask) error {
	return t.set(ctx, a.SessionID, `UPDATE asks SET status = ?, answer = ?, responded_by = ?, response_id = ?, resolved_at = ? WHERE id = ?`,
		a.Status, blob(a.Answer), blob(a.RespondedBy), a.ResponseID, tsp(a.ResolvedAt), a.ID)
}

func (t *tx) ListAsks(ctx context.Context, turnID, afterID string, limit int) ([]store.Ask, error) {
	return t.queryAsks(ctx, `SELECT `+askCols+` FROM asks WHERE turn_id = ? AND id > ? ORDER BY id LIMIT ?`, turnID, afterID, limit)
}

func (t *tx) PendingAsks(ctx context.Context, turnID string) ([]store.Ask, error) {
	return t.queryAsks(ctx, `SELECT `+askCols+` FROM asks WHERE turn_id = ? AND status = 'pending' ORDER BY id`, turnID)
}

const tokenCols = `id, session_id, turn_id, status, tags, metadata, data, secret_hash, idempotency_key, created_at, expires_at, resolved_at`

func (t *tx) InsertToken(ctx context.Context, k *store.Token) error {
	return t.put(ctx, k.SessionID, `INSERT INTO tokens(`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.SessionID, k.TurnID, k.Status, blob(k.Tags), blob(k.Metadata), blob(k.Data), k.SecretHash, k.IdempotencyKey,
		ts(k.CreatedAt), tsp(k.ExpiresAt), tsp(k.ResolvedAt))
}

func (t *tx) queryTokens(ctx context.Context, q string, args ...any) ([]store.Token, error) {
	rows, err := t.rows(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Token
	for rows.Next() {
		var k store.Token
		var tags, meta, data []byte
		var created tcol
		var expires, resolved tpcol
		if err := rows.Scan(&k.ID, &k.SessionID, &k.TurnID, &k.Status, &tags, &meta, &data, &k.SecretHash, &k.IdempotencyKey,
			&created, &expires, &resolved); err != nil {
			return nil, err
		}
		k.Tags, k.Metadata, k.Data = raw(tags), raw(meta), raw(data)
		k.CreatedAt, k.ExpiresAt, k.ResolvedAt = fromT(created), fromTP(expires), fromTP(resolved)
		out = append(out, k)
	}
	return out, rows.Err()
}

func (t *tx) oneToken(ctx context.Context, q string, args ...any) (*store.Token, error) {
	ks, err := t.queryTokens(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	if len(ks) == 0 {
		return nil, store.ErrNotFound
	}
	return &ks[0], nil
}

func (t *tx) GetToken(ctx context.Context, id string) (*store.Token, error) {
	return t.oneToken(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id)
}

func (t *tx) GetTokenByKey(ctx context.Context, sessionID, key string) (*store.Token, error) {
	return t.oneToken(ctx, `SELECT `+tokenCols+` FROM tokens WHERE session_id = ? AND idempotency_key = ? AND idempotency_key <> ''`, sessionID, key)
}

func (t *tx) UpdateToken(ctx context.Context, k *store.Token) error {
	return t.set(ctx, k.SessionID, `UPDATE tokens SET status = ?, data = ?, resolved_at = ?, expires_at = ? WHERE id = ?`,
		k.Status, blob(k.Data), tsp(k.ResolvedAt), tsp(k.ExpiresAt), k.ID)
}

func (t *tx) ExpiringTokens(ctx context.Context) ([]store.Token, error) {
	return t.queryTokens(ctx, `SELECT `+tokenCols+` FROM tokens WHERE status = 'pending' AND expires_at IS NOT NULL ORDER BY expires_at, id`)
}

const waitCols = `id, session_id, turn_id, kind, target_id, status, deadline, idle_timeout_us, outcome, created_at, resolved_at`

func (t *tx) InsertWait(ctx context.Context, w *store.Wait) error {
	return t.put(ctx, w.SessionID, `INSERT INTO waits(`+waitCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.SessionID, w.TurnID, w.Kind, w.TargetID, w.Status, tsp(w.Deadline), w.IdleTimeout.Microseconds(), blob(w.Outcome),
		ts(w.CreatedAt), tsp(w.ResolvedAt))
}

func (t *tx) queryWaits(ctx context.Context, q string, args ...any) ([]store.Wait, error) {
	rows, err := t.rows(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Wait
	for rows.Next() {
		var w store.Wait
		var outcome []byte
		var idle int64
		var created tcol
		var deadline, resolved tpcol
		if err := rows.Scan(&w.ID, &w.SessionID, &w.TurnID, &w.Kind, &w.TargetID, &w.Status, &deadline, &idle, &outcome, &created, &resolved); err != nil {
			return nil, err
		}
		w.Deadline, w.IdleTimeout, w.Outcome = fromTP(deadline), time.Duration(idle)*time.Microsecond, raw(outcome)
		w.CreatedAt, w.ResolvedAt = fromT(created), fromTP(resolved)
		out = append(out, w)
	}
	return out, rows.Err()
}

func (t *tx) GetWait(ctx context.Context, id string) (*store.Wait, error) {
	ws, err := t.queryWaits(ctx, `SELECT `+waitCols+` FROM waits WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, store.ErrNotFound
	}
	return &ws[0], nil
}

func (t *tx) UpdateWait(ctx context.Context, w *store.Wait) error {
	return t.set(ctx, w.SessionID, `UPDATE waits SET status = ?, deadline = ?, outcome = ?, resolved_at = ? WHERE id = ?`,
		w.Status, tsp(w.Deadline), blob(w.Outcome), tsp(w.ResolvedAt), w.ID)
}

func (t *tx) OpenWaits(ctx context.Context, sessionID string) ([]store.Wait, error) {
	if sessionID == "" {
		return t.queryWaits(ctx, `SELECT `+waitCols+` FROM waits WHERE status = 'waiting' ORDER BY created_at, id`)
	}
	return t.queryWaits(ctx, `SELECT `+waitCols+` FROM waits WHERE session_id = ? AND status = 'waiting' ORDER BY created_at, id`, sessionID)
}

func (t *tx) WaitsOn(ctx context.Context, targetID string) ([]store.Wait, error) {
	return t.queryWaits(ctx, `SELECT `+waitCols+` FROM waits WHERE target_id = ? AND target_id <> '' AND status = 'waiting' ORDER BY created_at, id`, targetID)
}
