package obs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/protocol"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestNewTracerFromEnv(t *testing.T) {
	ep := "http://127.0.0.1:1"
	cases := []struct {
		env  map[string]string
		on   bool
		code helmrtype.Code
	}{
		{env: map[string]string{}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/v1/traces"}, on: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, code: helmrtype.CodeInvalidRequest},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, code: helmrtype.CodeInvalidRequest},
	}
	for _, c := range cases {
		tr, err := NewTracer(context.Background(), func(k string) string { return c.env[k] }, "test")
		if c.code != "" {
			if helmrtype.CodeOf(err) != c.code {
				t.Errorf("NewTracer(%v) = %v, want %s", c.env, err, c.code)
			}
			continue
		}
		if err != nil || tr.Enabled() != c.on {
			t.Errorf("NewTracer(%v) = enabled %v, %v; want %v", c.env, tr.Enabled(), err, c.on)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		tr.Shutdown(ctx)
		cancel()
	}
	var off *Tracer
	if off.Enabled() || off.Shutdown(context.Background()) != nil {
		t.Error("a nil Tracer is not off")
	}
	if _, sp := off.StartAdmit(context.Background()); sp != nil {
		t.Error("a nil Tracer started an admission span")
	}
}

func memTracer(t *testing.T) (*Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	tr := NewTracerWith(sdktrace.NewSimpleSpanProcessor(exp))
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr, exp
}

const (
	testTurnID  = "0197a3c2-6000-7000-8000-00000000abcd"
	testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	testAdmit   = "00-" + testTraceID + "-00f067aa0ba902b7-01"
)

func TestTraceParents(t *testing.T) {
	sc, err := ParseTraceParent(testAdmit)
	if err != nil || sc.TraceID().String() != testTraceID || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsSampled() {
		t.Fatalf("ParseTraceParent: %v %v", sc, err)
	}
	for _, bad := range []string{"", "00-x-y-01", "01-" + testTraceID + "-00f067aa0ba902b7-01", "00-" + testTraceID + "-0000000000000000-01",
		"00-" + testTraceID + "-00f067aa0ba902b7-ff", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if _, err := ParseTraceParent(bad); err == nil {
			t.Errorf("ParseTraceParent(%q) accepted", bad)
		}
	}
	if got := TurnSpanID(testTurnID).String(); got != "800000000000abcd" {
		t.Errorf("TurnSpanID = %s", got)
	}
	if got, want := TurnTraceParent(testAdmit, testTurnID), "00-"+testTraceID+"-800000000000abcd-01"; got != want {
		t.Errorf("TurnTraceParent = %s, want %s", got, want)
	}
	if TurnTraceParent("", testTurnID) != "" || TurnTraceParent(testAdmit, "not-a-uuid") != "" {
		t.Error("a Turn without a trace has a turn traceparent")
	}
	// The span in ctx, only when sampled.
	tr, _ := memTracer(t)
	ctx, sp := tr.Start(context.Background(), "x")
	defer sp.End()
	if got := TraceParent(ctx); got != "00-"+sp.SpanContext().TraceID().String()+"-"+sp.SpanContext().SpanID().String()+"-01" {
		t.Errorf("TraceParent = %s", got)
	}
	unsampled := trace.ContextWithSpanContext(context.Background(), sp.SpanContext().WithTraceFlags(0))
	if TraceParent(unsampled) != "" || TraceParent(context.Background()) != "" {
		t.Error("TraceParent of an unsampled or missing span is not empty")
	}
}

func TestEndTurnWritesTheTurnSpan(t *testing.T) {
	tr, exp := memTracer(t)
	created := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	tr.EndTurn(TurnEnd{TraceParent: testAdmit, SessionID: "s", TurnID: testTurnID, Agent: "a", Status: helmrtype.TurnFailed,
		ErrorCode: "handler_failed", Created: created, Ended: created.Add(time.Second)})
	tr.EndTurn(TurnEnd{TurnID: testTurnID, Status: helmrtype.TurnCompleted, Created: created, Ended: created}) // untraced: nothing
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name != SpanTurn || s.SpanContext.TraceID().String() != testTraceID || s.SpanContext.SpanID() != TurnSpanID(testTurnID) ||
		s.Parent.SpanID().String() != "00f067aa0ba902b7" || !s.StartTime.Equal(created) || s.EndTime.Sub(s.StartTime) != time.Second ||
		s.Status.Description != helmrtype.TurnFailed || !hasAttr(s.Attributes, AttrErrorCode, "handler_failed") {
		t.Errorf("turn span: %+v", s)
	}
}

func hasAttr(kvs []attribute.KeyValue, k, v string) bool {
	for _, kv := range kvs {
		if string(kv.Key) == k && kv.Value.Emit() == v {
			return true
		}
	}
	return false
}

func TestImportSpansIsBounded(t *testing.T) {
	tr, exp := memTracer(t)
	start := time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)
	attrs := map[string]any{AttrOrigin: "forged", "long": strings.Repeat("é", 1000), "n": float64(7), "f": 1.5, "ok": true, "obj": map[string]any{}}
	for i := range 40 {
		attrs["k"+strings.Repeat("x", i)] = "v"
	}
	spans := []protocol.Span{
		{SpanID: "a3ce929d0e0e4736", Name: strings.Repeat("n", 300), Start: start, End: start.Add(time.Millisecond), Attributes: attrs, Error: "boom"},
		{SpanID: "0e0e4736a3ce929d", ParentID: "a3ce929d0e0e4736", Name: "child", Start: start, End: start},
		{SpanID: "zz", Name: "bad id", Start: start, End: start},
		{SpanID: "0000000000000000", Name: "zero id", Start: start, End: start},
		{SpanID: "1111111111111111", ParentID: "nope", Name: "bad parent", Start: start, End: start},
		{SpanID: "2222222222222222", Name: "backwards", Start: start, End: start.Add(-time.Second)},
		{SpanID: "3333333333333333", Name: "no start"},
		{SpanID: TurnSpanID(testTurnID).String(), Name: "the turn's own id", Start: start, End: start},
	}
	if n := tr.ImportSpans(testAdmit, testTurnID, spans); n != 2 {
		t.Fatalf("ImportSpans exported %d, want 2", n)
	}
	got := exp.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans exported", len(got))
	}
	p, c := got[0], got[1]
	if p.SpanContext.TraceID().String() != testTraceID || p.Parent.SpanID() != TurnSpanID(testTurnID) || len(p.Name) != MaxSpanNameBytes ||
		p.Status.Description != "boom" || p.SpanContext.SpanID().String() != "a3ce929d0e0e4736" {
		t.Errorf("first span: %+v", p)
	}
	if len(p.Attributes) != MaxSpanAttributes+1 || !hasAttr(p.Attributes, AttrOrigin, "session_process") {
		t.Errorf("first span has %d attributes: %v", len(p.Attributes), p.Attributes)
	}
	for _, kv := range p.Attributes {
		if kv.Key == "long" && len(kv.Value.AsString()) > MaxSpanAttrValueByte {
			t.Errorf("a value of %d bytes was kept", len(kv.Value.AsString()))
		}
	}
	if c.Parent.SpanID().String() != "a3ce929d0e0e4736" || c.SpanContext.TraceID().String() != testTraceID {
		t.Errorf("child span: %+v", c)
	}
	// At most a message's worth; nothing for an untraced Turn.
	exp.Reset()
	many := make([]protocol.Span, MaxSpansPerMessage+10)
	for i := range many {
		many[i] = protocol.Span{SpanID: "a3ce929d0e0e4736", Name: "x", Start: start, End: start}
	}
	if n := tr.ImportSpans(testAdmit, testTurnID, many); n != MaxSpansPerMessage {
		t.Errorf("ImportSpans of %d exported %d", len(many), n)
	}
	if n := tr.ImportSpans("", testTurnID, many); n != 0 {
		t.Errorf("ImportSpans for an untraced Turn exported %d", n)
	}
	var off *Tracer
	if n := off.ImportSpans(testAdmit, testTurnID, many); n != 0 {
		t.Errorf("ImportSpans with tracing off exported %d", n)
	}
}

