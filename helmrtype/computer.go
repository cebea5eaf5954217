package helmrtype

import "time"

// Computer statuses.
const (
	ComputerAvailable = "available"
	ComputerDeleting  = "deleting"
	ComputerDeleted   = "deleted"
)

// Computer residencies: where its processes are now.
const (
	ResidencyCold      = "cold"      // no process runs
	ResidencyStarting  = "starting"  // a process is starting
	ResidencyRunning   = "running"   // a process runs
	ResidencyParking   = "parking"   // its processes are being checkpointed (or frozen, where checkpoints are off)
	ResidencyParked    = "parked"    // its processes are checkpointed to disk and ended (frozen, where checkpoints are off); they are restored on demand
	ResidencyRestoring = "restoring" // its processes are being restored (thawed)
	// ResidencyUnavailable: its last process could not start; the
	// Computer's error says why. The next start tries again.
	ResidencyUnavailable = "unavailable"
)

// ComputerState is a Computer: an isolated environment made from a
// Template, with a durable /workspace shared by the Sessions and Commands
// placed on it.
type ComputerState struct {
	ID           string `json:"id"`
	Template     string `json:"template"`
	DeploymentID string `json:"deployment_id"`
	Key          string `json:"key,omitempty"`
	Status       string `json:"status"`
	Residency    string `json:"residency"`
	// Error says why the residency is unavailable.
	Error *Error `json:"error,omitempty"`
	// LimitsOff says why the host does not enforce its Template's cpu,
	// memory and process limits ("" when it does).
	LimitsOff string `json:"limits_off,omitempty"`
	// CheckpointOff says why this host cannot checkpoint its processes
	// ("" when it can): a parked Computer is then frozen, holding its
	// memory.
	CheckpointOff string     `json:"checkpoint_off,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	DeletedAt     *time.Time `json:"deleted_at,omitempty"`
	// Implicit is set for a Computer made for a Session at its first
	// launch: it is deleted once nothing has used it for a grace period.
	Implicit bool `json:"implicit,omitempty"`
}

// ComputerCreateRequest is the body of POST /v1/computers.
type ComputerCreateRequest struct {
	// Template is the ID of a Template of the Deployment (default the
	// current one).
	Template       string `json:"template"`
	DeploymentID   string `json:"deployment_id,omitempty"`
	Key            string `json:"key,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// ComputerPage is one page of Computers, oldest first.
type ComputerPage struct {
	Computers  []ComputerState `json:"computers"`
	NextCursor string          `json:"next_cursor,omitempty"`
}

// ComputerMember is a Session or Command placed on a Computer.
type ComputerMember struct {
	Kind   string `json:"kind"` // session, command
	ID     string `json:"id"`
	Status string `json:"status"`
}

// ComputerMemberPage is one page of a Computer's members: its Sessions,
// then its Commands.
type ComputerMemberPage struct {
	Members    []ComputerMember `json:"members"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// Command statuses.
const (
	CommandRunning   = "running"
	CommandExited    = "exited"    // the process ended; see exit_code (non-zero is an ordinary outcome)
	CommandCancelled = "cancelled" // cancelled before it exited
	CommandTimedOut  = "timed_out" // killed at its timeout
	CommandFailed    = "failed"    // could not start, or its outcome was lost
)

// CommandTerminal reports whether a Command status is final.
func CommandTerminal(status string) bool {
	return status == CommandExited || status == CommandCancelled || status == CommandTimedOut || status == CommandFailed
}

// Command limits.
const (
	DefaultCommandTimeout = 5 * time.Minute
	MaxCommandTimeout     = 15 * time.Minute
	MaxCommandStdin       = 1 << 20
)

// CommandRequest is the body of POST /v1/computers/{id}/commands.
type CommandRequest struct {
	// Command is the argv: program and arguments.
	Command []string `json:"command"`
	// Cwd is the working directory, inside /workspace (default /workspace).
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// Stdin is the process's standard input (text).
	Stdin string `json:"stdin,omitempty"`
	// Timeout is a Duration ("30s"; default 5m, at most 15m).
	Timeout        string `json:"timeout,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// CommandState is a Command: a process run in a Computer outside any Turn.
type CommandState struct {
	ID         string   `json:"id"`
	ComputerID string   `json:"computer_id"`
	Command    []string `json:"command"`
	Cwd        string   `json:"cwd"`
	Status     string   `json:"status"`
	// ExitCode is set when status is exited: 0–255, or 128+signal.
	ExitCode  *int       `json:"exit_code,omitempty"`
	Error     *Error     `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// CommandWaitResult answers GET /v1/commands/{id}/wait: status "settled"
// with the Command, or "timeout".
type CommandWaitResult struct {
	Status  string        `json:"status"`
	Command *CommandState `json:"command,omitempty"`
}

// CommandLogRecord is one chunk of a Command's output. Records are ordered
// by sequence across both streams.
type CommandLogRecord struct {
	Sequence int64     `json:"sequence"`
	Stream   string    `json:"stream"` // stdout, stderr
	Data     []byte    `json:"data"`   // base64 in JSON
	At       time.Time `json:"at"`
}

// CommandLogPage is one page of a Command's output after a sequence.
// NextAfter continues it; Done is true when the Command is over and every
// record has been returned.
type CommandLogPage struct {
	Records   []CommandLogRecord `json:"records"`
	NextAfter int64              `json:"next_after"`
	Done      bool               `json:"done"`
}
