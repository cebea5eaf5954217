// Package sessionproc is the session process's end of the session protocol:
// it connects to the control plane, runs an Agent's init once and then one
// Turn at a time, and carries output, responses, messages and cancellation.
// The public SDK (package helmr) adapts typed Agents to it.
package sessionproc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/mcp"
	"github.com/helmr-go/helmr/internal/protocol"
)

// CleanupPeriod is how long a cancelled Turn's handler and callbacks have to
// drain together.
const CleanupPeriod = 10 * time.Second

// Agent is an Agent as the runtime sees it: untyped JSON in and out.
type Agent interface {
	// AgentID is the Agent's ID.
	AgentID() string
	// RunInit runs the Agent's init, returning its result (nil without init).
	RunInit(ctx context.Context, info *Info) (any, error)
	// RunTurn runs one Turn and returns its JSON result.
	RunTurn(ctx context.Context, t *Turn, initResult any) (json.RawMessage, error)
}

// Info describes the Session a process serves.
type Info struct {
	SessionID      string
	SessionKey     string
	ParentID       string
	ComputerID     string
	DeploymentID   string
	RecoveryKind   string
	RecoveryReason string
	// IdleTimeout is the Agent's default hot-wait for its waits ("" for the
	// server's default of 30s).
	IdleTimeout string
	// MCP is the process's runtime MCP server.
	MCP *mcp.Runtime
	// Ctx ends when the process shuts down.
	Ctx context.Context
}

// Cancellation causes, seen through context.Cause on a Turn's ctx.
var (
	ErrInterrupted = helmrtype.Errorf(helmrtype.CodeInterrupted, "the turn was interrupted")
	ErrDeadline    = helmrtype.Errorf(helmrtype.CodeDeadlineExceeded, "the turn reached its max turn duration")
	ErrShutdown    = helmrtype.Errorf(helmrtype.CodeInterrupted, "the session process is shutting down")
)

// ErrUnusable is returned by Serve when a Turn's cleanup failed or overran:
// the process must end and not be reused.
var ErrUnusable = errors.New("a turn's cancellation cleanup failed; the session process is unusable")

// Rejecter is implemented by errors that reject a message without failing
// the Turn (helmr.MessageRejected).
type Rejecter interface{ RejectsMessage() bool }

// Conn is a connected session process.
type Conn struct {
	agents map[string]Agent
	// redial reconnects after the control plane went away; nil means a
	// lost connection is final.
	redial func(context.Context) (*websocket.Conn, error)
	window time.Duration

	// wmu orders writes and guards ws and parked: an operation is
	// registered and written under it, and a reconnect replays the
	// unacknowledged ones under it, so every op reaches the server once
	// per connection, in order.
	wmu sync.Mutex
	ws  *websocket.Conn
	// parked is set from a park until the next welcome: nothing is
	// written on ws (operations stay pending and go after the rejoin).
	parked bool

	mu      sync.Mutex
	pending map[string]*pendingOp         // by turn ID + op
	closed  chan struct{}                 // closed when the connection is lost for good
	turn    *Turn                         // the running Turn
	ready   bool                          // init succeeded
	waiters map[string]waiter             // blocked durable waits, by wait ID
	calls   map[string]chan *protocol.Msg // runtime MCP calls in flight, by call ID

	// workers run each Turn's settlement and handler.
	workers *workers
}

// pendingOp is an operation waiting for its ack.
type pendingOp struct {
	msg *protocol.Msg
	ch  chan *protocol.Msg
}

