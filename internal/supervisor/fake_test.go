package supervisor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/freezer"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
	"github.com/helmr-go/helmr/internal/supervisor"
)

// The supervisor driven through its real protocol endpoint, its real
// engine and a real SQLite store, with a fake launcher (the "process" is a
// goroutine of the test speaking the session protocol), a fake freezer and
// a clock the test moves by hand.

// fakeClock runs timers when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c    *fakeClock
	at   time.Time
	f    func()
	live bool
	d    time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) supervisor.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f, live: true, d: d}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.live
	t.live = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.live
	t.live, t.at, t.d = true, t.c.now.Add(d), d
	return was
}

// pending reports whether a live timer of duration d is set.
func (c *fakeClock) pending(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.live && t.d == d {
			return true
		}
	}
	return false
}

// advance moves the clock by d and runs the timers that came due.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	for _, t := range c.timers {
		if t.live && !t.at.After(c.now) {
			t.live = false
			due = append(due, t.f)
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		go f()
	}
}

// fakeFreezer counts freezes and thaws; it fails freezes while fail is set.
type fakeFreezer struct {
	mu             sync.Mutex
	freezes, thaws int
	frozen         bool
	fail           bool
}

func (f *fakeFreezer) Attach(ctx context.Context, name string, pid, pgid int) (freezer.Handle, error) {
	return f, nil
}
func (f *fakeFreezer) Kind() string { return "fake" }
func (f *fakeFreezer) Freeze(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("the fake freezer refuses")
	}
	f.freezes++
	f.frozen = true
	return nil
}
func (f *fakeFreezer) Thaw(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen {
		f.thaws++
	}
	f.frozen = false
	return nil
}
func (f *fakeFreezer) Frozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}
func (f *fakeFreezer) Release() error { return nil }

func (f *fakeFreezer) counts() (freezes, thaws int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.freezes, f.thaws
}

// fakeProcess is a launched "process": the test's protocol client.
type fakeProcess struct {
	spec supervisor.LaunchSpec
	done chan struct{}
	once sync.Once
}

func (p *fakeProcess) Done() <-chan struct{} { return p.done }
func (p *fakeProcess) Err() error            { return nil }
func (p *fakeProcess) Kill()                 { p.once.Do(func() { close(p.done) }) }

// PID is the test's own: the supervisor reads its start ID for the record
// and attaches the freezer to it (a fake one).
func (p *fakeProcess) PID() int { return os.Getpid() }

// fakeLauncher hands each launch to the test.
type fakeLauncher struct{ launched chan *fakeProcess }

func (l *fakeLauncher) Launch(ctx context.Context, spec supervisor.LaunchSpec) (supervisor.Process, error) {
	p := &fakeProcess{spec: spec, done: make(chan struct{})}
	l.launched <- p
	return p, nil
}

// rig is a supervisor on a fake launcher, freezer and clock.
type rig struct {
	t        *testing.T
	eng      *engine.Engine
	sup      *supervisor.Supervisor
	clock    *fakeClock
	freezer  *fakeFreezer
	launcher *fakeLauncher
	url      string
}

func newRig(t *testing.T, agent helmrtype.AgentManifest) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng := engine.New(st, engine.Options{})
	agent.Template = "box"
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
		Agents:    []helmrtype.AgentManifest{agent}}
	if _, err := eng.PublishDeployment(ctx, "sha256:test", m, "", ""); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, eng: eng, clock: newFakeClock(), freezer: &fakeFreezer{}, launcher: &fakeLauncher{launched: make(chan *fakeProcess, 4)}}
	r.sup = supervisor.New(eng, r.launcher, supervisor.Options{Clock: r.clock, Freezer: r.freezer,
		SocketPath: filepath.Join(t.TempDir(), "s.sock")})
	if err := r.sup.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r.sup)
	r.url = "ws" + strings.TrimPrefix(srv.URL, "http")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.sup.Close(ctx)
		srv.Close()
	})
	return r
}

// launched returns the next launched process.
func (r *rig) launched() *fakeProcess {
	r.t.Helper()
	select {
	case p := <-r.launcher.launched:
		return p
	case <-time.After(10 * time.Second):
		r.t.Fatal("timed out waiting for a launch")
		return nil
	}
}

