package helmr

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
)

var testBox = Template(TemplateSpec{ID: "box", Image: Image("box").FromHost()})

func textTurn(ctx context.Context, t *Turn[InputContent], ac *AgentContext[struct{}]) (any, error) {
	return nil, nil
}

func mustPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), want) {
			t.Fatalf("panic %v, want one mentioning %q", r, want)
		}
	}()
	f()
}

func TestAgentValidatesItsDefinition(t *testing.T) {
	mustPanic(t, "must match", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "", Template: testBox, Turn: textTurn})
	})
	mustPanic(t, "must match", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "-bad", Template: testBox, Turn: textTurn})
	})
	mustPanic(t, "must match", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: strings.Repeat("a", 129), Template: testBox, Turn: textTurn})
	})
	mustPanic(t, "Template is required", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Turn: textTurn})
	})
	mustPanic(t, "give Turn", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox})
	})
	run := func(ctx context.Context, s *ActorSession[InputContent, any], ac *AgentContext[struct{}]) error {
		return nil
	}
	mustPanic(t, "not both", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox, Turn: textTurn, Run: run})
	})
	mustPanic(t, "IdleTimeout", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox, Run: run, IdleTimeout: "2h"})
	})
	if m := Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox, Run: run, IdleTimeout: "5m"}).manifest(); !m.Actor || m.IdleTimeout != "5m" {
		t.Fatalf("actor manifest: %+v", m)
	}
	mustPanic(t, "CloseAfterIdle", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox, Turn: textTurn, CloseAfterIdle: "soon"})
	})
	mustPanic(t, "MaxTurnDuration", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox, Turn: textTurn, MaxTurnDuration: "never"})
	})
	a := Agent(AgentSpec[InputContent, any, struct{}]{ID: "A.b_c-1", Template: testBox, Turn: textTurn})
	m := a.manifest()
	if m.InputKind != "text" || m.CloseAfterIdle != "7d" || m.HibernateAfterIdle != "never" || m.Template != "box" {
		t.Fatalf("defaults: %+v", m)
	}
}

func TestTemplateValidates(t *testing.T) {
	mustPanic(t, "Image is required", func() { Template(TemplateSpec{ID: "x"}) })
	mustPanic(t, "From(ref) or FromHost()", func() { Template(TemplateSpec{ID: "x", Image: Image("x")}) })
	mustPanic(t, "takes no build steps", func() { Template(TemplateSpec{ID: "x", Image: Image("x").FromHost().Run("true")}) })
	mustPanic(t, "takes no build steps", func() { Template(TemplateSpec{ID: "x", Image: Image("x").Env("A", "1").FromHost()}) })
	mustPanic(t, "memory", func() {
		Template(TemplateSpec{ID: "x", Image: Image("x").FromHost(), Resources: Resources{Memory: "lots"}})
	})
	for in, want := range map[string]int64{"512MiB": 512 << 20, "1GiB": 1 << 30, "1.5Gi": 3 << 29, "100M": 100e6, "4096": 4096} {
		if got, err := ParseMemory(in); err != nil || got != want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	img := Image("x").From("debian:12").Run("apt-get", "install", "-y", "git").Workdir("/workspace").Env("A", "1").User("agent").Copy("/app", "./app")
	if len(img.m.Steps) != 5 || img.m.From != "debian:12" || img.m.Steps[0].Op != "run" {
		t.Fatalf("image steps %+v", img.m)
	}
}

type review struct {
	Issue int `json:"issue"`
}

func TestTypedAgentSchemas(t *testing.T) {
	a := Agent(AgentSpec[review, map[string]bool, struct{}]{ID: "typed", Template: testBox,
		Turn: func(ctx context.Context, t *Turn[review], ac *AgentContext[struct{}]) (map[string]bool, error) {
			return nil, nil
		}})
	m := a.manifest()
	if m.InputKind != "json" || !strings.Contains(string(m.InputSchema), `"issue"`) {
		t.Fatalf("manifest %+v", m)
	}
	ctx := context.Background()
	if v, err := a.input.Validate(ctx, json.RawMessage(`{"issue":3}`)); err != nil || v.Issue != 3 {
		t.Fatalf("valid input: %v %v", v, err)
	}
	for _, bad := range []string{`{"issue":"3"}`, `{}`, `{"issue":1,"extra":true}`, `[1]`, `nope`} {
		if _, err := a.input.Validate(ctx, json.RawMessage(bad)); err == nil {
			t.Errorf("input %s accepted", bad)
		}
	}
}

func TestBuildManifest(t *testing.T) {
	a := Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox, Turn: textTurn})
	b := Agent(AgentSpec[InputContent, any, struct{}]{ID: "b", Template: testBox, Turn: textTurn})
	m, err := BuildManifest(a, b)
	if err != nil || len(m.Agents) != 2 || len(m.Templates) != 1 || m.Version != helmrtype.ManifestVersion {
		t.Fatalf("%+v %v", m, err)
	}
	if _, err := BuildManifest(a, a); err == nil {
		t.Fatal("duplicate agent accepted")
	}
	other := Template(TemplateSpec{ID: "box", Image: Image("other").From("scratch")})
	c := Agent(AgentSpec[InputContent, any, struct{}]{ID: "c", Template: other, Turn: textTurn})
	if _, err := BuildManifest(a, c); err == nil {
		t.Fatal("two different templates with one id accepted")
	}
	if _, err := BuildManifest(); err == nil {
		t.Fatal("no agents accepted")
	}
}

