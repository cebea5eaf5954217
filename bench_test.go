package helmr

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/helmr-go/helmr/internal/cputime"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/sessionproc"
	"github.com/helmr-go/helmr/protocoltest"
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
	d := protocoltest.NewDriver(b, cp)
	d.Handshake("echo")
	input := json.RawMessage(`[{"type":"text","text":"hello"}]`)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := range b.N {
		d.Turn(i, input)
	}
	b.StopTimer()
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
	d.Shutdown()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
}
