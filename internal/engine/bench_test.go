package engine_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cputime"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
)

// readyNotifier plays a supervisor whose session processes are all ready
// and idle: every admission starts its Turn in the same transaction.
type readyNotifier struct{ started *store.Turn }

func (n *readyNotifier) SessionWork(string)                       {}
func (n *readyNotifier) TurnMessage(string, string)               {}
func (n *readyNotifier) TurnInterrupt(string, string)             {}
func (n *readyNotifier) Reserve(string) engine.Reservation        { return n }
func (n *readyNotifier) Started(t *store.Turn, _ []store.Message) { n.started = t }

// BenchmarkWarmTurn is a warm Turn's work in the engine and the SQLite
// store, without HTTP or a session process: admission (which starts the
// Turn), one output record, and the settlement with a response, as the
// bench's echo Agent makes them. synchronous=NORMAL leaves fsync out, so
// that the figure is the CPU work (the bench command measures the whole);
// cpu-ns/op is the process's CPU per Turn, the figure to compare with FULL.
func BenchmarkWarmTurn(b *testing.B) {
	ctx := context.Background()
	e := newEngineOn(b, benchSync, engine.Options{})
	rec, _, err := e.CreateSession(ctx, helmrtype.SessionCreateRequest{Agent: "echo"}, engine.APICaller)
	if err != nil {
		b.Fatal(err)
	}
	n := &readyNotifier{}
	e.SetNotifier(n)
	sid := rec.Session.ID
	input := text("hello")
	response, _ := json.Marshal(helmrtype.Text("hello"))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	for i := 0; i < b.N; i++ {
		n.started = nil
		if _, _, err := e.Enqueue(ctx, sid, helmrtype.EnqueueRequest{Input: input}, engine.APICaller); err != nil {
			b.Fatal(err)
		}
		t := n.started
		if t == nil {
			b.Fatal("the admission started no Turn")
		}
		if _, _, err := e.AppendOutput(ctx, sid, t.ID, 1, helmrtype.Text("ok ")); err != nil {
			b.Fatal(err)
		}
		if _, _, err := e.SettleTurn(ctx, sid, t.ID, 2, engine.Settlement{Status: helmrtype.TurnCompleted,
			Result: json.RawMessage(`{"seq":1}`), Response: response}, true); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N), "cpu-ns/op")
}

// benchSync is the synchronous mode of BenchmarkWarmTurn's store.
var benchSync = envOr("HELMR_BENCH_SYNC", "NORMAL")

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
