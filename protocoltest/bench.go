package protocoltest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cputime"
	"github.com/helmr-go/helmr/internal/protocol"
)

// BenchTurns measures warm Turns of the conformance agent started by argv:
// the benchmark plays the control plane over a real WebSocket on a Unix
// socket, as the vectors do, and each iteration is one Turn of
// {"do": "echo"} (turn.start, the output and its ack, the settlement and
// its ack). Besides the round trip's wall time it reports the agent
// process's own CPU time per Turn (agent-cpu-ns/op, all its threads, from
// /proc), the figure that tells one SDK's cost per Turn from another's.
func BenchTurns(b *testing.B, argv []string) {
	dir := b.TempDir()
	sock := filepath.Join(dir, "s.sock")
	conns := make(chan *websocket.Conn, 1)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ws := acceptProcess(w, req, testToken)
		if ws == nil {
			return
		}
		conns <- ws
		<-req.Context().Done()
	})}
	go srv.Serve(ln)
	defer srv.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := startAgent(cmd, dir, sock, testToken, "conformance"); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	var ws *websocket.Conn
	select {
	case ws = <-conns:
	case <-time.After(stepTimeout):
		b.Fatal("the agent did not connect")
	}
	defer ws.CloseNow()
	d := NewDriver(b, ws)
	d.Handshake("conformance")
	input := json.RawMessage(`{"do":"echo","text":"hello"}`)
	d.Turn(0, input) // the first Turn's one-off work (first use of the code) is not counted
	b.ResetTimer()
	cpu0 := processCPU(b, cmd.Process.Pid)
	for i := range b.N {
		d.Turn(i+1, input)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b, cmd.Process.Pid)-cpu0)/float64(b.N), "agent-cpu-ns/op")
	// A shutdown lets the process exit by itself (and write what it
	// writes at exit, such as node's --cpu-prof).
	d.Shutdown()
	select {
	case <-exited:
	case <-time.After(stepTimeout):
	}
}

// Driver plays the control plane's side of warm Turns on a session
// process's connection, for benchmarks: Handshake, then one Turn per call,
// then Shutdown. What does not go as a warm Turn should fails tb.
type Driver struct {
	tb      testing.TB
	ws      *websocket.Conn
	created time.Time
}

// NewDriver returns a Driver on ws, the server's end of the connection.
func NewDriver(tb testing.TB, ws *websocket.Conn) *Driver {
	return &Driver{tb: tb, ws: ws, created: time.Now().UTC()}
}

func (d *Driver) read(want string) *protocol.Msg {
	d.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	_, data, err := d.ws.Read(ctx)
	if err != nil {
		d.tb.Fatalf("waiting for %s: %v", want, err)
	}
	var m protocol.Msg
	if err := json.Unmarshal(data, &m); err != nil {
		d.tb.Fatal(err)
	}
	if m.Type != want || m.Error != nil {
		d.tb.Fatalf("got %s, want %s: %s", m.Type, want, data)
	}
	return &m
}

func (d *Driver) write(m *protocol.Msg) {
	d.tb.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		d.tb.Fatal(err)
	}
	if err := d.ws.Write(context.Background(), websocket.MessageText, data); err != nil {
		d.tb.Fatal(err)
	}
}

// Handshake takes hello, welcomes the process as a new Session of agent
// and waits for ready (init done).
func (d *Driver) Handshake(agent string) {
	d.tb.Helper()
	d.read(protocol.TypeHello)
	d.write(&protocol.Msg{Type: protocol.TypeWelcome, Welcome: &protocol.Welcome{Agent: agent,
		SessionID: "0197a3c2-5b1e-7c40-9a55-2f1e0c9d8b11", ComputerID: "0197a3c2-5b9f-7d01-8e2a-6a4b1c0f3e77",
		DeploymentID: "0197a3c1-0e44-7a10-b0c3-91d2e8f4a605", Recovery: protocol.Recovery{Kind: "initial"}, ServerTime: time.Now().UTC()}})
	d.read(protocol.TypeReady)
}

// Turn runs Turn number i with input: turn.start, one output and its ack,
// the completed settlement and its ack.
func (d *Driver) Turn(i int, input json.RawMessage) {
	d.tb.Helper()
	id := fmt.Sprintf("t%d", i)
	d.write(&protocol.Msg{Type: protocol.TypeTurnStart, TurnID: id, Turn: &protocol.TurnStart{ID: id, Sequence: int64(i + 1), CreatedAt: d.created,
		Input: input, Source: helmrtype.InputSource{Kind: "user"}}})
	o := d.read(protocol.TypeOutput)
	d.write(&protocol.Msg{Type: protocol.TypeAck, TurnID: id, Op: o.Op, Sequence: int64(2*i + 1)})
	s := d.read(protocol.TypeSettle)
	if s.Status != helmrtype.TurnCompleted {
		d.tb.Fatalf("turn %s settled %s: %v", id, s.Status, s.Error)
	}
	d.write(&protocol.Msg{Type: protocol.TypeAck, TurnID: id, Op: s.Op})
}

// Shutdown asks the process to stop and answers its close of the
// connection.
func (d *Driver) Shutdown() {
	d.tb.Helper()
	d.write(&protocol.Msg{Type: protocol.TypeShutdown})
	for {
		if _, _, err := d.ws.Read(context.Background()); err != nil {
			return
		}
	}
}

// processCPU is the CPU time (user and system, all threads) of process pid.
func processCPU(b *testing.B, pid int) time.Duration {
	st, ok := cputime.Read(pid)
	if !ok {
		b.Fatalf("read the CPU time of process %d", pid)
	}
	return st.CPU
}
