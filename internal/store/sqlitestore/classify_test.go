package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

// codeError is an error with a SQLite result code, as the driver's are.
type codeError int

func (e codeError) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e codeError) Code() int     { return int(e) }

func TestClassify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	const ioErrShortRead = sqliteIOErr | 2<<8 // SQLITE_IOERR_SHORT_READ
	for _, tc := range []struct {
		name                 string
		ctx                  context.Context
		err                  error
		unavailable, noSpace bool
	}{
		{"nil", ctx, nil, false, false},
		{"io error", ctx, fmt.Errorf("sqlitestore: commit: %w", codeError(sqliteIOErr)), true, false},
		{"extended io error", ctx, codeError(ioErrShortRead), true, false},
		{"cannot open", ctx, codeError(sqliteCantOpen), true, false},
		{"full", ctx, codeError(sqliteFull), false, true},
		{"busy after the timeout", ctx, codeError(sqliteBusy), false, false},
		{"constraint", ctx, codeError(19), false, false},
		{"not found", ctx, store.ErrNotFound, false, false},
		{"io error after the caller gave up", cancelled, codeError(sqliteIOErr), false, false},
	} {
		got := classify(tc.ctx, tc.err)
		if u := errors.Is(got, store.ErrUnavailable); u != tc.unavailable {
			t.Errorf("%s: unavailable = %v, want %v (%v)", tc.name, u, tc.unavailable, got)
		}
		if n := errors.Is(got, store.ErrNoSpace); n != tc.noSpace {
			t.Errorf("%s: no space = %v, want %v (%v)", tc.name, n, tc.noSpace, got)
		}
		if tc.err != nil && !errors.Is(got, tc.err) {
			t.Errorf("%s: %v lost its cause %v", tc.name, got, tc.err)
		}
	}
}

// TestBusyIsNotUnavailable: a real SQLITE_BUSY from the driver (a second
// writer on the file while the store holds its write lock, after the busy
// timeout) is not an outage.
func TestBusyIsNotUnavailable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "helmr.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.ctl("BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer s.ctl("ROLLBACK")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.ExecContext(t.Context(), "BEGIN IMMEDIATE")
	var se interface{ Code() int }
	if !errors.As(err, &se) || se.Code()&primaryCodeMask != sqliteBusy {
		t.Fatalf("a second writer got %v, want SQLITE_BUSY", err)
	}
	if errors.Is(classify(t.Context(), err), store.ErrUnavailable) {
		t.Errorf("SQLITE_BUSY classified unavailable: %v", err)
	}
}
