package obs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/protocol"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing: one trace per Turn. The Turn's trace context is the W3C
// traceparent of the span that admitted it, stored with the Turn; the
// Turn's own span ("helmr.turn") has a span ID derived from the Turn's ID,
// so every part of the Turn's life (dispatch, the session process's spans,
// settlement) is a child of it without another stored value, on any node
// and after a restart, and the span itself is written at settlement with
// the admission as its start. See docs/observability.md.

// Span names of the control plane and the session process.
const (
	SpanTurn     = "helmr.turn"
	SpanAdmit    = "helmr.turn.admit"
	SpanDispatch = "helmr.turn.dispatch"
	SpanSettle   = "helmr.turn.settle"
	SpanHandler  = protocol.SpanHandler
	SpanOutput   = protocol.SpanOutput
	SpanWait     = protocol.SpanWait
	SpanMCP      = protocol.SpanMCP
)

// Attribute keys of Helmr's spans.
const (
	AttrSessionID = "helmr.session.id"
	AttrTurnID    = "helmr.turn.id"
	AttrAgent     = "helmr.agent"
	AttrStatus    = "helmr.turn.status"
	AttrErrorCode = "helmr.error.code"
	AttrRequestID = "helmr.request.id"
	AttrOrigin    = "helmr.origin"
)

// Limits on the spans a session process ships (protocol.TypeSpans): the
// process is untrusted, so a span over a limit is cut or dropped, never
// an error of its Turn.
const (
	MaxSpansPerMessage   = protocol.MaxSpansPerMessage
	MaxSpansPerTurn      = protocol.MaxSpansPerTurn
	MaxSpanNameBytes     = 128
	MaxSpanAttributes    = 32
	MaxSpanAttrKeyBytes  = 128
	MaxSpanAttrValueByte = 1024
)

// Tracer makes Helmr's spans and exports them through OpenTelemetry. A nil
// Tracer, or one made by NewTracer with tracing off, does nothing and
// costs nothing: callers check Enabled before any work for a span.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// NewTracer configures tracing from the standard OTEL_* environment
// variables that getenv reads. Tracing is on when OTEL_TRACES_EXPORTER is
// "otlp", or when it is unset and an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn it off. The
// exporter speaks OTLP over HTTP (http/protobuf, the default) or gRPC
// (OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL=grpc) and reads its other OTEL_*
// variables (endpoint, headers, timeouts) from the process's environment
// itself, so getenv should be os.Getenv but in tests of the decision. With
// tracing off it returns a Tracer that is off.
func NewTracer(ctx context.Context, getenv func(string) string, version string) (*Tracer, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return &Tracer{}, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return &Tracer{}, nil
	case "":
		if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return &Tracer{}, nil
		}
	case "otlp":
	default:
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "OTEL_TRACES_EXPORTER=%s: helmr exports traces with otlp only (or none)", exp)
	}
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	var exp sdktrace.SpanExporter
	var err error
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "OTEL_EXPORTER_OTLP_PROTOCOL=%s: helmr exports OTLP as http/protobuf or grpc", proto)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	// The service name defaults to helmr; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES override it (later detectors win).
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "helmr"),
		attribute.String("service.version", version)), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return newTracer(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// NewTracerWith returns a Tracer that is on and hands its spans to sp (a
// processor over an exporter of the caller's choice, as tests use).
func NewTracerWith(sp sdktrace.SpanProcessor) *Tracer {
	return newTracer(sdktrace.WithSpanProcessor(sp))
}

func newTracer(opts ...sdktrace.TracerProviderOption) *Tracer {
	// The sampler comes from OTEL_TRACES_SAMPLER (parent-based always-on
	// by default), which the SDK reads itself.
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithIDGenerator(idGenerator{}))...)
	return &Tracer{tp: tp, tracer: tp.Tracer("github.com/helmr-go/helmr")}
}

// Enabled reports whether the Tracer records spans.
func (t *Tracer) Enabled() bool { return t != nil && t.tp != nil }

// Shutdown exports the spans not yet exported and stops the Tracer.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Start starts a span as a child of the span in ctx (a new trace when
// there is none). Callers check Enabled first.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, opts...)
}

// idGenerator makes random IDs, except for a span whose IDs the caller
// fixed in its ctx (withSpanID): a Turn's span and the spans a session
// process shipped keep their own IDs.
type idGenerator struct{}

type fixedIDKey struct{}

