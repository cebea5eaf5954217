package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

// --- leases ---
//
// Expiry is on the database's clock, so nodes' clocks need not agree.
// AcquireLease takes the Session's lock: it is ordered with the Session's
// other transitions (a takeover sees everything the former holder
// committed).

func (t *tx) AcquireLease(ctx context.Context, sessionID, nodeID string, ttl time.Duration) (string, bool, error) {
	if err := t.write(); err != nil {
		return "", false, err
	}
	if err := t.lock(ctx, sessionID); err != nil {
		return "", false, mapErr(err)
	}
	var holder string
	var live bool
	err := t.one(ctx, `SELECT node_id, expires_at > now() FROM session_leases WHERE session_id = $1`, []any{sessionID}, &holder, &live)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return "", false, err
	case holder != nodeID && live:
		return holder, false, nil
	}
	fresh := holder != nodeID || !live
	err = t.exec(ctx, "", `INSERT INTO session_leases(session_id, node_id, expires_at) VALUES ($1, $2, now() + $3 * interval '1 microsecond')
 ON CONFLICT (session_id) DO UPDATE SET node_id = excluded.node_id, expires_at = excluded.expires_at`,
		sessionID, nodeID, ttl.Microseconds())
	if err != nil {
		return "", false, err
	}
	return nodeID, fresh, nil
}

func (t *tx) RenewLeases(ctx context.Context, nodeID string, ttl time.Duration) ([]string, error) {
	if err := t.write(); err != nil {
		return nil, err
	}
	rows, err := t.q.Query(ctx, `UPDATE session_leases SET expires_at = now() + $2 * interval '1 microsecond'
 WHERE node_id = $1 RETURNING session_id`, nodeID, ttl.Microseconds())
	return collectStrings(rows, err)
}

func (t *tx) ReleaseLease(ctx context.Context, sessionID, nodeID string) error {
	return t.exec(ctx, "", `DELETE FROM session_leases WHERE session_id = $1 AND node_id = $2`, sessionID, nodeID)
}

// LeaseHolder takes the Session's lock (in a write transaction), so that
// the answer holds until the transaction ends.
func (t *tx) LeaseHolder(ctx context.Context, sessionID string) (string, error) {
	var n string
	err := mapErr(t.row(ctx, sessionID, `SELECT node_id FROM session_leases WHERE session_id = $1`, sessionID).Scan(&n))
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return n, err
}

func (t *tx) Leases(ctx context.Context) (map[string]string, error) {
	rows, err := t.q.Query(ctx, `SELECT session_id, node_id FROM session_leases WHERE expires_at > now()`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanPairs(rows)
}

func (t *tx) UnleasedWork(ctx context.Context, limit int) ([]string, error) {
	rows, err := t.q.Query(ctx, `SELECT session_id FROM (SELECT DISTINCT t.session_id FROM turns t
 WHERE t.status IN ('queued', 'running')
   AND NOT EXISTS (SELECT 1 FROM session_leases l WHERE l.session_id = t.session_id AND l.expires_at > now())
   AND (t.status = 'running' OR NOT EXISTS (SELECT 1 FROM holds h WHERE h.session_id = t.session_id AND h.released_at IS NULL))
 ) w ORDER BY random() LIMIT $1`, limit)
	return collectStrings(rows, err)
}

// collectStrings reads rows of one text column; no rows is nil.
func collectStrings(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// --- deployment binaries ---

// PutBinary looks for the digest first, so that publishing a Deployment
// again does not send its binary to the database again.
func (t *tx) PutBinary(ctx context.Context, digest string, data []byte) error {
	if err := t.write(); err != nil {
		return err
	}
	var one int
	switch err := t.one(ctx, `SELECT 1 FROM deployment_binaries WHERE digest = $1`, []any{digest}, &one); {
	case err == nil:
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	return t.exec(ctx, "", `INSERT INTO deployment_binaries(digest, data) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING`, digest, data)
}

func (t *tx) GetBinary(ctx context.Context, digest string) ([]byte, error) {
	var b []byte
	err := t.one(ctx, `SELECT data FROM deployment_binaries WHERE digest = $1`, []any{digest}, &b)
	return b, err
}

// Announce sends a notice in the form of an event's, of a Command's when it
// names one, or of the node's kind alone when it names neither (see
// ParseNotice).
func (t *tx) Announce(ctx context.Context, n store.Notice) error {
	if err := t.write(); err != nil {
		return err
	}
	if n.CommandID == "" && n.SessionID == "" {
		_, err := t.q.Exec(ctx, `SELECT pg_notify('`+channel+`', 'n|' || coalesce(current_setting('helmr.node', true), '') || '|' || $1)`, n.Kind)
		return mapErr(err)
	}
	if n.CommandID != "" {
		_, err := t.q.Exec(ctx, `SELECT pg_notify('`+channel+`', 'c|' || coalesce(current_setting('helmr.node', true), '') || '|' || $1 || '|' || $2)`,
			n.CommandID, n.Kind)
		return mapErr(err)
	}
	_, err := t.q.Exec(ctx, `SELECT pg_notify('`+channel+`', 'e|' || coalesce(current_setting('helmr.node', true), '') || '|' || $1 || '|' || $2 || '|' || $3)`,
		n.SessionID, n.Kind, n.TurnID)
	return mapErr(err)
}

func (t *tx) Heartbeat(ctx context.Context, nodeID, incarnation string, ttl time.Duration) (string, error) {
	var prev string
	err := t.one(ctx, `SELECT incarnation FROM nodes WHERE id = $1 AND expires_at > now()`, []any{nodeID}, &prev)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	return prev, t.exec(ctx, "", `INSERT INTO nodes(id, incarnation, expires_at) VALUES ($1, $2, now() + $3 * interval '1 microsecond')
 ON CONFLICT (id) DO UPDATE SET incarnation = excluded.incarnation, expires_at = excluded.expires_at`, nodeID, incarnation, ttl.Microseconds())
}

func (t *tx) LiveNodes(ctx context.Context) (map[string]bool, error) {
	rows, err := t.q.Query(ctx, `SELECT id FROM nodes WHERE expires_at > now()`)
	ids, err := collectStrings(rows, err)
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out, err
}
