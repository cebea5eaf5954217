package sqlitestore

import (
	"context"
	"errors"
	"time"

	"github.com/helmr-go/helmr/internal/store"
)

// --- leases ---
//
// One process writes a SQLite database, so leases matter little here;
// they behave as in the PostgreSQL store, on this machine's clock.

func (t *tx) AcquireLease(ctx context.Context, sessionID, nodeID string, ttl time.Duration) (string, bool, error) {
	now := time.Now()
	var holder string
	var expires int64
	err := t.one(ctx, `SELECT node_id, expires_at FROM session_leases WHERE session_id = ?`, []any{sessionID}, &holder, &expires)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return "", false, err
	case holder != nodeID && expires > micros(now):
		return holder, false, nil
	}
	fresh := holder != nodeID || expires <= micros(now)
	err = t.exec(ctx, `INSERT INTO session_leases(session_id, node_id, expires_at) VALUES (?, ?, ?)
 ON CONFLICT(session_id) DO UPDATE SET node_id = excluded.node_id, expires_at = excluded.expires_at`,
		sessionID, nodeID, micros(now.Add(ttl)))
	if err != nil {
		return "", false, err
	}
	return nodeID, fresh, nil
}

func (t *tx) RenewLeases(ctx context.Context, nodeID string, ttl time.Duration) ([]string, error) {
	if err := t.exec(ctx, `UPDATE session_leases SET expires_at = ? WHERE node_id = ?`, micros(time.Now().Add(ttl)), nodeID); err != nil {
		return nil, err
	}
	return t.strings(ctx, `SELECT session_id FROM session_leases WHERE node_id = ? ORDER BY session_id`, nodeID)
}

func (t *tx) ReleaseLease(ctx context.Context, sessionID, nodeID string) error {
	return t.exec(ctx, `DELETE FROM session_leases WHERE session_id = ? AND node_id = ?`, sessionID, nodeID)
}

func (t *tx) LeaseHolder(ctx context.Context, sessionID string) (string, error) {
	var n string
	err := t.one(ctx, `SELECT node_id FROM session_leases WHERE session_id = ?`, []any{sessionID}, &n)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	return n, err
}

func (t *tx) Leases(ctx context.Context) (map[string]string, error) {
	rows, err := t.q.query(ctx, `SELECT session_id, node_id FROM session_leases WHERE expires_at > ?`, micros(time.Now()))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanPairs(rows)
}

func (t *tx) UnleasedWork(ctx context.Context, limit int) ([]string, error) {
	return t.strings(ctx, `SELECT session_id FROM (SELECT DISTINCT t.session_id FROM turns t
 WHERE t.status IN ('queued', 'running')
   AND NOT EXISTS (SELECT 1 FROM session_leases l WHERE l.session_id = t.session_id AND l.expires_at > ?)
   AND (t.status = 'running' OR NOT EXISTS (SELECT 1 FROM holds h WHERE h.session_id = t.session_id AND h.released_at IS NULL))
 ) ORDER BY random() LIMIT ?`, micros(time.Now()), limit)
}

// strings runs q and returns its one text column.
func (t *tx) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	return queryAll(ctx, t, func(sc interface{ Scan(...any) error }) (*string, error) {
		var s string
		return &s, sc.Scan(&s)
	}, q, args...)
}

// --- deployment binaries ---

func (t *tx) PutBinary(ctx context.Context, digest string, data []byte) error {
	return t.exec(ctx, `INSERT INTO deployment_binaries(digest, data) VALUES (?, ?) ON CONFLICT(digest) DO NOTHING`, digest, data)
}

func (t *tx) GetBinary(ctx context.Context, digest string) ([]byte, error) {
	var b []byte
	err := t.one(ctx, `SELECT data FROM deployment_binaries WHERE digest = ?`, []any{digest}, &b)
	return b, err
}

// Announce does nothing: a SQLite database serves one node.
func (t *tx) Announce(ctx context.Context, n store.Notice) error { return nil }

func (t *tx) Heartbeat(ctx context.Context, nodeID, incarnation string, ttl time.Duration) (string, error) {
	now := time.Now()
	var prev string
	err := t.one(ctx, `SELECT incarnation FROM nodes WHERE id = ? AND expires_at > ?`, []any{nodeID, micros(now)}, &prev)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", err
	}
	return prev, t.exec(ctx, `INSERT INTO nodes(id, incarnation, expires_at) VALUES (?, ?, ?)
 ON CONFLICT(id) DO UPDATE SET incarnation = excluded.incarnation, expires_at = excluded.expires_at`,
		nodeID, incarnation, micros(now.Add(ttl)))
}

func (t *tx) LiveNodes(ctx context.Context) (map[string]bool, error) {
	ids, err := t.strings(ctx, `SELECT id FROM nodes WHERE expires_at > ?`, micros(time.Now()))
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out, err
}
