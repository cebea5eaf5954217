package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/helmr-go/helmr/internal/store"
)

// errReadOnly refuses a write in a View. It is returned before the
// statement reaches the server: PostgreSQL would abort the whole read
// transaction on it.
var errReadOnly = errors.New("pgstore: write in a read-only transaction")

// tx is a store.Tx on one PostgreSQL transaction.
//
// A statement that fails aborts a PostgreSQL transaction, and the store
// promises that ErrDuplicate and ErrNotFound leave it usable. So inserts
// use ON CONFLICT DO NOTHING and report ErrDuplicate when they stored no
// row, and lookups report ErrNotFound for an empty result: neither is a
// failed statement, and no savepoint is needed.
//
// Session locks: in an Update, the first call that names a Session (by ID,
// or by agent and key) takes a transaction-scoped advisory lock on it,
// before its statement runs. Updates of one Session therefore run one
// after another, as they do in the SQLite store's single writer: in READ
// COMMITTED every statement after the lock sees all that the previous
// holder committed, so read-modify-write sequences (MaxTurnSequence then
// InsertTurn, GetSession then UpdateSession) and event sequences are safe
// across connections and nodes. Locks need no row (events are appended for
// Sessions that have none) and are released at commit or rollback. An
// Update that names two Sessions may deadlock with one naming them in the
// other order; PostgreSQL then aborts one of them, whose Update fails.
// Views take no locks.
//
// Round trips: on a local server a transaction's cost is mostly its round
// trips, so a tx sends as few as it can, in pipelined batches (pgx.Batch,
// one Sync each). BEGIN goes out with the first statement; a Session lock
// goes out with the statement that follows it, together with a read of the
// Session's last event sequence (so that AppendEvent needs no read of its
// own); and writes whose only outcome is an error (exec: updates, upserts,
// appended events) are queued and go out ahead of the next statement, or
// with COMMIT. The error of a queued write is reported by the next call
// and by the commit: PostgreSQL has then aborted the transaction, and
// every later call reports it too. A transaction that sent nothing needs
// no round trip at all.
type tx struct {
	conn     *pgx.Conn
	q        txConn
	readOnly bool
	// begin opens the transaction; it is cleared once sent.
	begin string
	// queued holds locks and writes that go out ahead of the next
	// statement, in its batch.
	queued []queued
	// failed is the error of a queued lock or write, or of BEGIN: the
	// server has aborted the transaction.
	failed error
	// locked holds the lock keys this (write) transaction holds or has
	// queued.
	locked map[string]bool
	// seqs holds the last event sequence of locked Sessions that this
	// transaction has read or assigned.
	seqs map[string]int64
}

// queued is a lock (lock set) or a write waiting to be sent.
type queued struct {
	lock string
	sql  string
	args []any
}

