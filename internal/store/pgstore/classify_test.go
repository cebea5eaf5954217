package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
	"github.com/helmr-go/helmr/internal/store/storetest"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	// A real connect error: nothing listens on a port just closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	_, refused := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=5", port))
	var ce *pgconn.ConnectError
	if !errors.As(refused, &ce) {
		t.Fatalf("connect to a closed port: %v, want a *pgconn.ConnectError", refused)
	}
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"} }
	storetest.CheckClassify(t, classify, []storetest.ClassifyCase{
		{Name: "nil", Err: nil},
		{Name: "connection refused", Err: refused, Unavailable: true},
		{Name: "network error", Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, Unavailable: true},
		{Name: "eof", Err: fmt.Errorf("pgstore: commit: %w", io.EOF), Unavailable: true},
		{Name: "unexpected eof", Err: io.ErrUnexpectedEOF, Unavailable: true},
		{Name: "conn closed", Err: fmt.Errorf("x: %w", pgconn.ErrConnClosed), Unavailable: true},
		{Name: "connection exception", Err: pg("08006"), Unavailable: true},
		{Name: "admin shutdown", Err: pg("57P01"), Unavailable: true},
		{Name: "crash shutdown", Err: pg("57P02"), Unavailable: true},
		{Name: "cannot connect now", Err: pg("57P03"), Unavailable: true},
		{Name: "too many connections", Err: pg("53300"), Unavailable: true},
		{Name: "disk full", Err: pg("53100"), NoSpace: true},
		{Name: "unique violation", Err: pg("23505")},
		{Name: "wrong password", Err: pg("28P01")},
		{Name: "not found", Err: store.ErrNotFound},
		{Name: "other", Err: errors.New("pgstore: bad row")},
		{Name: "refused after the caller gave up", Ctx: cancelled, Err: refused},
	})
}

// TestTerminatedConnectionsAreUnavailable: when the server ends the
// store's connections (as a restart does), the calls that hit them fail
// with store.ErrUnavailable, and the next ones reconnect.
func TestTerminatedConnectionsAreUnavailable(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	s := openAt(t, url)
	defer s.Close()
	ctx := t.Context()
	read := func() error {
		return s.Read(ctx, func(tx store.Tx) error {
			_, err := tx.GetMeta(ctx, "nothing")
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err
		})
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	// The pool hands out its idle connection, now ended by the server.
	err = read()
	t.Logf("read on a terminated connection: %v", err)
	if err != nil && !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("read on a terminated connection: %v, want store.ErrUnavailable", err)
	}
	if st, _ := s.reach.State(); (err != nil) != (st == store.Unreachable) {
		t.Errorf("after %v the monitor says %v", err, st)
	}
	if err := read(); err != nil {
		t.Fatalf("read after reconnecting: %v", err)
	}
	if st, _ := s.reach.State(); st != store.Reachable {
		t.Errorf("after a successful read the monitor says %v", st)
	}
}