// FuzzImportSpans feeds a session process's spans message, as JSON, to
// ImportSpans: whatever it says, what is exported is in the Turn's trace
// and within the limits.
func FuzzImportSpans(f *testing.F) {
	f.Add(`[{"span_id":"a3ce929d0e0e4736","name":"helmr.turn.handler","start":"2026-12-02T05:00:00Z","end":"2026-12-02T05:00:01Z","attributes":{"a":1,"b":"x","c":true}}]`)
	f.Add(`[{"span_id":"a3ce929d0e0e4736","parent_span_id":"0e0e4736a3ce929d","name":"","start":"2026-12-02T05:00:00Z","end":"2026-12-02T05:00:00Z","error":"e"}]`)
	f.Add(`[{"span_id":"","name":"x"}]`)
	exp := tracetest.NewInMemoryExporter()
	tr := NewTracerWith(sdktrace.NewSimpleSpanProcessor(exp))
	f.Fuzz(func(t *testing.T, msg string) {
		var spans []protocol.Span
		if json.Unmarshal([]byte(msg), &spans) != nil {
			return
		}
		exp.Reset()
		n := tr.ImportSpans(testAdmit, testTurnID, spans)
		got := exp.GetSpans()
		if n != len(got) || n > MaxSpansPerMessage {
			t.Fatalf("exported %d, reported %d", len(got), n)
		}
		for _, s := range got {
			if s.SpanContext.TraceID().String() != testTraceID || len(s.Name) > MaxSpanNameBytes || len(s.Attributes) > MaxSpanAttributes+1 ||
				s.EndTime.Before(s.StartTime) {
				t.Fatalf("exported span out of bounds: %+v", s)
			}
		}
	})
}
