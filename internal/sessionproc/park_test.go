package sessionproc

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/protocol"
)

// fakeCP is the control plane's end of the protocol for these tests: a
// WebSocket endpoint on a Unix socket whose connections the test takes,
// one at a time, and drives by hand.
type fakeCP struct {
	t     *testing.T
	sock  string
	conns chan *websocket.Conn
	mu    sync.Mutex
	dials []time.Time // when each connection was accepted
}

func newFakeCP(t *testing.T) *fakeCP {
	t.Helper()
	f := &fakeCP{t: t, sock: filepath.Join(t.TempDir(), "s.sock"), conns: make(chan *websocket.Conn, 4)}
	ln, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Version}})
		if err != nil {
			return
		}
		f.mu.Lock()
		f.dials = append(f.dials, time.Now())
		f.mu.Unlock()
		f.conns <- ws
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f
}

// dial is the process's dial to the fake control plane.
func (f *fakeCP) dial(ctx context.Context) (*websocket.Conn, error) {
	return Dial(ctx, f.sock, "test-token")
}

// accept takes the next connection the process opens.
func (f *fakeCP) accept(within time.Duration) *websocket.Conn {
	f.t.Helper()
	select {
	case ws := <-f.conns:
		return ws
	case <-time.After(within):
		f.t.Fatalf("the process did not connect within %s", within)
		return nil
	}
}

func (f *fakeCP) lastDial() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dials[len(f.dials)-1]
}

func recv(t *testing.T, ws *websocket.Conn) *protocol.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var m protocol.Msg
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// expect reads the next message and checks its type.
func expect(t *testing.T, ws *websocket.Conn, typ string) *protocol.Msg {
	t.Helper()
	m := recv(t, ws)
	if m.Type != typ {
		t.Fatalf("got %q (%+v), want %q", m.Type, m, typ)
	}
	return m
}

func sendMsg(t *testing.T, ws *websocket.Conn, m *protocol.Msg) {
	t.Helper()
	b, _ := json.Marshal(m)
	if err := ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// expectClose reads until the process closes the connection and checks the
// status and reason.
func expectClose(t *testing.T, ws *websocket.Conn, code websocket.StatusCode, reason string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := ws.Read(ctx)
	if err == nil {
		t.Fatalf("want a close %d, got %s", code, b)
	}
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != code || ce.Reason != reason {
		t.Fatalf("the connection ended with %v, want close %d %q", err, code, reason)
	}
}

func welcomeMsg(kind string) *protocol.Msg {
	return &protocol.Msg{Type: protocol.TypeWelcome, Welcome: &protocol.Welcome{Agent: "a", SessionID: "s", ComputerID: "c",
		DeploymentID: "d", Recovery: protocol.Recovery{Kind: kind}}}
}

// funcAgent is an Agent whose Turns run turn.
type funcAgent struct {
	turn func(ctx context.Context, t *Turn) (json.RawMessage, error)
}

func (funcAgent) AgentID() string                             { return "a" }
func (funcAgent) RunInit(context.Context, *Info) (any, error) { return nil, nil }
func (a funcAgent) RunTurn(ctx context.Context, t *Turn, _ any) (json.RawMessage, error) {
	return a.turn(ctx, t)
}

// startServe runs the process side on a first connection to f, with
// reconnection when redial is true, and returns the server's end of the
// connection and the channel of serve's result.
func startServe(t *testing.T, f *fakeCP, a Agent, redial bool, window time.Duration) (*websocket.Conn, chan error) {
	t.Helper()
	ws, err := f.dial(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var rd func(context.Context) (*websocket.Conn, error)
	if redial {
		rd = f.dial
	}
	done := make(chan error, 1)
	go func() { done <- serve(context.Background(), ws, "a", []Agent{a}, rd, window) }()
	return f.accept(5 * time.Second), done
}

func shutdownAndWait(t *testing.T, ws *websocket.Conn, done chan error) {
	t.Helper()
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypeShutdown})
	expect(t, ws, protocol.TypeStopping)
	expectClose(t, ws, websocket.StatusNormalClosure, "shutdown")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after shutdown")
	}
}

func turnStart(id string) *protocol.Msg {
	return &protocol.Msg{Type: protocol.TypeTurnStart, TurnID: id, Turn: &protocol.TurnStart{ID: id, Sequence: 1, Input: json.RawMessage(`{}`)}}
}

