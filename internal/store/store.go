// Package store defines the durable store of the control plane: the Store
// interface that the engine uses, its row types, and (in storetest) the
// conformance suite every implementation passes.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrNotFound is returned by getters when no row matches.
var ErrNotFound = errors.New("store: not found")

// ErrNoSpace wraps the error of a write that failed because the store's
// disk is full; nothing of it was stored.
var ErrNoSpace = errors.New("store: no space left")

// ErrDuplicate is returned when an insert collides with a unique key.
var ErrDuplicate = errors.New("store: duplicate")

// Store is the durable state of the control plane. Every engine transition
// runs in one Update; an implementation may commit several concurrent
// Updates in one physical transaction (group commit) as long as each stays
// atomic on its own.
type Store interface {
	// Update runs fn in a read-write transaction. When fn returns an error,
	// none of its writes happen and Update returns that error.
	Update(ctx context.Context, fn func(Tx) error) error
	// View runs fn in a read-only snapshot.
	View(ctx context.Context, fn func(Tx) error) error
	// Read runs fn read-only with no common snapshot promised: each read
	// sees at least what was committed before Read began. A single read
	// costs less than in View on a database server (no transaction to
	// begin and end).
	Read(ctx context.Context, fn func(Tx) error) error
	// Close releases the store.
	Close() error
}

// Listener is implemented by a Store that several control-plane nodes
// share: it tells each node about the changes the others commit.
type Listener interface {
	// Listen calls fn with each notice other nodes commit, in commit order,
	// until ctx ends; it returns ctx's error. After a lost connection it
	// reconnects and calls resync, since notices may have been missed.
	Listen(ctx context.Context, fn func(Notice), resync func()) error
}

// Notice is a change committed by another node: an event appended to a
// Session's timeline (Kind is the event's kind), a change of a Command or
// its output (Kind is NoticeCommand), or a change of neither that Kind
// names alone (such as the Schedules').
type Notice struct {
	Node      string
	Kind      string
	SessionID string
	TurnID    string
	CommandID string
}

// NoticeCommand is the Kind of a Notice about a Command.
const NoticeCommand = "command"

