package sqlitestore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/helmr-go/helmr/internal/store"
)

// Holds (migrations 0003_holds, 0004_hold_issuer).

const holdCols = `id, session_id, kind, can_release, reason, created_at, released_at, recovered_at, issuer_session_id`

func scanHold(sc interface{ Scan(...any) error }) (*store.Hold, error) {
	var h store.Hold
	var canRelease int
	var created int64
	var released, recovered sql.NullInt64
	if err := sc.Scan(&h.ID, &h.SessionID, &h.Kind, &canRelease, &h.Reason, &created, &released, &recovered, &h.IssuerSessionID); err != nil {
		return nil, err
	}
	h.CanRelease, h.CreatedAt = canRelease != 0, fromMicros(created)
	h.ReleasedAt, h.RecoveredAt = fromNullMicros(released), fromNullMicros(recovered)
	return &h, nil
}

func (t *tx) InsertHold(ctx context.Context, h *store.Hold) error {
	err := t.exec(ctx, `INSERT INTO holds(`+holdCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		h.ID, h.SessionID, h.Kind, boolInt(h.CanRelease), h.Reason, micros(h.CreatedAt), nullMicros(h.ReleasedAt), nullMicros(h.RecoveredAt), h.IssuerSessionID)
	if err == nil {
		t.cache.heldSession(h.SessionID)
	}
	return err
}

func (t *tx) GetHold(ctx context.Context, id string) (*store.Hold, error) {
	return queryOne(ctx, t, scanHold, `SELECT `+holdCols+` FROM holds WHERE id = ?`, id)
}

func (t *tx) UpdateHold(ctx context.Context, h *store.Hold) error {
	// Which Session the row is of is not read here: every Session is
	// forgotten (releases are rare).
	t.cache.heldSession("")
	return t.updateRow(ctx, `UPDATE holds SET released_at = ?, recovered_at = ? WHERE id = ?`,
		nullMicros(h.ReleasedAt), nullMicros(h.RecoveredAt), h.ID)
}

func (t *tx) ActiveHolds(ctx context.Context, sessionIDs []string) ([]store.Hold, error) {
	if len(sessionIDs) == 0 {
		return nil, nil
	}
	if t.cache.holdsFree(sessionIDs) {
		return nil, nil
	}
	args := make([]any, len(sessionIDs))
	for i, id := range sessionIDs {
		args[i] = id
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")
	hs, err := queryAll(ctx, t, scanHold, `SELECT `+holdCols+` FROM holds INDEXED BY holds_active
 WHERE session_id IN (`+marks+`) AND released_at IS NULL ORDER BY created_at, id`, args...)
	if err == nil {
		t.cache.readHolds(sessionIDs, hs)
	}
	return hs, err
}

func (t *tx) HoldsToRecover(ctx context.Context, sessionID string) ([]store.Hold, error) {
	return queryAll(ctx, t, scanHold, `SELECT `+holdCols+` FROM holds WHERE session_id = ? AND released_at IS NOT NULL
 AND recovered_at IS NULL AND kind IN ('process_failed', 'recovery_gap') ORDER BY created_at, id`, sessionID)
}

func (t *tx) ActiveHoldsOfKind(ctx context.Context, kind string) ([]store.Hold, error) {
	return queryAll(ctx, t, scanHold, `SELECT `+holdCols+` FROM holds INDEXED BY holds_active_kind
 WHERE kind = ? AND released_at IS NULL ORDER BY created_at, id`, kind)
}
