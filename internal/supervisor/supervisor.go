// Package supervisor makes sure that every Session with runnable work has a
// running session process: it launches the Deployment's binary, serves the
// process's end of the session protocol, dispatches Turns one at a time,
// and notices at once when a process ends.
package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/delegation"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/freezer"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/store"
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
	// keeps trying to reconnect before it gives up (default 10 minutes).
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
	// exiting counts the exits being recorded, by Session ID.
	exiting map[string]int
	// unavailable holds why the last process launch on a Computer failed,
	// by Computer ID, until one succeeds.
	unavailable map[string]*helmrtype.Error
	// releasing holds the lease releases in flight, by Session ID; see
	// cluster.go.
	releasing map[string]chan struct{}
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
	ctx, cancel := context.WithCancel(context.Background())
	s := &Supervisor{eng: eng, launcher: l, log: opts.Logger, socket: opts.SocketPath, opts: opts, ctx: ctx, cancel: cancel,
		procs: map[string]*proc{}, tokens: map[string]*proc{}, deleg: delegation.New(eng),
		releasing: map[string]chan struct{}{}, unavailable: map[string]*helmrtype.Error{}, exiting: map[string]int{}}
	eng.SetNotifier(s)
	eng.SetCommandRunner(s)
	return s
}

type procState int

const (
	stateStarting procState = iota
	stateReady
	stateStopping
	stateDead
	// stateReattaching: a process that survived a control-plane restart,
	// not reconnected yet.
	stateReattaching
)