// Tx is the set of operations available inside a transaction. Writes in a
// View fail. An error such as ErrDuplicate or ErrNotFound does not spoil the
// transaction: fn may go on using it. Times are stored with microsecond
// precision and read back in UTC; nil JSON and nil times read back as nil.
type Tx interface {
	// Counts returns the counts the metrics report, each query grouped by
	// its label (see CountQueries).
	Counts(ctx context.Context) (Counts, error)

	// Meta
	GetMeta(ctx context.Context, key string) (string, error)
	PutMeta(ctx context.Context, key, value string) error

	// API keys
	InsertAPIKey(ctx context.Context, k *APIKey) error
	// GetAPIKeyByHash returns the key (revoked or not) with the hash.
	GetAPIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	// GetAPIKey returns the key with the ID, revoked or not.
	GetAPIKey(ctx context.Context, id string) (*APIKey, error)
	// ListAPIKeys returns the keys with ID > afterID, oldest first.
	ListAPIKeys(ctx context.Context, afterID string, limit int) ([]APIKey, error)
	// RevokeAPIKey marks the key revoked at the given time; ErrNotFound
	// when no key has the ID. Revoking a revoked key changes nothing.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
	// LockActiveAPIKeys returns the IDs of the keys with the role that are
	// not revoked, oldest first, and holds them (PostgreSQL: FOR UPDATE)
	// until the transaction ends, so that two revocations cannot both
	// count the other's key.
	LockActiveAPIKeys(ctx context.Context, role string) ([]string, error)

	// Deployments
	InsertDeployment(ctx context.Context, d *Deployment) error
	GetDeployment(ctx context.Context, id string) (*Deployment, error)
	// GetDeploymentByDigest returns the Deployment of a binary digest and a
	// sources digest ("" for a Deployment without sources).
	GetDeploymentByDigest(ctx context.Context, digest, sourcesDigest string) (*Deployment, error)
	// ListDeployments returns deployments created before the given ID
	// (all when empty), newest first.
	ListDeployments(ctx context.Context, beforeID string, limit int) ([]Deployment, error)

	// Sessions
	InsertSession(ctx context.Context, s *Session) error
	GetSession(ctx context.Context, id string) (*Session, error)
	GetSessionByKey(ctx context.Context, agent, key string) (*Session, error)
	UpdateSession(ctx context.Context, s *Session) error
	// SetSessionIdleSince sets (or, with nil, clears) a Session's idle time
	// and the moment its closeAfterIdle runs out (nil when it never
	// does) alone, without reading the row.
	SetSessionIdleSince(ctx context.Context, id string, since, closeAt *time.Time) error
	// IdleDeadlines returns open Sessions whose IdleCloseAt is at or
	// before before, ordered by that moment then ID, starting after the
	// cursor after (its zero value starts at the beginning), at most
	// limit. It reads an index of those deadlines alone: its cost grows
	// with the Sessions due, not with all Sessions.
	IdleDeadlines(ctx context.Context, before time.Time, after IdleDeadline, limit int) ([]IdleDeadline, error)
	ListSessions(ctx context.Context, f SessionFilter) ([]Session, error)
	// SessionsWithWork returns IDs of Sessions that have queued or running Turns.
	SessionsWithWork(ctx context.Context) ([]string, error)

	// Turns
	// InsertTurn stores t. When t.Sequence is 0 it assigns the Session's
	// next one (one more than its highest, 1 for the first), as
	// AppendEvent does for events.
	InsertTurn(ctx context.Context, t *Turn) error
	GetTurn(ctx context.Context, sessionID, id string) (*Turn, error)
	UpdateTurn(ctx context.Context, t *Turn) error
	// ListTurns returns a Session's Turns with sequence > afterSeq, in order.
	ListTurns(ctx context.Context, sessionID string, afterSeq int64, limit int) ([]Turn, error)
	// MaxTurnSequence is the highest Turn sequence of a Session, 0 when none.
	MaxTurnSequence(ctx context.Context, sessionID string) (int64, error)
	// ActiveTurn returns the Session's running Turn when it has one, else
	// its oldest queued Turn; ErrNotFound when it has neither.
	ActiveTurn(ctx context.Context, sessionID string) (*Turn, error)
	// TurnsWithStatus returns every Turn (of all Sessions) in status.
	TurnsWithStatus(ctx context.Context, status string) ([]Turn, error)
	// ExpireTurnPayloads drops the payloads of at most limit settled Turns
	// whose TerminalAt is before cutoff and whose payloads are still kept,
	// oldest settlement first: their Input, Result and Response, their
	// messages' content (set to []), and the PayloadFields of their events
	// of the PayloadEventKinds, which gain a field payload_expired_at. It
	// sets their PayloadExpiredAt to at and returns how many it expired.
	// Turns that another transaction is expiring are skipped, not waited
	// for, so that several nodes can run it at once.
	ExpireTurnPayloads(ctx context.Context, cutoff, at time.Time, limit int) (int, error)

	// Messages
	// InsertMessage stores m and marks its Turn Messaged.
	InsertMessage(ctx context.Context, m *Message) error
	GetMessage(ctx context.Context, id string) (*Message, error)
	UpdateMessage(ctx context.Context, m *Message) error
	// PendingMessages returns a Turn's messages in status admitted, oldest first.
	PendingMessages(ctx context.Context, turnID string) ([]Message, error)

	// Events
	// AppendEvent assigns e.Sequence (one more than the Session's last) and
	// stores e.
	AppendEvent(ctx context.Context, e *Event) error
	// ListEvents returns up to limit events with sequence > after, in order.
	ListEvents(ctx context.Context, sessionID string, after int64, limit int) ([]Event, error)
	// LastEventSequence is the Session's highest event sequence, 0 when none.
	LastEventSequence(ctx context.Context, sessionID string) (int64, error)

	// Idempotency
	GetIdempotency(ctx context.Context, scope, key string) (*Idempotency, error)
	InsertIdempotency(ctx context.Context, r *Idempotency) error

	// Processes
	// PutProcess inserts or replaces the Session's process record.
	PutProcess(ctx context.Context, p *Process) error
	GetProcess(ctx context.Context, sessionID string) (*Process, error)
	// DeleteProcess removes the Session's process record when it is the
	// one launched with launchID; it is not an error when there is none.
	DeleteProcess(ctx context.Context, sessionID, launchID string) error
	// ListProcesses returns every process record, by Session ID.
	ListProcesses(ctx context.Context) ([]Process, error)

	// Leases: which control-plane node supervises a Session's process, for
	// several nodes on one database. Expiry is on the database's clock.

	// AcquireLease makes nodeID the Session's supervisor for ttl from now,
	// unless another node holds an unexpired lease. It returns the holder
	// after the call, and fresh when nodeID did not hold the lease before
	// (it was free, expired, or another node's expired one).
	AcquireLease(ctx context.Context, sessionID, nodeID string, ttl time.Duration) (holder string, fresh bool, err error)
	// RenewLeases extends every lease nodeID holds to ttl from now and
	// returns their Sessions.
	RenewLeases(ctx context.Context, nodeID string, ttl time.Duration) ([]string, error)
	// ReleaseLease ends nodeID's lease of the Session; it is not an error
	// when nodeID holds none.
	ReleaseLease(ctx context.Context, sessionID, nodeID string) error
	// Heartbeat records that nodeID, run by the process incarnation, is
	// alive for ttl from now. It returns the incarnation that the previous
	// heartbeat recorded while it is unexpired ("" when none): another
	// incarnation there means another process runs with the same node ID,
	// or this node restarted within the ttl.
	Heartbeat(ctx context.Context, nodeID, incarnation string, ttl time.Duration) (string, error)
	// LiveNodes returns the nodes whose heartbeat has not expired.
	LiveNodes(ctx context.Context) (map[string]bool, error)
	// LeaseHolder returns the node whose lease of the Session is recorded,
	// expired or not; "" when none. In a write transaction it takes the
	// Session's lock, so the answer holds until the transaction ends.
	LeaseHolder(ctx context.Context, sessionID string) (string, error)
	// Leases returns the unexpired leases: node ID by Session ID.
	Leases(ctx context.Context) (map[string]string, error)
	// Announce tells the other nodes, when the transaction commits, about
	// a change that appends no event: of a Session, of a Command when n
	// names one, or of neither when n names only its Kind. A store that
	// serves one node does nothing.
	Announce(ctx context.Context, n Notice) error
	// UnleasedWork returns up to limit Sessions, in random order, that have
	// no unexpired lease and a running Turn, or queued Turns and no hold of
	// their own. (A hold inherited from an ancestor is not seen here.)
	UnleasedWork(ctx context.Context, limit int) ([]string, error)

	// Deployment binaries, kept in the database so that every node can
	// launch every Deployment.

	// PutBinary stores a binary under its digest; storing a digest again
	// does nothing.
	PutBinary(ctx context.Context, digest string, data []byte) error
	// GetBinary returns the binary stored under digest.
	GetBinary(ctx context.Context, digest string) ([]byte, error)

	// Questions
	InsertAsk(ctx context.Context, a *Ask) error
	GetAsk(ctx context.Context, id string) (*Ask, error)
	// UpdateAsk, UpdateToken and UpdateWait return ErrNotFound when no row
	// has the ID.
	UpdateAsk(ctx context.Context, a *Ask) error
	// ListAsks returns a Turn's questions with ID > afterID, oldest first.
	ListAsks(ctx context.Context, turnID, afterID string, limit int) ([]Ask, error)
	// PendingAsks returns a Turn's questions in status pending, oldest first.
	PendingAsks(ctx context.Context, turnID string) ([]Ask, error)
	// ListAsksByStatus returns the questions of every Session with the
	// status ("" for any) and ID < beforeID ("" for no bound), newest
	// first.
	ListAsksByStatus(ctx context.Context, status, beforeID string, limit int) ([]Ask, error)

	// Tokens
	InsertToken(ctx context.Context, t *Token) error
	GetToken(ctx context.Context, id string) (*Token, error)
	// GetTokenByKey finds the Token a Session created with an idempotency key.
	GetTokenByKey(ctx context.Context, sessionID, key string) (*Token, error)
	UpdateToken(ctx context.Context, t *Token) error
	// ListTokensByStatus returns the Tokens of every Session with the
	// status ("" for any) and ID < beforeID ("" for no bound), newest
	// first.
	ListTokensByStatus(ctx context.Context, status, beforeID string, limit int) ([]Token, error)
	// ExpiringTokens returns pending Tokens that have an expiry, soonest first.
	ExpiringTokens(ctx context.Context) ([]Token, error)

	// Waits
	InsertWait(ctx context.Context, w *Wait) error
	GetWait(ctx context.Context, id string) (*Wait, error)
	UpdateWait(ctx context.Context, w *Wait) error
	// OpenWaits returns the waits in status waiting: the Session's, or every
	// Session's when sessionID is empty, oldest first.
	OpenWaits(ctx context.Context, sessionID string) ([]Wait, error)
	// WaitsOn returns the open waits whose target is targetID (a Token or
	// question ID), oldest first.
	WaitsOn(ctx context.Context, targetID string) ([]Wait, error)

	// Holds
	InsertHold(ctx context.Context, h *Hold) error
	GetHold(ctx context.Context, id string) (*Hold, error)
	// UpdateHold writes ReleasedAt and RecoveredAt; ErrNotFound when no
	// hold has the ID.
	UpdateHold(ctx context.Context, h *Hold) error
	// ActiveHolds returns the unreleased holds placed on any of sessionIDs,
	// oldest first.
	ActiveHolds(ctx context.Context, sessionIDs []string) ([]Hold, error)
	// HoldsToRecover returns a Session's released process_failed and
	// recovery_gap holds with no reconstruction yet, oldest first.
	HoldsToRecover(ctx context.Context, sessionID string) ([]Hold, error)
	// ActiveHoldsOfKind returns the unreleased holds of one kind on any
	// Session, oldest first, through an index of them alone.
	ActiveHoldsOfKind(ctx context.Context, kind string) ([]Hold, error)

	// Schedules (migration 0011_schedules)
	// InsertSchedule stores a new Schedule; ErrDuplicate when its ID, or
	// its Agent and Name, are taken.
	InsertSchedule(ctx context.Context, s *Schedule) error
	GetSchedule(ctx context.Context, id string) (*Schedule, error)
	// ListSchedules returns every Schedule by Agent and Name.
	ListSchedules(ctx context.Context) ([]Schedule, error)
	// UpdateSchedule writes everything but the ID, Agent, Name and
	// CreatedAt; ErrNotFound when no Schedule has the ID.
	UpdateSchedule(ctx context.Context, s *Schedule) error
	// DeleteSchedule removes a Schedule; ErrNotFound when none has the ID.
	DeleteSchedule(ctx context.Context, id string) error

	// Computers (migration 0005_computers)
	// InsertComputer stores a new Computer; ErrDuplicate when its ID, or
	// its Key among Computers not deleted, is taken.
	InsertComputer(ctx context.Context, c *Computer) error
	GetComputer(ctx context.Context, id string) (*Computer, error)
	// GetComputerByKey finds the Computer with Key that is not deleted.
	GetComputerByKey(ctx context.Context, key string) (*Computer, error)
	// ListComputers lists Computers by ID after afterID ("" from the
	// start), deleted ones included.
	ListComputers(ctx context.Context, afterID string, limit int) ([]Computer, error)
	// UpdateComputer writes Status and DeletedAt (a deleted Computer's
	// key is free again); ErrNotFound when no Computer has the ID.
	UpdateComputer(ctx context.Context, c *Computer) error
	// SetComputerStatus changes a Computer's Status from from to to in one
	// statement and reports whether it did (false when its Status is not
	// from); ErrNotFound when no Computer has the ID. Of several
	// transactions that make the same change at once, on any node, one
	// does it; the others wait for it and report false. It also locks the
	// row until the transaction ends, even when from equals to.
	SetComputerStatus(ctx context.Context, id, from, to string) (bool, error)
	// IdleImplicitComputers lists, by ID after afterID, the implicit
	// Computers that are available and that nothing uses: every Session
	// placed on them is closed and none of their Commands is queued or
	// running (migration 0013_implicit_computers).
	IdleImplicitComputers(ctx context.Context, afterID string, limit int) ([]Computer, error)

	// Commands
	InsertCommand(ctx context.Context, c *Command) error
	GetCommand(ctx context.Context, id string) (*Command, error)
	// UpdateCommand writes Status, ExitCode, Error, StartedAt and EndedAt.
	UpdateCommand(ctx context.Context, c *Command) error
	// RequestCommandCancel sets CancelRequested of a queued or running
	// Command, in one statement (a Command that ends meanwhile keeps its
	// end), and reports whether it did; ErrNotFound when no Command has
	// the ID.
	RequestCommandCancel(ctx context.Context, id string) (bool, error)
	// ListCommands lists a Computer's Commands by ID after afterID.
	ListCommands(ctx context.Context, computerID, afterID string, limit int) ([]Command, error)
	// UnfinishedCommands returns the Commands in status queued or running,
	// of every Computer, oldest first (for recovery).
	UnfinishedCommands(ctx context.Context) ([]Command, error)
	// AppendCommandLog stores one output chunk; ErrDuplicate when the
	// Command already has a chunk with that Sequence.
	AppendCommandLog(ctx context.Context, l *CommandLog) error
	// ListCommandLogs returns a Command's chunks with Sequence > after, in
	// order, at most limit.
	ListCommandLogs(ctx context.Context, commandID string, after int64, limit int) ([]CommandLog, error)

	// Slack (migration 0016_slack)
	// InsertSlackApp stores a connected app; ErrDuplicate when its ID or
	// its TeamID is taken.
	InsertSlackApp(ctx context.Context, a *SlackApp) error
	GetSlackApp(ctx context.Context, id string) (*SlackApp, error)
	GetSlackAppByTeam(ctx context.Context, teamID string) (*SlackApp, error)
	// ListSlackApps returns every connected app by ID.
	ListSlackApps(ctx context.Context) ([]SlackApp, error)
	// DeleteSlackApp removes an app; ErrNotFound when none has the ID.
	DeleteSlackApp(ctx context.Context, id string) error
	// PutSlackUser inserts or replaces a Slack user's mapping.
	PutSlackUser(ctx context.Context, u *SlackUser) error
	GetSlackUser(ctx context.Context, teamID, userID string) (*SlackUser, error)
	// ListSlackUsers returns a workspace's mappings ("" for every
	// workspace) by team and user ID.
	ListSlackUsers(ctx context.Context, teamID string) ([]SlackUser, error)
	// DeleteSlackUser removes a mapping; ErrNotFound when there is none.
	DeleteSlackUser(ctx context.Context, teamID, userID string) error
	// InsertSlackThread binds a Session to a Slack thread; ErrDuplicate
	// when the Session has one, or the app's channel thread is taken.
	InsertSlackThread(ctx context.Context, th *SlackThread) error
	// GetSlackThread returns the Session's thread.
	GetSlackThread(ctx context.Context, sessionID string) (*SlackThread, error)
	// GetSlackThreadByTS returns the thread an app's channel message
	// thread_ts belongs to; with threadTS "" the oldest (by Session ID) of
	// the app's threads in the channel, not done, whose opening message
	// has no ts yet.
	GetSlackThreadByTS(ctx context.Context, appID, channelID, threadTS string) (*SlackThread, error)
	// UpdateSlackThread writes ThreadTS, Cursor and Done; ErrNotFound
	// when the Session has no thread.
	UpdateSlackThread(ctx context.Context, th *SlackThread) error
	// ListSlackThreads returns the threads not Done with a Session ID
	// after afterSessionID, by Session ID.
	ListSlackThreads(ctx context.Context, afterSessionID string, limit int) ([]SlackThread, error)
	// PutSlackPost inserts or replaces what a thread's post shows.
	PutSlackPost(ctx context.Context, p *SlackPost) error
	GetSlackPost(ctx context.Context, sessionID, key string) (*SlackPost, error)
}

