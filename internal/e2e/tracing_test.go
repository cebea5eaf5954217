package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/store"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// otlpSpan is one span an OTLP receiver got, decoded.
type otlpSpan struct {
	Trace, ID, Parent, Name, Service string
	Attrs                            map[string]string
	Links                            []string // "TRACE/SPAN"
	Error                            bool
	Start, End                       time.Time
}

// otlpReceiver is an in-process OTLP/HTTP collector: it decodes every
// ExportTraceServiceRequest posted to /v1/traces.
type otlpReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	spans    []otlpSpan
	requests int
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want protobuf on /v1/traces", http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(req.Body)
		var ex coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.requests++
		for _, rs := range ex.ResourceSpans {
			service := attrString(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					sp := otlpSpan{Trace: hex.EncodeToString(s.TraceId), ID: hex.EncodeToString(s.SpanId),
						Parent: hex.EncodeToString(s.ParentSpanId), Name: s.Name, Service: service, Attrs: map[string]string{},
						Error: s.GetStatus().GetCode() == 2, Start: time.Unix(0, int64(s.StartTimeUnixNano)), End: time.Unix(0, int64(s.EndTimeUnixNano))}
					for _, kv := range s.Attributes {
						sp.Attrs[kv.Key] = anyString(kv.Value)
					}
					for _, l := range s.Links {
						sp.Links = append(sp.Links, hex.EncodeToString(l.TraceId)+"/"+hex.EncodeToString(l.SpanId))
					}
					r.spans = append(r.spans, sp)
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func attrString(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return anyString(kv.Value)
		}
	}
	return ""
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return ""
}

func (r *otlpReceiver) snapshot() ([]otlpSpan, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]otlpSpan(nil), r.spans...), r.requests
}