// proc is one session process and its connection.
type proc struct {
	sessionID string
	tokenHash string
	launchID  string
	launch    *engine.Launch
	process   Process

	mu        sync.Mutex
	state     procState
	conn      *websocket.Conn
	running   string // the Turn the process runs, "" when idle
	cancelled bool   // a cancel was sent for running
	recheck   bool   // work may have arrived while a dispatch was in flight
	killTimer *time.Timer
	deadline  *time.Timer
	expected  bool   // the process was asked to stop
	killed    bool   // kill was asked, maybe before the process existed
	initError string // init failed with this message
	retired   string // why the process was retired (a Turn's cleanup failed)
	// drainKilled is set when the cleanup timer ended the process.
	drainKilled bool
	// lost: another node took the Session over; the process is ended
	// without touching the Session.
	lost bool
	// leasedAt is when this node had the Session's lease for the process
	// (its launch took it over, or its adoption confirmed it); zero before.
	leasedAt time.Time
	// While a start is in flight (running is "-"), interrupts and messages
	// for the Turn being started wait here; started applies them.
	pendingCancel map[string]string
	pendingMsgs   bool
	sentMsgs      map[string]bool // messages sent for the running Turn
	helloTimer    *time.Timer
	retireTimer   *time.Timer
	// waits are the open waits of the running Turn, with their idle
	// timeouts; see suspend.go.
	waits map[string]time.Duration
	// mcpCalls counts runtime MCP calls in flight: the process is busy.
	mcpCalls int
	freeze   freezer.Handle // nil when the host cannot freeze
	frozen   bool
	// parking and restoring: a Freeze or a Thaw is in progress.
	parking, restoring bool
	lastActive         time.Time
	idleTimer          *time.Timer
	welcomed           bool // welcome was sent on the connection
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

// SessionWork starts or wakes the Session's process when it has queued Turns.
func (s *Supervisor) SessionWork(sessionID string) {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	p, ok := s.procs[sessionID]
	if !ok {
		token, hash := engine.NewSecret("hlmr_proc_")
		p = &proc{sessionID: sessionID, tokenHash: hash, launchID: engine.NewID(), recorded: make(chan struct{})}
		s.procs[sessionID] = p
		s.tokens[p.tokenHash] = p
		s.wg.Add(1)
		s.mu.Unlock()
		go s.start(p, token)
		return
	}
	s.mu.Unlock()
	s.dispatch(p)
}

// Reserve holds the Session's process for a Turn being admitted when it is
// ready and idle, so that admission and start share one transaction.
func (s *Supervisor) Reserve(sessionID string) engine.Reservation {
	p := s.get(sessionID)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateReady || p.running != "" {
		return nil
	}
	p.running, p.recheck = "-", false
	return reservation{s: s, p: p}
}

type reservation struct {
	s *Supervisor
	p *proc
}

func (r reservation) Started(t *store.Turn, msgs []store.Message) { r.s.started(r.p, t, msgs, nil) }

// TurnMessage delivers admitted messages when the Turn runs now.
func (s *Supervisor) TurnMessage(sessionID, turnID string) {
	p := s.get(sessionID)
	if p == nil {
		return
	}
	p.mu.Lock()
	running := p.running == turnID && p.state == stateReady
	if p.running == "-" {
		p.pendingMsgs = true // a start is in flight: started sends them
	}
	p.mu.Unlock()
	if running {
		s.activity(p)
		s.sendPending(p, turnID)
	}
}

// TurnInterrupt cancels the Turn if the Session's process runs it.
func (s *Supervisor) TurnInterrupt(sessionID, turnID string) {
	if p := s.get(sessionID); p != nil {
		s.cancelTurn(p, turnID, protocol.ReasonInterrupted)
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

func (s *Supervisor) start(p *proc, token string) {
	defer s.wg.Done()
	ctx := s.ctx
	if !s.takeOver(ctx, p.sessionID) {
		// Another node supervises the Session; the notices of this work
		// reach it.
		close(p.recorded)
		s.forget(p)
		return
	}
	p.mu.Lock()
	p.leasedAt = time.Now()
	p.mu.Unlock()
	var bin string
	l, err := s.eng.PrepareLaunch(ctx, p.sessionID, false)
	if err == nil {
		p.mu.Lock()
		p.launch = l
		p.mu.Unlock()
		bin = l.Binary
		if s.opts.ResolveBinary != nil {
			bin, err = s.opts.ResolveBinary(ctx, l.Digest, l.Binary)
		}
	}
	var sourceDir string
	if err == nil {
		sourceDir, err = s.resolveSources(ctx, l.SourcesDigest)
	}
	if err == nil {
		var proc Process
		proc, err = s.launcher.Launch(ctx, LaunchSpec{SessionID: p.sessionID, ComputerID: l.Session.ComputerID,
			Agent: l.Session.Agent, Binary: bin, Runtime: l.Runtime, Socket: s.socket, Token: token,
			ReconnectWindow: s.opts.ReconnectWindow, Template: l.Template, SourceDir: sourceDir})
		if err == nil {
			p.mu.Lock()
			p.process = proc
			killed := p.killed
			if p.state == stateStarting && p.conn == nil {
				p.helloTimer = time.AfterFunc(helloTimeout, func() {
					p.mu.Lock()
					silent := p.state == stateStarting && p.conn == nil
					p.mu.Unlock()
					if silent {
						s.log.Warn("session process did not connect in time; ending it", "session", p.sessionID)
						p.kill()
					}
				})
			}
			p.mu.Unlock()
			if killed {
				proc.Kill()
			}
		}
	}
	if errors.Is(err, engine.ErrHeld) {
		// Held: no process until a resume asks for one. A resume that
		// committed meanwhile found this start in flight; look again.
		close(p.recorded)
		s.forget(p)
		if ok, err := s.eng.CanStart(context.Background(), p.sessionID); err == nil && ok {
			s.SessionWork(p.sessionID)
		}
		s.release(p.sessionID)
		return
	}
	if l != nil {
		s.computerLaunched(l.Session.ComputerID, err)
	}
	if err != nil {
		close(p.recorded)
		s.log.Error("launch session process", "session", p.sessionID, "err", err)
		s.forget(p)
		// Nothing runs until someone looks: a process_failed hold, not a
		// launch loop.
		msg := fmt.Sprintf("the session process could not start: %v", err)
		s.eng.FailRunningTurn(context.Background(), p.sessionID, helmrtype.TurnFailed, helmrtype.CodeProcessExited, msg, helmrtype.HoldProcessFailed)
		s.release(p.sessionID)
		return
	}
	s.log.Debug("session process started", "session", p.sessionID)
	if pid := pidOf(p.process); pid != 0 {
		s.attachFreezer(p, pid)
		s.record(p, l, pid)
	}
	close(p.recorded)
	s.watch(p)
}

// computerLaunched notes how the last launch on a Computer went: after a
// failure the Computer is unavailable, with that error, until a launch
// succeeds.
func (s *Supervisor) computerLaunched(computerID string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.unavailable, computerID)
		return
	}
	s.unavailable[computerID] = &helmrtype.Error{Code: helmrtype.CodeProcessExited,
		Message: fmt.Sprintf("the computer's process could not start: %v", err)}
}

// pidOf is the process's ID, 0 when its launcher does not tell.
func pidOf(p Process) int {
	if pp, ok := p.(interface{ PID() int }); ok {
		return pp.PID()
	}
	return 0
}

// record stores the process's record, so that a restarted control plane
// can reattach it. Without one the process cannot outlive this one.
func (s *Supervisor) record(p *proc, l *engine.Launch, pid int) {
	sid, err := startID(pid)
	if err == nil {
		err = s.eng.RecordProcess(s.ctx, &store.Process{SessionID: p.sessionID, LaunchID: p.launchID, PID: pid,
			StartID: sid, TokenHash: p.tokenHash, ComputerID: l.Session.ComputerID, Recovery: l.Recovery, LaunchedAt: s.eng.Now(),
			NodeID: s.eng.Node()})
	}
	if err != nil && s.ctx.Err() == nil {
		s.log.Warn("record session process; it cannot reattach after a restart", "session", p.sessionID, "err", err)
	}
}

// watch waits for the process to end, unless this control plane detaches
// from it first.
func (s *Supervisor) watch(p *proc) {
	select {
	case <-p.process.Done():
		s.exited(p)
	case <-s.ctx.Done():
		s.mu.Lock()
		detaching := s.detaching
		s.mu.Unlock()
		if !detaching {
			<-p.process.Done()
			s.exited(p)
		}
	}
}

func (s *Supervisor) forget(p *proc) {
	s.mu.Lock()
	if s.procs[p.sessionID] == p {
		delete(s.procs, p.sessionID)
	}
	delete(s.tokens, p.tokenHash)
	s.mu.Unlock()
}

func (s *Supervisor) exited(p *proc) {
	// While the exit is recorded, the Session's lease is not idle.
	s.mu.Lock()
	s.exiting[p.sessionID]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.exiting[p.sessionID]--; s.exiting[p.sessionID] <= 0 {
			delete(s.exiting, p.sessionID)
		}
		s.mu.Unlock()
	}()
	// Messages the process sent before it ended are still in the socket:
	// let the connection drain first, so that its last words (init.failed,
	// a settlement) count before the exit does.
	p.mu.Lock()
	served := p.served
	p.mu.Unlock()
	if served != nil {
		select {
		case <-served:
		case <-time.After(drainTimeout):
		}
	}
	p.mu.Lock()
	wasReady := p.state == stateReady || p.state == stateStopping
	p.state = stateDead
	running := p.running
	drainKilled := p.drainKilled
	expected := p.expected
	initError := p.initError
	retired := p.retired
	lost := p.lost
	p.stopTimers()
	conn := p.conn
	p.mu.Unlock()
	if conn != nil {
		conn.CloseNow()
	}
	s.forget(p)
	s.releaseFreezer(p)
	if lost {
		return // the node that took the Session over settles what it ran
	}
	defer s.release(p.sessionID)
	ctx := context.Background()
	s.eng.ForgetProcess(ctx, p.sessionID, p.launchID)
	why := "the session process exited"
	if err := p.process.Err(); err != nil {
		why = err.Error()
	}
	// A process that ends other than by an orderly stop places a hold on
	// its Session: nothing more runs there until a resume, which starts a
	// reconstructed process. Its running Turn is never replayed.
	failed := helmrtype.HoldProcessFailed
	switch {
	case s.isClosing() && running == "":
		// Shutting down: queued work stays queued for the next start.
	case p.launch == nil:
		// A process that survived a restart and never reattached: what it
		// ran is lost.
		s.log.Warn("session process did not reattach", "session", p.sessionID, "why", why)
		s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnInterrupted, helmrtype.CodeExecutionLost,
			"the control plane restarted and the session process did not reattach; the turn is not replayed", helmrtype.HoldRecoveryGap)
	case initError != "":
		// init failed: the Turn that would have run failed with its error.
		s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnFailed, helmrtype.CodeHandlerFailed, initError, failed)
	case expected && running == "" && retired == "":
		s.eng.ProcessStopped(ctx, p.sessionID, "stopped")
		s.relaunchIfWork(p.sessionID)
	case !wasReady:
		s.log.Warn("session process ended before it was ready", "session", p.sessionID, "why", why)
		s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnFailed, helmrtype.CodeProcessExited, why+" before it was ready", failed)
	default:
		status, code, msg := helmrtype.TurnFailed, helmrtype.CodeProcessExited, why
		switch {
		case running != "" && drainKilled:
			// A cancelled Turn that did not drain in time: its process was
			// ended, and the Turn is interrupted.
			status, code = helmrtype.TurnInterrupted, helmrtype.CodeCleanupFailed
			msg = "the turn did not drain within the cleanup period; " + why
		case running != "":
			msg = why + " while the turn ran"
			// A provider's coded error (a disk limit) keeps its code.
			if he := (*helmrtype.Error)(nil); errors.As(p.process.Err(), &he) {
				code, msg = he.Code, he.Message+" (while the turn ran)"
			}
		case retired != "":
			code, msg = helmrtype.CodeCleanupFailed, retired
		}
		s.log.Warn("session process ended", "session", p.sessionID, "why", why)
		hold := failed
		if s.isClosing() {
			hold = "" // a shutdown, not a failure of the Session
		}
		s.eng.FailRunningTurn(ctx, p.sessionID, status, code, msg, hold)
	}
}

