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
	EnvToken  = "HELMR_SESSION_TOKEN"  // the process's credential, where no descriptor carries it (tests, by hand)
	// EnvTokenFD names the descriptor from which the process reads its
	// credential to the end (the control plane's launcher passes it so).
	EnvTokenFD = "HELMR_SESSION_TOKEN_FD"
	EnvAgent   = "HELMR_AGENT" // the Agent this process serves
)

// TokenFD is the descriptor the control plane's launcher gives a session
// process its credential on.
const TokenFD = 3

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
	// TypeWaitResolved ends a wait the process started with wait.start.
	TypeWaitResolved = "wait.resolved"
	// TypeMCPResult answers mcp.scope and mcp.call, by call_id.
	TypeMCPResult = "mcp.result"
	// TypePark tells a process that announced FeaturePark that it is
	// about to be checkpointed: it closes its connection and dials again
	// no sooner than Msg.Pause (docs/protocol.md, "Parking").
	TypePark = "park"
)

// FeaturePark, in hello's features, says the process understands park.
const FeaturePark = "park"

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
	TypeAsk           = "ask"          // a question to a person (op)
	TypeTokenCreate   = "token.create" // a new Token (op)
	TypeWaitStart     = "wait.start"   // a durable wait on a timer, Token or question (op)
	// TypeWaitResume asks, after a reconnect, for the outcome of a wait the
	// process still blocks on; wait.resolved answers when it is over.
	TypeWaitResume = "wait.resume"
	// TypeWaitCancel withdraws a wait the process no longer blocks on (op).
	TypeWaitCancel = "wait.cancel"
	// TypeMCPScope asks for the normalized form of a runtime MCP scope,
	// checked against the Session's maximum.
	TypeMCPScope = "mcp.scope"
	// TypeMCPCall carries one runtime MCP tool call. Calls are not ops:
	// they are answered by call_id, run concurrently, and are not replayed
	// after a reconnect (the process fails them as unavailable).
	TypeMCPCall = "mcp.call"
	// TypeSpans carries spans the process recorded for its running Turn
	// (only when turn.start carried a traceparent). It is not an op: it is
	// not acknowledged or replayed, and a lost one loses only telemetry.
	TypeSpans = "spans"
)

// Cancel reasons.
const (
	ReasonInterrupted = "interrupted"
	ReasonDeadline    = "deadline"
	// ReasonExecutionLost cancels a Turn the control plane no longer runs
	// (it settled while the process was out of contact).
	ReasonExecutionLost = "execution_lost"
)

// Recovery kinds in welcome.
const (
	RecoveryInitial       = "initial"
	RecoveryReconstructed = "reconstructed"
	// RecoveryReattached answers a process that reconnected after the
	// control plane restarted: it keeps its state and does not rerun init.
	RecoveryReattached = "reattached"
)

// EnvReconnectWindow tells a process how long to keep trying to reconnect
// after it lost the control plane (a Duration such as "10m").
const EnvReconnectWindow = "HELMR_RECONNECT_WINDOW"

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
	// Resume is set in the hello of a process that reconnects.
	Resume *Resume `json:"resume,omitempty"`
	// Features lists what the process understands beyond the base
	// protocol (FeaturePark).
	Features []string `json:"features,omitempty"`
	// park: the process dials again no sooner than this (a Duration such
	// as "5s").
	Pause string `json:"pause,omitempty"`
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
	// ask
	Ask *AskStart `json:"ask,omitempty"`
	// token.create, and its ack
	Token *TokenStart `json:"token,omitempty"`
	// TokenState answers token.create.
	TokenState *helmrtype.TokenState `json:"token_state,omitempty"`
	// wait.start
	Wait *helmrtype.WaitStart `json:"wait,omitempty"`
	// wait.resolved
	WaitID  string                 `json:"wait_id,omitempty"`
	Outcome *helmrtype.WaitOutcome `json:"outcome,omitempty"`
	// mcp.scope, mcp.call, and mcp.result (with Result or Error)
	CallID string   `json:"call_id,omitempty"`
	MCP    *MCPCall `json:"mcp,omitempty"`
	// spans
	Spans []Span `json:"spans,omitempty"`
}

// Names of the spans an SDK records in a traced Turn, and the bounds the
// control plane applies to what a process ships (more is dropped).
const (
	SpanHandler        = "helmr.turn.handler" // the Turn's handler, from turn.start to turn.settle
	SpanOutput         = "helmr.turn.output"  // one output operation, sent to acknowledged
	SpanWait           = "helmr.turn.wait"    // one durable wait (ask, Token, timer), started to resolved
	SpanMCP            = "helmr.turn.mcp"     // one runtime MCP tool call, sent to answered
	MaxSpansPerMessage = 256
	MaxSpansPerTurn    = 4096
)

// Span is one finished span a session process recorded in its Turn's
// trace. The trace is the Turn's (never named here); IDs are 16 hex
// digits; a span without a parent is a child of the Turn's span.
type Span struct {
	SpanID   string    `json:"span_id"`
	ParentID string    `json:"parent_span_id,omitempty"`
	Name     string    `json:"name"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	// Attributes are strings, numbers or booleans.
	Attributes map[string]any `json:"attributes,omitempty"`
	// Error, when set, marks the span failed with this description.
	Error string `json:"error,omitempty"`
}

// MCPCall is a runtime MCP request. For mcp.scope, Scope is the policy to
// resolve (absent: the maximum). For mcp.call, Scope is the normalized
// scope the call is made under, and Tool and Args the call; TurnID in the
// message is the process's running Turn, if any.
type MCPCall struct {
	Scope json.RawMessage `json:"scope,omitempty"`
	Tool  string          `json:"tool,omitempty"`
	Args  json.RawMessage `json:"args,omitempty"`
}

// Resume is what a reconnecting process says about itself.
type Resume struct {
	// Ready is true once init has succeeded.
	Ready bool `json:"ready"`
	// TurnID is the Turn the process runs (including one whose settlement
	// is not acknowledged yet), "" when idle.
	TurnID string `json:"turn_id,omitempty"`
}

// AskStart asks a person a question; the process chooses the ID.
type AskStart struct {
	ID       string             `json:"id"`
	Question helmrtype.Question `json:"question"`
}

// TokenStart creates a Token; the process chooses the ID and the public
// access credential, of which the server keeps only a hash.
type TokenStart struct {
	ID     string                `json:"id"`
	Secret string                `json:"secret"`
	Create helmrtype.TokenCreate `json:"create"`
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
	// TraceParent is the W3C traceparent of the Turn's span when the
	// control plane traces the Turn; the process's spans are its children.
	TraceParent string `json:"traceparent,omitempty"`
}

// InboundMessage is a message to a running Turn.
type InboundMessage struct {
	ID      string                `json:"id"`
	Content helmrtype.Content     `json:"content"`
	Source  helmrtype.InputSource `json:"source"`
}