// waitFor waits until the receiver has a helmr.turn span for each Turn.
func (r *otlpReceiver) waitFor(t *testing.T, turnIDs ...string) []otlpSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans, _ := r.snapshot()
		missing := 0
		for _, id := range turnIDs {
			if findSpan(spans, func(s otlpSpan) bool { return s.Name == obs.SpanTurn && s.Attrs[obs.AttrTurnID] == id }) == nil {
				missing++
			}
		}
		if missing == 0 {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("no helmr.turn span for %d of the Turns %v; spans: %s", missing, turnIDs, describeSpans(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func findSpan(spans []otlpSpan, ok func(otlpSpan) bool) *otlpSpan {
	for i := range spans {
		if ok(spans[i]) {
			return &spans[i]
		}
	}
	return nil
}

func describeSpans(spans []otlpSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "\n  %s %s<-%s %s %v links=%v", s.Trace, s.ID, s.Parent, s.Name, s.Attrs, s.Links)
	}
	return b.String()
}

// tree draws a trace's spans as a tree, with each span's start (from the
// trace's first) and duration.
func tree(spans []otlpSpan, trace string) string {
	var in []otlpSpan
	for _, s := range spans {
		if s.Trace == trace {
			in = append(in, s)
		}
	}
	slices.SortFunc(in, func(a, b otlpSpan) int { return a.Start.Compare(b.Start) })
	if len(in) == 0 {
		return ""
	}
	t0 := in[0].Start
	ids := map[string]bool{}
	for _, s := range in {
		ids[s.ID] = true
	}
	var b strings.Builder
	var walk func(s otlpSpan, depth int)
	walk = func(s otlpSpan, depth int) {
		extra := ""
		if len(s.Links) > 0 {
			extra = "  (links to " + strings.Join(s.Links, ", ") + ")"
		}
		fmt.Fprintf(&b, "%s%-*s +%7.2fms %8.2fms%s\n", strings.Repeat("  ", depth), 40-2*depth, s.Name,
			float64(s.Start.Sub(t0).Microseconds())/1000, float64(s.End.Sub(s.Start).Microseconds())/1000, extra)
		for _, c := range in {
			if c.Parent == s.ID {
				walk(c, depth+1)
			}
		}
	}
	for _, s := range in {
		if !ids[s.Parent] {
			walk(s, 0)
		}
	}
	return b.String()
}

// mustSpan returns the one span of trace named name (with attribute
// turn_id when given) and fails the test when there is not exactly one.
func mustSpan(t *testing.T, spans []otlpSpan, trace, name, turnID string) otlpSpan {
	t.Helper()
	var found []otlpSpan
	for _, s := range spans {
		if s.Trace == trace && s.Name == name && (turnID == "" || s.Attrs[obs.AttrTurnID] == turnID) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %s (turn %q) in trace %s, want 1; spans: %s", len(found), name, turnID, trace, describeSpans(spans))
	}
	return found[0]
}

func wantParent(t *testing.T, child, parent otlpSpan) {
	t.Helper()
	if child.Parent != parent.ID || child.Trace != parent.Trace {
		t.Errorf("span %s has parent %s/%s, want %s (%s/%s)", child.Name, child.Trace, child.Parent, parent.Name, parent.Trace, parent.ID)
	}
}

// TestTracingAcrossATurn runs helmr server with OTLP/HTTP export to an
// in-process receiver and follows one Turn from its REST admission (under
// the client's own traceparent) through dispatch, the session process
// (handler, agent code's span, output, a timer wait) to settlement, and
// the Turn of a child Session it started through runtime MCP, which is a
// trace of its own linked to the caller's Turn. A Turn admitted before a
// restart of the control plane and dispatched after it stays in its trace.
func TestTracingAcrossATurn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs helmr server")
	}
	rcv := newOTLPReceiver(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME=helmr-e2e"}
	data := t.TempDir()
	s := startServerWith(t, data, env, nil, "server", "--log-level", "warn")
	if out, errOut, code := s.cli(t, "deploy", "testdata/agents"); code != 0 {
		t.Fatalf("deploy: %d %s %s", code, out, errOut)
	}

	// The client's span: the API request is its child.
	clientTrace, clientSpan := "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	in := driveIn{Calls: []call{
		{Tool: "spawn", Args: map[string]any{"agent": "worker", "input": map[string]any{"n": 3}, "idempotency_key": "w1"}},
		{Tool: "wait_turn", Args: map[string]any{"session_id": "$0.session_id", "turn_id": "$0.turn_id", "timeout": "30s"}},
	}}
	body := map[string]any{"agent": "driver", "input": map[string]any{"trace": true, "calls": in.Calls}}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.url+"/v1/sessions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rec helmrtype.SessionCreateReceipt
	json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK || rec.Turn == nil {
		t.Fatalf("create: %d %+v", resp.StatusCode, rec)
	}
	p := &plane{t: t, url: s.url, key: s.key}
	o := p.wait(rec.Session.ID, rec.Turn.ID)
	var res driveOut
	if o.Status != helmrtype.TurnCompleted || json.Unmarshal(o.Result, &res) != nil || len(res.Calls) != 2 || res.Calls[0].Error != "" {
		t.Fatalf("driver turn: %s %+v %s", o.Status, o.Error, o.Result)
	}
	childTurn, _ := res.Calls[0].Result["turn_id"].(string)
	if childTurn == "" {
		t.Fatalf("spawn result: %+v", res.Calls[0])
	}
	spans := rcv.waitFor(t, rec.Turn.ID, childTurn)
	if testing.Verbose() {
		child := findSpan(spans, func(s otlpSpan) bool { return s.Name == obs.SpanTurn && s.Attrs[obs.AttrTurnID] == childTurn })
		t.Logf("the driver's trace %s:\n%s\nthe worker's trace %s:\n%s", clientTrace, tree(spans, clientTrace), child.Trace, tree(spans, child.Trace))
	}

	// One trace from the client's span to settlement.
	tr := clientTrace
	api := mustSpan(t, spans, tr, "POST /v1/sessions", "")
	if api.Parent != clientSpan || api.Service != "helmr-e2e" || api.Attrs["http.response.status_code"] == "" {
		t.Errorf("API request span: %+v", api)
	}
	admit := mustSpan(t, spans, tr, obs.SpanAdmit, "")
	wantParent(t, admit, api)
	turn := mustSpan(t, spans, tr, obs.SpanTurn, rec.Turn.ID)
	wantParent(t, turn, admit)
	if turn.ID != obs.TurnSpanID(rec.Turn.ID).String() || turn.Attrs[obs.AttrStatus] != "completed" || turn.Attrs[obs.AttrAgent] != "driver" {
		t.Errorf("turn span: %+v", turn)
	}
	for _, name := range []string{obs.SpanDispatch, obs.SpanSettle, obs.SpanHandler} {
		wantParent(t, mustSpan(t, spans, tr, name, ""), turn)
	}
	handler := mustSpan(t, spans, tr, obs.SpanHandler, "")
	if handler.Attrs[obs.AttrOrigin] != "session_process" || handler.Attrs["helmr.turn.status"] != "completed" {
		t.Errorf("handler span: %+v", handler)
	}
	work := mustSpan(t, spans, tr, "e2e.work", "")
	wantParent(t, work, handler)
	if work.Attrs["e2e.calls"] != "2" {
		t.Errorf("agent code's span: %+v", work)
	}
	output := mustSpan(t, spans, tr, obs.SpanOutput, "")
	wantParent(t, output, work)
	if output.Attrs["helmr.output.sequence"] == "" || output.Attrs["helmr.output.parts"] != "1" {
		t.Errorf("output span: %+v", output)
	}
	var tools []string
	for _, s := range spans {
		if s.Trace == tr && s.Name == obs.SpanMCP {
			wantParent(t, s, handler)
			tools = append(tools, s.Attrs["helmr.mcp.tool"])
		}
	}
	if slices.Sort(tools); !slices.Equal(tools, []string{"spawn", "wait_turn"}) {
		t.Errorf("runtime MCP call spans for %v, want spawn and wait_turn", tools)
	}
	wait := mustSpan(t, spans, tr, obs.SpanWait, "")
	wantParent(t, wait, work)
	if wait.Attrs["helmr.wait.kind"] != "timer" || wait.Attrs["helmr.wait.status"] != "resolved" {
		t.Errorf("wait span: %+v", wait)
	}

	// The child's Turn: a trace of its own, whose admission links to the
	// caller's Turn span.
	child := findSpan(spans, func(s otlpSpan) bool { return s.Name == obs.SpanTurn && s.Attrs[obs.AttrTurnID] == childTurn })
	if child.Trace == tr {
		t.Errorf("the child's Turn is in its caller's trace")
	}
	childAdmit := mustSpan(t, spans, child.Trace, obs.SpanAdmit, "")
	wantParent(t, *child, childAdmit)
	if childAdmit.Parent != "" || len(childAdmit.Links) != 1 || childAdmit.Links[0] != tr+"/"+turn.ID {
		t.Errorf("child admission span: %+v, want a root linked to %s/%s", childAdmit, tr, turn.ID)
	}
	wantParent(t, mustSpan(t, spans, child.Trace, obs.SpanHandler, ""), *child)
	wantParent(t, mustSpan(t, spans, child.Trace, obs.SpanDispatch, ""), *child)

	// A Turn queued behind a running one when the control plane is killed
	// is dispatched by the next control plane, in its admission's trace.
	out, errOut, code := s.cli(t, "session", "create", "--agent", "echo", "--text", "sleep 3s", "--json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var slow helmrtype.SessionCreateReceipt
	json.Unmarshal([]byte(out), &slow)
	out, _, code = s.cli(t, "session", "enqueue", slow.Session.ID, "--text", "after the restart", "--json")
	var queued helmrtype.TurnState
	if code != 0 || json.Unmarshal([]byte(out), &queued) != nil {
		t.Fatalf("enqueue: %d %s", code, out)
	}
	spans, _ = rcv.snapshot()
	queuedAdmit := findSpan(spans, func(s otlpSpan) bool { return s.Name == obs.SpanAdmit && s.Attrs[obs.AttrTurnID] == queued.ID })
	for deadline := time.Now().Add(10 * time.Second); queuedAdmit == nil && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		spans, _ = rcv.snapshot()
		queuedAdmit = findSpan(spans, func(s otlpSpan) bool { return s.Name == obs.SpanAdmit && s.Attrs[obs.AttrTurnID] == queued.ID })
	}
	if queuedAdmit == nil {
		t.Fatalf("no admission span for the queued Turn: %s", describeSpans(spans))
	}
	s.kill()
	s2 := startServerWith(t, data, env, nil, "server", "--log-level", "warn")
	out, _, code = s2.cli(t, "session", "turn", "wait", slow.Session.ID, queued.ID, "--timeout", "60s", "--json")
	var wr helmrtype.TimedTurnWaitResult
	if json.Unmarshal([]byte(out), &wr); code != 0 || wr.Outcome == nil || wr.Outcome.Status != "completed" {
		t.Fatalf("queued turn after the restart: %d %s", code, out)
	}
	spans = rcv.waitFor(t, queued.ID)
	qt := mustSpan(t, spans, queuedAdmit.Trace, obs.SpanTurn, queued.ID)
	wantParent(t, qt, *queuedAdmit)
	wantParent(t, mustSpan(t, spans, queuedAdmit.Trace, obs.SpanDispatch, ""), qt)
	wantParent(t, mustSpan(t, spans, queuedAdmit.Trace, obs.SpanHandler, ""), qt)
}

