package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

const turnCols = `id, session_id, sequence, status, input, source, created_at, started_at, terminal_at,
 result, response, response_staged, error_code, error_message, output_bytes, last_op, waited, messaged, interrupt_requested, payload_expired_at, trace_parent`

func scanTurn(row pgx.Row) (*store.Turn, error) {
	var t store.Turn
	var input, source, result, response []byte
	if err := row.Scan(&t.ID, &t.SessionID, &t.Sequence, &t.Status, &input, &source, &t.CreatedAt, &t.StartedAt, &t.TerminalAt,
		&result, &response, &t.ResponseStaged, &t.ErrorCode, &t.ErrorMessage, &t.OutputBytes, &t.LastOp, &t.Waited, &t.Messaged, &t.InterruptRequested, &t.PayloadExpiredAt, &t.TraceParent); err != nil {
		return nil, err
	}
	t.Input, t.Source, t.Result, t.Response = raw(input), raw(source), raw(result), raw(response)
	t.CreatedAt = utc(t.CreatedAt)
	t.StartedAt = utcPtr(t.StartedAt)
	t.TerminalAt = utcPtr(t.TerminalAt)
	t.PayloadExpiredAt = utcPtr(t.PayloadExpiredAt)
	return &t, nil
}

// InsertTurn with no sequence assigns it in the same statement (under the
// Session's lock), so that admitting a Turn needs no read of its own.
func (t *tx) InsertTurn(ctx context.Context, tr *store.Turn) error {
	if err := t.write(); err != nil {
		return err
	}
	var seq int64
	err := t.row(ctx, tr.SessionID, `INSERT INTO turns(`+turnCols+`)
 SELECT $1, $2, COALESCE(NULLIF($3::bigint, 0), MAX(sequence) + 1, 1), $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21
 FROM turns WHERE session_id = $2 ON CONFLICT DO NOTHING RETURNING sequence`,
		tr.ID, tr.SessionID, tr.Sequence, tr.Status, blob(tr.Input), blob(tr.Source), tr.CreatedAt,
		tr.StartedAt, tr.TerminalAt, blob(tr.Result), blob(tr.Response), tr.ResponseStaged,
		tr.ErrorCode, tr.ErrorMessage, tr.OutputBytes, tr.LastOp, tr.Waited, tr.Messaged, tr.InterruptRequested, tr.PayloadExpiredAt, tr.TraceParent).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrDuplicate
	}
	if err != nil {
		return mapErr(err)
	}
	tr.Sequence = seq
	return nil
}

func (t *tx) queryTurns(ctx context.Context, key string, q string, args ...any) ([]store.Turn, error) {
	rows, err := t.query(ctx, key, q, args...)
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

func (t *tx) oneTurn(ctx context.Context, key string, q string, args ...any) (*store.Turn, error) {
	tr, err := scanTurn(t.row(ctx, key, q, args...))
	return tr, mapErr(err)
}

func (t *tx) GetTurn(ctx context.Context, sessionID, turnID string) (*store.Turn, error) {
	return t.oneTurn(ctx, sessionID, `SELECT `+turnCols+` FROM turns WHERE id = $1 AND session_id = $2`, turnID, sessionID)
}

func (t *tx) UpdateTurn(ctx context.Context, tr *store.Turn) error {
	return t.exec(ctx, tr.SessionID, `UPDATE turns SET status = $1, started_at = $2, terminal_at = $3, result = $4, response = $5,
 response_staged = $6, error_code = $7, error_message = $8, output_bytes = $9, last_op = $10, waited = $11, messaged = $12, interrupt_requested = $13 WHERE session_id = $14 AND sequence = $15`,
		tr.Status, tr.StartedAt, tr.TerminalAt, blob(tr.Result), blob(tr.Response),
		tr.ResponseStaged, tr.ErrorCode, tr.ErrorMessage, tr.OutputBytes, tr.LastOp, tr.Waited, tr.Messaged, tr.InterruptRequested, tr.SessionID, tr.Sequence)
}

func (t *tx) ListTurns(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]store.Turn, error) {
	return t.queryTurns(ctx, sessionID, `SELECT `+turnCols+` FROM turns WHERE session_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3`, sessionID, afterSeq, limit)
}