const (
	beginUpdate = `begin isolation level read committed read write`
	beginView   = `begin isolation level repeatable read read only`
	lockSQL     = `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
	lastSeqSQL  = `SELECT COALESCE(MAX(sequence), 0) FROM events WHERE session_id = $1`
)

// newTx returns a tx on conn, whose transaction has not begun yet.
func newTx(conn *pgx.Conn, readOnly bool) *tx {
	t := &tx{conn: conn, readOnly: readOnly, begin: beginUpdate}
	if readOnly {
		t.begin = beginView
	} else {
		t.locked, t.seqs = map[string]bool{}, map[string]int64{}
	}
	t.q = txConn{t}
	return t
}

// sessionKeyLockPrefix starts the lock keys that are not Session IDs.
const sessionKeyLockPrefix = "session-key\n"

// sessionKeyLock is the lock key of a Session's agent and key, taken by
// GetSessionByKey and InsertSession so that concurrent creates with one key
// see each other.
func sessionKeyLock(agent, key string) string { return sessionKeyLockPrefix + agent + "\n" + key }

// idempotencyLock is the lock key of an idempotency key, taken by
// GetIdempotency in a write transaction: concurrent requests with one key
// (on any node) run one after the other, and the later one finds the
// earlier one's receipt instead of repeating its work.
func idempotencyLock(scope, key string) string {
	return sessionKeyLockPrefix + "idempotency\n" + scope + "\n" + key
}

// needsLock reports whether the transaction must still take lock key.
func (t *tx) needsLock(key string) bool { return !t.readOnly && key != "" && !t.locked[key] }

// lock queues the advisory lock key unless the transaction holds it (or
// has queued it): it is taken ahead of the next statement.
func (t *tx) lock(_ context.Context, key string) error {
	if t.failed != nil {
		return t.failed
	}
	if t.needsLock(key) {
		t.locked[key] = true
		t.queued = append(t.queued, queued{lock: key})
	}
	return nil
}

// step tells how to read one result at the head of a batch.
type step struct {
	kind byte // 'b' BEGIN, 'l' lock, 's' last event sequence of key, 'w' write
	key  string
}

// head starts a batch with what must precede the next statement: BEGIN,
// then the queued locks (each followed by a read of its Session's last
// event sequence, in an Update) and writes. It returns nil when there is
// nothing to send ahead.
func (t *tx) head() (*pgx.Batch, []step) {
	if t.begin == "" && len(t.queued) == 0 {
		return nil, nil
	}
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, 2*len(t.queued)+2)}
	steps := make([]step, 0, 2*len(t.queued)+1)
	if t.begin != "" {
		b.Queue(t.begin)
		steps = append(steps, step{kind: 'b'})
		t.begin = ""
	}
	for _, q := range t.queued {
		if q.lock == "" {
			b.Queue(q.sql, q.args...)
			steps = append(steps, step{kind: 'w'})
			continue
		}
		b.Queue(lockSQL, q.lock)
		steps = append(steps, step{kind: 'l', key: q.lock})
		if _, ok := t.seqs[q.lock]; !ok && !strings.HasPrefix(q.lock, sessionKeyLockPrefix) {
			// A statement of its own: it sees what the previous holder
			// of the lock committed.
			b.Queue(lastSeqSQL, q.lock)
			steps = append(steps, step{kind: 's', key: q.lock})
		}
	}
	clear(t.queued)
	t.queued = t.queued[:0]
	return b, steps
}

// readHead reads the results of the head of a batch. An error fails the
// transaction.
func (t *tx) readHead(br pgx.BatchResults, steps []step) error {
	for _, s := range steps {
		var err error
		switch s.kind {
		case 's':
			var n int64
			if err = br.QueryRow().Scan(&n); err == nil {
				t.seqs[s.key] = n
			}
		default:
			_, err = br.Exec()
		}
		if err != nil {
			switch s.kind {
			case 'b':
				err = fmt.Errorf("pgstore: begin: %w", err)
			case 'w':
				err = fmt.Errorf("pgstore: earlier write: %w", mapErr(err))
			default:
				err = fmt.Errorf("pgstore: session lock: %w", err)
			}
			t.failed = err
			return err
		}
	}
	return nil
}

// send sends what is queued, followed by sql when it is not empty, in one
// batch, and reads the results of what was queued. It returns nil results
// when nothing was queued (and sql was not sent): the caller runs sql on
// the connection then. An error fails the transaction.
func (t *tx) send(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	if t.failed != nil {
		return nil, t.failed
	}
	b, steps := t.head()
	if b == nil {
		return nil, nil
	}
	if sql != "" {
		b.Queue(sql, args...)
	}
	br := t.conn.SendBatch(ctx, b)
	if err := t.readHead(br, steps); err != nil {
		br.Close()
		return nil, err
	}
	return br, nil
}

// flush sends what is queued, if anything, without a statement of its own.
func (t *tx) flush(ctx context.Context) error {
	br, err := t.send(ctx, "", nil)
	if br != nil {
		if err = br.Close(); err != nil {
			t.failed = err
		}
	}
	return err
}

// txConn runs statements in a tx, each in one batch with what the tx has
// queued ahead of it. It has the methods of pgx.Tx that the store uses.
type txConn struct{ t *tx }

// Exec runs sql now and returns its command tag.
func (c txConn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br, err := c.t.send(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	if br == nil {
		return c.t.conn.Exec(ctx, sql, args...)
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs sql now; the rows must be closed.
func (c txConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br, err := c.t.send(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	if br == nil {
		return c.t.conn.Query(ctx, sql, args...)
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs sql now; Scan reads its first row.
func (c txConn) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	br, err := c.t.send(ctx, sql, args)
	if err != nil {
		return errRow{err}
	}
	if br == nil {
		return c.t.conn.QueryRow(ctx, sql, args...)
	}
	return &batchRow{br: br}
}

// errRow is a pgx.Row that fails.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// batchRow is the row of the last statement of a batch.
type batchRow struct{ br pgx.BatchResults }

func (r *batchRow) Scan(dest ...any) error {
	err := r.br.QueryRow().Scan(dest...)
	if cerr := r.br.Close(); err == nil {
		err = cerr
	}
	return err
}

// batchRows are the rows of the last statement of a batch; the batch is
// closed with them.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

// commit sends what is queued and COMMIT, in one batch. A transaction
// that has sent nothing, and has no writes queued, needs no round trip.
func (t *tx) commit(ctx context.Context) error {
	if t.failed != nil {
		return t.failed
	}
	if t.begin != "" && !t.hasQueuedWrites() {
		return nil
	}
	tag, err := t.q.Exec(ctx, `commit`)
	if err != nil {
		return err
	}
	if tag.String() != "COMMIT" { // ROLLBACK: the transaction had failed
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *tx) hasQueuedWrites() bool {
	for _, q := range t.queued {
		if q.lock == "" {
			return true
		}
	}
	return false
}

// end leaves the connection outside a transaction: it rolls back what was
// begun and not committed.
func (t *tx) end(ctx context.Context) error {
	if t.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	_, err := t.conn.Exec(ctx, `rollback`)
	return err
}

// row runs a single-row query after taking lock key.
func (t *tx) row(ctx context.Context, key string, q string, args ...any) pgx.Row {
	if err := t.lock(ctx, key); err != nil {
		return errRow{err}
	}
	return t.q.QueryRow(ctx, q, args...)
}

// query runs a query after taking lock key.
func (t *tx) query(ctx context.Context, key string, q string, args ...any) (pgx.Rows, error) {
	if err := t.lock(ctx, key); err != nil {
		return nil, err
	}
	rows, err := t.q.Query(ctx, q, args...)
	return rows, mapErr(err)
}

func (t *tx) write() error {
	if t.readOnly {
		return errReadOnly
	}
	return nil
}

// exec queues a write statement after taking lock key ("" for none): it
// is sent ahead of the next statement or with COMMIT, and its error, if
// any, reported then.
func (t *tx) exec(ctx context.Context, key string, q string, args ...any) error {
	if err := t.write(); err != nil {
		return err
	}
	if err := t.lock(ctx, key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t.queued = append(t.queued, queued{sql: q, args: freeze(args)})
	return nil
}

// freeze copies what args point to, so that a queued write stores the
// values of the time it was called.
func freeze(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case []byte:
			out[i] = bytes.Clone(v)
		case json.RawMessage:
			out[i] = bytes.Clone(v)
		case *time.Time:
			out[i] = clonePtr(v)
		case *string:
			out[i] = clonePtr(v)
		case *int64:
			out[i] = clonePtr(v)
		default:
			out[i] = a
		}
	}
	return out
}

// clonePtr returns a pointer to a copy of *p (nil for nil).
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// insert runs an INSERT ... ON CONFLICT DO NOTHING after taking lock keys
// and reports ErrDuplicate when it stored nothing.
func (t *tx) insert(ctx context.Context, keys []string, q string, args ...any) error {
	if err := t.write(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := t.lock(ctx, k); err != nil {
			return err
		}
	}
	tag, err := t.q.Exec(ctx, q+` ON CONFLICT DO NOTHING`, args...)
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrDuplicate
	}
	return nil
}

// one runs a query expected to return at most one row and scans it.
func (t *tx) one(ctx context.Context, q string, args []any, dest ...any) error {
	return mapErr(t.q.QueryRow(ctx, q, args...).Scan(dest...))
}

// utc gives a stored time back in UTC.
func utc(v time.Time) time.Time { return v.UTC() }

func utcPtr(v *time.Time) *time.Time {
	if v == nil {
		return nil
	}
	u := v.UTC()
	return &u
}

// blob stores JSON as bytes, nil as NULL.
func blob(b json.RawMessage) []byte {
	if b == nil {
		return nil
	}
	return []byte(b)
}

// notNull stores a nil manifest as empty text, as the SQLite store does.
func notNull(b json.RawMessage) []byte {
	if b == nil {
		return []byte{}
	}
	return []byte(b)
}

func raw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return json.RawMessage(b)
}

func (t *tx) GetMeta(ctx context.Context, key string) (string, error) {
	var v string
	err := t.one(ctx, `SELECT value FROM meta WHERE key = $1`, []any{key}, &v)
	return v, err
}

func (t *tx) PutMeta(ctx context.Context, key, value string) error {
	return t.exec(ctx, "", `INSERT INTO meta(key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
}

func (t *tx) InsertAPIKey(ctx context.Context, k *store.APIKey) error {
	return t.insert(ctx, nil, `INSERT INTO api_keys(id, name, hash, created_at) VALUES ($1, $2, $3, $4)`, k.ID, k.Name, k.Hash, k.CreatedAt)
}

func (t *tx) GetAPIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	var k store.APIKey
	if err := t.one(ctx, `SELECT id, name, hash, created_at FROM api_keys WHERE hash = $1`, []any{hash}, &k.ID, &k.Name, &k.Hash, &k.CreatedAt); err != nil {
		return nil, err
	}
	k.CreatedAt = utc(k.CreatedAt)
	return &k, nil
}