// createSession creates a Session of the rig's Agent "echo" with a first
// Turn, and returns its ID.
func (r *rig) createSession() string {
	r.t.Helper()
	rec, _, err := r.eng.CreateSession(context.Background(), helmrtype.SessionCreateRequest{Agent: "echo",
		Input: json.RawMessage(`[{"type":"text","text":"hi"}]`)}, engine.APICaller)
	if err != nil {
		r.t.Fatal(err)
	}
	return rec.Session.ID
}

// conn is the fake process's protocol connection.
type conn struct {
	t  *testing.T
	ws *websocket.Conn
}

// connect is the launched process's start: hello, welcome, ready.
func (r *rig) connect(p *fakeProcess) *conn {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, r.url, &websocket.DialOptions{Subprotocols: []string{protocol.Version},
		HTTPHeader: http.Header{"Authorization": {"Bearer " + p.spec.Token}}})
	if err != nil {
		r.t.Fatal(err)
	}
	ws.SetReadLimit(32 << 20)
	r.t.Cleanup(func() { ws.CloseNow() })
	c := &conn{t: r.t, ws: ws}
	c.send(&protocol.Msg{Type: protocol.TypeHello, Protocol: protocol.Version})
	if m := c.read(); m.Type != protocol.TypeWelcome {
		r.t.Fatalf("got %s, want welcome", m.Type)
	}
	c.send(&protocol.Msg{Type: protocol.TypeReady})
	return c
}

func (c *conn) send(m *protocol.Msg) {
	c.t.Helper()
	b, _ := json.Marshal(m)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next message other than an ack.
func (c *conn) read() *protocol.Msg {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, b, err := c.ws.Read(ctx)
		if err != nil {
			c.t.Fatal(err)
		}
		var m protocol.Msg
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatal(err)
		}
		if m.Type != protocol.TypeAck {
			return &m
		}
	}
}