func (t *tx) MaxTurnSequence(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	err := mapErr(t.row(ctx, sessionID, `SELECT COALESCE(MAX(sequence), 0) FROM turns WHERE session_id = $1`, sessionID).Scan(&n))
	return n, err
}

func (t *tx) ActiveTurn(ctx context.Context, sessionID string) (*store.Turn, error) {
	return t.oneTurn(ctx, sessionID, `SELECT `+turnCols+` FROM turns
 WHERE status IN ('queued', 'running') AND session_id = $1 ORDER BY status = 'running' DESC, sequence LIMIT 1`, sessionID)
}

func (t *tx) TurnsWithStatus(ctx context.Context, status string) ([]store.Turn, error) {
	return t.queryTurns(ctx, "", `SELECT `+turnCols+` FROM turns WHERE status = $1 ORDER BY session_id, sequence`, status)
}

// expireSQL takes a batch of Turns to expire and drops their payloads.
// FOR UPDATE SKIP LOCKED leaves the Turns that another node's batch holds
// to it, and one that such a batch expired meanwhile no longer matches
// once its lock is granted.
const expireSQL = `WITH picked AS (
  SELECT session_id, sequence FROM turns
  WHERE payload_expired_at IS NULL AND terminal_at IS NOT NULL AND terminal_at < $1
  ORDER BY terminal_at LIMIT $2 FOR UPDATE SKIP LOCKED
)
UPDATE turns SET input = NULL, result = NULL, response = NULL, response_staged = false, payload_expired_at = $3
FROM picked WHERE turns.session_id = picked.session_id AND turns.sequence = picked.sequence
RETURNING turns.session_id, turns.id`

// ExpireTurnPayloads rewrites the events' data in Go (store.ExpireEventData):
// PostgreSQL's JSON functions refuse a payload with \u0000 in it. The
// event updates are queued and go out in one batch with the commit.
func (t *tx) ExpireTurnPayloads(ctx context.Context, cutoff, at time.Time, limit int) (int, error) {
	if err := t.write(); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	rows, err := t.query(ctx, "", expireSQL, cutoff, limit, at)
	if err != nil {
		return 0, err
	}
	var sessions, turns []string
	for rows.Next() {
		var sid, id string
		if err := rows.Scan(&sid, &id); err != nil {
			rows.Close()
			return 0, mapErr(err)
		}
		sessions, turns = append(sessions, sid), append(turns, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, mapErr(err)
	}
	if len(turns) == 0 {
		return 0, nil
	}
	if err := t.exec(ctx, "", `UPDATE messages SET content = convert_to('[]', 'UTF8') WHERE turn_id = ANY($1::text[])`, turns); err != nil {
		return 0, err
	}
	evs, err := t.query(ctx, "", `SELECT e.session_id, e.sequence, e.data FROM events e
 JOIN unnest($1::text[], $2::text[]) AS x(session_id, turn_id) ON e.session_id = x.session_id AND e.turn_id = x.turn_id
 WHERE e.kind = ANY($3::text[])`, sessions, turns, store.PayloadEventKinds)
	if err != nil {
		return 0, err
	}
	type rewrite struct {
		session string
		seq     int64
		data    []byte
	}
	var out []rewrite
	for evs.Next() {
		var r rewrite
		var data []byte
		if err := evs.Scan(&r.session, &r.seq, &data); err != nil {
			evs.Close()
			return 0, mapErr(err)
		}
		d, err := store.ExpireEventData(data, at)
		if err != nil {
			evs.Close()
			return 0, fmt.Errorf("pgstore: event %d of session %s: %w", r.seq, r.session, err)
		}
		r.data = d
		out = append(out, r)
	}
	evs.Close()
	if err := evs.Err(); err != nil {
		return 0, mapErr(err)
	}
	for _, r := range out {
		if err := t.exec(ctx, "", `UPDATE events SET data = $1 WHERE session_id = $2 AND sequence = $3`, r.data, r.session, r.seq); err != nil {
			return 0, err
		}
	}
	return len(turns), nil
}

const messageCols = `id, session_id, turn_id, content, source, status, created_at`

// InsertMessage: the trigger of migration 0009 marks the Turn (for nodes
// of an older version too).
func (t *tx) InsertMessage(ctx context.Context, m *store.Message) error {
	return t.insert(ctx, []string{m.SessionID}, `INSERT INTO messages(`+messageCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		m.ID, m.SessionID, m.TurnID, []byte(m.Content), []byte(m.Source), m.Status, m.CreatedAt)
}

func (t *tx) queryMessages(ctx context.Context, q string, args ...any) ([]store.Message, error) {
	rows, err := t.q.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Message
	for rows.Next() {
		var m store.Message
		var content, source []byte
		if err := rows.Scan(&m.ID, &m.SessionID, &m.TurnID, &content, &source, &m.Status, &m.CreatedAt); err != nil {
			return nil, err
		}
		m.Content, m.Source, m.CreatedAt = raw(content), raw(source), utc(m.CreatedAt)
		out = append(out, m)
	}
	return out, rows.Err()
}

func (t *tx) GetMessage(ctx context.Context, id string) (*store.Message, error) {
	ms, err := t.queryMessages(ctx, `SELECT `+messageCols+` FROM messages WHERE id = $1`, id)
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, store.ErrNotFound
	}
	return &ms[0], nil
}