// Dial connects to the protocol endpoint on a Unix socket.
func Dial(ctx context.Context, socket, token string) (*websocket.Conn, error) {
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	ws, _, err := websocket.Dial(ctx, "ws://helmr"+protocol.Path, &websocket.DialOptions{
		HTTPClient: client, Subprotocols: []string{protocol.Version},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		return nil, fmt.Errorf("connect to the control plane: %w", err)
	}
	ws.SetReadLimit(32 << 20)
	return ws, nil
}

// RunFromEnv connects with the variables the supervisor sets and serves
// until shutdown. It is what helmr.Main runs inside a session process.
func RunFromEnv(ctx context.Context, agents []Agent) error {
	socket, agent := os.Getenv(protocol.EnvSocket), os.Getenv(protocol.EnvAgent)
	token, err := readToken()
	if err != nil {
		return err
	}
	if socket == "" || token == "" {
		return errors.New("not started by helmr: " + protocol.EnvSocket + " and " + protocol.EnvTokenFD + " are unset")
	}
	ws, err := Dial(ctx, socket, token)
	if err != nil {
		return err
	}
	window := 10 * time.Minute
	if v := os.Getenv(protocol.EnvReconnectWindow); v != "" {
		if d, err := helmrtype.ParseDuration(v); err == nil {
			window = d
		}
	}
	return serve(ctx, ws, agent, agents, func(ctx context.Context) (*websocket.Conn, error) { return Dial(ctx, socket, token) }, window)
}

// readToken reads the process's credential from the descriptor named by
// HELMR_SESSION_TOKEN_FD (and closes it), or else from
// HELMR_SESSION_TOKEN; it removes both from the environment, so that
// child processes of agent code inherit neither, and makes the process
// non-dumpable (hideMemory), so that they cannot read it from its memory.
func readToken() (string, error) {
	if err := hideMemory(); err != nil {
		return "", fmt.Errorf("hide the session credential: %w", err)
	}
	fdText, token := os.Getenv(protocol.EnvTokenFD), os.Getenv(protocol.EnvToken)
	os.Unsetenv(protocol.EnvTokenFD)
	os.Unsetenv(protocol.EnvToken)
	if fdText == "" {
		return token, nil
	}
	fd, err := strconv.Atoi(fdText)
	if err != nil || fd < 3 {
		return "", fmt.Errorf("%s=%q: want a descriptor number above 2", protocol.EnvTokenFD, fdText)
	}
	f := os.NewFile(uintptr(fd), "session-token")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("read the session credential from descriptor %d: %w", fd, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Serve runs the protocol on an open connection for the named Agent. A lost
// connection is final.
func Serve(ctx context.Context, ws *websocket.Conn, agentID string, agents []Agent) error {
	return serve(ctx, ws, agentID, agents, nil, 0)
}

func serve(ctx context.Context, ws *websocket.Conn, agentID string, agents []Agent, redial func(context.Context) (*websocket.Conn, error), window time.Duration) error {
	c := &Conn{ws: ws, agents: map[string]Agent{}, pending: map[string]*pendingOp{}, closed: make(chan struct{}),
		redial: redial, window: window, workers: newWorkers()}
	defer c.workers.close()
	for _, a := range agents {
		c.agents[a.AgentID()] = a
	}
	defer func() { c.conn().CloseNow() }()
	// The connection outlives ctx: when ctx ends (SIGTERM), the process
	// drains like a shutdown from the server, settling its running Turn
	// before it closes the connection.
	conn := context.WithoutCancel(ctx)
	procCtx, shutdown := context.WithCancelCause(conn)
	defer shutdown(nil)
	stop := context.AfterFunc(ctx, func() { shutdown(ErrShutdown) })
	defer stop()

	if err := c.write(conn, c.hello(nil)); err != nil {
		return err
	}
	// A park before the welcome is ignored (docs/protocol.md, "Parking").
	m, err := c.read(conn)
	for err == nil && m.Type == protocol.TypePark {
		m, err = c.read(conn)
	}
	if err != nil {
		return err
	}
	if m.Type != protocol.TypeWelcome || m.Welcome == nil {
		return fmt.Errorf("protocol: want welcome, got %q", m.Type)
	}
	w := m.Welcome
	if agentID == "" {
		agentID = w.Agent
	}
	agent, ok := c.agents[agentID]
	if !ok {
		c.write(conn, &protocol.Msg{Type: protocol.TypeInitFailed, Error: helmrtype.Errorf(helmrtype.CodeNotFound, "this binary has no agent %q", agentID)})
		return fmt.Errorf("no agent %q", agentID)
	}
	info := &Info{SessionID: w.SessionID, SessionKey: w.SessionKey, ParentID: w.ParentID, ComputerID: w.ComputerID,
		DeploymentID: w.DeploymentID, RecoveryKind: w.Recovery.Kind, RecoveryReason: w.Recovery.Reason, Ctx: procCtx,
		MCP: mcp.NewRuntime(mcpBackend{c}, nil)}
	defer info.MCP.Close()
	if it, ok := agent.(interface{ IdleTimeout() string }); ok {
		info.IdleTimeout = it.IdleTimeout()
	}

	// Read in the background: init may take long and a shutdown may come.
	starts := make(chan *Turn, 64)
	readErr := make(chan error, 1)
	go func() {
		for {
			m, err := c.read(conn)
			if err == nil && m.Type == protocol.TypePark {
				// A park is obeyed only by a process that can dial again
				// and is not stopping; otherwise it is ignored.
				pause, ok := parkPause(m.Pause)
				if !ok || c.redial == nil || procCtx.Err() != nil {
					continue
				}
				c.park()
				if c.reconnectAfter(conn, pause) {
					continue
				}
				err = helmrtype.Errorf(helmrtype.CodeUnavailable, "parked, then no control plane took the process back within the reconnect window")
			} else if err != nil && procCtx.Err() == nil && c.reconnect(conn, err) {
				continue
			}
			if err != nil {
				readErr <- err
				close(c.closed)
				close(starts)
				return
			}
			// Everything but turn.start is handled here, so acks are never
			// stuck behind a busy main loop.
			switch m.Type {
			case protocol.TypeAck:
				c.deliverAck(m)
			case protocol.TypeMessage:
				if t := c.current(m.TurnID); t != nil && m.Message != nil {
					t.enqueueMessage(*m.Message)
				}
			case protocol.TypeCancel:
				if t := c.current(m.TurnID); t != nil {
					cause := ErrInterrupted
					if m.Reason == protocol.ReasonDeadline {
						cause = ErrDeadline
					}
					t.cancel(cause)
				}
			case protocol.TypeShutdown:
				shutdown(ErrShutdown)
			case protocol.TypeWaitResolved:
				c.resolveWait(m.WaitID, m.Outcome)
			case protocol.TypeMCPResult:
				c.deliverCall(m)
			case protocol.TypeTurnStart:
				if m.Turn == nil {
					continue
				}
				// The Turn is current from now, so a cancel or message
				// right behind turn.start finds it.
				t := newTurn(c, m.Turn, info)
				c.mu.Lock()
				c.turn = t
				c.mu.Unlock()
				select {
				case starts <- t:
				default: // the server sends one turn.start at a time; never full
				}
			}
		}
	}()

	initResult, err := safeInit(procCtx, agent, info)
	if err != nil && procCtx.Err() != nil {
		// init was ended by a shutdown: that is a stop, not a failure, and
		// the queued Turns stay queued.
		c.write(conn, &protocol.Msg{Type: protocol.TypeStopping})
		c.conn().Close(websocket.StatusNormalClosure, "shutdown")
		return nil
	}
	if err != nil {
		c.write(conn, &protocol.Msg{Type: protocol.TypeInitFailed, Error: asError(err, helmrtype.CodeHandlerFailed)})
		return fmt.Errorf("init: %w", err)
	}
	c.mu.Lock()
	c.ready = true
	c.mu.Unlock()
	if err := c.write(conn, &protocol.Msg{Type: protocol.TypeReady}); err != nil && c.redial == nil {
		return err
	}
	var running sync.WaitGroup
	defer running.Wait()
	unusable := make(chan struct{}, 1)
	for {
		var t *Turn
		var ok bool
		select {
		case <-unusable:
			return ErrUnusable
		case <-procCtx.Done():
			// Shutdown (from the server or a signal): tell the server to
			// start nothing more here, cancel the running Turn, let it
			// settle, then close.
			c.write(conn, &protocol.Msg{Type: protocol.TypeStopping})
			c.cancelTurn(ErrShutdown)
			running.Wait()
			c.conn().Close(websocket.StatusNormalClosure, "shutdown")
			return nil
		case t, ok = <-starts:
			if !ok {
				c.cancelTurn(ErrShutdown)
				running.Wait()
				err := <-readErr
				if procCtx.Err() != nil {
					return nil
				}
				return fmt.Errorf("connection to the control plane lost: %w", err)
			}
		}
		running.Add(1)
		c.workers.run(func() {
			defer running.Done()
			exit := c.runTurn(t, agent, initResult)
			c.mu.Lock()
			if c.turn == t {
				c.turn = nil
			}
			c.mu.Unlock()
			if exit {
				// A callback failed or overran the cleanup period: the
				// Session's process must not be reused.
				select {
				case unusable <- struct{}{}:
				default:
				}
			}
		})
	}
}

func safeInit(ctx context.Context, a Agent, info *Info) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("init panicked: %v", r)
		}
	}()
	return a.RunInit(ctx, info)
}