func (s *Supervisor) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

func (s *Supervisor) relaunchIfWork(sessionID string) {
	ids, err := s.eng.QueuedWork(context.Background(), sessionID)
	if err == nil && ids {
		s.SessionWork(sessionID)
	}
}

func (p *proc) stopTimers() {
	for _, t := range []**time.Timer{&p.helloTimer, &p.retireTimer} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
	if p.killTimer != nil {
		p.killTimer.Stop()
		p.killTimer = nil
	}
	if p.deadline != nil {
		p.deadline.Stop()
		p.deadline = nil
	}
	if p.idleTimer != nil {
		p.idleTimer.Stop()
		p.idleTimer = nil
	}
}

// ServeHTTP is the protocol endpoint: a session process connects here with
// its token and speaks helmr.session.v1 over a WebSocket.
func (s *Supervisor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	token := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(token) <= len(prefix) || token[:len(prefix)] != prefix {
		http.Error(w, "missing process token", http.StatusUnauthorized)
		return
	}
	s.mu.Lock()
	p := s.tokens[engine.HashSecret(token[len(prefix):])]
	closing := s.closing
	s.mu.Unlock()
	if closing {
		http.Error(w, "the control plane is shutting down", http.StatusServiceUnavailable)
		return
	}
	if p == nil {
		http.Error(w, "unknown process token", http.StatusUnauthorized)
		return
	}
	p.mu.Lock()
	proc := p.process
	p.mu.Unlock()
	if pid := pidOf(proc); pid != 0 {
		if peer := peerPID(r.Context()); peer != 0 && !descends(peer, pid) {
			s.log.Warn("a process used another process's token", "session", p.sessionID, "peer_pid", peer)
			http.Error(w, "this token belongs to another process", http.StatusForbidden)
			return
		}
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Version}})
	if err != nil {
		return
	}
	s.conns.Add(1)
	defer s.conns.Done()
	conn.SetReadLimit(32 << 20)
	p.mu.Lock()
	if p.conn != nil || (p.state != stateStarting && p.state != stateReattaching) {
		p.mu.Unlock()
		conn.Close(websocket.StatusPolicyViolation, "process already connected")
		return
	}
	p.conn = conn
	p.served = make(chan struct{})
	defer close(p.served)
	if p.helloTimer != nil {
		p.helloTimer.Stop()
		p.helloTimer = nil
	}
	p.mu.Unlock()
	s.serve(p, conn)
}