// TestParkAndReturn: a Turn waits on a timer; the server parks the process;
// it closes with 1000 "parked", dials again only after the pause, says
// hello with resume and features, asks for its wait again, and the Turn
// settles with the state the handler kept in memory.
func TestParkAndReturn(t *testing.T) {
	f := newFakeCP(t)
	a := funcAgent{turn: func(ctx context.Context, t *Turn) (json.RawMessage, error) {
		state := []string{"before"}
		until := time.Now().Add(time.Hour)
		o, err := t.Wait(ctx, helmrtype.WaitStart{Kind: helmrtype.WaitTimer, Until: &until})
		if err != nil {
			return nil, err
		}
		state = append(state, "after:"+o.Status)
		return json.Marshal(state)
	}}
	ws, done := startServe(t, f, a, true, time.Minute)
	h := expect(t, ws, protocol.TypeHello)
	if !slices.Equal(h.Features, []string{protocol.FeaturePark}) || h.Resume != nil {
		t.Fatalf("first hello: features %v, resume %+v; want [park] and no resume", h.Features, h.Resume)
	}
	sendMsg(t, ws, welcomeMsg(protocol.RecoveryInitial))
	expect(t, ws, protocol.TypeReady)
	sendMsg(t, ws, turnStart("t1"))
	w := expect(t, ws, protocol.TypeWaitStart)
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypeAck, TurnID: "t1", Op: w.Op})

	const pause = 700 * time.Millisecond
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypePark, Pause: "700ms"})
	expectClose(t, ws, websocket.StatusNormalClosure, "parked")
	closed := time.Now()
	ws = f.accept(10 * time.Second)
	// closed is taken a little after the process closed; allow for that.
	if d := f.lastDial().Sub(closed); d < pause-200*time.Millisecond {
		t.Fatalf("the process dialled %s after it closed, before the pause of %s", d, pause)
	}
	h = expect(t, ws, protocol.TypeHello)
	if !slices.Equal(h.Features, []string{protocol.FeaturePark}) || h.Resume == nil || !h.Resume.Ready || h.Resume.TurnID != "t1" {
		t.Fatalf("hello after the park: features %v, resume %+v", h.Features, h.Resume)
	}
	sendMsg(t, ws, welcomeMsg(protocol.RecoveryReattached))
	r := expect(t, ws, protocol.TypeWaitResume)
	if r.TurnID != "t1" || r.WaitID != w.Wait.ID {
		t.Fatalf("wait.resume %+v, want the wait %s of t1", r, w.Wait.ID)
	}
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypeWaitResolved, TurnID: "t1", WaitID: w.Wait.ID, Outcome: &helmrtype.WaitOutcome{Status: "resolved"}})
	s := expect(t, ws, protocol.TypeSettle)
	if s.Status != "completed" || string(s.Result) != `["before","after:resolved"]` {
		t.Fatalf("settle %s %s, want completed with the handler's state", s.Status, s.Result)
	}
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypeAck, TurnID: "t1", Op: s.Op})
	shutdownAndWait(t, ws, done)
}

// TestParkQueuesWrites: an operation the handler makes during the pause
// is not written on the closed connection; it goes after the rejoin.
func TestParkQueuesWrites(t *testing.T) {
	f := newFakeCP(t)
	wake := make(chan struct{})
	a := funcAgent{turn: func(ctx context.Context, t *Turn) (json.RawMessage, error) {
		<-wake
		if _, err := t.Output(ctx, helmrtype.Text("awake")); err != nil {
			return nil, err
		}
		return json.RawMessage(`true`), nil
	}}
	ws, done := startServe(t, f, a, true, time.Minute)
	expect(t, ws, protocol.TypeHello)
	sendMsg(t, ws, welcomeMsg(protocol.RecoveryInitial))
	expect(t, ws, protocol.TypeReady)
	sendMsg(t, ws, turnStart("t1"))
	time.Sleep(50 * time.Millisecond)
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypePark, Pause: "600ms"})
	expectClose(t, ws, websocket.StatusNormalClosure, "parked")
	close(wake) // the handler writes during the pause
	ws = f.accept(10 * time.Second)
	h := expect(t, ws, protocol.TypeHello)
	if h.Resume == nil || h.Resume.TurnID != "t1" {
		t.Fatalf("resume %+v", h.Resume)
	}
	sendMsg(t, ws, welcomeMsg(protocol.RecoveryReattached))
	o := expect(t, ws, protocol.TypeOutput)
	if o.Op != 1 || len(o.Content) != 1 || o.Content[0].Text != "awake" {
		t.Fatalf("output after the rejoin: %+v", o)
	}
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypeAck, TurnID: "t1", Op: 1, Sequence: 3})
	s := expect(t, ws, protocol.TypeSettle)
	if s.Op != 2 || s.Status != "completed" {
		t.Fatalf("settle %+v", s)
	}
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypeAck, TurnID: "t1", Op: 2})
	shutdownAndWait(t, ws, done)
}

