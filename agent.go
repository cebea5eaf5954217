package helmr

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/sessionproc"
)

// InputContent is conversational input: an array of text parts. An Agent
// whose input type is InputContent is a text Agent.
type InputContent = helmrtype.Content

// Content is an array of text and JSON parts.
type Content = helmrtype.Content

// ContentPart is one part of Content.
type ContentPart = helmrtype.ContentPart

// InputSource says where a Turn's input came from: Kind is "user" (then,
// for a message in a Slack thread, with Slack), "api_key", "schedule" or
// "session" (then with RequesterSessionID and OriginTurnID).
type InputSource = helmrtype.InputSource

// RuntimeMCPPolicy is a runtime MCP allowlist: AgentSpec.RuntimeMCP sets an
// Agent's maximum and MCP.ConnectionOptions takes a narrower one.
type RuntimeMCPPolicy = helmrtype.RuntimeMCPPolicy

// RuntimeMCPRule grants one runtime MCP operation; see the helmrtype
// constants MCPStart, MCPSpawn, … for the operation names.
type RuntimeMCPRule = helmrtype.RuntimeMCPRule

// Text returns Content with one text part.
func Text(s string) Content { return helmrtype.Text(s) }

// JSON returns Content with one JSON part holding v.
func JSON(v any) (Content, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Content{{Type: helmrtype.PartJSON, Value: b}}, nil
}

// Validator validates and converts raw JSON into a T: the role of the
// specification's Standard Schema. JSONSchema may return nil when the
// validator has no JSON Schema form; discovery then says so.
type Validator[T any] interface {
	Validate(ctx context.Context, raw json.RawMessage) (T, error)
	JSONSchema() json.RawMessage
}

// AgentSpec declares an Agent. I is the input type (InputContent for a text
// Agent), R the result type and S the type init returns.
type AgentSpec[I, R, S any] struct {
	// ID matches ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$.
	ID string
	// Template is the Computer template new Sessions run on.
	Template *TemplateDef
	// Init runs once per session process before its first Turn.
	Init func(ctx context.Context, ic *InitContext) (S, error)
	// Turn handles one Turn; its result is validated and becomes the Turn's result.
	// Give Turn or Run, not both. It runs on a goroutine that later Turns
	// may reuse (as net/http reuses a connection's): a handler that calls
	// runtime.LockOSThread unlocks it before it returns.
	Turn func(ctx context.Context, t *Turn[I], ac *AgentContext[S]) (R, error)
	// Run makes the Agent an Actor: it runs once per session process,
	// after Init, and receives the Session's Turns in FIFO order with
	// s.Receive (see ActorSession).
	Run func(ctx context.Context, s *ActorSession[I, R], ac *AgentContext[S]) error
	// IdleTimeout is the default hot-wait of this Agent's waits (timers,
	// Tokens, questions) and, for an Actor, how long it stays hot while
	// it waits in Receive; past it the process may be suspended. 1ms–1h;
	// default 30s.
	IdleTimeout string
	// InputSchema overrides the validator derived from I.
	InputSchema Validator[I]
	// ResultSchema overrides the validator derived from R. A result is
	// stored as the handler's value encodes when SchemaFor's validators
	// check it (the default: it must fit R's schema and decode into R),
	// and as this Validator returns it otherwise.
	ResultSchema Validator[R]
	// CloseAfterIdle closes an idle Session after this Duration, or "never". Default "7d".
	CloseAfterIdle string
	// HibernateAfterIdle hibernates an idle Session's Computer. Default "never".
	HibernateAfterIdle string
	// MaxTurnDuration is when a running Turn reaches its deadline. Empty: no limit.
	MaxTurnDuration string
	// RuntimeMCP is the most this Agent's code may do through the runtime
	// MCP server (see MCP.ConnectionOptions). nil resolves, at publication,
	// to every operation on every Agent of the Deployment with new-Computer
	// placement; &RuntimeMCPPolicy{} grants nothing.
	RuntimeMCP *RuntimeMCPPolicy
	// Triggers start Sessions of this Agent on their own (Cron).
	Triggers []Trigger
}

