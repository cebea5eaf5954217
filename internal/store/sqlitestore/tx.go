package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/helmr-go/helmr/internal/store"
)

// errReadOnly refuses a write in a View or Read that a read-only
// connection would not refuse by itself.
var errReadOnly = errors.New("sqlitestore: write in a read-only transaction")

type tx struct {
	ctx      context.Context
	readOnly bool
	q        querier
	// cache is the writer's cache of rows (writecache.go) in write
	// transactions; nil in reads.
	cache *writeCache
}

func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func nullMicros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

func fromNullMicros(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func blob(b json.RawMessage) any {
	if b == nil {
		return nil
	}
	return []byte(b)
}

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func (t *tx) exec(ctx context.Context, q string, args ...any) error {
	_, err := t.q.exec(ctx, q, args...)
	if isUnique(err) {
		return store.ErrDuplicate
	}
	return err
}

// one runs a query expected to return at most one row and scans it.
func (t *tx) one(ctx context.Context, q string, args []any, dest ...any) error {
	rows, err := t.q.query(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return store.ErrNotFound
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

func (t *tx) GetMeta(ctx context.Context, key string) (string, error) {
	var v string
	err := t.one(ctx, `SELECT value FROM meta WHERE key = ?`, []any{key}, &v)
	return v, err
}

func (t *tx) PutMeta(ctx context.Context, key, value string) error {
	return t.exec(ctx, `INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
}

const deploymentCols = `id, digest, manifest, binary_path, created_at, sources_digest`

func scanDeployment(sc interface{ Scan(...any) error }) (*store.Deployment, error) {
	var d store.Deployment
	var manifest string
	var created int64
	if err := sc.Scan(&d.ID, &d.Digest, &manifest, &d.BinaryPath, &created, &d.SourcesDigest); err != nil {
		return nil, err
	}
	d.Manifest = json.RawMessage(manifest)
	d.CreatedAt = fromMicros(created)
	return &d, nil
}

func (t *tx) InsertDeployment(ctx context.Context, d *store.Deployment) error {
	return t.exec(ctx, `INSERT INTO deployments(`+deploymentCols+`) VALUES (?, ?, ?, ?, ?, ?)`, d.ID, d.Digest, string(d.Manifest), d.BinaryPath, micros(d.CreatedAt), d.SourcesDigest)
}

func (t *tx) getDeployment(ctx context.Context, where string, args ...any) (*store.Deployment, error) {
	rows, err := t.q.query(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, err
		}
		return nil, store.ErrNotFound
	}
	return scanDeployment(rows)
}

func (t *tx) GetDeployment(ctx context.Context, id string) (*store.Deployment, error) {
	return t.getDeployment(ctx, "id = ?", id)
}

func (t *tx) GetDeploymentByDigest(ctx context.Context, digest, sourcesDigest string) (*store.Deployment, error) {
	return t.getDeployment(ctx, "digest = ? AND sources_digest = ?", digest, sourcesDigest)
}

func (t *tx) ListDeployments(ctx context.Context, beforeID string, limit int) ([]store.Deployment, error) {
	q := `SELECT ` + deploymentCols + ` FROM deployments`
	args := []any{}
	if beforeID != "" {
		q += ` WHERE id < ?`
		args = append(args, beforeID)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)
	rows, err := t.q.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Deployment
	for rows.Next() {
		d, err := scanDeployment(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	return out, rows.Err()
}

const sessionCols = `id, deployment_id, root_session_id, agent, template, computer_id, parent_session_id,
 requester_session_id, key, status, close_after_idle, hibernate_after_idle, max_turn_duration,
 idle_since, initial_turn_id, created_at, slack_channel_id, idle_close_at`

func scanSession(sc interface{ Scan(...any) error }) (*store.Session, error) {
	var s store.Session
	var idle, closeAt sql.NullInt64
	var created int64
	if err := sc.Scan(&s.ID, &s.DeploymentID, &s.RootSessionID, &s.Agent, &s.Template, &s.ComputerID, &s.ParentSessionID,
		&s.RequesterSessionID, &s.Key, &s.Status, &s.CloseAfterIdle, &s.HibernateAfterIdle, &s.MaxTurnDuration,
		&idle, &s.InitialTurnID, &created, &s.SlackChannelID, &closeAt); err != nil {
		return nil, err
	}
	s.IdleSince, s.IdleCloseAt = fromNullMicros(idle), fromNullMicros(closeAt)
	s.CreatedAt = fromMicros(created)
	return &s, nil
}

func (t *tx) InsertSession(ctx context.Context, s *store.Session) error {
	err := t.exec(ctx, `INSERT INTO sessions(`+sessionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.DeploymentID, s.RootSessionID, s.Agent, s.Template, s.ComputerID, s.ParentSessionID,
		s.RequesterSessionID, s.Key, s.Status, s.CloseAfterIdle, s.HibernateAfterIdle, s.MaxTurnDuration,
		nullMicros(s.IdleSince), s.InitialTurnID, micros(s.CreatedAt), s.SlackChannelID, nullMicros(s.IdleCloseAt))
	if err == nil {
		t.cache.insertedSession(s)
	}
	return err
}

func (t *tx) querySessions(ctx context.Context, q string, args ...any) ([]store.Session, error) {
	rows, err := t.q.query(ctx, q, args...)
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

func (t *tx) GetSession(ctx context.Context, id string) (*store.Session, error) {
	if s, ok := t.cache.session(id); ok {
		return s, nil
	}
	ss, err := t.querySessions(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ss) == 0 {
		return nil, store.ErrNotFound
	}
	t.cache.readSession(&ss[0])
	return &ss[0], nil
}

func (t *tx) GetSessionByKey(ctx context.Context, agent, key string) (*store.Session, error) {
	ss, err := t.querySessions(ctx, `SELECT `+sessionCols+` FROM sessions WHERE agent = ? AND key = ? AND key <> ''`, agent, key)
	if err != nil {
		return nil, err
	}
	if len(ss) == 0 {
		return nil, store.ErrNotFound
	}
	return &ss[0], nil
}

func (t *tx) SetSessionIdleSince(ctx context.Context, id string, since, closeAt *time.Time) error {
	err := t.exec(ctx, `UPDATE sessions SET idle_since = ?, idle_close_at = ? WHERE id = ?`, nullMicros(since), nullMicros(closeAt), id)
	if err == nil {
		t.cache.updatedSession(id, func(c *store.Session) { c.IdleSince, c.IdleCloseAt = since, closeAt })
	}
	return err
}

func (t *tx) UpdateSession(ctx context.Context, s *store.Session) error {
	err := t.exec(ctx, `UPDATE sessions SET computer_id = ?, status = ?, idle_since = ?, initial_turn_id = ?, idle_close_at = ? WHERE id = ?`,
		s.ComputerID, s.Status, nullMicros(s.IdleSince), s.InitialTurnID, nullMicros(s.IdleCloseAt), s.ID)
	if err == nil {
		t.cache.updatedSession(s.ID, func(c *store.Session) {
			c.ComputerID, c.Status, c.IdleSince, c.InitialTurnID, c.IdleCloseAt = s.ComputerID, s.Status, s.IdleSince, s.InitialTurnID, s.IdleCloseAt
		})
	}
	return err
}

func (t *tx) IdleDeadlines(ctx context.Context, before time.Time, after store.IdleDeadline, limit int) ([]store.IdleDeadline, error) {
	// A zero cursor starts below every deadline.
	at, id := micros(after.CloseAt), after.SessionID
	if after.CloseAt.IsZero() {
		at = math.MinInt64
	}
	rows, err := t.q.query(ctx, `SELECT id, idle_close_at FROM sessions INDEXED BY sessions_idle_close
 WHERE idle_close_at IS NOT NULL AND status = 'open' AND idle_close_at <= ? AND (idle_close_at > ? OR (idle_close_at = ? AND id > ?))
 ORDER BY idle_close_at, id LIMIT ?`, micros(before), at, at, id, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.IdleDeadline
	for rows.Next() {
		var d store.IdleDeadline
		var m int64
		if err := rows.Scan(&d.SessionID, &m); err != nil {
			return nil, err
		}
		d.CloseAt = fromMicros(m)
		out = append(out, d)
	}
	return out, rows.Err()
}

func (t *tx) ListSessions(ctx context.Context, f store.SessionFilter) ([]store.Session, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if f.Agent != "" {
		add("agent = ?", f.Agent)
	}
	if f.Key != "" {
		add("key = ?", f.Key)
	}
	if f.ParentSessionID != "" {
		// The second term lets SQLite use the partial index sessions_parent.
		add("parent_session_id = ? AND parent_session_id <> ''", f.ParentSessionID)
	}
	if f.RequesterSessionID != "" {
		add("requester_session_id = ?", f.RequesterSessionID)
	}
	if f.ComputerID != "" {
		// The second term lets SQLite use the partial index sessions_computer.
		add("computer_id = ? AND computer_id <> ''", f.ComputerID)
	}
	if f.AfterID != "" {
		add("id > ?", f.AfterID)
	}
	if len(f.Statuses) > 0 {
		ph := make([]string, len(f.Statuses))
		for i, s := range f.Statuses {
			ph[i] = "?"
			args = append(args, s)
		}
		where = append(where, "status IN ("+strings.Join(ph, ", ")+")")
	}
	q := `SELECT ` + sessionCols + ` FROM sessions`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += ` ORDER BY id LIMIT ?`
	args = append(args, limit)
	return t.querySessions(ctx, q, args...)
}

func (t *tx) SessionsWithWork(ctx context.Context) ([]string, error) {
	rows, err := t.q.query(ctx, `SELECT DISTINCT session_id FROM turns WHERE status IN ('queued', 'running') ORDER BY session_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var sid string
		if err := rows.Scan(idDest{&sid}); err != nil {
			return nil, err
		}
		out = append(out, sid)
	}
	return out, rows.Err()
}

const turnCols = `id, session_id, sequence, status, input, source, created_at, started_at, terminal_at,
 result, response, response_staged, error_code, error_message, output_bytes, last_op, waited, messaged, interrupt_requested, payload_expired_at, trace_parent`

func scanTurn(sc interface{ Scan(...any) error }) (*store.Turn, error) {
	var t store.Turn
	var created int64
	var started, terminal, expired sql.NullInt64
	var input, source, result, response []byte
	var staged, waited, messaged, interrupt int
	if err := sc.Scan(idDest{&t.ID}, idDest{&t.SessionID}, &t.Sequence, &t.Status, &input, &source, &created, &started, &terminal,
		&result, &response, &staged, &t.ErrorCode, &t.ErrorMessage, &t.OutputBytes, &t.LastOp, &waited, &messaged, &interrupt, &expired, &t.TraceParent); err != nil {
		return nil, err
	}
	t.Input, t.Source, t.Result, t.Response = raw(input), raw(source), raw(result), raw(response)
	t.ResponseStaged, t.Waited, t.Messaged, t.InterruptRequested = staged != 0, waited != 0, messaged != 0, interrupt != 0
	t.CreatedAt = fromMicros(created)
	t.StartedAt = fromNullMicros(started)
	t.TerminalAt = fromNullMicros(terminal)
	t.PayloadExpiredAt = fromNullMicros(expired)
	return &t, nil
}

func raw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (t *tx) InsertTurn(ctx context.Context, tr *store.Turn) error {
	seq := tr.Sequence
	if seq == 0 {
		n, err := t.MaxTurnSequence(ctx, tr.SessionID)
		if err != nil {
			return err
		}
		seq = n + 1
	}
	err := t.exec(ctx, `INSERT INTO turns(`+turnCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id(tr.ID), id(tr.SessionID), seq, tr.Status, blob(tr.Input), blob(tr.Source), micros(tr.CreatedAt),
		nullMicros(tr.StartedAt), nullMicros(tr.TerminalAt), blob(tr.Result), blob(tr.Response), boolInt(tr.ResponseStaged),
		tr.ErrorCode, tr.ErrorMessage, tr.OutputBytes, tr.LastOp, boolInt(tr.Waited), boolInt(tr.Messaged), boolInt(tr.InterruptRequested),
		nullMicros(tr.PayloadExpiredAt), tr.TraceParent)
	if err == nil {
		tr.Sequence = seq
		t.cache.insertedTurn(tr)
	}
	return err
}

func (t *tx) queryTurns(ctx context.Context, q string, args ...any) ([]store.Turn, error) {
	rows, err := t.q.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Turn
	for rows.Next() {
		tr, err := scanTurn(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *tr)
	}
	return out, rows.Err()
}

func (t *tx) oneTurn(ctx context.Context, q string, args ...any) (*store.Turn, error) {
	ts, err := t.queryTurns(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, store.ErrNotFound
	}
	return &ts[0], nil
}

func (t *tx) GetTurn(ctx context.Context, sessionID, turnID string) (*store.Turn, error) {
	tr, ok := t.cache.turn(turnID)
	if !ok {
		// Look up by the unique id index alone: with session_id in the
		// WHERE clause SQLite may scan the Session's whole primary-key range.
		var err error
		if tr, err = t.oneTurn(ctx, `SELECT `+turnCols+` FROM turns WHERE id = ?`, id(turnID)); err != nil {
			return nil, err
		}
		t.cache.readTurn(tr)
	}
	if tr.SessionID != sessionID {
		return nil, store.ErrNotFound
	}
	return tr, nil
}

func (t *tx) UpdateTurn(ctx context.Context, tr *store.Turn) error {
	var err error
	if cur, ok := t.cache.turn(tr.ID); ok && cur.SessionID == tr.SessionID && cur.Sequence == tr.Sequence &&
		cur.Status == tr.Status && equalTime(cur.TerminalAt, tr.TerminalAt) {
		// The columns the indexes hold (status, terminal_at) are as stored:
		// a statement that does not set them leaves the index pages alone
		// (an output record, a flag), one page written instead of three.
		err = t.exec(ctx, `UPDATE turns SET started_at = ?, result = ?, response = ?, response_staged = ?, error_code = ?,
 error_message = ?, output_bytes = ?, last_op = ?, waited = ?, messaged = ?, interrupt_requested = ? WHERE session_id = ? AND sequence = ?`,
			nullMicros(tr.StartedAt), blob(tr.Result), blob(tr.Response), boolInt(tr.ResponseStaged), tr.ErrorCode,
			tr.ErrorMessage, tr.OutputBytes, tr.LastOp, boolInt(tr.Waited), boolInt(tr.Messaged), boolInt(tr.InterruptRequested), id(tr.SessionID), tr.Sequence)
	} else {
		err = t.exec(ctx, `UPDATE turns SET status = ?, started_at = ?, terminal_at = ?, result = ?, response = ?,
 response_staged = ?, error_code = ?, error_message = ?, output_bytes = ?, last_op = ?, waited = ?, messaged = ?, interrupt_requested = ? WHERE session_id = ? AND sequence = ?`,
			tr.Status, nullMicros(tr.StartedAt), nullMicros(tr.TerminalAt), blob(tr.Result), blob(tr.Response),
			boolInt(tr.ResponseStaged), tr.ErrorCode, tr.ErrorMessage, tr.OutputBytes, tr.LastOp, boolInt(tr.Waited), boolInt(tr.Messaged), boolInt(tr.InterruptRequested), id(tr.SessionID), tr.Sequence)
	}
	if err == nil {
		t.cache.updatedTurn(tr)
	}
	return err
}

// equalTime reports whether a and b are the same stored time (or both nil).
func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return micros(*a) == micros(*b)
}

func (t *tx) ListTurns(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]store.Turn, error) {
	return t.queryTurns(ctx, `SELECT `+turnCols+` FROM turns WHERE session_id = ? AND sequence > ? ORDER BY sequence LIMIT ?`, id(sessionID), afterSeq, limit)
}

func (t *tx) MaxTurnSequence(ctx context.Context, sessionID string) (int64, error) {
	if n, ok := t.cache.seq(false, sessionID); ok {
		return n, nil
	}
	var n int64
	err := t.one(ctx, `SELECT COALESCE(MAX(sequence), 0) FROM turns WHERE session_id = ?`, []any{id(sessionID)}, &n)
	if err == nil {
		t.cache.setSeq(false, sessionID, n)
	}
	return n, err
}

// activeStatus reports whether status is covered by the turns_active
// partial index, which the hot queries name explicitly: without statistics
// SQLite would otherwise scan the Session's primary-key range.
func activeStatus(status string) bool { return status == "queued" || status == "running" }

func (t *tx) ActiveTurn(ctx context.Context, sessionID string) (*store.Turn, error) {
	if t.cache != nil {
		turnID, found, known := t.cache.activeOf(sessionID)
		if !known {
			if err := t.learnActive(ctx, sessionID); err != nil {
				return nil, err
			}
			turnID, found, known = t.cache.activeOf(sessionID)
		}
		if known {
			if !found {
				return nil, store.ErrNotFound
			}
			return t.GetTurn(ctx, sessionID, turnID)
		}
	}
	return t.oneTurn(ctx, `SELECT `+turnCols+` FROM turns INDEXED BY turns_active
 WHERE status IN ('queued', 'running') AND session_id = ? ORDER BY status = 'running' DESC, sequence LIMIT 1`, id(sessionID))
}

// learnActive reads a Session's queued and running Turns into the write
// cache when they are few (a long queue is not kept).
func (t *tx) learnActive(ctx context.Context, sessionID string) error {
	rows, err := t.q.query(ctx, `SELECT id, sequence, status FROM turns INDEXED BY turns_active
 WHERE status IN ('queued', 'running') AND session_id = ? LIMIT ?`, id(sessionID), maxActiveKnown+1)
	if err != nil {
		return err
	}
	defer rows.Close()
	var set []activeTurn
	for rows.Next() {
		var a activeTurn
		if err := rows.Scan(idDest{&a.id}, &a.seq, &a.status); err != nil {
			return err
		}
		set = append(set, a)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(set) <= maxActiveKnown {
		t.cache.knowActive(sessionID, set)
	}
	return nil
}

func (t *tx) TurnsWithStatus(ctx context.Context, status string) ([]store.Turn, error) {
	if activeStatus(status) {
		return t.queryTurns(ctx, `SELECT `+turnCols+` FROM turns INDEXED BY turns_active
 WHERE status IN ('queued', 'running') AND status = ? ORDER BY session_id, sequence`, status)
	}
	return t.queryTurns(ctx, `SELECT `+turnCols+` FROM turns WHERE status = ? ORDER BY session_id, sequence`, status)
}

// ExpireTurnPayloads: SQLite has one writer, so nothing else expires the
// same Turns meanwhile.
func (t *tx) ExpireTurnPayloads(ctx context.Context, cutoff, at time.Time, limit int) (int, error) {
	if t.readOnly {
		// A read finding nothing to expire would succeed.
		return 0, errReadOnly
	}
	if limit <= 0 {
		return 0, nil
	}
	rows, err := t.q.query(ctx, `SELECT session_id, sequence, id FROM turns INDEXED BY turns_unexpired
 WHERE payload_expired_at IS NULL AND terminal_at IS NOT NULL AND terminal_at < ? ORDER BY terminal_at LIMIT ?`, micros(cutoff), limit)
	if err != nil {
		return 0, err
	}
	type due struct {
		session, id string
		seq         int64
	}
	var dues []due
	for rows.Next() {
		var d due
		if err := rows.Scan(idDest{&d.session}, &d.seq, idDest{&d.id}); err != nil {
			rows.Close()
			return 0, err
		}
		dues = append(dues, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	paths := make([]string, len(store.PayloadFields))
	for i, f := range store.PayloadFields {
		paths[i] = "'$." + f + "'"
	}
	kinds := "'" + strings.Join(store.PayloadEventKinds, "', '") + "'"
	// The data is stored as a BLOB, which SQLite's JSON functions would
	// read as JSONB: it is read as text and written back as a BLOB.
	events := `UPDATE events SET data = CAST(json_set(json_remove(CAST(data AS TEXT), ` + strings.Join(paths, ", ") + `), '$.` +
		store.PayloadExpiredField + `', ?) AS BLOB) WHERE session_id = ? AND turn_id = ? AND kind IN (` + kinds + `)`
	stamp := store.PayloadExpiredStamp(at)
	for _, d := range dues {
		if err := t.exec(ctx, `UPDATE turns SET input = NULL, result = NULL, response = NULL, response_staged = 0, payload_expired_at = ?
 WHERE session_id = ? AND sequence = ?`, micros(at), id(d.session), d.seq); err != nil {
			return 0, err
		}
		t.cache.forgetTurn(d.id)
		if err := t.exec(ctx, `UPDATE messages SET content = CAST('[]' AS BLOB) WHERE turn_id = ?`, d.id); err != nil {
			return 0, err
		}
		if err := t.exec(ctx, events, stamp, id(d.session), id(d.id)); err != nil {
			return 0, err
		}
	}
	return len(dues), nil
}

const messageCols = `id, session_id, turn_id, content, source, status, created_at`

func (t *tx) InsertMessage(ctx context.Context, m *store.Message) error {
	if err := t.exec(ctx, `INSERT INTO messages(`+messageCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.SessionID, m.TurnID, []byte(m.Content), []byte(m.Source), m.Status, micros(m.CreatedAt)); err != nil {
		return err
	}
	if err := t.exec(ctx, `UPDATE turns SET messaged = 1 WHERE id = ? AND messaged = 0`, id(m.TurnID)); err != nil {
		return err
	}
	if tr, ok := t.cache.turn(m.TurnID); ok {
		tr.Messaged = true
		t.cache.readTurn(tr)
	}
	return nil
}

func (t *tx) queryMessages(ctx context.Context, q string, args ...any) ([]store.Message, error) {
	rows, err := t.q.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Message
	for rows.Next() {
		var m store.Message
		var content, source []byte
		var created int64
		if err := rows.Scan(&m.ID, &m.SessionID, &m.TurnID, &content, &source, &m.Status, &created); err != nil {
			return nil, err
		}
		m.Content, m.Source, m.CreatedAt = raw(content), raw(source), fromMicros(created)
		out = append(out, m)
	}
	return out, rows.Err()
}

func (t *tx) GetMessage(ctx context.Context, id string) (*store.Message, error) {
	ms, err := t.queryMessages(ctx, `SELECT `+messageCols+` FROM messages WHERE id = ?`, id)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, store.ErrNotFound
	}
	return &ms[0], nil
}

func (t *tx) UpdateMessage(ctx context.Context, m *store.Message) error {
	return t.exec(ctx, `UPDATE messages SET status = ? WHERE id = ?`, m.Status, m.ID)
}

func (t *tx) PendingMessages(ctx context.Context, turnID string) ([]store.Message, error) {
	return t.queryMessages(ctx, `SELECT `+messageCols+` FROM messages WHERE turn_id = ? AND status = 'admitted' ORDER BY created_at, id`, turnID)
}

func (t *tx) AppendEvent(ctx context.Context, e *store.Event) error {
	last, err := t.LastEventSequence(ctx, e.SessionID)
	if err != nil {
		return err
	}
	e.Sequence = last + 1
	data := e.Data
	if data == nil {
		data = json.RawMessage("{}")
	}
	if err := t.exec(ctx, `INSERT INTO events(session_id, sequence, turn_id, kind, data, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		id(e.SessionID), e.Sequence, id(e.TurnID), e.Kind, []byte(data), micros(e.CreatedAt)); err != nil {
		return err
	}
	t.cache.setSeq(true, e.SessionID, e.Sequence)
	return nil
}

func (t *tx) ListEvents(ctx context.Context, sessionID string, after int64, limit int) ([]store.Event, error) {
	rows, err := t.q.query(ctx, `SELECT session_id, sequence, turn_id, kind, data, created_at FROM events
 WHERE session_id = ? AND sequence > ? ORDER BY sequence LIMIT ?`, id(sessionID), after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var data []byte
		var created int64
		if err := rows.Scan(idDest{&e.SessionID}, &e.Sequence, idDest{&e.TurnID}, &e.Kind, &data, &created); err != nil {
			return nil, err
		}
		e.Data, e.CreatedAt = raw(data), fromMicros(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

func (t *tx) LastEventSequence(ctx context.Context, sessionID string) (int64, error) {
	if n, ok := t.cache.seq(true, sessionID); ok {
		return n, nil
	}
	var n int64
	err := t.one(ctx, `SELECT COALESCE(MAX(sequence), 0) FROM events WHERE session_id = ?`, []any{id(sessionID)}, &n)
	if err == nil {
		t.cache.setSeq(true, sessionID, n)
	}
	return n, err
}

func (t *tx) GetIdempotency(ctx context.Context, scope, key string) (*store.Idempotency, error) {
	var r store.Idempotency
	var resp []byte
	var created int64
	if err := t.one(ctx, `SELECT scope, key, digest, response, created_at FROM idempotency WHERE scope = ? AND key = ?`,
		[]any{scope, key}, &r.Scope, &r.Key, &r.Digest, &resp, &created); err != nil {
		return nil, err
	}
	r.Response, r.CreatedAt = raw(resp), fromMicros(created)
	return &r, nil
}

func (t *tx) InsertIdempotency(ctx context.Context, r *store.Idempotency) error {
	return t.exec(ctx, `INSERT INTO idempotency(scope, key, digest, response, created_at) VALUES (?, ?, ?, ?, ?)`,
		r.Scope, r.Key, r.Digest, []byte(r.Response), micros(r.CreatedAt))
}

// id encodes an ID for the turns and events tables, which hold most rows:
// a canonical UUID is stored as its 16 bytes (sorting as its text does),
// anything else as text. Reads decode with idDest.
func id(s string) any {
	if len(s) == 36 {
		if u, err := uuid.Parse(s); err == nil && u.String() == s {
			return u[:]
		}
	}
	return s
}

// idDest scans an ID written by id.
type idDest struct{ s *string }

func (d idDest) Scan(v any) error {
	switch x := v.(type) {
	case []byte:
		if len(x) == 16 {
			*d.s = uuid.UUID(x).String()
		} else {
			*d.s = string(x)
		}
	case string:
		*d.s = x
	case nil:
		*d.s = ""
	default:
		return fmt.Errorf("sqlitestore: id of type %T", v)
	}
	return nil
}