func TestHumanContent(t *testing.T) {
	if c, err := toContent("hi"); err != nil || c.PlainText() != "hi" {
		t.Fatal(c, err)
	}
	if c, err := toContent(Content{}); err != nil || len(c) != 0 {
		t.Fatal(c, err)
	}
	if _, err := toContent(42); helmrtype.CodeOf(err) != helmrtype.CodeOutputInvalid {
		t.Fatal(err)
	}
	if _, err := toContent(make(Content, 65)); helmrtype.CodeOf(err) != helmrtype.CodeLimitExceeded {
		t.Fatal(err)
	}
	if !IsMessageRejected(RejectMessage("no")) || IsMessageRejected(context.Canceled) {
		t.Fatal("IsMessageRejected")
	}
}

func TestNilMapAndPointerResultsValidate(t *testing.T) {
	ctx := context.Background()
	m, err := SchemaFor[map[string]int]()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Validate(ctx, json.RawMessage(`null`)); err != nil {
		t.Fatalf("nil map: %v", err)
	}
	if _, err := m.Validate(ctx, json.RawMessage(`{"a":"x"}`)); err == nil {
		t.Fatal("map of int took a string")
	}
	p, _ := SchemaFor[*review]()
	if _, err := p.Validate(ctx, json.RawMessage(`null`)); err != nil {
		t.Fatalf("nil pointer: %v", err)
	}
	if _, err := p.Validate(ctx, json.RawMessage(`{"issue":"x"}`)); err == nil {
		t.Fatal("pointer to struct took a bad field")
	}
}

func TestRuntimeMCPInTheManifest(t *testing.T) {
	mustPanic(t, "list_computers takes neither", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox, Turn: textTurn,
			RuntimeMCP: &RuntimeMCPPolicy{Allow: []RuntimeMCPRule{{Operation: helmrtype.MCPListComputers, Agents: []string{"a"}}}}})
	})
	mustPanic(t, "derived from inspect_turn", func() {
		Agent(AgentSpec[InputContent, any, struct{}]{ID: "a", Template: testBox, Turn: textTurn,
			RuntimeMCP: &RuntimeMCPPolicy{Allow: []RuntimeMCPRule{{Operation: "wait_turn", Agents: []string{"a"}}}}})
	})
	none := Agent(AgentSpec[InputContent, any, struct{}]{ID: "none", Template: testBox, Turn: textTurn, RuntimeMCP: &RuntimeMCPPolicy{}})
	inherit := Agent(AgentSpec[InputContent, any, struct{}]{ID: "inherit", Template: testBox, Turn: textTurn})
	spawner := Agent(AgentSpec[InputContent, any, struct{}]{ID: "spawner", Template: testBox, Turn: textTurn,
		RuntimeMCP: &RuntimeMCPPolicy{Allow: []RuntimeMCPRule{{Operation: helmrtype.MCPSpawn, Agents: []string{"none"}}}}})
	m, err := BuildManifest(none, inherit, spawner)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.Agents[0].RuntimeMCP); got != `{"allow":[]}` {
		t.Errorf("an empty maximum is written %s, want {\"allow\":[]}", got)
	}
	if m.Agents[1].RuntimeMCP != nil {
		t.Errorf("an omitted maximum is written %s, want nothing", m.Agents[1].RuntimeMCP)
	}
	p, err := m.RuntimeMCPOf(&m.Agents[1])
	if err != nil || len(p.Allow) != 12 || !slices.Equal(p.Allow[0].Agents, []string{"inherit", "none", "spawner"}) {
		t.Errorf("the omitted maximum resolves to %+v %v", p, err)
	}
	// A policy naming an Agent outside the program fails the build.
	stray := Agent(AgentSpec[InputContent, any, struct{}]{ID: "stray", Template: testBox, Turn: textTurn,
		RuntimeMCP: &RuntimeMCPPolicy{Allow: []RuntimeMCPRule{{Operation: helmrtype.MCPSpawn, Agents: []string{"ghost"}}}}})
	if _, err := BuildManifest(none, stray); err == nil || !strings.Contains(err.Error(), `"ghost" is not in this manifest`) {
		t.Fatalf("a policy naming an unknown Agent: %v", err)
	}
}