// AgentDef is a validated Agent definition. Pass it to Main, and to
// helmrclient.Create for typed invocation.
type AgentDef[I, R, S any] struct {
	spec   AgentSpec[I, R, S]
	text   bool
	input  Validator[I]
	result Validator[R]
	// triggers are the manifest entries of spec.Triggers.
	triggers []helmrtype.TriggerManifest
}

// Definition is any Agent definition; Main takes these.
type Definition interface {
	AgentID() string
	manifest() helmrtype.AgentManifest
	template() *TemplateDef
	runtime() sessionproc.Agent
}

// Agent validates spec and returns the Agent definition. Like the
// specification's TypeError, it panics when the ID is invalid or the
// template or turn handler is missing.
func Agent[I, R, S any](spec AgentSpec[I, R, S]) *AgentDef[I, R, S] {
	if !helmrtype.ValidName(spec.ID) {
		panic(fmt.Sprintf("helmr.Agent: id %q must match %s", spec.ID, helmrtype.NamePattern))
	}
	if spec.Template == nil {
		panic(fmt.Sprintf("helmr.Agent %q: Template is required", spec.ID))
	}
	if (spec.Turn == nil) == (spec.Run == nil) {
		panic(fmt.Sprintf("helmr.Agent %q: give Turn (a handler per Turn) or Run (an Actor), not both or neither", spec.ID))
	}
	if _, err := helmrtype.ParseIdleTimeout(spec.IdleTimeout); err != nil {
		panic(fmt.Sprintf("helmr.Agent %q: IdleTimeout: %v", spec.ID, err))
	}
	if spec.CloseAfterIdle == "" {
		spec.CloseAfterIdle = "7d"
	}
	if spec.HibernateAfterIdle == "" {
		spec.HibernateAfterIdle = helmrtype.Never
	}
	for name, v := range map[string]string{"CloseAfterIdle": spec.CloseAfterIdle, "HibernateAfterIdle": spec.HibernateAfterIdle} {
		if _, _, err := helmrtype.ParseRetention(v); err != nil {
			panic(fmt.Sprintf("helmr.Agent %q: %s: %v", spec.ID, name, err))
		}
	}
	if spec.MaxTurnDuration != "" {
		if _, err := helmrtype.ParseDuration(spec.MaxTurnDuration); err != nil {
			panic(fmt.Sprintf("helmr.Agent %q: MaxTurnDuration: %v", spec.ID, err))
		}
	}
	if spec.RuntimeMCP != nil {
		if err := spec.RuntimeMCP.Check(nil); err != nil {
			panic(fmt.Sprintf("helmr.Agent %q: %v", spec.ID, err))
		}
	}
	d := &AgentDef[I, R, S]{spec: spec, input: spec.InputSchema, result: spec.ResultSchema}
	d.text = reflect.TypeFor[I]() == reflect.TypeFor[InputContent]()
	var err error
	if d.input == nil && !d.text {
		if d.input, err = SchemaFor[I](); err != nil {
			panic(fmt.Sprintf("helmr.Agent %q: input type: %v", spec.ID, err))
		}
	}
	if d.result == nil {
		if d.result, err = SchemaFor[R](); err != nil {
			panic(fmt.Sprintf("helmr.Agent %q: result type: %v", spec.ID, err))
		}
	}
	if d.triggers, err = checkTriggers(spec.Triggers, d.text, d.input); err != nil {
		panic(fmt.Sprintf("helmr.Agent %q: %v", spec.ID, err))
	}
	return d
}

// AgentID returns the Agent's ID.
func (d *AgentDef[I, R, S]) AgentID() string { return d.spec.ID }

// InvocationTypes carries the Agent's input and result types for typed
// clients (helmrclient.Create); its values are zero.
func (d *AgentDef[I, R, S]) InvocationTypes() (I, R) {
	var i I
	var r R
	return i, r
}

func (d *AgentDef[I, R, S]) template() *TemplateDef { return d.spec.Template }