// SlackApp is a connected Slack app. Sealed holds its credentials,
// encrypted with the control plane's secrets key; nothing else does.
type SlackApp struct {
	ID           string
	Name         string
	TeamID       string
	BotUserID    string
	Mode         string // socket, events
	MentionAgent string
	Sealed       []byte
	CreatedAt    time.Time
}

// SlackUser maps a Slack user to a responder identity and a role.
type SlackUser struct {
	TeamID    string
	UserID    string
	Identity  string
	Role      string
	CreatedAt time.Time
}

// SlackThread is the Slack thread a Session owns and how far its
// timeline has been posted there.
type SlackThread struct {
	SessionID string
	AppID     string
	ChannelID string
	// ThreadTS is the ts of the thread's opening message ("" until posted).
	ThreadTS string
	// Cursor is the last event sequence of the Session projected.
	Cursor int64
	// Done is set once the Session closed and its timeline is projected.
	Done      bool
	CreatedAt time.Time
}

// SlackPost is one bot message of a thread: Key names what it shows (a
// Turn's output, a question), TS the message and Text its last text.
type SlackPost struct {
	SessionID string
	Key       string
	TS        string
	Text      string
	UpdatedAt time.Time
}

// Computer is the record of a Computer: an environment made from a
// Template of a Deployment, with a durable /workspace.
type Computer struct {
	ID           string
	Template     string
	DeploymentID string
	// Key is an optional caller-chosen name, unique among Computers that
	// are not deleted ("" when none).
	Key       string
	Status    string // available, deleting, deleted
	CreatedAt time.Time
	DeletedAt *time.Time
	// Implicit is set for a Computer made for a Session at its first
	// launch (not through the API): it is deleted once nothing uses it.
	Implicit bool
}

