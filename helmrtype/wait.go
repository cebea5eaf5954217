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

// Idle timeouts of managed waits: the default and the allowed range.
const (
	DefaultIdleTimeout = 30 * time.Second
	MinIdleTimeout     = time.Millisecond
	MaxIdleTimeout     = time.Hour
)

// ParseIdleTimeout reads a wait's (or an Actor's) idle timeout: a Duration
// from 1ms to 1h; empty means DefaultIdleTimeout.
func ParseIdleTimeout(s string) (time.Duration, error) {
	if s == "" {
		return DefaultIdleTimeout, nil
	}
	d, err := ParseDuration(s)
	if err != nil {
		return 0, Errorf(CodeInvalidRequest, "idle_timeout: %v", err)
	}
	if d < MinIdleTimeout || d > MaxIdleTimeout {
		return 0, Errorf(CodeInvalidRequest, "idle_timeout %s is out of range: it must be from 1ms to 1h", s)
	}
	return d, nil
}

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
	// Schema, on a Token wait, is the JSON Schema its completion must
	// satisfy (at most MaxTokenSchemaBytes): the Token keeps it and the
	// control plane refuses other data, the Token staying pending.
	Schema json.RawMessage `json:"schema,omitempty"`
}
