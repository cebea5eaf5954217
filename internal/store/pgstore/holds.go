package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

// Holds (migrations 0003_holds, 0004_hold_issuer). Calls that name a Session take its lock:
// InsertHold, ActiveHolds and HoldsToRecover, so that a hold placed
// concurrently with a Turn's start is seen by one or the other.

const holdCols = `id, session_id, kind, can_release, reason, created_at, released_at, recovered_at, issuer_session_id`

func scanHold(row pgx.Row) (*store.Hold, error) {
	var h store.Hold
	if err := row.Scan(&h.ID, &h.SessionID, &h.Kind, &h.CanRelease, &h.Reason, &h.CreatedAt, &h.ReleasedAt, &h.RecoveredAt, &h.IssuerSessionID); err != nil {
		return nil, err
	}
	h.CreatedAt, h.ReleasedAt, h.RecoveredAt = utc(h.CreatedAt), utcPtr(h.ReleasedAt), utcPtr(h.RecoveredAt)
	return &h, nil
}

func (t *tx) InsertHold(ctx context.Context, h *store.Hold) error {
	return t.insert(ctx, []string{h.SessionID}, `INSERT INTO holds(`+holdCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		h.ID, h.SessionID, h.Kind, h.CanRelease, h.Reason, h.CreatedAt, h.ReleasedAt, h.RecoveredAt, h.IssuerSessionID)
}

func (t *tx) GetHold(ctx context.Context, id string) (*store.Hold, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+holdCols+` FROM holds WHERE id = $1`, id), scanHold)
}

func (t *tx) UpdateHold(ctx context.Context, h *store.Hold) error {
	return t.updateRow(ctx, `UPDATE holds SET released_at = $1, recovered_at = $2 WHERE id = $3`, h.ReleasedAt, h.RecoveredAt, h.ID)
}

func (t *tx) ActiveHolds(ctx context.Context, sessionIDs []string) ([]store.Hold, error) {
	if len(sessionIDs) == 0 {
		return nil, nil
	}
	for _, id := range sessionIDs {
		if err := t.lock(ctx, id); err != nil {
			return nil, mapErr(err)
		}
	}
	rows, err := t.q.Query(ctx, `SELECT `+holdCols+` FROM holds WHERE session_id = ANY($1) AND released_at IS NULL ORDER BY created_at, id`, sessionIDs)
	return collect(rows, err, scanHold)
}

func (t *tx) HoldsToRecover(ctx context.Context, sessionID string) ([]store.Hold, error) {
	if err := t.lock(ctx, sessionID); err != nil {
		return nil, mapErr(err)
	}
	rows, err := t.q.Query(ctx, `SELECT `+holdCols+` FROM holds WHERE session_id = $1 AND released_at IS NOT NULL
 AND recovered_at IS NULL AND kind IN ('process_failed', 'recovery_gap') ORDER BY created_at, id`, sessionID)
	return collect(rows, err, scanHold)
}

func (t *tx) ActiveHoldsOfKind(ctx context.Context, kind string) ([]store.Hold, error) {
	rows, err := t.q.Query(ctx, `SELECT `+holdCols+` FROM holds WHERE kind = $1 AND released_at IS NULL ORDER BY created_at, id`, kind)
	return collect(rows, err, scanHold)
}