const deploymentCols = `id, digest, manifest, binary_path, created_at, sources_digest`

func scanDeployment(row pgx.Row) (*store.Deployment, error) {
	var d store.Deployment
	var manifest []byte
	if err := row.Scan(&d.ID, &d.Digest, &manifest, &d.BinaryPath, &d.CreatedAt, &d.SourcesDigest); err != nil {
		return nil, mapErr(err)
	}
	d.Manifest = raw(manifest)
	d.CreatedAt = utc(d.CreatedAt)
	return &d, nil
}

func (t *tx) InsertDeployment(ctx context.Context, d *store.Deployment) error {
	return t.insert(ctx, nil, `INSERT INTO deployments(`+deploymentCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		d.ID, d.Digest, notNull(d.Manifest), d.BinaryPath, d.CreatedAt, d.SourcesDigest)
}

func (t *tx) GetDeployment(ctx context.Context, id string) (*store.Deployment, error) {
	return scanDeployment(t.q.QueryRow(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE id = $1`, id))
}

func (t *tx) GetDeploymentByDigest(ctx context.Context, digest, sourcesDigest string) (*store.Deployment, error) {
	return scanDeployment(t.q.QueryRow(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE digest = $1 AND sources_digest = $2`, digest, sourcesDigest))
}

func (t *tx) ListDeployments(ctx context.Context, beforeID string, limit int) ([]store.Deployment, error) {
	q := `SELECT ` + deploymentCols + ` FROM deployments`
	args := []any{}
	if beforeID != "" {
		q += ` WHERE id < $1`
		args = append(args, beforeID)
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args))
	rows, err := t.q.Query(ctx, q, args...)
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
 idle_since, initial_turn_id, created_at`

func scanSession(row pgx.Row) (*store.Session, error) {
	var s store.Session
	if err := row.Scan(&s.ID, &s.DeploymentID, &s.RootSessionID, &s.Agent, &s.Template, &s.ComputerID, &s.ParentSessionID,
		&s.RequesterSessionID, &s.Key, &s.Status, &s.CloseAfterIdle, &s.HibernateAfterIdle, &s.MaxTurnDuration,
		&s.IdleSince, &s.InitialTurnID, &s.CreatedAt); err != nil {
		return nil, err
	}
	s.IdleSince = utcPtr(s.IdleSince)
	s.CreatedAt = utc(s.CreatedAt)
	return &s, nil
}

func (t *tx) InsertSession(ctx context.Context, s *store.Session) error {
	keys := []string{s.ID}
	if s.Key != "" {
		keys = append(keys, sessionKeyLock(s.Agent, s.Key))
	}
	return t.insert(ctx, keys, `INSERT INTO sessions(`+sessionCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		s.ID, s.DeploymentID, s.RootSessionID, s.Agent, s.Template, s.ComputerID, s.ParentSessionID,
		s.RequesterSessionID, s.Key, s.Status, s.CloseAfterIdle, s.HibernateAfterIdle, s.MaxTurnDuration,
		s.IdleSince, s.InitialTurnID, s.CreatedAt)
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

func (t *tx) SetSessionIdleSince(ctx context.Context, id string, at *time.Time) error {
	return t.exec(ctx, id, `UPDATE sessions SET idle_since = $1 WHERE id = $2`, at, id)
}

func (t *tx) UpdateSession(ctx context.Context, s *store.Session) error {
	return t.exec(ctx, s.ID, `UPDATE sessions SET computer_id = $1, status = $2, idle_since = $3, initial_turn_id = $4 WHERE id = $5`,
		s.ComputerID, s.Status, s.IdleSince, s.InitialTurnID, s.ID)
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

const turnCols = `id, session_id, sequence, status, input, source, created_at, started_at, terminal_at,
 result, response, response_staged, error_code, error_message, output_bytes, last_op, waited, messaged, interrupt_requested`

func scanTurn(row pgx.Row) (*store.Turn, error) {
	var t store.Turn
	var input, source, result, response []byte
	if err := row.Scan(&t.ID, &t.SessionID, &t.Sequence, &t.Status, &input, &source, &t.CreatedAt, &t.StartedAt, &t.TerminalAt,
		&result, &response, &t.ResponseStaged, &t.ErrorCode, &t.ErrorMessage, &t.OutputBytes, &t.LastOp, &t.Waited, &t.Messaged, &t.InterruptRequested); err != nil {
		return nil, err
	}
	t.Input, t.Source, t.Result, t.Response = raw(input), raw(source), raw(result), raw(response)
	t.CreatedAt = utc(t.CreatedAt)
	t.StartedAt = utcPtr(t.StartedAt)
	t.TerminalAt = utcPtr(t.TerminalAt)
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
 SELECT $1, $2, COALESCE(NULLIF($3::bigint, 0), MAX(sequence) + 1, 1), $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19
 FROM turns WHERE session_id = $2 ON CONFLICT DO NOTHING RETURNING sequence`,
		tr.ID, tr.SessionID, tr.Sequence, tr.Status, blob(tr.Input), blob(tr.Source), tr.CreatedAt,
		tr.StartedAt, tr.TerminalAt, blob(tr.Result), blob(tr.Response), tr.ResponseStaged,
		tr.ErrorCode, tr.ErrorMessage, tr.OutputBytes, tr.LastOp, tr.Waited, tr.Messaged, tr.InterruptRequested).Scan(&seq)
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
