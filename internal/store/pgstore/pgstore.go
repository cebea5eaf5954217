// Package pgstore is the PostgreSQL implementation of store.Store, for
// control planes that outgrow one machine: a pgx connection pool, one
// database transaction per Update, and a REPEATABLE READ snapshot per View.
//
// Several processes may share one database. Within an Update, the first
// call that names a Session takes a transaction-scoped advisory lock on it,
// so Updates of one Session run one after another, as with the SQLite
// store's single writer, and event sequences stay gapless; migrations run
// under a database-wide advisory lock. The SQLite store's group commit has
// no counterpart here: PostgreSQL commits concurrent transactions together
// by itself.
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/helmr-go/helmr/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLockKey is the advisory lock held while migrations run, so that
// nodes starting together apply each migration once.
const migrationLockKey int64 = 0x68656c6d72 // "helmr"

// Options configure Open.
type Options struct {
	// MaxConns bounds the connection pool; 0 keeps pgx's default (the
	// larger of 4 and the number of CPUs) unless the URL sets
	// pool_max_conns.
	MaxConns int32
	// Logger receives store diagnostics; nil discards them.
	Logger *slog.Logger
	// NodeID names this control-plane node among those sharing the
	// database: its connections set helmr.node to it, so that the
	// notices of its own changes are told apart (see Listen).
	NodeID string
}

// Store is a PostgreSQL-backed store.Store.
type Store struct {
	log  *slog.Logger
	pool *pgxpool.Pool
	node string
	// reach follows whether the database answers, from every call's
	// outcome, and logs each outage once.
	reach *store.Monitor
}

// Open connects to the PostgreSQL database at url (a postgres:// URL or a
// key=value connection string that pgx accepts) and applies the embedded
// migrations. It refuses a database whose schema is newer than this binary
// knows with store.ErrSchemaTooNew.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.NodeID != "" {
		if strings.ContainsAny(opts.NodeID, "|\x00") {
			return nil, fmt.Errorf("pgstore: node ID %q: want no '|'", opts.NodeID)
		}
		cfg.ConnConfig.RuntimeParams["helmr.node"] = opts.NodeID
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	s := &Store{log: opts.Logger, pool: pool, node: opts.NodeID, reach: store.NewMonitor(opts.Logger, nil)}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the pool, waiting for connections in use to be returned.
// Calling it again does nothing.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Migrations lists the embedded migrations in order.
func Migrations() ([]store.Migration, error) { return store.ReadMigrations(migrationFS, "migrations") }

// migrate applies the migrations the database lacks, each in its own
// transaction, holding an advisory lock so that concurrent Opens apply each
// one once.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := Migrations()
	if err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: connect: %w", classify(ctx, err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLockKey); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLockKey)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL)`); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	var cur int
	if err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&cur); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	if len(ms) > 0 && cur > ms[len(ms)-1].Version {
		return store.ErrSchemaTooNew
	}
	for _, m := range ms {
		if m.Version <= cur {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// No arguments: pgx sends the file with the simple protocol,
			// which runs several statements.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations(version, name) VALUES ($1, $2)`, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("pgstore: migration %04d_%s: %w", m.Version, m.Name, err)
		}
		s.log.Info("applied migration", "version", m.Version, "name", m.Name)
	}
	return nil
}

// Update runs fn in one READ COMMITTED transaction, with per-Session locks
// (see the package doc), and commits it when fn returns nil. fn runs once;
// it is not retried, so a transaction that PostgreSQL aborts (a deadlock,
// a lost connection) makes Update fail. Once fn has returned nil the
// commit is not interrupted by ctx, so that the outcome Update reports is
// the one stored.
//
// An error that says the database could not be reached is marked with
// store.ErrUnavailable (see classify), and the Store's Monitor logs the
// outage once.
func (s *Store) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	verdict, err := s.update(ctx, fn)
	if !verdict {
		return err
	}
	return s.reach.Observe(ctx, err)
}

// update is Update without the Monitor; verdict is false when the outcome
// says nothing of whether the database answers (fn dropped the error of a
// call on a connection that broke).
func (s *Store) update(ctx context.Context, fn func(store.Tx) error) (verdict bool, err error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return true, fmt.Errorf("pgstore: begin: %w", classify(ctx, err))
	}
	t := newTx(c.Conn(), false)
	defer s.release(ctx, c, t)
	if err := runFn(fn, t); err != nil {
		return true, brokenConn(ctx, c, classify(ctx, err))
	}
	cctx := context.WithoutCancel(ctx)
	if err := t.commit(cctx); err != nil {
		return true, brokenConn(cctx, c, classify(cctx, fmt.Errorf("pgstore: commit: %w", err)))
	}
	return !c.Conn().IsClosed(), nil
}

// brokenConn marks err unavailable when the call failed because c's
// connection broke (pgx closes a connection whose socket failed), even
// where the error that reached here no longer says so.
func brokenConn(ctx context.Context, c *pgxpool.Conn, err error) error {
	if ctx.Err() == nil && c.Conn().IsClosed() {
		return store.Unavailable(err)
	}
	return err
}

// View runs fn in a READ ONLY, REPEATABLE READ transaction: every read of
// fn sees the same snapshot. Writes are refused before they reach the
// server, so the transaction stays usable after one.
func (s *Store) View(ctx context.Context, fn func(store.Tx) error) error {
	return s.read(ctx, true, fn)
}

// Read runs fn's reads each on its own (autocommit), with no transaction
// to begin or end: a single read is one round trip. Writes are refused as
// in View.
func (s *Store) Read(ctx context.Context, fn func(store.Tx) error) error {
	return s.read(ctx, false, fn)
}

// read runs fn read-only, in one snapshot or none.
func (s *Store) read(ctx context.Context, snapshot bool, fn func(store.Tx) error) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.reach.Observe(ctx, fmt.Errorf("pgstore: begin read: %w", classify(ctx, err)))
	}
	t := newTx(c.Conn(), true)
	if !snapshot {
		t.begin = ""
	}
	defer s.release(ctx, c, t)
	if err := runFn(fn, t); err != nil {
		return s.reach.Observe(ctx, brokenConn(ctx, c, classify(ctx, err)))
	}
	if c.Conn().IsClosed() {
		// fn dropped the error of a read on a broken connection: that
		// is no sign that the database answers.
		return nil
	}
	return s.reach.Observe(ctx, nil)
}

// release ends what is left of t's transaction (a rollback, unless it
// committed or never began) and returns its connection to the pool, which
// drops a connection left in a transaction.
func (s *Store) release(ctx context.Context, c *pgxpool.Conn, t *tx) {
	if err := t.end(context.WithoutCancel(ctx)); err != nil && !c.Conn().IsClosed() && !unreachable(context.WithoutCancel(ctx), err) {
		// A broken connection is the outage the Monitor logs once.
		s.log.Warn("rollback", "err", err)
	}
	c.Release()
}

func runFn(fn func(store.Tx) error, t store.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pgstore: update panicked: %v", r)
		}
	}()
	return fn(t)
}

// mapErr turns driver errors into the store's sentinel errors.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return store.ErrDuplicate
	}
	return err
}
