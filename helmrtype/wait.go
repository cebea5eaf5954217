package helmrtype

import (
	"encoding/json"
	"time"
)

// Kinds of durable waits.
const (
	WaitTimer = "timer"
	WaitToken = "token"
	WaitAsk   = "ask"
)

// Statuses of a WaitOutcome.
const (
	OutcomeResolved = "resolved"
	OutcomeFailed   = "failed"
)

// WaitOutcome is how a durable wait ended: Status OutcomeResolved with
// Value (a Token's data, an answer; null for a timer), or OutcomeFailed
// with Error (wait_timeout, token_cancelled, token_expired, …).
type WaitOutcome struct {
	Status      string          `json:"status"`
	Value       json.RawMessage `json:"value,omitempty"`
	RespondedBy *Responder      `json:"responded_by,omitempty"`
	Error       *Error          `json:"error,omitempty"`
}

// WaitStart starts a durable wait; the process chooses the ID. A repeat
// with the same ID is answered as the first was.
type WaitStart struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// TargetID is the Token or question waited on.
	TargetID string `json:"target_id,omitempty"`
	// Until is when a timer fires.
	Until *time.Time `json:"until,omitempty"`
	// Timeout ends a Token or question wait with wait_timeout (a Duration).
	Timeout string `json:"timeout,omitempty"`
	// IdleTimeout is how long the process stays hot before the wait may be
	// suspended (a Duration, 1ms–1h; default 30s).
	IdleTimeout string `json:"idle_timeout,omitempty"`
}
