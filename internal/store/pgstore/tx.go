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
