package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"github.com/helmr-go/helmr/internal/store"
)

const apiKeyCols = `id, name, hash, role, prefix, created_at, revoked_at`

func scanAPIKey(sc interface{ Scan(...any) error }) (*store.APIKey, error) {
	var k store.APIKey
	var created int64
	var revoked sql.NullInt64
	if err := sc.Scan(&k.ID, &k.Name, &k.Hash, &k.Role, &k.Prefix, &created, &revoked); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RevokedAt = fromMicros(created), fromNullMicros(revoked)
	return &k, nil
}

func (t *tx) InsertAPIKey(ctx context.Context, k *store.APIKey) error {
	return t.exec(ctx, `INSERT INTO api_keys(`+apiKeyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Name, k.Hash, k.Role, k.Prefix, micros(k.CreatedAt), nullMicros(k.RevokedAt))
}

func (t *tx) getAPIKey(ctx context.Context, where string, arg any) (*store.APIKey, error) {
	ks, err := queryAll(ctx, t, scanAPIKey, `SELECT `+apiKeyCols+` FROM api_keys WHERE `+where, arg)
	if err != nil {
		return nil, err
	}
	if len(ks) == 0 {
		return nil, store.ErrNotFound
	}
	return &ks[0], nil
}

func (t *tx) GetAPIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	return t.getAPIKey(ctx, `hash = ?`, hash)
}

func (t *tx) GetAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	return t.getAPIKey(ctx, `id = ?`, id)
}

func (t *tx) ListAPIKeys(ctx context.Context, afterID string, limit int) ([]store.APIKey, error) {
	return queryAll(ctx, t, scanAPIKey, `SELECT `+apiKeyCols+` FROM api_keys WHERE id > ? ORDER BY id LIMIT ?`, afterID, limit)
}

func (t *tx) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	return t.updateRow(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`, micros(at), id)
}

// LockActiveAPIKeys needs no lock: SQLite runs one writing transaction at
// a time.
func (t *tx) LockActiveAPIKeys(ctx context.Context, role string) ([]string, error) {
	rows, err := t.q.query(ctx, `SELECT id FROM api_keys WHERE role = ? AND revoked_at IS NULL ORDER BY id`, role)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (t *tx) ListAsksByStatus(ctx context.Context, status, beforeID string, limit int) ([]store.Ask, error) {
	q := `SELECT ` + askCols + ` FROM asks WHERE (? = '' OR status = ?) AND (? = '' OR id < ?) ORDER BY id DESC LIMIT ?`
	return queryAll(ctx, t, scanAsk, q, status, status, beforeID, beforeID, limit)
}
