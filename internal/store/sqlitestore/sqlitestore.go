// Package sqlitestore is the embedded SQLite implementation of store.Store:
// one file in WAL mode, one writer connection that commits concurrent
// Updates together (group commit), and a pool of readers.
package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"sync"

	"github.com/helmr-go/helmr/internal/store"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// maxBatch bounds how many Updates share one physical transaction.
const maxBatch = 256

// Options configure Open.
type Options struct {
	// Synchronous is SQLite's synchronous pragma: "FULL" (default; every
	// commit is on disk before it is acknowledged) or "NORMAL" (WAL commits
	// survive a process crash but may be lost on power loss).
	Synchronous string
	// Logger receives store diagnostics; nil discards them.
	Logger *slog.Logger
}

// Store is a SQLite-backed store.Store.
type Store struct {
	log       *slog.Logger
	writer    *sql.DB
	reader    *sql.DB
	wconn     *sql.Conn
	closeOnce sync.Once
	wstmts    *stmtCache
	rstmts    *stmtCache
	cache     *writeCache // the leading Update's only
	// reach follows whether the database file answers, from every
	// call's outcome, and logs each outage once.
	reach *store.Monitor

	// Updates wait in queue for a leader: the caller of one of them, which
	// commits a batch on its own goroutine (see Update). wmu guards them.
	wmu     sync.Mutex
	queue   []*updateReq
	leading bool         // an Update leads; queue is empty when none does
	closed  bool         // Close has begun: no Update is taken
	led     *sync.Cond   // signalled on wmu when the last leader is done
	batch   []*updateReq // the leader's, reused from batch to batch
}

type updateReq struct {
	ctx context.Context
	fn  func(store.Tx) error
	// err carries its outcome, or errLead while it is still queued: its
	// caller leads the next batch.
	err chan error
}

// errLead tells a queued Update's caller that it leads the next batch.
var errLead = errors.New("sqlitestore: lead the next batch")

// Open opens (creating if needed) the SQLite database at path and applies
// its migrations.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if opts.Synchronous == "" {
		opts.Synchronous = "FULL"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	syncMode := strings.ToUpper(opts.Synchronous)
	if syncMode != "FULL" && syncMode != "NORMAL" {
		return nil, fmt.Errorf("sqlitestore: synchronous must be FULL or NORMAL, not %q", opts.Synchronous)
	}
	// The database is readable by its owner alone; SQLite gives its
	// journal files the database file's mode.
	if err := ownerOnly(path); err != nil {
		return nil, err
	}
	dsn := func(readOnly bool) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous("+syncMode+")")
		q.Add("_pragma", "foreign_keys(OFF)")
		q.Add("_pragma", "mmap_size(268435456)")
		// Page caches are per connection: a larger one for the writer,
		// small ones for readers, which read through the memory map.
		if readOnly {
			q.Add("_pragma", "cache_size(-2048)")
		} else {
			q.Add("_pragma", "cache_size(-8192)")
		}
		if readOnly {
			q.Add("_pragma", "query_only(1)")
		}
		return "file:" + path + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn(false))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	wconn, err := w.Conn(ctx)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	s := &Store{log: opts.Logger, writer: w, wconn: wconn, cache: newWriteCache(), reach: store.NewMonitor(opts.Logger, nil)}
	s.led = sync.NewCond(&s.wmu)
	s.wstmts = &stmtCache{prep: func(q string) (*sql.Stmt, error) { return wconn.PrepareContext(context.Background(), q) }}
	if err := s.migrate(ctx); err != nil {
		s.closeDBs()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn(true))
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	s.reader = r
	s.rstmts = &stmtCache{prep: func(q string) (*sql.Stmt, error) { return r.PrepareContext(context.Background(), q) }}
	return s, nil
}

func (s *Store) closeDBs() {
	s.wstmts.close()
	if s.rstmts != nil {
		s.rstmts.close()
	}
	s.wconn.Close()
	s.writer.Close()
	if s.reader != nil {
		s.reader.Close()
	}
}

// Close refuses new Updates, waits for those already queued to commit,
// and closes the file.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.wmu.Lock()
		s.closed = true
		for s.leading {
			s.led.Wait()
		}
		s.wmu.Unlock()
		s.closeDBs()
	})
	return nil
}

// Migrations lists the embedded migrations in order.
func Migrations() ([]store.Migration, error) { return store.ReadMigrations(migrationFS, "migrations") }

