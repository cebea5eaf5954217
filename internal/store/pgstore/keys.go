package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

const apiKeyCols = `id, name, hash, role, prefix, created_at, revoked_at`

func scanAPIKey(row pgx.Row) (*store.APIKey, error) {
	var k store.APIKey
	if err := row.Scan(&k.ID, &k.Name, &k.Hash, &k.Role, &k.Prefix, &k.CreatedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RevokedAt = utc(k.CreatedAt), utcPtr(k.RevokedAt)
	return &k, nil
}

func (t *tx) InsertAPIKey(ctx context.Context, k *store.APIKey) error {
	return t.insert(ctx, nil, `INSERT INTO api_keys(`+apiKeyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		k.ID, k.Name, k.Hash, k.Role, k.Prefix, k.CreatedAt, k.RevokedAt)
}

func (t *tx) getAPIKey(ctx context.Context, where string, arg any) (*store.APIKey, error) {
	k, err := scanAPIKey(t.q.QueryRow(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE `+where, arg))
	if err != nil {
		return nil, mapErr(err)
	}
	return k, nil
}

func (t *tx) GetAPIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	return t.getAPIKey(ctx, `hash = $1`, hash)
}

func (t *tx) GetAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	return t.getAPIKey(ctx, `id = $1`, id)
}

func (t *tx) ListAPIKeys(ctx context.Context, afterID string, limit int) ([]store.APIKey, error) {
	rows, err := t.q.Query(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	return collect(rows, err, scanAPIKey)
}

func (t *tx) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	return t.updateRow(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2`, at, id)
}

// LockActiveAPIKeys locks the rows it returns: a concurrent revocation
// waits, then reads them again and leaves out the keys revoked meanwhile.
func (t *tx) LockActiveAPIKeys(ctx context.Context, role string) ([]string, error) {
	if err := t.write(); err != nil {
		return nil, err
	}
	rows, err := t.q.Query(ctx, `SELECT id FROM api_keys WHERE role = $1 AND revoked_at IS NULL ORDER BY id FOR UPDATE`, role)
	return collectStrings(rows, mapErr(err))
}

func (t *tx) ListAsksByStatus(ctx context.Context, status, beforeID string, limit int) ([]store.Ask, error) {
	rows, err := t.q.Query(ctx, `SELECT `+askCols+` FROM asks WHERE ($1 = '' OR status = $1) AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`,
		status, beforeID, limit)
	return collect(rows, err, scanAsk)
}
