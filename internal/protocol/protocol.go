// Package protocol defines the messages of the session protocol
// (helmr.session.v1) between the control plane and a session process. See
// docs/protocol.md for the exchange.
package protocol

import (
	"encoding/json"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Version is the protocol's name, sent as the WebSocket subprotocol.
const Version = "helmr.session.v1"

// Environment variables the supervisor gives a session process.
const (
	EnvSocket = "HELMR_SESSION_SOCKET" // Unix socket of the protocol endpoint
	EnvToken  = "HELMR_SESSION_TOKEN"  // the process's credential
	EnvAgent  = "HELMR_AGENT"          // the Agent this process serves
)

// ManifestFlag makes an agent binary print its manifest and exit.
const ManifestFlag = "--helmr-manifest"

// Path is the HTTP path of the protocol endpoint on the Unix socket.
const Path = "/session"

// Message types, server to process.
const (
	TypeWelcome   = "welcome"
	TypeTurnStart = "turn.start"
	TypeMessage   = "message"
	TypeCancel    = "cancel"
	TypeShutdown  = "shutdown"
	TypeAck       = "ack"
)

// Message types, process to server.
const (
	TypeHello         = "hello"
	TypeReady         = "ready"
	TypeStopping      = "stopping" // the process is shutting down by itself: start no Turn on it
	TypeInitFailed    = "init.failed"
	TypeOutput        = "output"
	TypeMessageAccept = "message.accept"
	TypeMessageReject = "message.reject"
	TypeSettle        = "turn.settle"
)

// Cancel reasons.
const (
	ReasonInterrupted = "interrupted"
	ReasonDeadline    = "deadline"
)

// Msg is one protocol message. Type selects which fields are meaningful.
type Msg struct {
	Type string `json:"type"`
	// Op numbers a process operation within its Turn (1, 2, …); an ack
	// carries the op it answers.
	Op     int64  `json:"op,omitempty"`
	TurnID string `json:"turn_id,omitempty"`

	// hello
	Protocol string `json:"protocol,omitempty"`
	PID      int    `json:"pid,omitempty"`
	// welcome
	Welcome *Welcome `json:"welcome,omitempty"`
	// turn.start
	Turn *TurnStart `json:"turn,omitempty"`
	// message
	Message *InboundMessage `json:"message,omitempty"`
	// cancel, message.reject
	Reason string `json:"reason,omitempty"`
	// output
	Content helmrtype.Content `json:"content,omitzero"`
	// message.accept, message.reject
	MessageID string `json:"message_id,omitempty"`
	// turn.settle
	Status string          `json:"status,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// Response is the staged response (a Content array), absent when none.
	Response json.RawMessage `json:"response,omitempty"`
	// init.failed, turn.settle, message.reject, ack
	Error *helmrtype.Error `json:"error,omitempty"`
	// ack of output
	Sequence int64 `json:"sequence,omitempty"`
}

// Welcome tells a process which Session it serves.
type Welcome struct {
	Agent        string    `json:"agent"`
	SessionID    string    `json:"session_id"`
	SessionKey   string    `json:"session_key,omitempty"`
	ParentID     string    `json:"parent_session_id,omitempty"`
	ComputerID   string    `json:"computer_id"`
	DeploymentID string    `json:"deployment_id"`
	Recovery     Recovery  `json:"recovery"`
	ServerTime   time.Time `json:"server_time"`
}

// Recovery says whether a process is a Session's first or a reconstruction.
type Recovery struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// TurnStart gives a process a Turn to run.
type TurnStart struct {
	ID        string                `json:"id"`
	Sequence  int64                 `json:"sequence"`
	CreatedAt time.Time             `json:"created_at"`
	Input     json.RawMessage       `json:"input"`
	Source    helmrtype.InputSource `json:"source"`
	// Deadline is when the Turn reaches its max_turn_duration, if any.
	Deadline *time.Time `json:"deadline,omitempty"`
}

// InboundMessage is a message to a running Turn.
type InboundMessage struct {
	ID      string                `json:"id"`
	Content helmrtype.Content     `json:"content"`
	Source  helmrtype.InputSource `json:"source"`
}
