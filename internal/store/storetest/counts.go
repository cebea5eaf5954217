package storetest

import (
	"context"
	"testing"

	"github.com/helmr-go/helmr/internal/store"
)

// testCounts: Counts groups Sessions by status and active holds by kind,
// and counts nothing that is not there.
func testCounts(t *testing.T, s store.Store) {
	closed := newSession("ses-3", "b", "")
	closed.Status = "closed"
	released := at(80)
	update(t, s, func(ctx context.Context, tx store.Tx) error {
		for _, se := range []*store.Session{newSession("ses-1", "a", ""), newSession("ses-2", "a", ""), closed} {
			wantOK(t, "InsertSession", tx.InsertSession(ctx, se))
		}
		for _, h := range []*store.Hold{{ID: "hold-1", SessionID: "ses-1", Kind: "interrupt", CanRelease: true, CreatedAt: at(70)},
			{ID: "hold-2", SessionID: "ses-2", Kind: "interrupt", CanRelease: true, CreatedAt: at(71)},
			{ID: "hold-3", SessionID: "ses-2", Kind: "process_failed", CanRelease: true, CreatedAt: at(72), ReleasedAt: &released}} {
			wantOK(t, "InsertHold", tx.InsertHold(ctx, h))
		}
		return nil
	})
	view(t, s, func(ctx context.Context, tx store.Tx) error {
		c, err := tx.Counts(ctx)
		if err != nil {
			t.Fatalf("Counts: %v", err)
		}
		want := store.NewCounts()
		want.SessionsByStatus["open"], want.SessionsByStatus["closed"] = 2, 1
		want.HoldsByKind["interrupt"] = 2
		check(t, "Counts", c, want)
		return nil
	})
}