// upper is a result validator that transforms: it upper-cases the text.
type upper struct{}

func (upper) JSONSchema() json.RawMessage { return json.RawMessage(`{"type":"string"}`) }
func (upper) Validate(_ context.Context, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return strings.ToUpper(s), nil
}

// sloppy encodes as a string although its type is a struct, so a result
// holding it breaks the schema derived from the result type.
type sloppy struct{}

func (sloppy) MarshalJSON() ([]byte, error) { return []byte(`"not an object"`), nil }

// picky refuses to decode an empty string, which it encodes to.
type picky string

func (p *picky) UnmarshalJSON(b []byte) error {
	if string(b) == `""` {
		return errors.New("picky: empty")
	}
	return json.Unmarshal(b, (*string)(p))
}

// encodeAs encodes res as an Agent with result type R encodes its
// handler's result: with resultSchema, or the schema derived from R when
// it is nil.
func encodeAs[R any](ctx context.Context, resultSchema Validator[R], res R) (json.RawMessage, error) {
	def := Agent(AgentSpec[InputContent, R, struct{}]{ID: "r", ResultSchema: resultSchema,
		Template: Template(TemplateSpec{ID: "r", Image: Image("r").FromHost()}),
		Turn: func(context.Context, *Turn[InputContent], *AgentContext[struct{}]) (R, error) {
			var zero R
			return zero, nil
		}})
	return runtimeAgent[InputContent, R, struct{}]{def}.encodeResult(ctx, res)
}

func TestResultEncoding(t *testing.T) {
	ctx := context.Background()
	// The schema derived from the result type checks the handler's own
	// encoding, which is the result as persisted.
	big := int64(1<<62 + 1) // not exact as a float64
	raw, err := encodeAs[map[string]any](ctx, nil, map[string]any{"n": big, "b": []int{1}})
	if err != nil || string(raw) != `{"b":[1],"n":4611686018427387905}` {
		t.Fatalf("derived: %s, %v", raw, err)
	}
	type withSloppy struct {
		S sloppy `json:"s"`
	}
	if _, err := encodeAs(ctx, nil, withSloppy{}); helmrtype.CodeOf(err) != helmrtype.CodeResultInvalid {
		t.Fatalf("a result that breaks its derived schema: %v, want result_invalid", err)
	}
	// The result must still decode into its type.
	type withPicky struct {
		P picky `json:"p"`
	}
	if _, err := encodeAs(ctx, nil, withPicky{}); helmrtype.CodeOf(err) != helmrtype.CodeResultInvalid {
		t.Fatalf("a result that does not decode into its type: %v, want result_invalid", err)
	}
	// A validator given as ResultSchema may transform: its output is
	// the result.
	raw, err = encodeAs[string](ctx, upper{}, "done")
	if err != nil || string(raw) != `"DONE"` {
		t.Fatalf("transforming validator: %s, %v", raw, err)
	}
}