// Command is a process run in a Computer outside any Turn. Argv, Env and
// Stdin read back as nil when empty.
type Command struct {
	ID         string
	ComputerID string
	Argv       []string
	Cwd        string
	Env        []string
	Stdin      []byte
	// TimeoutMS bounds the run (0: the default).
	TimeoutMS int64
	Status    string // queued, running, exited, cancelled, timed_out, failed
	// ExitCode is set once the process exited (status exited): 0–255, or
	// 128+signal.
	ExitCode  *int
	Error     string
	CreatedAt time.Time
	StartedAt *time.Time
	EndedAt   *time.Time
	// NodeID is the control-plane node that runs it ("" with one node).
	NodeID string
	// CancelRequested is set once a cancel was accepted, so that the node
	// running the Command stops it even if it missed the notice (see
	// RequestCommandCancel).
	CancelRequested bool
}

// CommandLog is one chunk of a Command's output.
type CommandLog struct {
	CommandID string
	// Sequence numbers the chunks of a Command from 1, across both streams.
	Sequence int64
	Stream   string // stdout, stderr
	Data     []byte
	At       time.Time
}

// Schedule is a cron trigger of an Agent of the current Deployment, and
// where its firing stands.
type Schedule struct {
	ID           string
	Agent        string
	Name         string
	DeploymentID string
	// Pattern is the cron expression; Timezone the IANA zone it is read in.
	Pattern  string
	Timezone string
	// Input is each fire's initial Turn input (JSON).
	Input json.RawMessage
	// Overlap is "skip" or "allow".
	Overlap   string
	CreatedAt time.Time
	UpdatedAt time.Time
	// NextFireAt is the next occurrence to fire.
	NextFireAt time.Time
	// LastFireAt is the occurrence that last admitted a Session, and
	// LastSessionID that Session.
	LastFireAt    *time.Time
	LastSessionID string
	// MissedCount counts occurrences not admitted (downtime past the
	// catch-up window, or skipped for overlap).
	MissedCount int64
}

