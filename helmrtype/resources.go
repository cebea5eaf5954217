package helmrtype

import (
	"encoding/json"
	"time"
)

// Session statuses.
const (
	SessionOpen    = "open"
	SessionClosing = "closing"
	SessionClosed  = "closed"
)

// Turn statuses.
const (
	TurnQueued      = "queued"
	TurnRunning     = "running"
	TurnCompleted   = "completed"
	TurnFailed      = "failed"
	TurnInterrupted = "interrupted"
	TurnCancelled   = "cancelled"
)

// TurnTerminal reports whether a Turn status is terminal.
func TurnTerminal(status string) bool {
	switch status {
	case TurnCompleted, TurnFailed, TurnInterrupted, TurnCancelled:
		return true
	}
	return false
}

// Input source kinds.
const (
	SourceUser     = "user"
	SourceAPIKey   = "api_key"
	SourceSchedule = "schedule"
	SourceSession  = "session"
)

// InputSource says where a Turn's input or a message came from.
type InputSource struct {
	Kind               string `json:"kind"`
	RequesterSessionID string `json:"requester_session_id,omitempty"`
	OriginTurnID       string `json:"origin_turn_id,omitempty"`
	// Slack is set on a user's input written in a Slack thread.
	Slack *SlackInputSource `json:"slack,omitempty"`
}

// TurnBrief is a Turn's identity and status, as in Session.initial_turn.
type TurnBrief struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Hold pauses admission of a Session's queued Turns until released.
// Hold kinds.
const (
	HoldInterrupt       = "interrupt"
	HoldProcessFailed   = "process_failed"
	HoldRecoveryGap     = "recovery_gap"
	HoldStoragePressure = "storage_pressure"
)

// SessionControlReceipt answers a Session interrupt or resume: the control
// is accepted (not yet converged), with the hold it placed or released.
type SessionControlReceipt struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	HoldID    string `json:"hold_id"`
}

// SessionStatusReceipt answers a Session close or cancel with the
// Session's status after the request.
type SessionStatusReceipt struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
}

// ResumeRequest is the body of POST /v1/sessions/{id}/resume.
type ResumeRequest struct {
	HoldID         string `json:"hold_id"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Hold is a hold on a Session or, inherited, on one of its ancestors.
type Hold struct {
	ID         *string   `json:"id"`
	SessionID  *string   `json:"session_id"`
	Kind       string    `json:"kind"`
	CreatedAt  time.Time `json:"created_at"`
	CanRelease bool      `json:"can_release"`
	// Reason says why a process_failed or recovery_gap hold was placed.
	Reason string `json:"reason,omitempty"`
}

// Session is a Session's current state, every field of the spec's table.
type Session struct {
	ID                 string     `json:"id"`
	DeploymentID       string     `json:"deployment_id"`
	RootSessionID      string     `json:"root_session_id"`
	Agent              string     `json:"agent"`
	Template           string     `json:"template"`
	ComputerID         *string    `json:"computer_id"`
	ParentSessionID    *string    `json:"parent_session_id"`
	RequesterSessionID *string    `json:"requester_session_id"`
	Key                string     `json:"key,omitempty"`
	SlackChannelID     string     `json:"slack_channel_id,omitempty"`
	Status             string     `json:"status"`
	CloseAfterIdle     string     `json:"close_after_idle"`
	HibernateAfterIdle string     `json:"hibernate_after_idle"`
	MaxTurnDuration    string     `json:"max_turn_duration,omitempty"`
	IdleSince          *time.Time `json:"idle_since"`
	InitialTurn        *TurnBrief `json:"initial_turn"`
	Holds              []Hold     `json:"holds"`
	CreatedAt          time.Time  `json:"created_at"`
}

// TurnError is the error of a failed or interrupted Turn.
type TurnError struct {
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"`
}

// TurnState is a Turn's current state.
type TurnState struct {
	ID               string          `json:"id"`
	SessionID        string          `json:"session_id"`
	Sequence         int64           `json:"sequence"`
	Status           string          `json:"status"`
	Input            json.RawMessage `json:"input,omitempty"`
	Source           InputSource     `json:"source"`
	CreatedAt        time.Time       `json:"created_at"`
	StartedAt        *time.Time      `json:"started_at,omitempty"`
	TerminalAt       *time.Time      `json:"terminal_at,omitempty"`
	Result           json.RawMessage `json:"result,omitempty"`
	Response         Content         `json:"response,omitzero"`
	Error            *TurnError      `json:"error,omitempty"`
	PayloadExpiredAt *time.Time      `json:"payload_expired_at,omitempty"`
}

// TurnOutcome is a settled Turn: its terminal status and payload.
type TurnOutcome struct {
	Status           string          `json:"status"`
	Result           json.RawMessage `json:"result,omitempty"`
	Response         Content         `json:"response,omitzero"`
	Error            *TurnError      `json:"error,omitempty"`
	PayloadExpiredAt *time.Time      `json:"payload_expired_at,omitempty"`
}

