package sqlitestore

import (
	"context"
	"database/sql"

	"github.com/helmr-go/helmr/internal/store"
)

// Schedules (migration 0011_schedules).

const scheduleCols = `id, agent, name, deployment_id, pattern, timezone, input, overlap, created_at, updated_at,
 next_fire_at, last_fire_at, last_session_id, missed_count`

func scanSchedule(sc interface{ Scan(...any) error }) (*store.Schedule, error) {
	var s store.Schedule
	var input []byte
	var created, updated, next int64
	var last sql.NullInt64
	if err := sc.Scan(&s.ID, &s.Agent, &s.Name, &s.DeploymentID, &s.Pattern, &s.Timezone, &input, &s.Overlap,
		&created, &updated, &next, &last, &s.LastSessionID, &s.MissedCount); err != nil {
		return nil, err
	}
	s.Input = raw(input)
	s.CreatedAt, s.UpdatedAt, s.NextFireAt, s.LastFireAt = fromMicros(created), fromMicros(updated), fromMicros(next), fromNullMicros(last)
	return &s, nil
}

func (t *tx) InsertSchedule(ctx context.Context, s *store.Schedule) error {
	return t.exec(ctx, `INSERT INTO schedules(`+scheduleCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		s.ID, s.Agent, s.Name, s.DeploymentID, s.Pattern, s.Timezone, blob(s.Input), s.Overlap,
		micros(s.CreatedAt), micros(s.UpdatedAt), micros(s.NextFireAt), nullMicros(s.LastFireAt), s.LastSessionID, s.MissedCount)
}

func (t *tx) GetSchedule(ctx context.Context, id string) (*store.Schedule, error) {
	return queryOne(ctx, t, scanSchedule, `SELECT `+scheduleCols+` FROM schedules WHERE id = ?`, id)
}

func (t *tx) ListSchedules(ctx context.Context) ([]store.Schedule, error) {
	return queryAll(ctx, t, scanSchedule, `SELECT `+scheduleCols+` FROM schedules ORDER BY agent, name`)
}

func (t *tx) UpdateSchedule(ctx context.Context, s *store.Schedule) error {
	return t.updateRow(ctx, `UPDATE schedules SET deployment_id = ?, pattern = ?, timezone = ?, input = ?, overlap = ?,
 updated_at = ?, next_fire_at = ?, last_fire_at = ?, last_session_id = ?, missed_count = ? WHERE id = ?`,
		s.DeploymentID, s.Pattern, s.Timezone, blob(s.Input), s.Overlap, micros(s.UpdatedAt), micros(s.NextFireAt),
		nullMicros(s.LastFireAt), s.LastSessionID, s.MissedCount, s.ID)
}

func (t *tx) DeleteSchedule(ctx context.Context, id string) error {
	return t.updateRow(ctx, `DELETE FROM schedules WHERE id = ?`, id)
}