func withSpanID(ctx context.Context, id trace.SpanID) context.Context {
	return context.WithValue(ctx, fixedIDKey{}, id)
}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		hi, lo := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			tid[i], tid[8+i] = byte(hi>>(8*i)), byte(lo>>(8*i))
		}
	}
	return tid, idGenerator{}.NewSpanID(ctx, tid)
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if id, ok := ctx.Value(fixedIDKey{}).(trace.SpanID); ok {
		return id
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		v := rand.Uint64()
		for i := range 8 {
			sid[i] = byte(v >> (8 * i))
		}
	}
	return sid
}

// TraceParent returns the W3C traceparent of the sampled span in ctx, ""
// when there is none: what a Turn admitted under ctx stores.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return formatTraceParent(sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

func formatTraceParent(tid trace.TraceID, sid trace.SpanID, flags trace.TraceFlags) string {
	return "00-" + tid.String() + "-" + sid.String() + "-" + flags.String()
}

// ParseTraceParent reads a W3C traceparent ("00-TRACEID-SPANID-FLAGS").
func ParseTraceParent(s string) (trace.SpanContext, error) {
	parts := strings.Split(s, "-")
	if len(parts) != 4 || parts[0] != "00" || len(parts[3]) != 2 {
		return trace.SpanContext{}, errors.New("not a version 00 traceparent")
	}
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil {
		return trace.SpanContext{}, err
	}
	sid, err := trace.SpanIDFromHex(parts[2])
	if err != nil {
		return trace.SpanContext{}, err
	}
	var flags trace.TraceFlags
	switch parts[3] {
	case "01":
		flags = trace.FlagsSampled
	case "00":
	default:
		return trace.SpanContext{}, errors.New("unknown traceparent flags")
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), nil
}

// TurnSpanID is the span ID of a Turn's span: the last 8 bytes of its
// UUIDv7, which are random.
func TurnSpanID(turnID string) trace.SpanID {
	u, err := uuid.Parse(turnID)
	if err != nil {
		return trace.SpanID{}
	}
	var sid trace.SpanID
	copy(sid[:], u[8:])
	return sid
}

// TurnSpanContext returns the span context of the Turn's span from the
// Turn's stored trace context; ok false when it has none.
func TurnSpanContext(traceParent, turnID string) (_ trace.SpanContext, ok bool) {
	if traceParent == "" {
		return trace.SpanContext{}, false
	}
	adm, err := ParseTraceParent(traceParent)
	sid := TurnSpanID(turnID)
	if err != nil || !sid.IsValid() {
		return trace.SpanContext{}, false
	}
	return adm.WithSpanID(sid), true
}

