package helmrtype

import (
	"encoding/json"
	"time"
)

// Schedule is a trigger of an Agent of the current Deployment and where its
// firing stands (GET /v1/schedules/{id}).
type Schedule struct {
	ID           string `json:"id"`
	Agent        string `json:"agent"`
	Name         string `json:"name"`
	Kind         string `json:"kind"`
	DeploymentID string `json:"deployment_id"`
	// Pattern is the cron expression, read in Timezone (IANA).
	Pattern  string          `json:"pattern"`
	Timezone string          `json:"timezone"`
	Input    json.RawMessage `json:"input,omitempty"`
	Overlap  string          `json:"overlap"`
	// NextFireAt is the next occurrence that fires.
	NextFireAt time.Time `json:"next_fire_at"`
	// LastFireAt is the occurrence that last admitted a Session, and
	// LastSessionID that Session.
	LastFireAt    *time.Time `json:"last_fire_at,omitempty"`
	LastSessionID string     `json:"last_session_id,omitempty"`
	// MissedCount counts occurrences that admitted nothing: missed while
	// no control plane ran (past the catch-up window, or all but the
	// latest), skipped for overlap, or refused.
	MissedCount int64     `json:"missed_count"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// SchedulePage is a page of Schedules (GET /v1/schedules).
type SchedulePage struct {
	Schedules  []Schedule `json:"schedules"`
	NextCursor string     `json:"next_cursor,omitempty"`
}