// runTurn reads the next turn.start and settles it completed.
func (c *conn) runTurn() string {
	c.t.Helper()
	m := c.read()
	if m.Type != protocol.TypeTurnStart {
		c.t.Fatalf("got %s, want turn.start", m.Type)
	}
	c.send(&protocol.Msg{Type: protocol.TypeSettle, TurnID: m.TurnID, Op: 1, Status: helmrtype.TurnCompleted})
	return m.TurnID
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// kinds lists the kinds of the Session's events.
func (r *rig) kinds(sessionID string) []string {
	page, err := r.eng.ListEvents(context.Background(), sessionID, 0, 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	var k []string
	for _, e := range page.Records {
		k = append(k, e.Kind)
	}
	return k
}

func count(kinds []string, kind string) int {
	n := 0
	for _, k := range kinds {
		if k == kind {
			n++
		}
	}
	return n
}

// An idle Session past hibernateAfterIdle is frozen on the supervisor's
// clock, and its next Turn thaws it first: the timeline records each once,
// and the Computer's residency follows.
func TestIdleSessionHibernatesOnTheClock(t *testing.T) {
	t.Parallel()
	r := newRig(t, helmrtype.AgentManifest{ID: "echo", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "1m"})
	ctx := context.Background()
	sid := r.createSession()
	c := r.connect(r.launched())
	c.runTurn()
	sess, err := r.eng.GetSession(ctx, sid)
	if err != nil || sess.ComputerID == nil {
		t.Fatalf("session %v, err %v: no computer", sess, err)
	}
	computer := *sess.ComputerID
	eventually(t, "the idle timer", func() bool { return r.clock.pending(time.Minute) })
	if r.sup.Suspended(sid) {
		t.Fatal("suspended before its idle time")
	}
	r.clock.advance(59 * time.Second)
	if f, _ := r.freezer.counts(); f != 0 {
		t.Fatalf("frozen after 59 s of a 1 m idle time")
	}
	r.clock.advance(time.Second)
	eventually(t, "the freeze", func() bool { return r.sup.Suspended(sid) })
	eventually(t, "wait.suspended", func() bool { return count(r.kinds(sid), helmrtype.EventWaitSuspended) == 1 })
	if res, _ := r.sup.Residency(computer); res != helmrtype.ResidencyParked {
		t.Fatalf("residency %s, want parked", res)
	}
	if c, _ := r.sup.ProcessStates(); c != (supervisor.ProcessCounts{Frozen: 1}) {
		t.Fatalf("process states %+v, want 1 frozen", c)
	}

	// A new Turn thaws the process before it is sent.
	if _, _, err := r.eng.Enqueue(ctx, sid, helmrtype.EnqueueRequest{Input: json.RawMessage(`[{"type":"text","text":"again"}]`)}, engine.APICaller); err != nil {
		t.Fatal(err)
	}
	c.runTurn()
	if f, th := r.freezer.counts(); f != 1 || th != 1 || r.freezer.Frozen() {
		t.Fatalf("freezes %d, thaws %d, frozen %v; want 1, 1, false", f, th, r.freezer.Frozen())
	}
	eventually(t, "wait.resumed", func() bool { return count(r.kinds(sid), helmrtype.EventWaitResumed) == 1 })
	if r.sup.Suspended(sid) {
		t.Fatal("still suspended after a Turn")
	}
	if res, _ := r.sup.Residency(computer); res != helmrtype.ResidencyRunning {
		t.Fatalf("residency %s, want running", res)
	}
}

// A freeze that fails leaves the process hot and records nothing; the
// next idle period tries again.
func TestFailedFreezeLeavesTheProcessHot(t *testing.T) {
	t.Parallel()
	r := newRig(t, helmrtype.AgentManifest{ID: "echo", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "1m"})
	r.freezer.fail = true
	sid := r.createSession()
	c := r.connect(r.launched())
	c.runTurn()
	eventually(t, "the idle timer", func() bool { return r.clock.pending(time.Minute) })
	r.clock.advance(time.Minute)
	// The failed freeze arms the idle timer again once it is over.
	eventually(t, "the idle timer again", func() bool { return r.clock.pending(time.Minute) })
	if r.sup.Suspended(sid) || count(r.kinds(sid), helmrtype.EventWaitSuspended) != 0 {
		t.Fatalf("suspended after a failed freeze: %v", r.kinds(sid))
	}
	r.freezer.mu.Lock()
	r.freezer.fail = false
	r.freezer.mu.Unlock()
	r.clock.advance(time.Minute)
	eventually(t, "the freeze", func() bool { return r.sup.Suspended(sid) })
}

// A Session's previous process that no supervisor here runs (left behind
// by a node that died) and that lives on this host is ended before the
// Session's next process launches: never two processes of one Session.
func TestPredecessorEndedBeforeLaunch(t *testing.T) {
	t.Parallel()
	r := newRig(t, helmrtype.AgentManifest{ID: "echo", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never"})
	ctx := context.Background()
	sid := r.createSession()
	first := r.launched()
	c := r.connect(first)
	c.runTurn()
	// The first process stops in order, and its record goes with it.
	c.send(&protocol.Msg{Type: protocol.TypeStopping})
	c.ws.Close(websocket.StatusNormalClosure, "")
	first.Kill()
	eventually(t, "the first record to go", func() bool {
		p, err := r.eng.ProcessRecord(ctx, sid)
		return err == nil && p == nil
	})

	// Another node's process of the Session, still alive on this host.
	old := exec.Command("sleep", "60")
	old.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := old.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- old.Wait() }()
	t.Cleanup(func() { old.Process.Kill() })
	startID, err := supervisor.StartID(old.Process.Pid)
	if err != nil {
		t.Skipf("process start IDs need Linux's /proc: %v", err)
	}
	if err := r.eng.RecordProcess(ctx, &store.Process{SessionID: sid, LaunchID: "other-launch", PID: old.Process.Pid,
		StartID: startID, NodeID: "other-node", LaunchedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.eng.Enqueue(ctx, sid, helmrtype.EnqueueRequest{Input: json.RawMessage(`[{"type":"text","text":"again"}]`)}, engine.APICaller); err != nil {
		t.Fatal(err)
	}
	next := r.launched()
	// At the launch the old process is gone: a zombie (not reaped by this
	// test yet) or reaped.
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", old.Process.Pid)); err == nil {
		if i := strings.LastIndexByte(string(stat), ')'); i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z' {
			t.Fatalf("the next process launched while the old one still ran: %s", stat)
		}
	}
	select {
	case err := <-ended:
		if ws, ok := old.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("the old process ended with %v, want SIGKILL", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the old process was not reaped")
	}
	r.connect(next).runTurn()
}
