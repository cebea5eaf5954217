package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// Backup writes a consistent copy of the SQLite database at path to the new
// file to, with VACUUM INTO on a connection of its own: the copy is one
// read snapshot, taken while a control plane (in this process or another)
// goes on writing, and holds every transaction committed before it
// began. The copy is owner-only (mode 0600) and passes CheckIntegrity
// before Backup returns; a file already at to is refused.
func Backup(ctx context.Context, path, to string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("sqlitestore: backup: %w", err)
	}
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("sqlitestore: backup: %s exists; choose a new file", to)
	}
	abs, err := filepath.Abs(to)
	if err != nil {
		return err
	}
	db, err := openPlain(path)
	if err != nil {
		return err
	}
	defer db.Close()
	// Owner-only from the start: the copy holds what the database holds.
	f, err := os.OpenFile(abs, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("sqlitestore: backup: %w", err)
	}
	f.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, abs); err != nil {
		os.Remove(abs)
		return fmt.Errorf("sqlitestore: backup of %s: %w", path, err)
	}
	if err := CheckIntegrity(ctx, abs); err != nil {
		os.Remove(abs)
		return err
	}
	return nil
}

// CheckIntegrity runs SQLite's integrity check on the database at path and
// returns an error naming the first problem it reports.
func CheckIntegrity(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("sqlitestore: integrity check: %w", err)
	}
	db, err := openPlain(path)
	if err != nil {
		return err
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check(1)`).Scan(&res); err != nil {
		return fmt.Errorf("sqlitestore: integrity check of %s: %w", path, err)
	}
	if res != "ok" {
		return fmt.Errorf("sqlitestore: integrity check of %s: %s", path, res)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'schema_migrations'`).Scan(&n); err != nil || n == 0 {
		return errors.Join(fmt.Errorf("sqlitestore: %s is not a helmr database", path), err)
	}
	return nil
}

// openPlain opens one connection to the database at path, waiting for
// locks as the store's own connections do.
func openPlain(path string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
