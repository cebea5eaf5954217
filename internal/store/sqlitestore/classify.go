package sqlitestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/helmr-go/helmr/internal/store"
)

// SQLite's primary result codes that classify tells apart.
const (
	sqliteIOErr     = 10 // SQLITE_IOERR: the OS failed a read, write or sync
	sqliteFull      = 13 // SQLITE_FULL: the disk is full
	sqliteCantOpen  = 14 // SQLITE_CANTOPEN: the file cannot be opened
	sqliteBusy      = 5  // SQLITE_BUSY: another connection holds a lock
	primaryCodeMask = 0xff
)

// classify marks err, the error of a store call made with ctx, with the
// store's sentinels: store.ErrNoSpace for a write that found the disk
// full, store.ErrUnavailable for a call that could not use the database
// file at all (an I/O error, a file that cannot be opened). It is the one
// place where the SQLite store tells these apart. SQLITE_BUSY, which
// outlasted the busy timeout, is contention, not an outage: it stays as
// it is, as does every other error.
func classify(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, store.ErrNoSpace) || errors.Is(err, store.ErrUnavailable) {
		return err
	}
	var se interface{ Code() int }
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() & primaryCodeMask {
	case sqliteFull:
		return fmt.Errorf("%w: %w", store.ErrNoSpace, err)
	case sqliteIOErr, sqliteCantOpen:
		if ctx.Err() == nil {
			return store.Unavailable(err)
		}
	}
	return err
}