func (s *Supervisor) send(p *proc, m *protocol.Msg) error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	return s.write(p, m)
}

// write sends m; the caller holds p.writeMu (and not p.mu).
func (s *Supervisor) write(p *proc, m *protocol.Msg) error {
	p.mu.Lock()
	conn, welcomed := p.conn, p.welcomed
	if m.Type == protocol.TypeWelcome {
		p.welcomed = true
	}
	p.mu.Unlock()
	if conn == nil {
		return errors.New("process not connected")
	}
	if !welcomed && m.Type != protocol.TypeWelcome {
		// The handshake comes first. What is dropped here is sent again
		// after it (pending messages, wait outcomes on wait.resume).
		return errors.New("process not welcomed yet")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	return conn.Write(ctx, websocket.MessageText, b)
}

func (s *Supervisor) serve(p *proc, conn *websocket.Conn) {
	// Runtime MCP calls in flight end with the connection.
	ctx, endConn := context.WithCancel(s.ctx)
	defer endConn()
	defer conn.CloseNow()
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			// The connection is the process's lifeline: without it the
			// process cannot work, so it is ended and noticed as an exit.
			p.mu.Lock()
			dead := p.state == stateDead
			p.mu.Unlock()
			s.mu.Lock()
			detaching := s.detaching
			s.mu.Unlock()
			if !dead && !detaching {
				// A process that is exiting by itself (its sandbox still
				// reaping it) gets a moment, so that its own exit status
				// is what is reported.
				p.mu.Lock()
				proc := p.process
				p.mu.Unlock()
				if proc != nil {
					select {
					case <-proc.Done():
					case <-time.After(500 * time.Millisecond):
					}
				}
				p.kill()
			}
			return
		}
		var m protocol.Msg
		if err := json.Unmarshal(b, &m); err != nil {
			s.log.Warn("bad protocol message", "session", p.sessionID, "err", err)
			continue
		}
		s.handle(ctx, p, &m)
		// After the message took effect: the idle clock restarts, and an
		// Actor that just settled its Turn starts waiting in Receive.
		s.activity(p)
	}
}

func (s *Supervisor) ack(p *proc, m *protocol.Msg, seq int64, err error) {
	s.answer(p, &protocol.Msg{Type: protocol.TypeAck, Op: m.Op, TurnID: m.TurnID, Sequence: seq}, err)
}

// answer sends the acknowledgement a of an operation that ended with err
// (its error instead of its result); none when the operation was cut short
// (see unfinished).
func (s *Supervisor) answer(p *proc, a *protocol.Msg, err error) {
	if unfinished(err) {
		return
	}
	if err != nil {
		a.Error, a.TokenState = toError(err), nil
	}
	if serr := s.send(p, a); serr != nil {
		s.log.Debug("ack", "session", p.sessionID, "err", serr)
	}
}