func (s *Store) migrate(ctx context.Context) error {
	c := s.wconn
	if _, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	var cur int
	if err := c.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return fmt.Errorf("sqlitestore: migrate: %w", err)
	}
	ms, err := Migrations()
	if err != nil {
		return err
	}
	if len(ms) > 0 && cur > ms[len(ms)-1].Version {
		return store.ErrSchemaTooNew
	}
	for _, m := range ms {
		if m.Version <= cur {
			continue
		}
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback()
			return fmt.Errorf("sqlitestore: migration %d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations(version, name) VALUES (?, ?)`, m.Version, m.Name); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		s.log.Info("applied migration", "version", m.Version, "name", m.Name)
	}
	return nil
}

// errClosed refuses an Update after Close.
var errClosed = errors.New("sqlitestore: store is closed")

// Update runs fn inside a savepoint of a transaction shared with the
// Updates queued with it (group commit), and returns once that transaction
// is committed.
//
// There is no writer goroutine to hand the work to and back: the caller
// of an Update that finds no leader leads, committing the batch at the
// head of the queue (its own Update first) on its own goroutine; when
// more are queued by then, the oldest one's caller leads the next batch.
// One leader at a time uses the write connection and the write cache, and
// an Update alone costs no goroutine switch.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &updateReq{ctx: ctx, fn: fn, err: make(chan error, 1)}
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return errClosed
	}
	s.queue = append(s.queue, req)
	if s.leading {
		s.wmu.Unlock()
		// Once queued, the update runs to its outcome; waiting for it
		// keeps the caller's view of what happened exact.
		if err := <-req.err; err != errLead {
			return s.reach.Observe(ctx, classify(ctx, err))
		}
		s.wmu.Lock()
	}
	s.leading = true
	s.lead()
	return s.reach.Observe(ctx, classify(ctx, <-req.err))
}

// lead commits the batch at the head of the queue, then passes the lead
// to the oldest Update still queued, or ends it. wmu is held on entry and
// released on return.
func (s *Store) lead() {
	n := min(len(s.queue), maxBatch)
	batch := append(s.batch[:0], s.queue[:n]...)
	s.queue = append(s.queue[:0], s.queue[n:]...)
	s.wmu.Unlock()
	finished := false
	defer func() {
		if finished {
			return
		}
		// A panic in the commit path (an Update's own panics are
		// recovered), or runtime.Goexit in an Update's function: the
		// transaction and the write cache are in a state no later
		// Update may build on, and nobody leads. End the process, as a
		// panic on a goroutine of its own does; here an HTTP handler
		// leading would have it recovered and leave the store wedged.
		r := recover()
		if r == nil {
			r = "an Update's function ended its goroutine (runtime.Goexit)"
		}
		msg := fmt.Sprintf("sqlitestore: commit: %v\n%s", r, debug.Stack())
		go panic(msg)
		select {}
	}()
	s.commitBatch(batch)
	finished = true
	clear(batch)
	s.batch = batch
	s.wmu.Lock()
	if len(s.queue) > 0 {
		s.queue[0].err <- errLead
	} else {
		s.leading = false
		s.led.Broadcast()
	}
	s.wmu.Unlock()
}

// ctl runs a transaction-control statement, prepared once.
func (s *Store) ctl(q string) error {
	st, err := s.wstmts.get(q)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(context.Background())
	return err
}

func (s *Store) commitBatch(batch []*updateReq) {
	fail := func(err error) {
		for _, r := range batch {
			r.err <- err
		}
	}
	if err := s.ctl("BEGIN IMMEDIATE"); err != nil {
		fail(fmt.Errorf("sqlitestore: begin: %w", err))
		return
	}
	newTx := func(r *updateReq) *tx {
		return &tx{ctx: r.ctx, q: writeQ{c: s.wconn, cache: s.wstmts}, cache: s.cache}
	}
	if len(batch) == 1 {
		// Alone in its transaction, an Update needs no savepoint.
		r := batch[0]
		s.cache.beginUpdate()
		err := r.ctx.Err()
		if err == nil {
			err = runFn(r.fn, newTx(r))
		}
		if err != nil {
			s.cache.endBatch(false)
			if rerr := s.ctl("ROLLBACK"); rerr != nil {
				s.log.Error("rollback", "err", rerr)
			}
			r.err <- err
			return
		}
		if err := s.ctl("COMMIT"); err != nil {
			s.cache.endBatch(false)
			s.ctl("ROLLBACK")
			fail(fmt.Errorf("sqlitestore: commit: %w", err))
			return
		}
		s.cache.endUpdate(true)
		s.cache.endBatch(true)
		r.err <- nil
		return
	}
	results := make([]error, len(batch))
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			results[i] = err
			continue
		}
		if err := s.ctl("SAVEPOINT u"); err != nil {
			results[i] = err
			continue
		}
		s.cache.beginUpdate()
		err := runFn(r.fn, newTx(r))
		s.cache.endUpdate(err == nil)
		if err != nil {
			if rerr := s.ctl("ROLLBACK TO u"); rerr != nil {
				s.abortBatch(batch, rerr)
				return
			}
		}
		if rerr := s.ctl("RELEASE u"); rerr != nil {
			s.abortBatch(batch, rerr)
			return
		}
		results[i] = err
	}
	if err := s.ctl("COMMIT"); err != nil {
		s.cache.endBatch(false)
		s.ctl("ROLLBACK")
		fail(fmt.Errorf("sqlitestore: commit: %w", err))
		return
	}
	s.cache.endBatch(true)
	for i, r := range batch {
		r.err <- results[i]
	}
}