// Hold is a hold on a Session: while a Session or one of its ancestors has
// an active (unreleased) hold, its queued Turns are not started.
type Hold struct {
	ID         string
	SessionID  string
	Kind       string // interrupt, process_failed, recovery_gap, storage_pressure
	CanRelease bool
	Reason     string
	CreatedAt  time.Time
	ReleasedAt *time.Time
	// RecoveredAt is when a process was reconstructed after this released
	// process_failed or recovery_gap hold.
	RecoveredAt *time.Time
	// IssuerSessionID is the Session whose runtime MCP interrupt_session
	// placed this hold ("" for any other hold); only it may resume the
	// hold through runtime MCP.
	IssuerSessionID string
}

// Process is the record of a running session process, kept so that a
// restarted control plane can find and reattach it.
type Process struct {
	SessionID string
	// LaunchID names one launch; a later launch of the Session replaces it.
	LaunchID string
	PID      int
	// StartID tells the process apart from a later one with the same PID
	// (boot ID and start time).
	StartID    string
	TokenHash  string
	ComputerID string
	Recovery   string
	LaunchedAt time.Time
	// NodeID is the control-plane node that launched the process.
	NodeID string
	// Parked: the process was checkpointed to disk and ended; its images
	// are in its Computer's directory and it is restored on demand, by
	// whichever node supervises the Session (PID and StartID name the
	// process as it was before the park).
	Parked bool
}

