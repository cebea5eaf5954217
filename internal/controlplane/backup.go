package controlplane

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// Backup and restore of the embedded SQLite store (docs/operations.md).
// A PostgreSQL database is backed up with PostgreSQL's own tools.

// sqlitePath returns the SQLite file of cfg, or refuses a PostgreSQL
// database, pointing to what does it instead (what: "back up", "restore").
func sqlitePath(cfg Config, what, tool string) (string, error) {
	switch db := cfg.Database; {
	case db == "":
		if cfg.DataDir == "" {
			return "", helmrtype.Errorf(helmrtype.CodeInvalidRequest, "a data directory or --database sqlite:PATH is required")
		}
		return filepath.Join(cfg.DataDir, "helmr.db"), nil
	case strings.HasPrefix(db, "sqlite:"):
		return strings.TrimPrefix(db, "sqlite:"), nil
	case isPostgres(db):
		return "", helmrtype.Errorf(helmrtype.CodeInvalidRequest,
			"helmr cannot %s a PostgreSQL database: use %s (see docs/operations.md, \"Backup and restore\")", what, tool)
	}
	return "", fmt.Errorf("controlplane: database %q: want sqlite:PATH or postgres://…", cfg.Database)
}

// Backup writes a consistent copy of cfg's SQLite database to the new file
// to, while a control plane may be running on it (sqlitestore.Backup). The
// copy holds every record acknowledged before the backup began and passes
// an integrity check. A PostgreSQL database is refused (use pg_dump).
func Backup(ctx context.Context, cfg Config, to string) error {
	path, err := sqlitePath(cfg, "back up", "pg_dump")
	if err != nil {
		return err
	}
	return sqlitestore.Backup(ctx, path, to)
}

// Restore replaces cfg's SQLite database with the backup at from, after
// checking its integrity. No control plane may run on cfg.DataDir (its
// lock is taken); the old database's write-ahead log is removed with it.
// A PostgreSQL database is refused (use pg_restore or psql).
func Restore(ctx context.Context, cfg Config, from string) error {
	path, err := sqlitePath(cfg, "restore", "pg_restore or psql")
	if err != nil {
		return err
	}
	if err := sqlitestore.CheckIntegrity(ctx, from); err != nil {
		return err
	}
	if cfg.DataDir != "" {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return err
		}
		lock, err := lockDir(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("%w: stop it before restoring", err)
		}
		defer lock.Close()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".restore"
	if err := copyFile(from, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	// A log left by the old database would be replayed into the new one.
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			os.Remove(tmp)
			return err
		}
	}
	return os.Rename(tmp, path)
}

// copyFile copies from to a new owner-only file to, synced to disk.
func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