func (t *tx) UpdateMessage(ctx context.Context, m *store.Message) error {
	return t.exec(ctx, "", `UPDATE messages SET status = $1 WHERE id = $2`, m.Status, m.ID)
}

func (t *tx) PendingMessages(ctx context.Context, turnID string) ([]store.Message, error) {
	return t.queryMessages(ctx, `SELECT `+messageCols+` FROM messages WHERE turn_id = $1 AND status = 'admitted' ORDER BY created_at, id`, turnID)
}

// AppendEvent assigns the next sequence of the Session under its lock (see
// tx): the last sequence is read after the lock is granted, and the lock is
// held to the end of the transaction, so sequences stay gapless and in
// commit order. Later appends in the same transaction count on. The insert
// itself is queued, like the writes of exec.
func (t *tx) AppendEvent(ctx context.Context, e *store.Event) error {
	if err := t.write(); err != nil {
		return err
	}
	last, err := t.LastEventSequence(ctx, e.SessionID)
	if err != nil {
		return err
	}
	data := e.Data
	if data == nil {
		data = json.RawMessage("{}")
	}
	if err := t.exec(ctx, "", `INSERT INTO events(session_id, sequence, turn_id, kind, data, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		e.SessionID, last+1, e.TurnID, e.Kind, []byte(data), e.CreatedAt); err != nil {
		return err
	}
	e.Sequence = last + 1
	t.seqs[e.SessionID] = e.Sequence
	return nil
}

func (t *tx) ListEvents(ctx context.Context, sessionID string, after int64, limit int) ([]store.Event, error) {
	rows, err := t.query(ctx, sessionID, `SELECT session_id, sequence, turn_id, kind, data, created_at FROM events
 WHERE session_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3`, sessionID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var e store.Event
		var data []byte
		if err := rows.Scan(&e.SessionID, &e.Sequence, &e.TurnID, &e.Kind, &data, &e.CreatedAt); err != nil {
			return nil, err
		}
		e.Data, e.CreatedAt = raw(data), utc(e.CreatedAt)
		out = append(out, e)
	}
	return out, rows.Err()
}

// LastEventSequence reads, in an Update, the sequence that the Session's
// lock brought along (see tx): taking the lock is what it costs.
func (t *tx) LastEventSequence(ctx context.Context, sessionID string) (int64, error) {
	if !t.readOnly {
		if n, ok := t.seqs[sessionID]; ok {
			return n, nil
		}
		if err := t.lock(ctx, sessionID); err != nil {
			return 0, err
		}
		if err := t.flush(ctx); err != nil {
			return 0, mapErr(err)
		}
		if n, ok := t.seqs[sessionID]; ok {
			return n, nil
		}
	}
	var n int64
	if err := t.q.QueryRow(ctx, lastSeqSQL, sessionID).Scan(&n); err != nil {
		return 0, mapErr(err)
	}
	if !t.readOnly {
		t.seqs[sessionID] = n // the lock keeps it current
	}
	return n, nil
}
