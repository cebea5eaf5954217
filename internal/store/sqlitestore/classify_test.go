package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/storetest"
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
	storetest.CheckClassify(t, classify, []storetest.ClassifyCase{
		{Name: "nil", Err: nil},
		{Name: "io error", Err: fmt.Errorf("sqlitestore: commit: %w", codeError(sqliteIOErr)), Unavailable: true},
		{Name: "extended io error", Err: codeError(ioErrShortRead), Unavailable: true},
		{Name: "cannot open", Err: codeError(sqliteCantOpen), Unavailable: true},
		{Name: "full", Err: codeError(sqliteFull), NoSpace: true},
		{Name: "busy after the timeout", Err: codeError(sqliteBusy)},
		{Name: "constraint", Err: codeError(19)},
		{Name: "not found", Err: store.ErrNotFound},
		{Name: "io error after the caller gave up", Ctx: cancelled, Err: codeError(sqliteIOErr)},
	})
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
