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
	"strings"
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
	token := "hlmr_proc_" + strings.Repeat("0123456789ab", 4)
	conns := make(chan *websocket.Conn, 1)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unknown process token", http.StatusUnauthorized)
			return
		}
		ws, err := websocket.Accept(w, req, &websocket.AcceptOptions{Subprotocols: []string{protocol.Version}})
		if err != nil {
			return
		}
		conns <- ws
		<-req.Context().Done()
	})}
	go srv.Serve(ln)
	defer srv.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := startAgent(cmd, dir, sock, token, "conformance"); err != nil {
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
	ctx := context.Background()
	read := func(want string) *protocol.Msg {
		b.Helper()
		rctx, cancel := context.WithTimeout(ctx, stepTimeout)
		defer cancel()
		_, data, err := ws.Read(rctx)
		if err != nil {
			b.Fatalf("waiting for %s: %v", want, err)
		}
		var m protocol.Msg
		if err := json.Unmarshal(data, &m); err != nil {
			b.Fatal(err)
		}
		if m.Type != want || m.Error != nil {
			b.Fatalf("got %s, want %s: %s", m.Type, want, data)
		}
		return &m
	}
	write := func(m *protocol.Msg) {
		b.Helper()
		data, err := json.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		if err := ws.Write(ctx, websocket.MessageText, data); err != nil {
			b.Fatal(err)
		}
	}
	read(protocol.TypeHello)
	write(&protocol.Msg{Type: protocol.TypeWelcome, Welcome: &protocol.Welcome{Agent: "conformance",
		SessionID: "0197a3c2-5b1e-7c40-9a55-2f1e0c9d8b11", ComputerID: "0197a3c2-5b9f-7d01-8e2a-6a4b1c0f3e77",
		DeploymentID: "0197a3c1-0e44-7a10-b0c3-91d2e8f4a605", Recovery: protocol.Recovery{Kind: "initial"}, ServerTime: time.Now().UTC()}})
	read(protocol.TypeReady)
	input := json.RawMessage(`{"do":"echo","text":"hello"}`)
	created := time.Now().UTC()
	turn := func(i int) {
		id := fmt.Sprintf("t%d", i)
		write(&protocol.Msg{Type: protocol.TypeTurnStart, TurnID: id, Turn: &protocol.TurnStart{ID: id, Sequence: int64(i), CreatedAt: created,
			Input: input, Source: helmrtype.InputSource{Kind: "user"}}})
		o := read(protocol.TypeOutput)
		write(&protocol.Msg{Type: protocol.TypeAck, TurnID: id, Op: o.Op, Sequence: int64(2 * i)})
		s := read(protocol.TypeSettle)
		if s.Status != "completed" {
			b.Fatalf("turn %s settled %s: %v", id, s.Status, s.Error)
		}
		write(&protocol.Msg{Type: protocol.TypeAck, TurnID: id, Op: s.Op})
	}
	turn(0) // the first Turn's one-off work (first use of the code) is not counted
	b.ResetTimer()
	cpu0 := processCPU(b, cmd.Process.Pid)
	for i := range b.N {
		turn(i + 1)
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU(b, cmd.Process.Pid)-cpu0)/float64(b.N), "agent-cpu-ns/op")
	// A shutdown lets the process exit by itself (and write what it
	// writes at exit, such as node's --cpu-prof).
	write(&protocol.Msg{Type: protocol.TypeShutdown})
	go func() {
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	}()
	select {
	case <-exited:
	case <-time.After(stepTimeout):
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