// Ask is a question a Turn asked a person.
type Ask struct {
	ID          string
	SessionID   string
	TurnID      string
	Status      string // pending, responded, cancelled
	Question    json.RawMessage
	Answer      json.RawMessage
	RespondedBy json.RawMessage
	ResponseID  string
	CreatedAt   time.Time
	ResolvedAt  *time.Time
}

// Token is a durable one-shot value that an outside party completes.
type Token struct {
	ID             string
	SessionID      string
	TurnID         string
	Status         string // pending, completed, cancelled, expired
	Tags           json.RawMessage
	Metadata       json.RawMessage
	Data           json.RawMessage
	SecretHash     string
	IdempotencyKey string
	CreatedAt      time.Time
	ExpiresAt      *time.Time
	ResolvedAt     *time.Time
	// Schema is the JSON Schema a completion must satisfy (that of the
	// Token's latest wait with one); nil accepts any JSON.
	Schema json.RawMessage
}

// Wait is a Turn's durable wait on a timer, a Token or a question.
type Wait struct {
	ID        string
	SessionID string
	TurnID    string
	Kind      string // timer, token, ask
	TargetID  string // the Token or question; "" for a timer
	Status    string // waiting, resolved
	// Deadline is when a timer fires or a waiter's timeout ends the wait.
	Deadline    *time.Time
	IdleTimeout time.Duration
	Outcome     json.RawMessage
	CreatedAt   time.Time
	ResolvedAt  *time.Time
}