// abortBatch ends a batch whose transaction is no longer intact: SQLite
// rolls the whole transaction back by itself after some errors (I/O, disk
// full, interrupt), and then a savepoint is gone. Every Update of the batch
// fails; none of their writes are kept, and none ran outside the transaction.
func (s *Store) abortBatch(batch []*updateReq, cause error) {
	s.cache.endBatch(false)
	ctx := context.Background()
	s.log.Error("group commit transaction lost", "err", cause)
	s.wconn.ExecContext(ctx, "ROLLBACK") // fails when SQLite already rolled back
	err := fmt.Errorf("sqlitestore: transaction lost: %w", cause)
	for _, r := range batch {
		r.err <- err
	}
}

func runFn(fn func(store.Tx) error, t store.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sqlitestore: update panicked: %v", r)
		}
	}()
	return fn(t)
}

// View runs fn in a read-only transaction on a reader connection.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	sqlTx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return s.reach.Observe(ctx, fmt.Errorf("sqlitestore: begin read: %w", classify(ctx, err)))
	}
	defer sqlTx.Rollback()
	return s.reach.Observe(ctx, classify(ctx, fn(&tx{ctx: ctx, readOnly: true, q: readQ{tx: sqlTx, cache: s.rstmts}})))
}

// Read is View: SQLite's snapshot costs nothing more.
func (s *Store) Read(ctx context.Context, fn func(store.Tx) error) error { return s.View(ctx, fn) }

// stmtCache keeps prepared statements by query text.
type stmtCache struct {
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	warming map[string]bool
	closed  bool
	wg      sync.WaitGroup // warm goroutines
	prep    func(string) (*sql.Stmt, error)
}

// lookup returns the prepared statement for q, nil when there is none yet.
func (c *stmtCache) lookup(q string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[q]
}

// warm prepares q in the background, once. Readers never prepare while
// they hold a pooled connection: preparing on the pool needs another one,
// and with every connection held by a reader doing the same, none would
// come.
func (c *stmtCache) warm(q string) {
	c.mu.Lock()
	if c.m[q] != nil || c.warming[q] || c.closed {
		c.mu.Unlock()
		return
	}
	if c.warming == nil {
		c.warming = map[string]bool{}
	}
	c.warming[q] = true
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		st, err := c.prep(q)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.warming, q)
		if err != nil {
			return
		}
		if c.closed {
			st.Close()
			return
		}
		if c.m == nil {
			c.m = map[string]*sql.Stmt{}
		}
		if c.m[q] == nil {
			c.m[q] = st
		} else {
			st.Close()
		}
	}()
}

func (c *stmtCache) get(q string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[q]; ok {
		return st, nil
	}
	st, err := c.prep(q)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[q] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// querier runs statements for a tx.
type querier interface {
	exec(ctx context.Context, q string, args ...any) (sql.Result, error)
	query(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

type writeQ struct {
	c     *sql.Conn
	cache *stmtCache
}

// The statements of an Update run in the transaction it shares with the
// other Updates of its batch. A done context refuses a statement before it
// starts but never interrupts one that runs: SQLite rolls back the whole
// transaction when a write is interrupted, which would undo the other
// Updates. (uncancelable returns the context statements run with.)
func uncancelable(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

func (w writeQ) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, err := uncancelable(ctx)
	if err != nil {
		return nil, err
	}
	st, err := w.cache.get(q)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

func (w writeQ) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx, err := uncancelable(ctx)
	if err != nil {
		return nil, err
	}
	st, err := w.cache.get(q)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

type readQ struct {
	tx    *sql.Tx
	cache *stmtCache
}

func (r readQ) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return nil, errors.New("sqlitestore: write in a read-only transaction")
}

func (r readQ) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := r.cache.lookup(q); st != nil {
		return r.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	// Not prepared yet: run it on the transaction's own connection, and
	// prepare it for next time in the background.
	r.cache.warm(q)
	return r.tx.QueryContext(ctx, q, args...)
}

// ownerOnly creates the database file at path with mode 0600 if it does
// not exist, and takes group and other access away from it and its
// journal files if it does.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("sqlitestore: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("sqlitestore: %w", err)
		}
	}
	return nil
}