// unfinished reports whether an operation failed only because this control
// plane is stopping or the connection ended (its context was cancelled):
// it gets no acknowledgement, so the process sends it again after it
// reconnects, and it takes effect once. An error acknowledgement would
// be final.
func unfinished(err error) bool {
	var he *helmrtype.Error
	return err != nil && !errors.As(err, &he) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func toError(err error) *helmrtype.Error {
	var he *helmrtype.Error
	if errors.As(err, &he) {
		return he
	}
	return &helmrtype.Error{Code: helmrtype.CodeInternal, Message: err.Error()}
}

func (s *Supervisor) handle(ctx context.Context, p *proc, m *protocol.Msg) {
	switch m.Type {
	case protocol.TypeHello:
		if m.Protocol != protocol.Version {
			s.log.Error("session process speaks another protocol", "session", p.sessionID, "protocol", m.Protocol)
			p.kill()
			return
		}
		p.mu.Lock()
		l := p.launch
		reattaching := p.state == stateReattaching
		p.mu.Unlock()
		if reattaching {
			s.reattach(ctx, p, m.Resume)
			return
		}
		if p.recorded != nil {
			select {
			case <-p.recorded:
			case <-ctx.Done():
				return
			}
		}
		w := &protocol.Welcome{Agent: l.Session.Agent, SessionID: l.Session.ID, SessionKey: l.Session.Key,
			ParentID: l.Session.ParentSessionID, ComputerID: l.Session.ComputerID, DeploymentID: l.Session.DeploymentID,
			Recovery: protocol.Recovery{Kind: l.Recovery, Reason: l.RecoveryReason}, ServerTime: time.Now().UTC()}
		s.send(p, &protocol.Msg{Type: protocol.TypeWelcome, Welcome: w})
	case protocol.TypeReady:
		p.mu.Lock()
		if p.state == stateStarting {
			p.state = stateReady
		}
		p.mu.Unlock()
		if s.isClosing() {
			s.send(p, &protocol.Msg{Type: protocol.TypeShutdown})
			return
		}
		s.dispatch(p)
	case protocol.TypeStopping:
		p.mu.Lock()
		p.expected = true
		if p.state == stateReady {
			p.state = stateStopping
		}
		p.mu.Unlock()
	case protocol.TypeInitFailed:
		p.mu.Lock()
		stopping := p.state == stateStopping || p.expected
		p.mu.Unlock()
		if stopping || s.isClosing() {
			return // init ended by a shutdown: the queued Turns stay queued
		}
		msg := "init failed"
		if m.Error != nil {
			msg = "init failed: " + m.Error.Message
		}
		p.mu.Lock()
		p.initError = msg
		p.mu.Unlock()
		s.failNextInit(p, msg)
	case protocol.TypeOutput:
		seq, _, err := s.eng.AppendOutput(ctx, p.sessionID, m.TurnID, m.Op, m.Content)
		s.ack(p, m, seq, err)
	case protocol.TypeMessageAccept:
		err := s.eng.MessageDelivered(ctx, p.sessionID, m.MessageID)
		s.ack(p, m, 0, err)
	case protocol.TypeMessageReject:
		msg := ""
		if m.Error != nil {
			msg = m.Error.Message
		}
		err := s.eng.MessageRejected(ctx, p.sessionID, m.MessageID, m.Reason, msg)
		s.ack(p, m, 0, err)
	case protocol.TypeSettle:
		// Settle and start the next queued Turn in one transaction when
		// this process is ready to run it. A Turn whose cleanup failed
		// retires its process: the SDK exits after settling.
		retire := m.Error != nil && m.Error.Code == helmrtype.CodeCleanupFailed
		p.mu.Lock()
		mine := p.running == m.TurnID && p.state == stateReady && !retire
		if p.running == m.TurnID {
			p.stopTimers()
			p.cancelled = false
			p.waits = nil
			p.running = ""
			if mine {
				p.running = "-"
			}
		}
		if retire && p.state == stateReady {
			p.retired = "a turn's cleanup failed; the session process was retired (" + m.Error.Message + ")"
			p.state = stateStopping
			p.retireTimer = time.AfterFunc(retireGrace, p.kill)
		}
		p.mu.Unlock()
		next, msgs, err := s.eng.SettleTurn(ctx, p.sessionID, m.TurnID, m.Op, engine.Settlement{Status: m.Status,
			Result: m.Result, Response: m.Response, Error: turnError(m.Error)}, mine)
		s.ack(p, m, 0, err)
		if err != nil {
			if mine {
				p.mu.Lock()
				p.running = ""
				p.mu.Unlock()
			}
			// The Turn is still running in the store while the process
			// believes it settled: end the process, whose exit settles it.
			s.log.Error("settle turn", "session", p.sessionID, "turn", m.TurnID, "err", err)
			p.kill()
			return
		}
		if mine {
			s.started(p, next, msgs, nil)
		} else if !retire {
			s.dispatch(p)
		}
	case protocol.TypeMCPScope, protocol.TypeMCPCall:
		s.startMCP(ctx, p, m)
	case protocol.TypeAsk, protocol.TypeTokenCreate, protocol.TypeWaitStart, protocol.TypeWaitResume, protocol.TypeWaitCancel:
		s.handleWait(ctx, p, m)
	default:
		s.log.Warn("unknown protocol message", "session", p.sessionID, "type", m.Type)
	}
}

func turnError(e *helmrtype.Error) *helmrtype.TurnError {
	if e == nil {
		return nil
	}
	return &helmrtype.TurnError{Code: e.Code, Message: e.Message}
}

// failNextInit fails the Turn that would have run when init failed; the
// process then exits and the next Turn starts a new one.
func (s *Supervisor) failNextInit(p *proc, msg string) {
	ctx := context.Background()
	t, _, err := s.eng.StartNextTurn(ctx, p.sessionID)
	if err != nil || t == nil {
		return
	}
	s.eng.SettleTurn(ctx, p.sessionID, t.ID, 0, engine.Settlement{Status: helmrtype.TurnFailed,
		Error: &helmrtype.TurnError{Code: helmrtype.CodeHandlerFailed, Message: msg}}, false)
}

// dispatch starts the next queued Turn when the process is ready and idle.
// A dispatch that finds another one in flight marks a recheck, so work
// admitted meanwhile is never missed.
func (s *Supervisor) dispatch(p *proc) {
	p.mu.Lock()
	if p.state != stateReady {
		p.mu.Unlock()
		return
	}
	if p.running != "" {
		p.recheck = true
		p.mu.Unlock()
		return
	}
	// Reserve the slot so concurrent dispatches do not both start a Turn.
	p.running = "-"
	p.recheck = false
	p.mu.Unlock()
	t, msgs, err := s.eng.StartNextTurn(s.ctx, p.sessionID)
	s.started(p, t, msgs, err)
}

// started sends a Turn that the engine marked running to the process, whose
// slot the caller reserved ("-"). With no Turn it frees the slot, and
// dispatches again when work arrived meanwhile.
func (s *Supervisor) started(p *proc, t *store.Turn, msgs []store.Message, err error) {
	if t != nil {
		s.activity(p) // a suspended Actor is thawed before its Turn arrives
	}
	// Lock order everywhere: writeMu before mu. The write lock is held from
	// before the slot is published, so anything sent for this Turn goes out
	// after turn.start.
	p.writeMu.Lock()
	p.mu.Lock()
	if err != nil || t == nil {
		p.writeMu.Unlock()
		p.running = ""
		again := p.recheck && err == nil
		p.recheck = false
		closed := p.sessionClosed
		p.mu.Unlock()
		if closed {
			s.stopIdle(p)
			return
		}
		if err != nil && s.ctx.Err() == nil {
			s.log.Error("start turn", "session", p.sessionID, "err", err)
		}
		if again {
			s.dispatch(p)
		}
		return
	}
	if p.state == stateDead {
		// The process ended while the Turn was being started: its exit
		// could not see the Turn, so it settles here.
		p.writeMu.Unlock()
		p.running = ""
		p.mu.Unlock()
		ctx := context.Background()
		// The hold comes from the exit's own handling.
		s.eng.FailRunningTurn(ctx, p.sessionID, helmrtype.TurnFailed, helmrtype.CodeProcessExited,
			"the session process exited as the turn started", "")
		return
	}
	p.running = t.ID
	start := &protocol.TurnStart{ID: t.ID, Sequence: t.Sequence, CreatedAt: t.CreatedAt, Input: t.Input}
	json.Unmarshal(t.Source, &start.Source)
	start.Deadline = s.armDeadline(p, t)
	cancelReason, cancelPending := p.pendingCancel[t.ID]
	msgPending := p.pendingMsgs
	p.pendingCancel, p.pendingMsgs = nil, false
	p.sentMsgs = map[string]bool{}
	for i := range msgs {
		p.sentMsgs[msgs[i].ID] = true
	}
	p.mu.Unlock()
	err = s.write(p, &protocol.Msg{Type: protocol.TypeTurnStart, TurnID: t.ID, Turn: start})
	for i := range msgs {
		if err == nil {
			err = s.write(p, messageMsg(&msgs[i]))
		}
	}
	p.writeMu.Unlock()
	if err != nil {
		// The process cannot take the Turn: end it; its exit settles the Turn.
		s.log.Warn("send turn", "session", p.sessionID, "err", err)
		p.kill()
		return
	}
	if msgPending {
		s.sendPending(p, t.ID)
	}
	if cancelPending {
		s.cancelTurn(p, t.ID, cancelReason)
	}
}

func messageMsg(m *store.Message) *protocol.Msg {
	im := &protocol.InboundMessage{ID: m.ID}
	json.Unmarshal(m.Content, &im.Content)
	json.Unmarshal(m.Source, &im.Source)
	return &protocol.Msg{Type: protocol.TypeMessage, TurnID: m.TurnID, Message: im}
}

// sendPending sends the Turn's admitted messages not yet sent to this process.
func (s *Supervisor) sendPending(p *proc, turnID string) {
	msgs, err := s.eng.PendingMessages(s.ctx, turnID)
	if err != nil {
		return
	}
	p.mu.Lock()
	var fresh []store.Message
	for _, m := range msgs {
		if p.running == turnID && !p.sentMsgs[m.ID] {
			p.sentMsgs[m.ID] = true
			fresh = append(fresh, m)
		}
	}
	p.mu.Unlock()
	for i := range fresh {
		s.send(p, messageMsg(&fresh[i]))
	}
}

// armDeadline starts the timer of the Turn's max_turn_duration, if the
// Agent has one, and returns the deadline; p.mu is held.
func (s *Supervisor) armDeadline(p *proc, t *store.Turn) *time.Time {
	d := p.launch.Agent.MaxTurnDuration
	if d == "" || t.StartedAt == nil {
		return nil
	}
	dur, err := helmrtype.ParseDuration(d)
	if err != nil {
		return nil
	}
	at := t.StartedAt.Add(dur)
	turnID := t.ID
	p.deadline = time.AfterFunc(time.Until(at), func() { s.deadlineReached(p, turnID) })
	return &at
}

func (s *Supervisor) deadlineReached(p *proc, turnID string) {
	s.eng.RecordDeadline(context.Background(), p.sessionID, turnID)
	s.cancelTurn(p, turnID, protocol.ReasonDeadline)
}

// cancelTurn asks the process to cancel a running Turn and ends the process
// if the Turn has not settled within the cleanup period.
func (s *Supervisor) cancelTurn(p *proc, turnID, reason string) {
	p.mu.Lock()
	if p.running == "-" || p.state == stateReattaching {
		// A start (or a reattach) is in flight: it applies the cancel if it
		// is this Turn.
		if p.pendingCancel == nil {
			p.pendingCancel = map[string]string{}
		}
		p.pendingCancel[turnID] = reason
		p.mu.Unlock()
		return
	}
	if p.running != turnID || p.cancelled {
		p.mu.Unlock()
		return
	}
	p.cancelled = true
	p.killTimer = time.AfterFunc(CleanupPeriod+killGrace, func() {
		p.mu.Lock()
		still := p.running == turnID
		if still {
			p.drainKilled = true
		}
		p.mu.Unlock()
		if still {
			s.log.Warn("turn did not drain within the cleanup period; ending its process", "session", p.sessionID, "turn", turnID)
			p.kill()
		}
	})
	p.mu.Unlock()
	s.activity(p)
	s.send(p, &protocol.Msg{Type: protocol.TypeCancel, TurnID: turnID, Reason: reason})
}

// Recover takes charge after a restart: processes of the previous control
// plane that are still alive get ReattachWindow to reconnect and keep their
// running Turns; other running Turns settle interrupted (execution_lost).
// Sessions with queued Turns get processes.
func (s *Supervisor) Recover(ctx context.Context) error {
	if s.clustered() {
		// Alive before anything: the other nodes fail the Commands of a
		// node without a heartbeat.
		if _, err := s.eng.RenewLeases(ctx, s.opts.LeaseTTL); err != nil {
			return err
		}
	}
	// Commands are not adopted across a restart: their outcome is lost.
	// (With several nodes, only this node's.)
	if n, err := s.eng.FailUnfinishedCommands(ctx); err != nil {
		return err
	} else if n > 0 {
		s.log.Warn("commands that ran when the control plane stopped are marked failed", "count", n)
	}
	recs, err := s.eng.Processes(ctx)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	var adopted []*proc
	for _, r := range recs {
		if s.clustered() && r.NodeID != "" && r.NodeID != s.eng.Node() {
			continue // another node's
		}
		ap, err := adopt(r.PID, r.StartID)
		if err != nil {
			s.eng.ForgetProcess(ctx, r.SessionID, r.LaunchID)
			continue
		}
		if s.clustered() {
			// Still this node's only if no other node took it over meanwhile.
			ok, err := s.eng.Reclaim(ctx, r.SessionID, r.LaunchID, s.opts.LeaseTTL)
			if err != nil {
				return err
			}
			if !ok {
				s.log.Warn("another node took the session over; ending its process here", "session", r.SessionID)
				ap.Kill()
				continue
			}
		}
		p := &proc{sessionID: r.SessionID, tokenHash: r.TokenHash, launchID: r.LaunchID, process: ap, state: stateReattaching, leasedAt: time.Now()}
		live[r.SessionID] = true
		adopted = append(adopted, p)
	}
	s.mu.Lock()
	for _, p := range adopted {
		s.procs[p.sessionID] = p
		s.tokens[p.tokenHash] = p
	}
	s.mu.Unlock()
	for _, p := range adopted {
		s.attachFreezer(p, p.process.(*adoptedProcess).PID())
		p.mu.Lock()
		p.helloTimer = time.AfterFunc(s.opts.ReattachWindow, func() {
			p.mu.Lock()
			silent := p.state == stateReattaching
			p.mu.Unlock()
			if silent {
				s.log.Warn("session process did not reattach in time; ending it", "session", p.sessionID)
				p.kill()
			}
		})
		p.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.watch(p)
		}()
	}
	ids, err := s.eng.Recover(ctx, live)
	if err != nil {
		return err
	}
	if s.clustered() {
		lctx, stop := context.WithCancel(context.Background())
		s.stopLeases, s.leasesDone = stop, make(chan struct{})
		go s.keepLeases(lctx)
	}
	for _, id := range ids {
		s.SessionWork(id)
	}
	return nil
}

