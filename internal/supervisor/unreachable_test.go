package supervisor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// A write that fails only because the database is unreachable is tried
// again until it goes through; any other error is final at once; and the
// tries end with the limit or the connection.
func TestRetryingWhileUnreachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &Supervisor{eng: engine.New(st, engine.Options{}), clock: SystemClock}
	down := store.Unavailable(errors.New("connection refused"))

	tries := 0
	v, err := retrying(ctx, s, nil, func() (int, error) {
		if tries++; tries < 4 {
			return 0, fmt.Errorf("settle: %w", down)
		}
		return 7, nil
	})
	if v != 7 || err != nil || tries != 4 {
		t.Fatalf("got %d, %v after %d tries; want 7, nil after 4", v, err, tries)
	}

	tries = 0
	other := errors.New("conflict")
	if err := retryingErr(ctx, s, nil, func() error { tries++; return other }); !errors.Is(err, other) || tries != 1 {
		t.Fatalf("another error: %v after %d tries; want it after 1", err, tries)
	}

	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := retryingErr(cctx, s, nil, func() error { return down }); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("after the connection ended: %v, want unavailable", err)
	}
}
