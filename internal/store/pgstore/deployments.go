package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

func (t *tx) GetMeta(ctx context.Context, key string) (string, error) {
	var v string
	err := t.one(ctx, `SELECT value FROM meta WHERE key = $1`, []any{key}, &v)
	return v, err
}

func (t *tx) PutMeta(ctx context.Context, key, value string) error {
	return t.exec(ctx, "", `INSERT INTO meta(key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
}

const deploymentCols = `id, digest, manifest, binary_path, created_at, sources_digest`

func scanDeployment(row pgx.Row) (*store.Deployment, error) {
	var d store.Deployment
	var manifest []byte
	if err := row.Scan(&d.ID, &d.Digest, &manifest, &d.BinaryPath, &d.CreatedAt, &d.SourcesDigest); err != nil {
		return nil, mapErr(err)
	}
	d.Manifest = raw(manifest)
	d.CreatedAt = utc(d.CreatedAt)
	return &d, nil
}

func (t *tx) InsertDeployment(ctx context.Context, d *store.Deployment) error {
	return t.insert(ctx, nil, `INSERT INTO deployments(`+deploymentCols+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		d.ID, d.Digest, notNull(d.Manifest), d.BinaryPath, d.CreatedAt, d.SourcesDigest)
}

func (t *tx) GetDeployment(ctx context.Context, id string) (*store.Deployment, error) {
	return scanDeployment(t.q.QueryRow(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE id = $1`, id))
}

func (t *tx) GetDeploymentByDigest(ctx context.Context, digest, sourcesDigest string) (*store.Deployment, error) {
	return scanDeployment(t.q.QueryRow(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE digest = $1 AND sources_digest = $2`, digest, sourcesDigest))
}

func (t *tx) ListDeployments(ctx context.Context, beforeID string, limit int) ([]store.Deployment, error) {
	q := `SELECT ` + deploymentCols + ` FROM deployments`
	args := []any{}
	if beforeID != "" {
		q += ` WHERE id < $1`
		args = append(args, beforeID)
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY id DESC LIMIT $%d`, len(args))
	rows, err := t.q.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Deployment
	for rows.Next() {
		d, err := scanDeployment(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	return out, rows.Err()
}