// APIKey is a stored API key; only its hash is kept, and the secret's
// first characters (Prefix, "" for keys made before they were kept).
type APIKey struct {
	ID        string
	Name      string
	Hash      string
	Role      string
	Prefix    string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Deployment is an immutable agent program: its binary's digest and
// manifest, and the digest of the sources its Templates' Copy steps read.
type Deployment struct {
	ID         string
	Digest     string
	Manifest   json.RawMessage
	BinaryPath string
	// SourcesDigest is the digest of the sources archive ("sha256:…"); ""
	// when the Deployment was published without sources. A binary digest
	// and a sources digest together identify a Deployment.
	SourcesDigest string
	CreatedAt     time.Time
}

// Session is a Session row.
type Session struct {
	ID                 string
	DeploymentID       string
	RootSessionID      string
	Agent              string
	Template           string
	ComputerID         string
	ParentSessionID    string
	RequesterSessionID string
	Key                string
	Status             string
	CloseAfterIdle     string
	HibernateAfterIdle string
	MaxTurnDuration    string
	IdleSince          *time.Time
	// IdleCloseAt is when an idle Session's closeAfterIdle runs out (nil
	// when it is busy or never closes after idling); the store indexes it
	// for IdleDeadlines.
	IdleCloseAt   *time.Time
	InitialTurnID string
	// SlackChannelID is the Slack channel the Session lives in ("" none).
	SlackChannelID string
	CreatedAt      time.Time
}

// IdleDeadline is when an idle Session's closeAfterIdle runs out.
type IdleDeadline struct {
	SessionID string
	CloseAt   time.Time
}

// SessionFilter selects Sessions for ListSessions. Empty fields match all.
type SessionFilter struct {
	Agent              string
	Key                string
	Statuses           []string
	ParentSessionID    string
	RequesterSessionID string
	// ComputerID selects the Sessions placed on that Computer.
	ComputerID string
	// AfterID continues a listing after this Session ID (IDs sort by creation).
	AfterID string
	Limit   int
}

// Turn is a Turn row.
type Turn struct {
	ID             string
	SessionID      string
	Sequence       int64
	Status         string
	Input          json.RawMessage
	Source         json.RawMessage
	CreatedAt      time.Time
	StartedAt      *time.Time
	TerminalAt     *time.Time
	Result         json.RawMessage
	Response       json.RawMessage // staged, published on completion
	ResponseStaged bool
	ErrorCode      string
	ErrorMessage   string
	OutputBytes    int64
	LastOp         int64
	// Waited is set once the Turn asked a question or started a wait, so
	// that settling a Turn that never did skips looking for them.
	Waited bool
	// Messaged is set once a message was admitted to the Turn, so that
	// starting or settling a Turn that had none skips looking for them.
	Messaged bool
	// InterruptRequested is set when an interrupt of this Turn alone (no
	// hold) is accepted, so that it is not lost before it reaches the
	// process (a restart, a node that missed the notice).
	InterruptRequested bool
	// PayloadExpiredAt is when ExpireTurnPayloads dropped the Turn's
	// payloads; nil while they are kept. InsertTurn writes it; UpdateTurn
	// leaves it as stored.
	PayloadExpiredAt *time.Time
	// TraceParent is the W3C traceparent of the span that admitted the
	// Turn, "" when it was not traced. InsertTurn writes it; it never
	// changes.
	TraceParent string
}

// PayloadEventKinds are the kinds of a Turn's events that carry its
// payloads, and PayloadFields the fields of their data that
// ExpireTurnPayloads removes.
var (
	PayloadEventKinds = []string{"turn.queued", "turn.output", "turn.completed", "message.admitted"}
	PayloadFields     = []string{"input", "content", "result", "response"}
)

// PayloadExpiredField is the field that ExpireTurnPayloads adds to the
// data of an event whose payload it removed: the expiry time, as
// PayloadExpiredStamp writes it.
const PayloadExpiredField = "payload_expired_at"

// ExpireEventData returns an event's data without its PayloadFields and
// with PayloadExpiredField set to at's PayloadExpiredStamp. Other fields
// keep their exact JSON text.
func ExpireEventData(data json.RawMessage, at time.Time) (json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &fields); err != nil {
			return nil, err
		}
	}
	for _, f := range PayloadFields {
		delete(fields, f)
	}
	stamp, err := json.Marshal(PayloadExpiredStamp(at))
	if err != nil {
		return nil, err
	}
	fields[PayloadExpiredField] = stamp
	return json.Marshal(fields)
}

