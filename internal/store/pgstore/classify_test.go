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
	for _, tc := range []struct {
		name                 string
		ctx                  context.Context
		err                  error
		unavailable, noSpace bool
	}{
		{"nil", ctx, nil, false, false},
		{"connection refused", ctx, refused, true, false},
		{"network error", ctx, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true, false},
		{"eof", ctx, fmt.Errorf("pgstore: commit: %w", io.EOF), true, false},
		{"unexpected eof", ctx, io.ErrUnexpectedEOF, true, false},
		{"conn closed", ctx, fmt.Errorf("x: %w", pgconn.ErrConnClosed), true, false},
		{"connection exception", ctx, pg("08006"), true, false},
		{"admin shutdown", ctx, pg("57P01"), true, false},
		{"crash shutdown", ctx, pg("57P02"), true, false},
		{"cannot connect now", ctx, pg("57P03"), true, false},
		{"too many connections", ctx, pg("53300"), true, false},
		{"disk full", ctx, pg("53100"), false, true},
		{"unique violation", ctx, pg("23505"), false, false},
		{"wrong password", ctx, pg("28P01"), false, false},
		{"not found", ctx, store.ErrNotFound, false, false},
		{"other", ctx, errors.New("pgstore: bad row"), false, false},
		{"refused after the caller gave up", cancelled, refused, false, false},
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