// TestTracingOff runs Turns on a control plane whose OTEL_* variables do
// not turn tracing on (an endpoint set, but the exporter none): the
// receiver gets nothing and no Turn stores a trace context.
func TestTracingOff(t *testing.T) {
	rcv := newOTLPReceiver(t)
	for _, env := range []map[string]string{
		{},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.srv.URL, "OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": rcv.srv.URL, "OTEL_SDK_DISABLED": "true"},
	} {
		tracer, err := obs.NewTracer(context.Background(), func(k string) string { return env[k] }, "test")
		if err != nil || tracer.Enabled() {
			t.Fatalf("NewTracer(%v) = enabled %v, %v; want off", env, tracer.Enabled(), err)
		}
		p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{Tracer: tracer})
		r := p.create("driver", mustJSON(t, map[string]any{"trace": true}))
		if o := p.wait(r.Session.ID, r.Turn.ID); o.Status != helmrtype.TurnCompleted {
			t.Fatalf("turn: %s %+v", o.Status, o.Error)
		}
		p.cp.Store.View(context.Background(), func(tx store.Tx) error {
			tr, err := tx.GetTurn(context.Background(), r.Session.ID, r.Turn.ID)
			if err != nil {
				t.Errorf("stored turn: %v", err)
			} else if tr.TraceParent != "" {
				t.Errorf("stored turn has trace context %q with tracing off", tr.TraceParent)
			}
			return nil
		})
		p.stop()
	}
	if spans, n := rcv.snapshot(); n != 0 || len(spans) != 0 {
		t.Fatalf("the receiver got %d requests with tracing off: %s", n, describeSpans(spans))
	}
}

