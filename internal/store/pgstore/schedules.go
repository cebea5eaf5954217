package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/helmr-go/helmr/internal/store"
)

// Schedules (migration 0011_schedules). They take no Session lock.

const scheduleCols = `id, agent, name, deployment_id, pattern, timezone, input, overlap, created_at, updated_at,
 next_fire_at, last_fire_at, last_session_id, missed_count`

func scanSchedule(row pgx.Row) (*store.Schedule, error) {
	var s store.Schedule
	var input []byte
	if err := row.Scan(&s.ID, &s.Agent, &s.Name, &s.DeploymentID, &s.Pattern, &s.Timezone, &input, &s.Overlap,
		&s.CreatedAt, &s.UpdatedAt, &s.NextFireAt, &s.LastFireAt, &s.LastSessionID, &s.MissedCount); err != nil {
		return nil, err
	}
	s.Input = raw(input)
	s.CreatedAt, s.UpdatedAt, s.NextFireAt, s.LastFireAt = utc(s.CreatedAt), utc(s.UpdatedAt), utc(s.NextFireAt), utcPtr(s.LastFireAt)
	return &s, nil
}

func (t *tx) InsertSchedule(ctx context.Context, s *store.Schedule) error {
	return t.insert(ctx, nil, `INSERT INTO schedules(`+scheduleCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		s.ID, s.Agent, s.Name, s.DeploymentID, s.Pattern, s.Timezone, blob(s.Input), s.Overlap,
		s.CreatedAt, s.UpdatedAt, s.NextFireAt, s.LastFireAt, s.LastSessionID, s.MissedCount)
}

func (t *tx) GetSchedule(ctx context.Context, id string) (*store.Schedule, error) {
	return scanOne(t.q.QueryRow(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE id = $1`, id), scanSchedule)
}

func (t *tx) ListSchedules(ctx context.Context) ([]store.Schedule, error) {
	rows, err := t.q.Query(ctx, `SELECT `+scheduleCols+` FROM schedules ORDER BY agent, name`)
	return collect(rows, err, scanSchedule)
}

func (t *tx) UpdateSchedule(ctx context.Context, s *store.Schedule) error {
	return t.updateRow(ctx, `UPDATE schedules SET deployment_id = $1, pattern = $2, timezone = $3, input = $4, overlap = $5,
 updated_at = $6, next_fire_at = $7, last_fire_at = $8, last_session_id = $9, missed_count = $10 WHERE id = $11`,
		s.DeploymentID, s.Pattern, s.Timezone, blob(s.Input), s.Overlap, s.UpdatedAt, s.NextFireAt, s.LastFireAt,
		s.LastSessionID, s.MissedCount, s.ID)
}

func (t *tx) DeleteSchedule(ctx context.Context, id string) error {
	return t.updateRow(ctx, `DELETE FROM schedules WHERE id = $1`, id)
}