func (c *Conn) current(turnID string) *Turn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turn != nil && c.turn.ID == turnID {
		return c.turn
	}
	return nil
}

func (c *Conn) cancelTurn(cause error) {
	c.mu.Lock()
	t := c.turn
	c.mu.Unlock()
	if t != nil {
		t.cancel(cause)
	}
}

func (c *Conn) conn() *websocket.Conn {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws
}

func (c *Conn) read(ctx context.Context) (*protocol.Msg, error) {
	_, b, err := c.conn().Read(ctx)
	if err != nil {
		return nil, err
	}
	var m protocol.Msg
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("protocol: %w", err)
	}
	return &m, nil
}

func (c *Conn) write(ctx context.Context, m *protocol.Msg) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(ctx, m)
}

// errParked is what a write returns between a park and the next welcome.
var errParked = helmrtype.Errorf(helmrtype.CodeUnavailable, "the session process is parked: it writes nothing until it has reconnected")

// writeLocked writes m on the current connection; c.wmu is held.
func (c *Conn) writeLocked(ctx context.Context, m *protocol.Msg) error {
	if c.parked {
		return errParked
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// hello is the process's hello: with resume when it reconnects, and the
// features it understands when it can dial again (park needs that).
func (c *Conn) hello(resume *protocol.Resume) *protocol.Msg {
	m := &protocol.Msg{Type: protocol.TypeHello, Protocol: protocol.Version, PID: os.Getpid(), Resume: resume}
	if c.redial != nil {
		m.Features = []string{protocol.FeaturePark}
	}
	return m
}

// parkPause reads a park's pause: absent is none; anything but a
// Duration makes the park invalid (ok false), and it is ignored.
func parkPause(s string) (d time.Duration, ok bool) {
	if s == "" {
		return 0, true
	}
	d, err := helmrtype.ParseDuration(s)
	return d, err == nil
}

// park obeys a park: from now nothing is written (operations stay pending
// for the rejoin), and the connection is closed with 1000 "parked", so
// that the process holds no connection to the control plane when it is
// checkpointed.
func (c *Conn) park() {
	c.wmu.Lock()
	c.parked = true
	ws := c.ws
	c.wmu.Unlock()
	// A process restored from a checkpoint can be checkpointed again
	// only while it is dumpable: it shows its memory from here until it
	// has reconnected (rejoin hides it again).
	showMemory()
	ws.Close(websocket.StatusNormalClosure, "parked")
}

// Reconnect timing. Each attempt waits its pause, dials within
// dialTimeout and has helloTimeout for hello and welcome; what it counts
// against the reconnect window is the time it took, but never more than
// its pause + dialTimeout + helloTimeout + attemptMargin. So the window
// counts the time the process ran while it tried: a jump of the clock
// while it was frozen or checkpointed (and restored later) counts for at
// most one attempt's share.
const (
	dialTimeout   = 5 * time.Second
	helloTimeout  = 10 * time.Second
	attemptMargin = time.Second
	firstBackoff  = 50 * time.Millisecond
	maxBackoff    = time.Second
)

// reconnect tries, for the reconnect window, to reach a control plane again
// after the connection was lost (a control-plane restart): it says what it
// runs in hello, takes the welcome, and replays every operation not yet
// acknowledged. It reports false when the loss is final.
func (c *Conn) reconnect(ctx context.Context, cause error) bool {
	if c.redial == nil || websocket.CloseStatus(cause) == websocket.StatusPolicyViolation {
		return false
	}
	return c.reconnectAfter(ctx, firstBackoff)
}

// reconnectAfter is reconnect with the first attempt's pause given (a
// park's pause; later attempts back off from 50 ms to 1 s).
func (c *Conn) reconnectAfter(ctx context.Context, pause time.Duration) bool {
	var spent time.Duration
	backoff := firstBackoff
	for spent < c.window {
		start := time.Now()
		if c.attempt(ctx, pause) {
			return true
		}
		spent += attemptShare(time.Since(start), pause)
		pause, backoff = backoff, min(backoff*2, maxBackoff)
	}
	return false
}

// attemptShare is what an attempt that took took, with pause pause,
// counts against the reconnect window.
func attemptShare(took, pause time.Duration) time.Duration {
	return max(0, min(took, pause+dialTimeout+helloTimeout+attemptMargin))
}

// attempt waits pause, dials and rejoins once, and reports whether it
// rejoined.
func (c *Conn) attempt(ctx context.Context, pause time.Duration) bool {
	pauseFor(pause)
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	ws, err := c.redial(dctx)
	cancel()
	if err != nil {
		return false
	}
	c.mu.Lock()
	resume := &protocol.Resume{Ready: c.ready}
	if c.turn != nil {
		resume.TurnID = c.turn.ID
	}
	c.mu.Unlock()
	if c.rejoin(ctx, ws, resume) {
		return true
	}
	ws.CloseNow()
	return false
}

// pauseStep is how often pauseFor looks at the wall clock.
const pauseStep = 20 * time.Millisecond

// pauseFor waits d by the wall clock, in short steps: a process
// checkpointed during the pause and restored later (CRIU restores its
// monotonic clock as it was) sees the pause over at once.
func pauseFor(d time.Duration) {
	end := time.Now().Round(0).Add(d)
	for {
		left := end.Sub(time.Now().Round(0))
		if left <= 0 {
			return
		}
		time.Sleep(min(left, pauseStep))
	}
}

// rejoin does the handshake on a new connection and replays pending ops.
func (c *Conn) rejoin(ctx context.Context, ws *websocket.Conn, resume *protocol.Resume) bool {
	b, _ := json.Marshal(c.hello(resume))
	wctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	if ws.Write(wctx, websocket.MessageText, b) != nil {
		return false
	}
	// A park before the welcome is ignored.
	for {
		_, b, err := ws.Read(wctx)
		var m protocol.Msg
		if err != nil || json.Unmarshal(b, &m) != nil {
			return false
		}
		if m.Type == protocol.TypeWelcome {
			break
		}
		if m.Type != protocol.TypePark {
			return false
		}
	}
	c.failCalls()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.CloseNow()
	c.ws = ws
	if c.parked {
		hideMemory() // shown while it was parked (park)
	}
	c.parked = false
	c.mu.Lock()
	ops := make([]*protocol.Msg, 0, len(c.pending))
	for _, p := range c.pending {
		ops = append(ops, p.msg)
	}
	c.mu.Unlock()
	slices.SortFunc(ops, func(a, b *protocol.Msg) int {
		return cmp.Or(cmp.Compare(a.TurnID, b.TurnID), cmp.Compare(a.Op, b.Op))
	})
	for _, m := range ops {
		if c.writeLocked(ctx, m) != nil {
			return true // the read that follows notices and reconnects again
		}
	}
	c.resumeWaits(ctx)
	return true
}

func ackKey(turnID string, op int64) string { return fmt.Sprintf("%s/%d", turnID, op) }

func (c *Conn) deliverAck(m *protocol.Msg) {
	k := ackKey(m.TurnID, m.Op)
	c.mu.Lock()
	p := c.pending[k]
	delete(c.pending, k)
	c.mu.Unlock()
	if p != nil {
		p.ch <- m
	}
}

// send registers an operation for its ack and writes it. When the
// connection can be re-established, a failed write is not an error: the
// operation stays pending and is replayed after the reconnect.
func (c *Conn) send(ctx context.Context, m *protocol.Msg) (chan *protocol.Msg, error) {
	ch := make(chan *protocol.Msg, 1)
	k := ackKey(m.TurnID, m.Op)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	c.pending[k] = &pendingOp{msg: m, ch: ch}
	c.mu.Unlock()
	// The write is not abandoned midway: a half-written frame would break
	// the connection.
	if err := c.writeLocked(context.WithoutCancel(ctx), m); err != nil && c.redial == nil {
		c.mu.Lock()
		delete(c.pending, k)
		c.mu.Unlock()
		return nil, err
	}
	return ch, nil
}

// await waits for an operation's ack. The server applies an operation even
// if ctx ends first; ctx bounds only the wait.
func (c *Conn) await(ctx context.Context, ch chan *protocol.Msg) (*protocol.Msg, error) {
	wait := ctx
	if ctx.Err() != nil {
		// Cleanup work (OnCancel callbacks) runs with a cancelled Turn ctx;
		// its operations still get their answer, within a bound.
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	select {
	case a := <-ch:
		if a.Error != nil {
			return a, a.Error
		}
		return a, nil
	case <-c.closed:
		return nil, errors.New("connection to the control plane lost")
	case <-wait.Done():
		return nil, context.Cause(wait)
	}
}

func asError(err error, def helmrtype.Code) *helmrtype.Error {
	var he *helmrtype.Error
	if errors.As(err, &he) {
		return he
	}
	return &helmrtype.Error{Code: def, Message: err.Error()}
}
