package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/helmr-go/helmr/internal/store"
)

// classify marks err, the error of a store call made with ctx, with the
// store's sentinels: store.ErrNoSpace for a write that found the
// database's disk full, store.ErrUnavailable for a call that could not
// reach the database (see unreachable). It is the one place where the
// PostgreSQL store tells these apart.
func classify(ctx context.Context, err error) error {
	switch {
	case err == nil, errors.Is(err, store.ErrNoSpace), errors.Is(err, store.ErrUnavailable):
		return err
	case sqlState(err) == "53100": // disk_full
		return fmt.Errorf("%w: %w", store.ErrNoSpace, err)
	case unreachable(ctx, err):
		return store.Unavailable(err)
	}
	return err
}

// sqlState is the SQLSTATE of the PostgreSQL error in err's chain, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// unreachable reports whether err says the database could not be reached:
// the server refused or ended the connection (SQLSTATE class 08,
// connection exception; 57P01–57P03, shut down or not accepting
// connections yet; 53300, too many connections), or the connection could
// not be made or broke (a connect error, a network error, EOF on the
// socket, a closed connection, anything pgx says failed before the
// request was sent). An error after ctx ended is the caller's, not the
// database's: a cancelled query closes its connection too.
func unreachable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if code := sqlState(err); code != "" {
		// The server answered: only its own words decide.
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err)
}