func (d *AgentDef[I, R, S]) manifest() helmrtype.AgentManifest {
	m := helmrtype.AgentManifest{ID: d.spec.ID, Template: d.spec.Template.ID(), InputKind: helmrtype.InputKindText,
		CloseAfterIdle: d.spec.CloseAfterIdle, HibernateAfterIdle: d.spec.HibernateAfterIdle,
		MaxTurnDuration: d.spec.MaxTurnDuration, HasInit: d.spec.Init != nil,
		Actor: d.spec.Run != nil, IdleTimeout: d.spec.IdleTimeout}
	if !d.text {
		m.InputKind = helmrtype.InputKindJSON
		m.InputSchema = d.input.JSONSchema()
		if m.InputSchema == nil {
			m.InputSchema = json.RawMessage(`{"unavailable":"the input validator has no JSON Schema form"}`)
		}
	}
	if d.spec.RuntimeMCP != nil {
		m.RuntimeMCP, _ = json.Marshal(d.spec.RuntimeMCP)
	}
	m.ResultSchema = d.result.JSONSchema()
	m.Triggers = d.triggers
	return m
}

func (d *AgentDef[I, R, S]) runtime() sessionproc.Agent { return runtimeAgent[I, R, S]{d} }

// runtimeAgent adapts a typed definition to the untyped runtime.
type runtimeAgent[I, R, S any] struct{ d *AgentDef[I, R, S] }

func (a runtimeAgent[I, R, S]) AgentID() string { return a.d.spec.ID }

// IdleTimeout is the Agent's default hot-wait.
func (a runtimeAgent[I, R, S]) IdleTimeout() string { return a.d.spec.IdleTimeout }

func (a runtimeAgent[I, R, S]) RunInit(ctx context.Context, info *sessionproc.Info) (any, error) {
	var s S
	if a.d.spec.Init != nil {
		var err error
		if s, err = a.d.spec.Init(ctx, newInitContext(info)); err != nil {
			return s, err
		}
	}
	if a.d.spec.Run != nil {
		return startActor(a, info, s), nil
	}
	return s, nil
}

func (a runtimeAgent[I, R, S]) RunTurn(ctx context.Context, rt *sessionproc.Turn, initResult any) (json.RawMessage, error) {
	if act, ok := initResult.(*actor[I, R, S]); ok {
		return act.turn(ctx, rt)
	}
	t, err := a.newTurn(ctx, rt)
	if err != nil {
		return nil, err
	}
	s, _ := initResult.(S)
	ac := &AgentContext[S]{InitContext: newInitContextFromTurn(rt, initResult), InitResult: s}
	res, err := a.d.spec.Turn(ctx, t, ac)
	if err != nil {
		return nil, err
	}
	return a.encodeResult(ctx, res)
}

// newTurn validates a Turn's input and makes its typed handle.
func (a runtimeAgent[I, R, S]) newTurn(ctx context.Context, rt *sessionproc.Turn) (*Turn[I], error) {
	var input I
	if a.d.text {
		c, err := helmrtype.ParseContent(rt.Input, helmrtype.MaxInputBytes, true)
		if err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: err.Error()}
		}
		input = any(c).(I)
	} else {
		v, err := a.d.input.Validate(ctx, rt.Input)
		if err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeInputInvalid, Message: err.Error()}
		}
		input = v
	}
	t := &Turn[I]{ID: rt.ID, Sequence: rt.Sequence, CreatedAt: rt.CreatedAt, Input: input, Source: rt.Source, rt: rt}
	t.Output = &Output{rt: rt}
	return t, nil
}

// encodeResult validates a handler's result and returns its JSON.
func (a runtimeAgent[I, R, S]) encodeResult(ctx context.Context, res R) (json.RawMessage, error) {
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, &helmrtype.Error{Code: helmrtype.CodeResultInvalid, Message: "the result does not encode as JSON: " + err.Error()}
	}
	if c, ok := a.d.result.(encodedChecker); ok {
		// A schema derived from R (the default) only checks: the
		// handler's own encoding is the persisted result.
		if err := c.checkEncoded(raw); err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeResultInvalid, Message: err.Error()}
		}
	} else {
		// The validator may transform: its output is the persisted result.
		validated, err := a.d.result.Validate(ctx, raw)
		if err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeResultInvalid, Message: err.Error()}
		}
		if raw, err = json.Marshal(validated); err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeResultInvalid, Message: "the validated result does not encode as JSON: " + err.Error()}
		}
	}
	if len(raw) > helmrtype.MaxResultBytes {
		return nil, helmrtype.Errorf(helmrtype.CodeResultInvalid, "the result is %d bytes of JSON; the limit is %d", len(raw), helmrtype.MaxResultBytes)
	}
	return raw, nil
}
