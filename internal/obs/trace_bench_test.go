package obs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/helmr-go/helmr/internal/protocol"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// BenchmarkTracedTurn is the control plane's tracing work for one Turn of
// the bench's shape, exported over OTLP/HTTP (protobuf) to a server that
// discards it: the API request's span, admission, dispatch, the session
// process's three spans (handler, output, wait), settlement and the Turn's
// span. ns/op is the CPU a traced Turn adds (the export included, as the
// batcher's goroutine runs on the same cores).
func BenchmarkTracedTurn(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer srv.Close()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(srv.URL+"/v1/traces"))
	if err != nil {
		b.Fatal(err)
	}
	tr := NewTracerWith(sdktrace.NewBatchSpanProcessor(exp))
	defer tr.Shutdown(context.Background())
	turnID := "0197a3c2-6000-7000-8000-00000000abcd"
	now := time.Now()
	shipped := []protocol.Span{
		{SpanID: "a3ce929d0e0e4736", Name: SpanHandler, Start: now, End: now, Attributes: map[string]any{"helmr.turn.status": "completed"}},
		{SpanID: "0e0e4736a3ce929d", ParentID: "a3ce929d0e0e4736", Name: SpanOutput, Start: now, End: now,
			Attributes: map[string]any{"helmr.output.parts": float64(1), "helmr.output.bytes": float64(20), "helmr.output.sequence": float64(3)}},
		{SpanID: "0e0e4736a3ce929e", ParentID: "a3ce929d0e0e4736", Name: SpanWait, Start: now, End: now,
			Attributes: map[string]any{"helmr.wait.kind": "timer", "helmr.wait.status": "resolved"}},
	}
	b.ReportAllocs()
	for b.Loop() {
		ctx, api := tr.Start(context.Background(), "POST /v1/sessions/{id}/turns", trace.WithSpanKind(trace.SpanKindServer))
		actx, admit := tr.StartAdmit(ctx)
		tp := TraceParent(actx)
		EndSpan(admit, "s", turnID, nil)
		api.End()
		_ = TurnTraceParent(tp, turnID)
		_, d, _ := tr.StartTurnChild(context.Background(), tp, turnID, SpanDispatch)
		EndSpan(d, "", "", nil)
		tr.ImportSpans(tp, turnID, shipped)
		_, st, _ := tr.StartTurnChild(context.Background(), tp, turnID, SpanSettle)
		EndSpan(st, "", "", nil)
		tr.EndTurn(TurnEnd{TraceParent: tp, SessionID: "s", TurnID: turnID, Agent: "echo", Status: "completed", Created: now, Ended: now})
	}
}

// BenchmarkTracingOff is what the same call sites cost with tracing off:
// each checks Enabled and does nothing.
func BenchmarkTracingOff(b *testing.B) {
	var tr *Tracer
	turnID := "0197a3c2-6000-7000-8000-00000000abcd"
	b.ReportAllocs()
	for b.Loop() {
		ctx := context.Background()
		if tr.Enabled() {
			b.Fatal("on")
		}
		ctx, admit := tr.StartAdmit(ctx)
		EndSpan(admit, "s", turnID, nil)
		_, d, _ := tr.StartTurnChild(ctx, "", turnID, SpanDispatch)
		EndSpan(d, "", "", nil)
		tr.EndTurn(TurnEnd{TurnID: turnID})
	}
}