// reattach takes back a process that survived a restart and reconnected.
// It keeps its state: init does not run again, its running Turn goes on and
// its unacknowledged operations arrive again (applied once, by op). A Turn
// the store started but the process never saw is sent to it now.
func (s *Supervisor) reattach(ctx context.Context, p *proc, r *protocol.Resume) {
	if r == nil {
		r = &protocol.Resume{}
	}
	l, err := s.eng.PrepareLaunch(ctx, p.sessionID, true)
	var t *store.Turn
	if err == nil {
		t, err = s.eng.RunningTurn(ctx, p.sessionID)
	}
	if err != nil {
		s.log.Error("reattach session process", "session", p.sessionID, "err", err)
		p.kill()
		return
	}
	if r.TurnID != "" && (t == nil || t.ID != r.TurnID) {
		// The process still settles a Turn the store settled (its ack was
		// lost in the restart): the repeated settle is acknowledged.
		if _, err := s.eng.GetTurn(ctx, p.sessionID, r.TurnID); err != nil {
			s.log.Warn("reattached process runs an unknown turn; ending it", "session", p.sessionID, "turn", r.TurnID)
			p.kill()
			return
		}
	}
	unseen := t != nil && t.ID != r.TurnID
	p.mu.Lock()
	l.Recovery = protocol.RecoveryReattached
	p.launch = l
	if p.helloTimer != nil {
		p.helloTimer.Stop()
		p.helloTimer = nil
	}
	p.state = stateStarting
	if r.Ready {
		p.state = stateReady
	}
	p.sentMsgs = map[string]bool{}
	switch {
	case unseen:
		p.running = "-" // started below
	case t != nil:
		p.running = t.ID
		s.armDeadline(p, t)
	}
	p.mu.Unlock()
	if t != nil && !unseen {
		// Its open waits count for suspension again.
		if ws, err := s.eng.OpenWaitsOf(ctx, p.sessionID); err == nil {
			p.mu.Lock()
			p.waits = map[string]time.Duration{}
			for _, w := range ws {
				if w.TurnID == t.ID {
					p.waits[w.ID] = w.IdleTimeout
				}
			}
			p.mu.Unlock()
		}
	}
	s.log.Info("session process reattached", "session", p.sessionID, "turn", r.TurnID)
	w := &protocol.Welcome{Agent: l.Session.Agent, SessionID: l.Session.ID, SessionKey: l.Session.Key,
		ParentID: l.Session.ParentSessionID, ComputerID: l.Session.ComputerID, DeploymentID: l.Session.DeploymentID,
		Recovery: protocol.Recovery{Kind: l.Recovery, Reason: l.RecoveryReason}, ServerTime: time.Now().UTC()}
	s.send(p, &protocol.Msg{Type: protocol.TypeWelcome, Welcome: w})
	s.activity(p)
	switch {
	case unseen:
		msgs, err := s.eng.PendingMessages(ctx, t.ID)
		if due, derr := s.eng.InterruptDue(ctx, p.sessionID, t.ID); derr == nil && due {
			// Accepted before the restart: it follows turn.start.
			p.mu.Lock()
			if p.pendingCancel == nil {
				p.pendingCancel = map[string]string{}
			}
			p.pendingCancel[t.ID] = protocol.ReasonInterrupted
			p.mu.Unlock()
		}
		s.started(p, t, msgs, err)
	case t != nil:
		s.sendPending(p, t.ID)
		p.mu.Lock()
		reason, cancelled := p.pendingCancel[t.ID]
		p.pendingCancel = nil
		p.mu.Unlock()
		if !cancelled {
			// An interrupt or cancel accepted before the restart may not
			// have reached the process.
			if due, err := s.eng.InterruptDue(ctx, p.sessionID, t.ID); err == nil && due {
				reason, cancelled = protocol.ReasonInterrupted, true
			}
		}
		if cancelled {
			s.cancelTurn(p, t.ID, reason)
		}
	case r.Ready:
		s.dispatch(p)
	}
}