// Outcome returns the outcome of a settled Turn; it is meaningful only when
// TurnTerminal(t.Status).
func (t *TurnState) Outcome() TurnOutcome {
	return TurnOutcome{Status: t.Status, Result: t.Result, Response: t.Response, Error: t.Error, PayloadExpiredAt: t.PayloadExpiredAt}
}

// Wait statuses of a timed Turn wait.
const (
	WaitSettled = "settled"
	WaitTimeout = "timeout"
)

// TimedTurnWaitResult is {status:"settled", outcome} or {status:"timeout"}.
type TimedTurnWaitResult struct {
	Status  string       `json:"status"`
	Outcome *TurnOutcome `json:"outcome,omitempty"`
}

// SessionEvent is one record of a Session's ordered timeline.
type SessionEvent struct {
	SessionID string          `json:"session_id"`
	TurnID    *string         `json:"turn_id"`
	Sequence  int64           `json:"sequence"`
	CreatedAt time.Time       `json:"created_at"`
	Kind      string          `json:"kind"`
	Data      json.RawMessage `json:"data"`
}

// SessionEventPage is one page of a Session's timeline.
type SessionEventPage struct {
	Records       []SessionEvent `json:"records"`
	NextAfter     int64          `json:"next_after"`
	HasMore       bool           `json:"has_more"`
	RetainedAfter int64          `json:"retained_after"`
}

// Event kinds.
const (
	EventTurnQueued       = "turn.queued"
	EventTurnRunning      = "turn.running"
	EventTurnFinalizing   = "turn.finalizing"
	EventTurnCompleted    = "turn.completed"
	EventTurnFailed       = "turn.failed"
	EventTurnInterrupted  = "turn.interrupted"
	EventTurnCancelled    = "turn.cancelled"
	EventTurnOutput       = "turn.output"
	EventMessageAdmitted  = "message.admitted"
	EventMessageStarted   = "message.started"
	EventMessageDelivered = "message.delivered"
	EventMessageRejected  = "message.rejected"
	EventProcessStopped   = "session.process_stopped"
	EventProcessFailed    = "session.process_failed"
	EventSessionDeadline  = "session.deadline"
	EventSessionInterrupt = "session.interrupt"
	EventSessionResume    = "session.resume"
	EventSessionClose     = "session.close"
	EventSessionClosed    = "session.closed"
	EventSessionCancel    = "session.cancel"
	EventSessionCancelled = "session.cancelled"
	EventAskCreated       = "ask.created"
	EventAskResponded     = "ask.responded"
	EventAskCancelled     = "ask.cancelled"
	// Durable waits: started, suspended (process frozen), resumed (thawed)
	// and resolved.
	EventWaitStarted   = "wait.started"
	EventWaitSuspended = "wait.suspended"
	EventWaitResumed   = "wait.resumed"
	EventWaitResolved  = "wait.resolved"
	// EventComputerResidency records a change of where the Session's
	// process is: running, parking, parked, restoring
	// (ComputerResidencyEvent).
	EventComputerResidency = "computer.residency"
)

// ComputerResidencyEvent is the data of a computer.residency event.
type ComputerResidencyEvent struct {
	ComputerID string `json:"computer_id"`
	Residency  string `json:"residency"`
	// Error says why a park or a restore failed, when one did.
	Error *Error `json:"error,omitempty"`
}

// TurnEventKind returns the event kind recording a Turn reaching status.
func TurnEventKind(status string) string { return "turn." + status }

// SessionCreateRequest is the body of POST /v1/sessions.
type SessionCreateRequest struct {
	Agent      string          `json:"agent"`
	Input      json.RawMessage `json:"input,omitempty"`
	Key        string          `json:"key,omitempty"`
	ComputerID string          `json:"computer_id,omitempty"`
	// Slack opens the Session in a Slack channel (docs/slack.md).
	Slack          *SlackChannelRequest `json:"slack,omitempty"`
	IdempotencyKey string               `json:"idempotency_key,omitempty"`
}

// SessionCreateReceipt is the answer to a Session creation.
type SessionCreateReceipt struct {
	Session Session    `json:"session"`
	Turn    *TurnState `json:"turn"`
}

// EnqueueRequest is the body of POST /v1/sessions/{id}/turns.
type EnqueueRequest struct {
	Input          json.RawMessage `json:"input"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// MessageRequest is the body of POST …/turns/{turn_id}/messages.
type MessageRequest struct {
	Content        json.RawMessage `json:"content"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// MessageReceipt acknowledges a message: {id, status:"accepted"}.
type MessageReceipt struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// ControlRequest is the body of control calls that take only an idempotency key.
type ControlRequest struct {
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// TurnInterruptReceipt acknowledges a Turn interrupt.
type TurnInterruptReceipt struct {
	ID        string `json:"id"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Status    string `json:"status"`
}

// SessionPage is one page of Sessions.
type SessionPage struct {
	Sessions   []Session `json:"sessions"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// TurnPage is one page of Turns in admission order.
type TurnPage struct {
	Turns      []TurnState `json:"turns"`
	NextCursor string      `json:"next_cursor,omitempty"`
}