// TestParkIgnored: a park before the welcome, one with a pause that is not
// a Duration, and any park to a process that cannot dial again (Serve) are
// ignored: the connection stays and the process serves on it.
func TestParkIgnored(t *testing.T) {
	echo := funcAgent{turn: func(ctx context.Context, t *Turn) (json.RawMessage, error) {
		return json.RawMessage(`"ok"`), nil
	}}
	for _, redial := range []bool{true, false} {
		f := newFakeCP(t)
		ws, done := startServe(t, f, echo, redial, time.Minute)
		h := expect(t, ws, protocol.TypeHello)
		if redial != (len(h.Features) == 1) {
			t.Fatalf("redial %v: features %v", redial, h.Features)
		}
		sendMsg(t, ws, &protocol.Msg{Type: protocol.TypePark, Pause: "1s"})
		sendMsg(t, ws, welcomeMsg(protocol.RecoveryInitial))
		expect(t, ws, protocol.TypeReady)
		sendMsg(t, ws, &protocol.Msg{Type: protocol.TypePark, Pause: "soon"})
		if !redial {
			sendMsg(t, ws, &protocol.Msg{Type: protocol.TypePark, Pause: "1s"})
		}
		sendMsg(t, ws, turnStart("t1"))
		s := expect(t, ws, protocol.TypeSettle)
		if s.Status != "completed" || string(s.Result) != `"ok"` {
			t.Fatalf("settle %+v", s)
		}
		sendMsg(t, ws, &protocol.Msg{Type: protocol.TypeAck, TurnID: "t1", Op: s.Op})
		shutdownAndWait(t, ws, done)
	}
}

// TestParkNoReturn: a parked process that finds no control plane within
// the reconnect window ends, as after a lost connection.
func TestParkNoReturn(t *testing.T) {
	f := newFakeCP(t)
	a := funcAgent{turn: func(ctx context.Context, t *Turn) (json.RawMessage, error) { return nil, nil }}
	ws, done := startServe(t, f, a, true, 400*time.Millisecond)
	expect(t, ws, protocol.TypeHello)
	sendMsg(t, ws, welcomeMsg(protocol.RecoveryInitial))
	expect(t, ws, protocol.TypeReady)
	// Refuse every later connection: close each at once.
	go func() {
		for ws := range f.conns {
			ws.CloseNow()
		}
	}()
	sendMsg(t, ws, &protocol.Msg{Type: protocol.TypePark, Pause: "100ms"})
	expectClose(t, ws, websocket.StatusNormalClosure, "parked")
	select {
	case err := <-done:
		if helmrtype.CodeOf(err) != helmrtype.CodeUnavailable {
			t.Fatalf("serve: %v, want an unavailable error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not give up after the reconnect window")
	}
}

// TestAttemptShare: an attempt counts the time it took against the
// reconnect window, but never more than its pause, its timeouts and a
// margin, so a clock that jumped while the process was frozen or
// checkpointed does not use the window up.
func TestAttemptShare(t *testing.T) {
	limit := 2*time.Second + dialTimeout + helloTimeout + attemptMargin
	for _, c := range []struct{ took, pause, want time.Duration }{
		{300 * time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond},
		{72 * time.Hour, 2 * time.Second, limit},
		{-time.Hour, time.Second, 0},
	} {
		if got := attemptShare(c.took, c.pause); got != c.want {
			t.Errorf("attemptShare(%s, %s) = %s, want %s", c.took, c.pause, got, c.want)
		}
	}
}