// Detach closes every protocol connection without stopping the processes:
// they keep running and reconnect to the next control plane on the same
// data directory (helmr server's stop, for restarts and upgrades).
func (s *Supervisor) Detach() {
	s.mu.Lock()
	s.closing, s.detaching = true, true
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	s.cancel()
	for _, p := range procs {
		p.mu.Lock()
		p.stopTimers()
		conn := p.conn
		p.mu.Unlock()
		if conn != nil {
			conn.Close(websocket.StatusGoingAway, "the control plane is restarting")
		}
	}
	s.wg.Wait()
	s.conns.Wait()
	s.endLeases()
}

// Close asks every process to shut down, waits for them until ctx ends,
// then kills what is left.
func (s *Supervisor) Close(ctx context.Context) {
	s.mu.Lock()
	s.closing = true
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.mu.Lock()
		p.expected = true
		p.state = stateStopping
		p.mu.Unlock()
		s.activity(p)
		s.send(p, &protocol.Msg{Type: protocol.TypeShutdown})
	}
	done := make(chan struct{})
	go func() { s.wg.Wait(); s.conns.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		for _, p := range procs {
			p.kill()
		}
		<-done
	}
	s.cancel()
	s.endLeases()
}

// handleWait serves the wait operations of a process: questions, Tokens,
// and the start and resumption of waits.
func (s *Supervisor) handleWait(ctx context.Context, p *proc, m *protocol.Msg) {
	switch m.Type {
	case protocol.TypeAsk:
		if m.Ask == nil {
			s.ack(p, m, 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "ask needs a question"))
			return
		}
		s.ack(p, m, 0, s.eng.Ask(ctx, p.sessionID, m.TurnID, m.Op, m.Ask.ID, &m.Ask.Question))
	case protocol.TypeTokenCreate:
		if m.Token == nil {
			s.ack(p, m, 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "token.create needs a token"))
			return
		}
		st, err := s.eng.CreateToken(ctx, p.sessionID, m.TurnID, m.Op, m.Token.ID, m.Token.Secret, m.Token.Create)
		s.answer(p, &protocol.Msg{Type: protocol.TypeAck, Op: m.Op, TurnID: m.TurnID, TokenState: st}, err)
	case protocol.TypeWaitStart:
		if m.Wait == nil {
			s.ack(p, m, 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "wait.start needs a wait"))
			return
		}
		w := m.Wait
		o, err := s.eng.StartWait(ctx, p.sessionID, m.TurnID, m.Op, *w)
		s.ack(p, m, 0, err)
		if err == nil && o != nil {
			s.sendResolved(p, m.TurnID, w.ID, o)
		}
	case protocol.TypeWaitCancel:
		s.ack(p, m, 0, s.eng.CancelWait(ctx, p.sessionID, m.TurnID, m.Op, m.WaitID))
	case protocol.TypeWaitResume:
		o, err := s.eng.ResumeWait(ctx, p.sessionID, m.WaitID)
		if err == nil && o != nil {
			s.sendResolved(p, m.TurnID, m.WaitID, o)
		}
	}
}

