package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

const sessionCols = `id, deployment_id, root_session_id, agent, template, computer_id, parent_session_id,
 requester_session_id, key, status, close_after_idle, hibernate_after_idle, max_turn_duration,
 idle_since, initial_turn_id, created_at, slack_channel_id, idle_close_at`

func scanSession(row pgx.Row) (*store.Session, error) {
	var s store.Session
	if err := row.Scan(&s.ID, &s.DeploymentID, &s.RootSessionID, &s.Agent, &s.Template, &s.ComputerID, &s.ParentSessionID,
		&s.RequesterSessionID, &s.Key, &s.Status, &s.CloseAfterIdle, &s.HibernateAfterIdle, &s.MaxTurnDuration,
		&s.IdleSince, &s.InitialTurnID, &s.CreatedAt, &s.SlackChannelID, &s.IdleCloseAt); err != nil {
		return nil, err
	}
	s.IdleSince, s.IdleCloseAt = utcPtr(s.IdleSince), utcPtr(s.IdleCloseAt)
	s.CreatedAt = utc(s.CreatedAt)
	return &s, nil
}

func (t *tx) InsertSession(ctx context.Context, s *store.Session) error {
	keys := []string{s.ID}
	if s.Key != "" {
		keys = append(keys, sessionKeyLock(s.Agent, s.Key))
	}
	return t.insert(ctx, keys, `INSERT INTO sessions(`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
		s.ID, s.DeploymentID, s.RootSessionID, s.Agent, s.Template, s.ComputerID, s.ParentSessionID,
		s.RequesterSessionID, s.Key, s.Status, s.CloseAfterIdle, s.HibernateAfterIdle, s.MaxTurnDuration,
		s.IdleSince, s.InitialTurnID, s.CreatedAt, s.SlackChannelID, s.IdleCloseAt)
}

func (t *tx) querySessions(ctx context.Context, q string, args ...any) ([]store.Session, error) {
	rows, err := t.q.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Session
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *s)
	}
	return out, rows.Err()
}

func (t *tx) oneSession(ctx context.Context, key string, q string, args ...any) (*store.Session, error) {
	s, err := scanSession(t.row(ctx, key, q, args...))
	return s, mapErr(err)
}

func (t *tx) GetSession(ctx context.Context, id string) (*store.Session, error) {
	return t.oneSession(ctx, id, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id)
}

func (t *tx) GetSessionByKey(ctx context.Context, agent, key string) (*store.Session, error) {
	return t.oneSession(ctx, sessionKeyLock(agent, key), `SELECT `+sessionCols+` FROM sessions WHERE agent = $1 AND key = $2 AND key <> ''`, agent, key)
}

func (t *tx) SetSessionIdleSince(ctx context.Context, id string, since, closeAt *time.Time) error {
	return t.exec(ctx, id, `UPDATE sessions SET idle_since = $1, idle_close_at = $2 WHERE id = $3`, since, closeAt, id)
}

func (t *tx) UpdateSession(ctx context.Context, s *store.Session) error {
	return t.exec(ctx, s.ID, `UPDATE sessions SET computer_id = $1, status = $2, idle_since = $3, initial_turn_id = $4, idle_close_at = $5 WHERE id = $6`,
		s.ComputerID, s.Status, s.IdleSince, s.InitialTurnID, s.IdleCloseAt, s.ID)
}

func (t *tx) IdleDeadlines(ctx context.Context, before time.Time, after store.IdleDeadline, limit int) ([]store.IdleDeadline, error) {
	// A zero cursor starts below every deadline (-infinity).
	var at any = after.CloseAt
	if after.CloseAt.IsZero() {
		at = "-infinity"
	}
	rows, err := t.q.Query(ctx, `SELECT id, idle_close_at FROM sessions
 WHERE idle_close_at IS NOT NULL AND status = 'open' AND idle_close_at <= $1 AND (idle_close_at, id) > ($2::timestamptz, $3)
 ORDER BY idle_close_at, id LIMIT $4`, before, at, after.SessionID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.IdleDeadline
	for rows.Next() {
		var d store.IdleDeadline
		if err := rows.Scan(&d.SessionID, &d.CloseAt); err != nil {
			return nil, err
		}
		d.CloseAt = utc(d.CloseAt)
		out = append(out, d)
	}
	return out, rows.Err()
}

func (t *tx) ListSessions(ctx context.Context, f store.SessionFilter) ([]store.Session, error) {
	q := `SELECT ` + sessionCols + ` FROM sessions WHERE true`
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		q += fmt.Sprintf(` AND `+cond, len(args))
	}
	if f.Agent != "" {
		add("agent = $%d", f.Agent)
	}
	if f.Key != "" {
		add("key = $%d", f.Key)
	}
	if f.ParentSessionID != "" {
		add("parent_session_id = $%d", f.ParentSessionID)
	}
	if f.RequesterSessionID != "" {
		add("requester_session_id = $%d", f.RequesterSessionID)
	}
	if f.ComputerID != "" {
		// The second term lets a generic plan use the partial index
		// sessions_computer.
		add("computer_id = $%d AND computer_id <> ''", f.ComputerID)
	}
	if f.AfterID != "" {
		add("id > $%d", f.AfterID)
	}
	if len(f.Statuses) > 0 {
		add("status = ANY($%d::text[])", f.Statuses)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY id LIMIT $%d`, len(args))
	return t.querySessions(ctx, q, args...)
}

func (t *tx) SessionsWithWork(ctx context.Context) ([]string, error) {
	rows, err := t.q.Query(ctx, `SELECT DISTINCT session_id FROM turns WHERE status IN ('queued', 'running') ORDER BY session_id`)
	return collectStrings(rows, err)
}

func (t *tx) GetIdempotency(ctx context.Context, scope, key string) (*store.Idempotency, error) {
	var r store.Idempotency
	var resp []byte
	if err := mapErr(t.row(ctx, idempotencyLock(scope, key), `SELECT scope, key, digest, response, created_at FROM idempotency WHERE scope = $1 AND key = $2`,
		scope, key).Scan(&r.Scope, &r.Key, &r.Digest, &resp, &r.CreatedAt)); err != nil {
		return nil, err
	}
	r.Response, r.CreatedAt = raw(resp), utc(r.CreatedAt)
	return &r, nil
}

func (t *tx) InsertIdempotency(ctx context.Context, r *store.Idempotency) error {
	return t.insert(ctx, nil, `INSERT INTO idempotency(scope, key, digest, response, created_at) VALUES ($1, $2, $3, $4, $5)`,
		r.Scope, r.Key, r.Digest, []byte(r.Response), r.CreatedAt)
}
