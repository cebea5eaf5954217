package helmr

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cputime"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/sessionproc"
)

// BenchmarkTurn measures the Go SDK's side of a warm Turn: the control
// plane's part is played over a real loopback WebSocket by the benchmark
// (turn.start, then the ack of the output and of the settlement), and the
// Agent writes one output, responds and returns a small result, as the
// bench's agent does. What it measures is mostly the SDK: its goroutines,
// JSON and validation per Turn.
func BenchmarkTurn(b *testing.B) {
	def := Agent(AgentSpec[InputContent, map[string]int64, struct{}]{ID: "echo", Template: Template(TemplateSpec{ID: "bench", Image: Image("bench").FromHost()}),
		Turn: func(ctx context.Context, t *Turn[InputContent], _ *AgentContext[struct{}]) (map[string]int64, error) {
			if _, err := t.Output.Write(ctx, "ok "); err != nil {
				return nil, err
			}
			if err := t.Respond(ctx, t.Input.PlainText()); err != nil {
				return nil, err
			}
			return map[string]int64{"seq": t.Sequence}, nil
		}})
	conns := make(chan *websocket.Conn, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{protocol.Version}})
		if err != nil {
			return
		}
		conns <- c
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(srv.URL, "http", "ws", 1)+protocol.Path, &websocket.DialOptions{Subprotocols: []string{protocol.Version}})
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- sessionproc.Serve(ctx, ws, "echo", Runtime(def)) }()
	cp := <-conns
	defer cp.CloseNow()
	read := func(want string) *protocol.Msg {
		b.Helper()
		_, data, err := cp.Read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var m protocol.Msg
		if err := json.Unmarshal(data, &m); err != nil {
			b.Fatal(err)
		}
		if m.Type != want || m.Error != nil {
			b.Fatalf("got %s (error %v), want %s", m.Type, m.Error, want)
		}
		return &m
	}
	write := func(m *protocol.Msg) {
		b.Helper()
		data, err := json.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		if err := cp.Write(ctx, websocket.MessageText, data); err != nil {
			b.Fatal(err)
		}
	}
	read(protocol.TypeHello)
	write(&protocol.Msg{Type: protocol.TypeWelcome, Welcome: &protocol.Welcome{Agent: "echo", SessionID: "s1", ServerTime: time.Now()}})
	read(protocol.TypeReady)
	input := json.RawMessage(`[{"type":"text","text":"hello"}]`)
	created := time.Now().UTC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := range b.N {
		id := fmt.Sprintf("t%d", i)
		write(&protocol.Msg{Type: protocol.TypeTurnStart, Turn: &protocol.TurnStart{ID: id, Sequence: int64(i + 1), CreatedAt: created,
			Input: input, Source: helmrtype.InputSource{Kind: "api"}}})
		o := read(protocol.TypeOutput)
		write(&protocol.Msg{Type: protocol.TypeAck, TurnID: id, Op: o.Op, Sequence: int64(2*i + 1)})
		s := read(protocol.TypeSettle)
		if s.Status != helmrtype.TurnCompleted {
			b.Fatalf("settled %s: %v", s.Status, s.Error)
		}
		write(&protocol.Msg{Type: protocol.TypeAck, TurnID: id, Op: s.Op})
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
	write(&protocol.Msg{Type: protocol.TypeShutdown})
	for { // answer the SDK's close
		if _, _, err := cp.Read(ctx); err != nil {
			break
		}
	}
	if err := <-served; err != nil {
		b.Fatal(err)
	}
}