// TurnTraceParent is the W3C traceparent of the Turn's span, which
// turn.start carries to the session process; "" when the Turn has no trace.
func TurnTraceParent(traceParent, turnID string) string {
	sc, ok := TurnSpanContext(traceParent, turnID)
	if !ok {
		return ""
	}
	return formatTraceParent(sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// StartTurnChild starts a span that is a child of the Turn's span; ok false
// (and nothing started) when tracing is off or the Turn has no trace.
func (t *Tracer) StartTurnChild(ctx context.Context, traceParent, turnID, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span, bool) {
	if !t.Enabled() {
		return ctx, nil, false
	}
	sc, ok := TurnSpanContext(traceParent, turnID)
	if !ok {
		return ctx, nil, false
	}
	ctx, sp := t.tracer.Start(trace.ContextWithRemoteSpanContext(ctx, sc), name, trace.WithAttributes(attrs...))
	return ctx, sp, true
}

// TurnEnd is a settled Turn, as EndTurn writes its span.
type TurnEnd struct {
	TraceParent, SessionID, TurnID, Agent, Status, ErrorCode string
	Created, Ended                                           time.Time
}

// EndTurn writes the Turn's span ("helmr.turn"), from its admission to its
// settlement, as a child of the admission's span.
func (t *Tracer) EndTurn(e TurnEnd) {
	if !t.Enabled() || e.TraceParent == "" {
		return
	}
	adm, err := ParseTraceParent(e.TraceParent)
	sid := TurnSpanID(e.TurnID)
	if err != nil || !sid.IsValid() {
		return
	}
	ctx := withSpanID(trace.ContextWithRemoteSpanContext(context.Background(), adm), sid)
	_, sp := t.tracer.Start(ctx, SpanTurn, trace.WithTimestamp(e.Created), trace.WithAttributes(
		attribute.String(AttrSessionID, e.SessionID), attribute.String(AttrTurnID, e.TurnID),
		attribute.String(AttrAgent, e.Agent), attribute.String(AttrStatus, e.Status)))
	if e.Status != helmrtype.TurnCompleted {
		sp.SetAttributes(attribute.String(AttrErrorCode, e.ErrorCode))
		sp.SetStatus(codes.Error, e.Status)
	}
	sp.End(trace.WithTimestamp(e.Ended))
}

// Link returns ctx carrying a link to sc, which the next Turn admitted
// under ctx gets (a child Session's Turn started by a caller's Turn).
func Link(ctx context.Context, sc trace.SpanContext) context.Context {
	return context.WithValue(ctx, linkKey{}, sc)
}

type linkKey struct{}

// LinkFrom returns the link Link put in ctx.
func LinkFrom(ctx context.Context) (trace.SpanContext, bool) {
	sc, ok := ctx.Value(linkKey{}).(trace.SpanContext)
	return sc, ok && sc.IsValid()
}

// ImportSpans exports spans that a session process recorded for its Turn.
// They join the Turn's trace whatever they say (the process cannot write
// into another trace): a span without a parent is the Turn span's child.
// Spans over the limits are cut (attributes, names) or dropped (bad IDs
// or times); it returns how many it exported.
func (t *Tracer) ImportSpans(traceParent, turnID string, spans []protocol.Span) int {
	turn, ok := TurnSpanContext(traceParent, turnID)
	if !t.Enabled() || !ok {
		return 0
	}
	if len(spans) > MaxSpansPerMessage {
		spans = spans[:MaxSpansPerMessage]
	}
	n := 0
	for i := range spans {
		s := &spans[i]
		sid, err := trace.SpanIDFromHex(s.SpanID)
		if err != nil || sid == turn.SpanID() || s.Start.IsZero() || s.End.Before(s.Start) {
			continue
		}
		parent := turn
		if s.ParentID != "" {
			pid, err := trace.SpanIDFromHex(s.ParentID)
			if err != nil {
				continue
			}
			parent = turn.WithSpanID(pid)
		}
		name := s.Name
		if name == "" {
			name = "unnamed"
		}
		ctx := withSpanID(trace.ContextWithRemoteSpanContext(context.Background(), parent), sid)
		_, sp := t.tracer.Start(ctx, cut(name, MaxSpanNameBytes), trace.WithTimestamp(s.Start),
			trace.WithAttributes(spanAttrs(s.Attributes)...), trace.WithAttributes(attribute.String(AttrOrigin, "session_process")))
		if s.Error != "" {
			sp.SetStatus(codes.Error, cut(s.Error, MaxSpanAttrValueByte))
		}
		sp.End(trace.WithTimestamp(s.End))
		n++
	}
	return n
}

// spanAttrs turns a shipped span's attributes into OpenTelemetry ones:
// strings, booleans, and numbers (integers when whole), within the limits.
func spanAttrs(m map[string]any) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, min(len(m), MaxSpanAttributes))
	for k, v := range m {
		if len(out) == MaxSpanAttributes {
			break
		}
		if k == "" || k == AttrOrigin {
			continue
		}
		k = cut(k, MaxSpanAttrKeyBytes)
		switch v := v.(type) {
		case string:
			out = append(out, attribute.String(k, cut(v, MaxSpanAttrValueByte)))
		case bool:
			out = append(out, attribute.Bool(k, v))
		case float64:
			if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
				out = append(out, attribute.Int64(k, int64(v)))
			} else {
				out = append(out, attribute.Float64(k, v))
			}
		}
	}
	return out
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// StartAdmit starts the span of a Turn's admission ("helmr.turn.admit"):
// a child of the span in ctx (the API request's), or, when ctx carries a
// Link (a runtime MCP call of another Turn), the root of a new trace that
// links to it. It returns a nil span when tracing is off.
func (t *Tracer) StartAdmit(ctx context.Context) (context.Context, trace.Span) {
	if !t.Enabled() {
		return ctx, nil
	}
	var opts []trace.SpanStartOption
	if l, ok := LinkFrom(ctx); ok {
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: l}))
	}
	return t.tracer.Start(ctx, SpanAdmit, opts...)
}

// EndSpan ends sp (nil: nothing), naming the Session and Turn when known
// and marking it failed with err's code (only the code: an error's text
// may quote input).
func EndSpan(sp trace.Span, sessionID, turnID string, err error) {
	if sp == nil {
		return
	}
	if sessionID != "" {
		sp.SetAttributes(attribute.String(AttrSessionID, sessionID))
	}
	if turnID != "" {
		sp.SetAttributes(attribute.String(AttrTurnID, turnID))
	}
	if err != nil {
		code := string(helmrtype.CodeOf(err))
		sp.SetAttributes(attribute.String(AttrErrorCode, code))
		sp.SetStatus(codes.Error, code)
	}
	sp.End()
}