// PayloadExpiredStamp is the expiry time at as events show it: RFC 3339 in
// UTC with microseconds at most, as the Turn's PayloadExpiredAt reads back.
func PayloadExpiredStamp(at time.Time) string {
	return at.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
}

// Message is a message sent to one exact Turn.
type Message struct {
	ID        string
	SessionID string
	TurnID    string
	Content   json.RawMessage
	Source    json.RawMessage
	Status    string // admitted, delivered, rejected
	CreatedAt time.Time
}

// Event is one record of a Session's timeline.
type Event struct {
	SessionID string
	Sequence  int64
	TurnID    string
	Kind      string
	Data      json.RawMessage // nil is stored as {}
	CreatedAt time.Time
}

// Idempotency records an accepted mutation: the digest of its canonical
// request and its receipt.
type Idempotency struct {
	Scope     string
	Key       string
	Digest    string
	Response  json.RawMessage
	CreatedAt time.Time
}

// Counts are row counts by label value, read at a metrics scrape.
type Counts struct {
	// SessionsByStatus, HoldsByKind (active holds), ComputersByStatus
	// (live Computers), CommandsByStatus and LeasesByNode count rows.
	SessionsByStatus  map[string]int64
	HoldsByKind       map[string]int64
	ComputersByStatus map[string]int64
	CommandsByStatus  map[string]int64
	LeasesByNode      map[string]int64
	// PendingAsks and PendingTokens count what waits for an answer.
	PendingAsks   int64
	PendingTokens int64
}

// CountQueries are the grouped counts Counts runs, the same SQL on every
// implementation: each yields rows of (label, count).
var CountQueries = []struct {
	SQL string
	Put func(c *Counts, label string, n int64)
}{
	{`SELECT status, COUNT(*) FROM sessions GROUP BY status`, func(c *Counts, l string, n int64) { c.SessionsByStatus[l] = n }},
	{`SELECT kind, COUNT(*) FROM holds WHERE released_at IS NULL GROUP BY kind`, func(c *Counts, l string, n int64) { c.HoldsByKind[l] = n }},
	{`SELECT status, COUNT(*) FROM computers WHERE status <> 'deleted' GROUP BY status`, func(c *Counts, l string, n int64) { c.ComputersByStatus[l] = n }},
	{`SELECT status, COUNT(*) FROM commands GROUP BY status`, func(c *Counts, l string, n int64) { c.CommandsByStatus[l] = n }},
	{`SELECT node_id, COUNT(*) FROM session_leases GROUP BY node_id`, func(c *Counts, l string, n int64) { c.LeasesByNode[l] = n }},
	{`SELECT 'pending', COUNT(*) FROM asks WHERE status = 'pending'`, func(c *Counts, _ string, n int64) { c.PendingAsks = n }},
	{`SELECT 'pending', COUNT(*) FROM tokens WHERE status = 'pending'`, func(c *Counts, _ string, n int64) { c.PendingTokens = n }},
}

// NewCounts returns Counts with empty maps.
func NewCounts() Counts {
	return Counts{SessionsByStatus: map[string]int64{}, HoldsByKind: map[string]int64{}, ComputersByStatus: map[string]int64{},
		CommandsByStatus: map[string]int64{}, LeasesByNode: map[string]int64{}}
}