// TestTracingTypeScriptAgent runs a TypeScript Agent under helmr dev with
// tracing on: the SDK takes turn.start's traceparent and ships its
// handler's span, which lands under the Turn's span.
func TestTracingTypeScriptAgent(t *testing.T) {
	needTypeScriptSDK(t)
	rcv := newOTLPReceiver(t)
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=50"}
	s := startServerWith(t, t.TempDir(), env, nil, "dev", tsAgentsDir)
	deadline := time.Now().Add(tsPatience)
	for !strings.Contains(s.output(), "deployed ") {
		if time.Now().After(deadline) {
			t.Fatalf("helmr dev did not deploy: %s", s.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	rec := createJSON(t, s, "validated", `{"n": 21, "word": "hi"}`)
	if o := waitTurnWithin(t, s, rec.Session.ID, rec.Turn.ID, tsPatience); o.Status != helmrtype.TurnCompleted {
		t.Fatalf("turn: %s %+v", o.Status, o.Error)
	}
	spans := rcv.waitFor(t, rec.Turn.ID)
	turn := *findSpan(spans, func(s otlpSpan) bool { return s.Name == obs.SpanTurn && s.Attrs[obs.AttrTurnID] == rec.Turn.ID })
	handler := mustSpan(t, spans, turn.Trace, obs.SpanHandler, "")
	wantParent(t, handler, turn)
	if handler.Attrs["helmr.turn.status"] != "completed" || handler.Attrs[obs.AttrOrigin] != "session_process" {
		t.Errorf("handler span: %+v", handler)
	}
	wantParent(t, mustSpan(t, spans, turn.Trace, obs.SpanDispatch, ""), turn)
	wantParent(t, mustSpan(t, spans, turn.Trace, obs.SpanSettle, ""), turn)
}

// TestTracingInProcess traces a control plane in this process (so that
// go test -race covers its tracing), with the spans in memory: a Turn
// with output, a wait and a runtime MCP child, each with its Turn span, and
// the session process's spans imported into the right trace.
func TestTracingInProcess(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tracer := obs.NewTracerWith(sdktrace.NewSimpleSpanProcessor(exp))
	p := startPlaneConfig(t, "127.0.0.1:0", controlplane.Config{Tracer: tracer})
	r := p.create("driver", mustJSON(t, map[string]any{"trace": true, "calls": []call{
		{Tool: "spawn", Args: map[string]any{"agent": "worker", "input": map[string]any{"n": 2}, "idempotency_key": "w"}},
		{Tool: "wait_turn", Args: map[string]any{"session_id": "$0.session_id", "turn_id": "$0.turn_id", "timeout": "30s"}},
	}}))
	if o := p.wait(r.Session.ID, r.Turn.ID); o.Status != helmrtype.TurnCompleted {
		t.Fatalf("turn: %s %+v", o.Status, o.Error)
	}
	var stored *store.Turn
	p.cp.Store.View(context.Background(), func(tx store.Tx) error {
		var err error
		stored, err = tx.GetTurn(context.Background(), r.Session.ID, r.Turn.ID)
		return err
	})
	sc, err := obs.ParseTraceParent(stored.TraceParent)
	if err != nil {
		t.Fatalf("stored trace context %q: %v", stored.TraceParent, err)
	}
	count := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		clear(count)
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == sc.TraceID() {
				count[s.Name]++
			}
			if s.Name == obs.SpanTurn && s.SpanContext.TraceID() != sc.TraceID() {
				count["child "+s.Name]++
			}
		}
		if count[obs.SpanTurn] == 1 && count["child "+obs.SpanTurn] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans of the Turn's trace: %v", count)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range []string{"POST /v1/sessions", obs.SpanAdmit, obs.SpanDispatch, obs.SpanHandler, "e2e.work", obs.SpanOutput, obs.SpanWait, obs.SpanSettle} {
		if count[name] != 1 {
			t.Errorf("%d %s spans in the Turn's trace, want 1 (%v)", count[name], name, count)
		}
	}
}