func (s *Supervisor) sendResolved(p *proc, turnID, waitID string, o *helmrtype.WaitOutcome) {
	s.send(p, &protocol.Msg{Type: protocol.TypeWaitResolved, TurnID: turnID, WaitID: waitID,
		Outcome: o})
}

// WaitStarted notes a wait of the process's running Turn, for suspension.
func (s *Supervisor) WaitStarted(sessionID, turnID, waitID string, idle time.Duration) {
	p := s.get(sessionID)
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.waits == nil {
		p.waits = map[string]time.Duration{}
	}
	p.waits[waitID] = idle
	p.mu.Unlock()
	s.activity(p)
}

// WaitResolved wakes the process if it is suspended and hands it the
// outcome.
func (s *Supervisor) WaitResolved(sessionID, turnID, waitID string, o *helmrtype.WaitOutcome) {
	p := s.get(sessionID)
	if p == nil {
		return
	}
	p.mu.Lock()
	delete(p.waits, waitID)
	p.mu.Unlock()
	s.activity(p)
	s.sendResolved(p, turnID, waitID, o)
}

// SessionClosed stops the closed Session's process once it is idle.
func (s *Supervisor) SessionClosed(sessionID string) {
	p := s.get(sessionID)
	if p == nil {
		return
	}
	p.mu.Lock()
	p.sessionClosed = true
	p.mu.Unlock()
	s.stopIdle(p)
}

// stopIdle asks an idle, ready process to shut down.
func (s *Supervisor) stopIdle(p *proc) {
	p.mu.Lock()
	if p.state != stateReady || p.running != "" {
		p.mu.Unlock()
		return
	}
	p.state, p.expected = stateStopping, true
	p.mu.Unlock()
	s.activity(p)
	s.send(p, &protocol.Msg{Type: protocol.TypeShutdown})
}
