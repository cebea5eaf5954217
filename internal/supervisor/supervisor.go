// Package supervisor makes sure that every Session with runnable work has a
// running session process: it launches the Deployment's binary, serves the
// process's end of the session protocol, dispatches Turns one at a time,
// and notices at once when a process ends.
package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/delegation"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/freezer"
)

// CleanupPeriod is how long a Turn's handler and OnCancel callbacks have to
// drain after cancellation before the process is terminated.
const CleanupPeriod = 10 * time.Second

// killGrace is added to CleanupPeriod before the supervisor stops waiting
// for a cancelled Turn to settle.
const killGrace = 2 * time.Second

// Options configure New.
type Options struct {
	// MaxCommandOutput bounds the stored output of one Command (default
	// DefaultMaxCommandOutput).
	MaxCommandOutput int64
	// SocketPath is the Unix socket where processes reach the protocol
	// endpoint. It must stay the same across restarts for processes to
	// reattach.
	SocketPath string
	// ReconnectWindow is how long a process that lost the control plane
	// keeps trying to reconnect before it gives up (default 10 minutes; on
	// a node sharing its database, at most half of LeaseTTL).
	ReconnectWindow time.Duration
	// ReattachWindow is how long Recover waits for a surviving process to
	// reconnect before it ends it (default 30 seconds).
	ReattachWindow time.Duration
	// Freezer suspends processes whose waits are idle; nil keeps them hot.
	Freezer freezer.Freezer
	Logger  *slog.Logger
	// ResolveBinary returns the local path of a Deployment's binary, given
	// its digest and the path recorded when it was published (on another
	// node, perhaps); nil uses the recorded path.
	ResolveBinary func(ctx context.Context, digest, path string) (string, error)
	// ResolveSources returns the local directory of a Deployment's unpacked
	// sources archive, given its digest (never ""); nil means Deployments
	// with sources cannot launch, and Copy steps fail with a clear error.
	ResolveSources func(ctx context.Context, digest string) (string, error)
	// LeaseTTL is how long a Session's lease outlives this node's last
	// renewal when several nodes share the database (default 15 s): after
	// a node dies, its Sessions wait that long before another takes them.
	LeaseTTL time.Duration
	// Clock runs the supervisor's timers (default SystemClock).
	Clock Clock
}

// Default windows of Options.
const (
	DefaultReconnectWindow = 10 * time.Minute
	DefaultReattachWindow  = 30 * time.Second
)

// Supervisor runs session processes.
type Supervisor struct {
	eng      *engine.Engine
	deleg    *delegation.Dispatcher
	launcher Launcher
	log      *slog.Logger
	clock    Clock
	socket   string
	opts     Options

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	conns sync.WaitGroup // protocol connections being served

	mu        sync.Mutex
	procs     map[string]*proc           // by session ID
	cmds      map[string]*runningCommand // running Commands, by ID
	tokens    map[string]*proc           // by hash of the process token
	closing   bool
	detaching bool // closing without stopping processes
	// adopted is set once Recover has taken back the processes of the
	// previous run: until then a token may be a survivor's not yet known.
	adopted bool
	// exiting counts the exits being recorded, by Session ID.
	exiting map[string]int
	// unavailable holds why the last process launch on a Computer failed,
	// by Computer ID, until one succeeds.
	unavailable map[string]*helmrtype.Error
	// releasing holds the lease releases in flight, by Session ID; see
	// cluster.go.
	releasing map[string]chan struct{}
	// parkedAtStop are the Sessions the stop parked (parkAll).
	parkedAtStop []string
	// stopLeases ends the lease keeper; nil without one.
	stopLeases context.CancelFunc
	leasesDone chan struct{}
	leaseWork  sync.WaitGroup // the keeper's releases and kills
}

// New returns a Supervisor and registers it with the engine.
func New(eng *engine.Engine, l Launcher, opts Options) *Supervisor {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ReconnectWindow <= 0 {
		opts.ReconnectWindow = DefaultReconnectWindow
	}
	if opts.ReattachWindow <= 0 {
		opts.ReattachWindow = DefaultReattachWindow
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.Clock == nil {
		opts.Clock = SystemClock
	}
	if eng.Node() != "" && opts.ReconnectWindow > opts.LeaseTTL/2 {
		// A process cut off from its node must be gone before its lease
		// can expire (one renewal period after the node's last): another
		// node then starts the Session's next process, on the same
		// Computer perhaps, and two must never run at once.
		opts.Logger.Info("session processes of a node sharing its database stop trying to reconnect after half the lease TTL",
			"reconnect_window", opts.LeaseTTL/2, "lease_ttl", opts.LeaseTTL)
		opts.ReconnectWindow = opts.LeaseTTL / 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{eng: eng, launcher: l, log: opts.Logger, clock: opts.Clock, socket: opts.SocketPath, opts: opts, ctx: ctx, cancel: cancel,
		procs: map[string]*proc{}, tokens: map[string]*proc{}, deleg: delegation.New(eng),
		releasing: map[string]chan struct{}{}, unavailable: map[string]*helmrtype.Error{}, exiting: map[string]int{}}
	eng.SetNotifier(s)
	eng.SetCommandRunner(s)
	return s
}

// proc is one session process and its connection.
type proc struct {
	sessionID string
	tokenHash string
	launchID  string
	launch    *engine.Launch
	process   Process

	mu sync.Mutex
	// life is the process's phase and residency (lifecycle.go).
	life      lifecycle
	conn      *websocket.Conn
	running   string // the Turn the process runs, "" when idle
	cancelled bool   // a cancel was sent for running
	recheck   bool   // work may have arrived while a dispatch was in flight
	killTimer Timer
	deadline  Timer
	expected  bool   // the process was asked to stop
	killed    bool   // kill was asked, maybe before the process existed
	initError string // init failed with this message
	retired   string // why the process was retired (a Turn's cleanup failed)
	// drainKilled is set when the cleanup timer ended the process.
	drainKilled bool
	// trace is the running Turn's stored trace context ("" untraced), and
	// spans how many spans its process shipped (bounded per Turn).
	trace string
	spans int
	// leasedAt is when this node had the Session's lease for the process
	// (its launch took it over, or its adoption confirmed it); zero before.
	leasedAt time.Time
	// While a start is in flight (running is "-"), interrupts and messages
	// for the Turn being started wait here; started applies them.
	pendingCancel map[string]string
	pendingMsgs   bool
	sentMsgs      map[string]bool // messages sent for the running Turn
	helloTimer    Timer
	retireTimer   Timer
	freeze        freezer.Handle // nil when the host cannot freeze
	idleTimer     Timer
	// parkTimer bounds the time from park to the process's close;
	// dumping is closed once a checkpoint in progress returned (park.go).
	parkTimer Timer
	dumping   chan struct{}
	// restorable: the process runs in a sandbox a checkpoint can take.
	restorable bool
	welcomed   bool // welcome was sent on the connection
	// sessionClosed: the Session is closed; the process stops once idle.
	sessionClosed bool
	// recorded is closed once a new launch is recorded in the store and
	// under the freezer: the process is welcomed (and runs init) only
	// then, so that everything it does can survive a restart and be
	// suspended. nil for an adopted process.
	recorded chan struct{}
	// writeMu orders writes to the connection, so that turn.start goes out
	// before any cancel or message for that Turn.
	writeMu sync.Mutex
	served  chan struct{} // closed when the connection's reader ends
}

// drainTimeout bounds how long an exit waits for the connection to drain.
const drainTimeout = 5 * time.Second

// helloTimeout bounds the time from launch to the process's hello.
const helloTimeout = 30 * time.Second

// retireGrace bounds how long a retired process may take to exit.
const retireGrace = 5 * time.Second

// kill ends the process now, or as soon as it exists. A frozen process
// is thawed after the signal, so that the signal lands.
func (p *proc) kill() {

	p.mu.Lock()
	p.killed = true
	proc, h := p.process, p.freeze
	p.mu.Unlock()
	if proc != nil {
		proc.Kill()
	}
	if h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		h.Thaw(ctx)
		cancel()
	}
}

// snapshot returns the processes this supervisor runs now.
func (s *Supervisor) snapshot() []*proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	return procs
}

// resolveBinary returns this node's path of the Launch's Deployment
// binary (ResolveBinary; the recorded path without it).
func (s *Supervisor) resolveBinary(ctx context.Context, l *engine.Launch) (string, error) {
	if s.opts.ResolveBinary == nil {
		return l.Binary, nil
	}
	return s.opts.ResolveBinary(ctx, l.Digest, l.Binary)
}

// setLaunch records what the process was launched (or reattached,
// restored) with, and the idle policy that follows from it; p.mu is held.
func (p *proc) setLaunch(l *engine.Launch) {
	p.launch = l
	p.life.policy = policyOf(l.Agent.Actor, l.Agent.IdleTimeout, l.Session.HibernateAfterIdle)
}

// resolveSources returns the local directory of the sources archive with
// digest; "" for a Deployment without sources.
func (s *Supervisor) resolveSources(ctx context.Context, digest string) (string, error) {
	if digest == "" || s.opts.ResolveSources == nil {
		return "", nil
	}
	dir, err := s.opts.ResolveSources(ctx, digest)
	if err != nil {
		return "", fmt.Errorf("the sources of the deployment: %w", err)
	}
	return dir, nil
}

func (s *Supervisor) get(sessionID string) *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[sessionID]
}

func (s *Supervisor) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}
