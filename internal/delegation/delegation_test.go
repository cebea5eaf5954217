package delegation_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/delegation"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// These tests drive the control-plane side of runtime MCP delegation
// (Dispatcher.Scope and Dispatcher.Call) against a real engine over a real
// SQLite file: no mocks and no session processes. A "running" caller is a
// Session launched the way the supervisor does it (PrepareLaunch assigns
// its Computer, StartNextTurn makes its first Turn running).

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Runtime MCP maxima of the test manifest's Agents.
const (
	narrowMCP = `{"allow":[{"operation":"spawn","agents":["worker"]},{"operation":"inspect_turn","agents":["worker"]}]}`
	muteMCP   = `{"allow":[]}`
	// placerMCP may spawn workers on a new Computer or on its own.
	placerMCP = `{"allow":[{"operation":"spawn","agents":["worker"],"computer":"caller"},{"operation":"spawn","agents":["worker"]},{"operation":"list_computers"},{"operation":"inspect_session","agents":["worker"]}]}`
)

// allAgents are the test manifest's Agent keys, sorted.
var allAgents = []string{"mute", "narrow", "placer", "planner", "worker"}

func agentManifest(id, kind, runtimeMCP string) helmrtype.AgentManifest {
	a := helmrtype.AgentManifest{ID: id, Template: "box", InputKind: kind, CloseAfterIdle: "never", HibernateAfterIdle: "never"}
	if runtimeMCP != "" {
		a.RuntimeMCP = json.RawMessage(runtimeMCP)
	}
	return a
}

// testManifest has a text Agent "planner" and a JSON Agent "worker" with
// the default maximum, "narrow" (spawn and inspect_turn of workers),
// "mute" (an explicit empty maximum) and "placer" (may reuse its own
// Computer for workers).
func testManifest() helmrtype.Manifest {
	return helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{{ID: "box", Image: helmrtype.ImageManifest{Name: "box", Host: true}}},
		Agents: []helmrtype.AgentManifest{
			agentManifest("planner", helmrtype.InputKindText, ""),
			agentManifest("worker", helmrtype.InputKindJSON, ""),
			agentManifest("narrow", helmrtype.InputKindText, narrowMCP),
			agentManifest("mute", helmrtype.InputKindText, muteMCP),
			agentManifest("placer", helmrtype.InputKindText, placerMCP),
		}}
}

type env struct {
	t   *testing.T
	ctx context.Context
	e   *engine.Engine
	d   *delegation.Dispatcher
	dep string // the first Deployment's ID
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st, engine.Options{})
	t.Cleanup(func() { e.Close(); st.Close() })
	dep, err := e.PublishDeployment(ctx, "sha256:one", testManifest(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, e: e, d: delegation.New(e), dep: dep.ID}
}

func text(s string) json.RawMessage {
	b, _ := json.Marshal(helmrtype.Text(s))
	return b
}

// inputFor is a valid first input for an Agent of the test manifest.
func inputFor(agent string) json.RawMessage {
	if agent == "worker" {
		return json.RawMessage(`{"task":"x"}`)
	}
	return text("go")
}

// launch gives a Session its Computer and starts its next Turn, as the
// supervisor does when it launches the Session's process, and returns the
// running Turn's ID.
func (v *env) launch(sid string) string {
	v.t.Helper()
	if _, err := v.e.PrepareLaunch(v.ctx, sid, false); err != nil {
		v.t.Fatalf("prepare launch %s: %v", sid, err)
	}
	turn, _, err := v.e.StartNextTurn(v.ctx, sid)
	if err != nil || turn == nil {
		v.t.Fatalf("start next turn of %s: %v %v", sid, turn, err)
	}
	return turn.ID
}

// root creates a root Session of agent through the API and launches it;
// it returns the Session's ID and its running Turn's ID.
func (v *env) root(agent string) (string, string) {
	v.t.Helper()
	rec, _, err := v.e.CreateSession(v.ctx, helmrtype.SessionCreateRequest{Agent: agent, Input: inputFor(agent)}, engine.APICaller)
	if err != nil {
		v.t.Fatal(err)
	}
	return rec.Session.ID, v.launch(rec.Session.ID)
}

// max is the scope a Session's process gets when it asks for no policy.
func (v *env) max(sid string) json.RawMessage {
	v.t.Helper()
	s, err := v.d.Scope(v.ctx, sid, nil)
	if err != nil {
		v.t.Fatalf("maximum scope of %s: %v", sid, err)
	}
	return s
}

// scope resolves policy for sid and fails the test if it is refused.
func (v *env) scope(sid, policy string) json.RawMessage {
	v.t.Helper()
	s, err := v.d.Scope(v.ctx, sid, json.RawMessage(policy))
	if err != nil {
		v.t.Fatalf("scope %s for %s: %v", policy, sid, err)
	}
	return s
}

type args map[string]any

// call makes one runtime MCP tool call of Session sid in Turn tid.
func (v *env) call(sid, tid string, scope json.RawMessage, tool string, a args) (json.RawMessage, error) {
	v.t.Helper()
	raw, err := json.Marshal(a)
	if err != nil {
		v.t.Fatal(err)
	}
	return v.d.Call(v.ctx, sid, tid, scope, tool, raw)
}

// must makes a call that has to succeed and decodes its result into out.
func (v *env) must(sid, tid string, scope json.RawMessage, tool string, a args, out any) {
	v.t.Helper()
	res, err := v.call(sid, tid, scope, tool, a)
	if err != nil {
		v.t.Fatalf("%s %v: %v", tool, a, err)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			v.t.Fatalf("%s result %s: %v", tool, res, err)
		}
	}
}

// create spawns or starts a Session of agent and returns the receipt.
func (v *env) create(sid, tid string, scope json.RawMessage, op, agent, key string) engine.DelegatedCreate {
	v.t.Helper()
	var r engine.DelegatedCreate
	v.must(sid, tid, scope, op, args{"agent": agent, "input": inputFor(agent), "idempotency_key": key}, &r)
	if r.SessionID == "" || r.TurnID == "" || r.Sequence != 1 {
		v.t.Fatalf("%s %s: receipt %+v", op, agent, r)
	}
	return r
}

func (v *env) session(id string) *helmrtype.Session {
	v.t.Helper()
	s, err := v.e.GetSession(v.ctx, id)
	if err != nil {
		v.t.Fatal(err)
	}
	return s
}

func (v *env) turn(sid, tid string) *helmrtype.TurnState {
	v.t.Helper()
	ts, err := v.e.GetTurn(v.ctx, sid, tid)
	if err != nil {
		v.t.Fatal(err)
	}
	return ts
}

func wantCode(t *testing.T, err error, code helmrtype.Code, what string) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Errorf("%s: got %v, want %s", what, err, code)
	}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestScopeResolvesWithinTheMaximum(t *testing.T) {
	v := newEnv(t)
	planner, _ := v.root("planner")
	narrow, _ := v.root("narrow")
	mute, _ := v.root("mute")

	defaultMax := jsonOf(t, helmrtype.DefaultRuntimeMCP(allAgents))
	narrowNorm := `{"allow":[{"operation":"spawn","agents":["worker"],"computer":"new"},{"operation":"inspect_turn","agents":["worker"]}]}`

	ok := []struct {
		name, session, policy, want string
	}{
		{"omitted policy is the default maximum", planner, "", defaultMax},
		{"blank policy is the maximum", planner, " \n\t", defaultMax},
		{"omitted policy is a finite maximum", narrow, "", narrowNorm},
		{"omitted policy is an empty maximum", mute, "", `{"allow":[]}`},
		{"empty allowlist under an empty maximum", mute, `{"allow":[]}`, `{"allow":[]}`},
		{"empty allowlist under the default maximum", planner, `{"allow":[]}`, `{"allow":[]}`},
		{"the maximum restated", narrow, narrowMCP, narrowNorm},
		{"256 overlapping rules union", planner, `{"allow":[` + strings.Repeat(`{"operation":"list_computers"},`, 255) + `{"operation":"list_computers"}]}`,
			`{"allow":[{"operation":"list_computers"}]}`},
		{"a narrower policy is normalized", planner,
			`{"allow":[{"operation":"inspect_turn","agents":["worker","planner"]},{"operation":"list_computers"},{"operation":"spawn","agents":["worker"],"computer":"new"},{"operation":"inspect_turn","agents":["planner"]}]}`,
			`{"allow":[{"operation":"spawn","agents":["worker"],"computer":"new"},{"operation":"inspect_turn","agents":["planner","worker"]},{"operation":"list_computers"}]}`},
		{"a narrower policy of a finite maximum", narrow, `{"allow":[{"operation":"inspect_turn","agents":["worker"]}]}`,
			`{"allow":[{"operation":"inspect_turn","agents":["worker"]}]}`},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			got, err := v.d.Scope(v.ctx, c.session, json.RawMessage(c.policy))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("scope\n got %s\nwant %s", got, c.want)
			}
		})
	}

	refused := []struct {
		name, session, policy string
		code                  helmrtype.Code
	}{
		{"an extra operation", narrow, `{"allow":[{"operation":"cancel_session","agents":["worker"]}]}`, helmrtype.CodeForbidden},
		{"an extra Agent", narrow, `{"allow":[{"operation":"spawn","agents":["worker","planner"]}]}`, helmrtype.CodeForbidden},
		{"list_computers not in the maximum", narrow, `{"allow":[{"operation":"list_computers"}]}`, helmrtype.CodeForbidden},
		{"caller placement when the maximum has only new", planner, `{"allow":[{"operation":"spawn","agents":["worker"],"computer":"caller"}]}`, helmrtype.CodeForbidden},
		{"caller placement of a finite maximum", narrow, `{"allow":[{"operation":"spawn","agents":["worker"],"computer":"caller"}]}`, helmrtype.CodeForbidden},
		{"anything under an empty maximum", mute, `{"allow":[{"operation":"list_computers"}]}`, helmrtype.CodeForbidden},
		{"an Agent not in the manifest", planner, `{"allow":[{"operation":"spawn","agents":["ghost"]}]}`, helmrtype.CodePolicyInvalid},
		{"not JSON", planner, `{allow`, helmrtype.CodePolicyInvalid},
		{"null", planner, `null`, helmrtype.CodePolicyInvalid},
		{"empty object", planner, `{}`, helmrtype.CodePolicyInvalid},
		{"boolean", planner, `true`, helmrtype.CodePolicyInvalid},
		{"blockAll", planner, `{"allow":[],"blockAll":true}`, helmrtype.CodePolicyInvalid},
		{"unknown field", planner, `{"allow":[],"deny":[]}`, helmrtype.CodePolicyInvalid},
		{"wait_turn authored", planner, `{"allow":[{"operation":"wait_turn","agents":["worker"]}]}`, helmrtype.CodePolicyInvalid},
		{"computer on a targeted operation", planner, `{"allow":[{"operation":"enqueue","agents":["worker"],"computer":"new"}]}`, helmrtype.CodePolicyInvalid},
		{"agents on list_computers", planner, `{"allow":[{"operation":"list_computers","agents":["worker"]}]}`, helmrtype.CodePolicyInvalid},
		{"no agents", planner, `{"allow":[{"operation":"spawn","agents":[]}]}`, helmrtype.CodePolicyInvalid},
		{"a duplicate Agent", planner, `{"allow":[{"operation":"spawn","agents":["worker","worker"]}]}`, helmrtype.CodePolicyInvalid},
		{"257 rules", planner, `{"allow":[` + strings.Repeat(`{"operation":"list_computers"},`, 256) + `{"operation":"list_computers"}]}`, helmrtype.CodePolicyInvalid},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			got, err := v.d.Scope(v.ctx, c.session, json.RawMessage(c.policy))
			if got != nil {
				t.Errorf("refused scope returned %s", got)
			}
			wantCode(t, err, c.code, c.policy)
		})
	}

	_, err := v.d.Scope(v.ctx, "00000000-0000-7000-8000-000000000000", nil)
	wantCode(t, err, helmrtype.CodeNotFound, "scope of an unknown Session")
}

func TestSpawnCreatesAnOwnedChild(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("planner")
	max := v.max(root)

	r := v.create(root, turn, max, "spawn", "worker", "k1")
	if !r.Created {
		t.Fatalf("first spawn: created false")
	}
	child := v.session(r.SessionID)
	if str(child.ParentSessionID) != root || child.RootSessionID != root || str(child.RequesterSessionID) != root {
		t.Errorf("child relationships: parent %q root %q requester %q, want %s for each", str(child.ParentSessionID), child.RootSessionID, str(child.RequesterSessionID), root)
	}
	if child.DeploymentID != v.dep || child.Agent != "worker" || child.Status != helmrtype.SessionOpen || child.Key != "" {
		t.Errorf("child: %+v", child)
	}
	if child.InitialTurn == nil || child.InitialTurn.ID != r.TurnID || child.InitialTurn.Status != helmrtype.TurnQueued {
		t.Errorf("child initial turn %+v, want queued %s", child.InitialTurn, r.TurnID)
	}
	first := v.turn(r.SessionID, r.TurnID)
	want := helmrtype.InputSource{Kind: helmrtype.SourceSession, RequesterSessionID: root, OriginTurnID: turn}
	if first.Source != want {
		t.Errorf("first turn source %+v, want %+v", first.Source, want)
	}
	if string(first.Input) != `{"task":"x"}` {
		t.Errorf("first turn input %s", first.Input)
	}

	// The same key and arguments replay the first answer.
	again := v.create(root, turn, max, "spawn", "worker", "k1")
	if again.Created || again.SessionID != r.SessionID || again.TurnID != r.TurnID {
		t.Errorf("replay: %+v, want %+v with created false", again, r)
	}
	// Keys belong to their caller: another root's k1 is its own.
	other, otherTurn := v.root("planner")
	if o := v.create(other, otherTurn, v.max(other), "spawn", "worker", "k1"); !o.Created || o.SessionID == r.SessionID {
		t.Errorf("another caller's k1: %+v", o)
	}

	// Outside a Turn (turnID ""), and with a Turn that is not the caller's
	// running Turn (its own queued Turn, another Session's, an unknown
	// one), the child's first Turn has no origin Turn.
	queued, _, err := v.e.Enqueue(v.ctx, root, helmrtype.EnqueueRequest{Input: text("later")}, engine.APICaller)
	if err != nil {
		t.Fatal(err)
	}
	for _, tid := range []string{"", queued.ID, r.TurnID, "00000000-0000-7000-8000-000000000000"} {
		r2 := v.create(root, tid, max, "spawn", "worker", "outside-"+tid)
		src := v.turn(r2.SessionID, r2.TurnID).Source
		if src != (helmrtype.InputSource{Kind: helmrtype.SourceSession, RequesterSessionID: root}) {
			t.Errorf("turn %q: source %+v, want no origin turn", tid, src)
		}
	}

	refused := []struct {
		name string
		a    args
		code helmrtype.Code
	}{
		{"no idempotency key", args{"agent": "worker", "input": inputFor("worker")}, helmrtype.CodeInvalidRequest},
		{"empty idempotency key", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": ""}, helmrtype.CodeInvalidRequest},
		{"same key, other input", args{"agent": "worker", "input": json.RawMessage(`{"task":"y"}`), "idempotency_key": "k1"}, helmrtype.CodeIdempotencyConflict},
		{"same key, other Agent", args{"agent": "planner", "input": inputFor("planner"), "idempotency_key": "k1"}, helmrtype.CodeIdempotencyConflict},
		{"unknown argument", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "k2", "agentId": "worker"}, helmrtype.CodeInvalidRequest},
		{"no agent", args{"input": inputFor("worker"), "idempotency_key": "k3"}, helmrtype.CodeInvalidRequest},
		{"no input", args{"agent": "worker", "idempotency_key": "k4"}, helmrtype.CodeInputInvalid},
		{"JSON input to a text Agent", args{"agent": "planner", "input": json.RawMessage(`{"task":"x"}`), "idempotency_key": "k5"}, helmrtype.CodeInputInvalid},
		{"an Agent not in the manifest", args{"agent": "ghost", "input": inputFor("worker"), "idempotency_key": "k6"}, helmrtype.CodeForbidden},
		{"someone else's Computer", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "k7", "computer_id": "00000000-0000-7000-8000-00000000c0de"}, helmrtype.CodeForbidden},
		// The default maximum creates on new Computers only.
		{"the caller's Computer without caller placement", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "k8", "computer_id": str(v.session(root).ComputerID)}, helmrtype.CodeForbidden},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			_, err := v.call(root, turn, max, "spawn", c.a)
			wantCode(t, err, c.code, c.name)
		})
	}
	// None of the refused calls created anything.
	page, err := v.e.ListSessions(v.ctx, engine.SessionQuery{ParentSessionID: root})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Sessions); n != 5 {
		t.Errorf("%d children of the root, want 5 (k1 and four outside a Turn)", n)
	}
}

func TestSpawnOnTheCallersComputer(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("placer")
	computer := str(v.session(root).ComputerID)
	if computer == "" {
		t.Fatal("a launched Session has no Computer")
	}
	max := v.max(root)

	var r engine.DelegatedCreate
	v.must(root, turn, max, "spawn", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "here", "computer_id": computer}, &r)
	if got := str(v.session(r.SessionID).ComputerID); got != computer {
		t.Errorf("child on computer %q, want the caller's %s", got, computer)
	}
	// Omitted computer_id: a fresh Computer, assigned at launch.
	fresh := v.create(root, turn, max, "spawn", "worker", "fresh")
	if c := v.session(fresh.SessionID).ComputerID; c != nil {
		t.Errorf("a child on a new Computer has computer %q before launch", *c)
	}
	v.launch(fresh.SessionID)
	if c := str(v.session(fresh.SessionID).ComputerID); c == "" || c == computer {
		t.Errorf("launched child computer %q, want a new one", c)
	}
	// A scope narrowed to new placement refuses the caller's Computer.
	onlyNew := v.scope(root, `{"allow":[{"operation":"spawn","agents":["worker"]}]}`)
	_, err := v.call(root, turn, onlyNew, "spawn", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "here2", "computer_id": computer})
	wantCode(t, err, helmrtype.CodeForbidden, "caller placement outside the scope")
	// And a scope narrowed to caller placement refuses a new Computer.
	onlyCaller := v.scope(root, `{"allow":[{"operation":"spawn","agents":["worker"],"computer":"caller"}]}`)
	_, err = v.call(root, turn, onlyCaller, "spawn", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "new2"})
	wantCode(t, err, helmrtype.CodeForbidden, "new placement outside the scope")
}

func TestStartCreatesAnIndependentRoot(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("planner")
	r := v.create(root, turn, v.max(root), "start", "worker", "s1")
	s := v.session(r.SessionID)
	if s.ParentSessionID != nil || s.RootSessionID != s.ID || str(s.RequesterSessionID) != root {
		t.Errorf("started Session: parent %q root %q requester %q; want no parent, itself as root, %s as requester",
			str(s.ParentSessionID), s.RootSessionID, str(s.RequesterSessionID), root)
	}
	if s.Agent != "worker" || s.DeploymentID != v.dep || s.Key != "" {
		t.Errorf("started Session: %+v", s)
	}
	want := helmrtype.InputSource{Kind: helmrtype.SourceSession, RequesterSessionID: root, OriginTurnID: turn}
	if src := v.turn(r.SessionID, r.TurnID).Source; src != want {
		t.Errorf("first turn source %+v, want %+v", src, want)
	}
	// start and spawn keys are separate spaces.
	if sp := v.create(root, turn, v.max(root), "spawn", "worker", "s1"); !sp.Created || sp.SessionID == r.SessionID {
		t.Errorf("spawn with a start's key: %+v", sp)
	}
	// Cancelling the caller does not reach a Session it started.
	if _, err := v.e.CancelSession(v.ctx, root, helmrtype.ControlRequest{}); err != nil {
		t.Fatal(err)
	}
	if st := v.session(r.SessionID).Status; st != helmrtype.SessionOpen {
		t.Errorf("started Session is %s after its requester was cancelled", st)
	}
}

func TestOnlyRootSessionsCreate(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("planner")
	r := v.create(root, turn, v.max(root), "spawn", "planner", "c")
	childTurn := v.launch(r.SessionID)
	childMax := v.max(r.SessionID)
	for _, op := range []string{"spawn", "start"} {
		_, err := v.call(r.SessionID, childTurn, childMax, op, args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "g"})
		wantCode(t, err, helmrtype.CodeForbidden, "a child's "+op)
	}
	// A started Session is a root: it may create.
	s := v.create(root, turn, v.max(root), "start", "planner", "s")
	sTurn := v.launch(s.SessionID)
	g := v.create(s.SessionID, sTurn, v.max(s.SessionID), "spawn", "worker", "g")
	if p := str(v.session(g.SessionID).ParentSessionID); p != s.SessionID {
		t.Errorf("a started Session's child has parent %q", p)
	}
}

func TestScopeIsEnforcedOnEveryCall(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("planner")
	max := v.max(root)
	w := v.create(root, turn, max, "spawn", "worker", "w")
	p := v.create(root, turn, max, "spawn", "planner", "p")

	// A scope that grants spawn only: every other tool exists but is refused.
	spawnOnly := v.scope(root, `{"allow":[{"operation":"spawn","agents":["worker"]}]}`)
	for _, c := range []struct {
		tool string
		a    args
	}{
		{"cancel_session", args{"session_id": w.SessionID}},
		{"close_session", args{"session_id": w.SessionID}},
		{"interrupt_session", args{"session_id": w.SessionID}},
		{"resume_session", args{"session_id": w.SessionID, "hold_id": "h"}},
		{"interrupt_turn", args{"session_id": w.SessionID, "turn_id": w.TurnID}},
		{"inspect_session", args{"session_id": w.SessionID}},
		{"list_sessions", args{}},
		{"inspect_turn", args{"session_id": w.SessionID, "turn_id": w.TurnID}},
		{"wait_turn", args{"session_id": w.SessionID, "turn_id": w.TurnID, "timeout": "1ms"}},
		{"enqueue", args{"session_id": w.SessionID, "input": inputFor("worker")}},
		{"send_turn", args{"session_id": w.SessionID, "turn_id": w.TurnID, "content": text("hi")}},
		{"start", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "x"}},
		{"list_computers", args{}},
	} {
		_, err := v.call(root, turn, spawnOnly, c.tool, c.a)
		wantCode(t, err, helmrtype.CodeForbidden, c.tool+" under a spawn-only scope")
	}
	v.create(root, turn, spawnOnly, "spawn", "worker", "w2")
	_, err := v.call(root, turn, spawnOnly, "spawn", args{"agent": "planner", "input": inputFor("planner"), "idempotency_key": "p2"})
	wantCode(t, err, helmrtype.CodeForbidden, "spawn of an Agent outside the scope")

	// An Agent outside the scope cannot be targeted even when owned.
	workersOnly := v.scope(root, `{"allow":[{"operation":"inspect_session","agents":["worker"]},{"operation":"cancel_session","agents":["worker"]}]}`)
	v.must(root, turn, workersOnly, "inspect_session", args{"session_id": w.SessionID}, nil)
	_, err = v.call(root, turn, workersOnly, "inspect_session", args{"session_id": p.SessionID})
	wantCode(t, err, helmrtype.CodeForbidden, "inspect_session of a planner under a worker scope")
	_, err = v.call(root, turn, workersOnly, "cancel_session", args{"session_id": p.SessionID})
	wantCode(t, err, helmrtype.CodeForbidden, "cancel_session of a planner under a worker scope")
	if st := v.session(p.SessionID).Status; st != helmrtype.SessionOpen {
		t.Errorf("refused cancel changed the planner child to %s", st)
	}

	// A forged scope, wider than the caller's maximum, is refused whatever
	// the tool: the narrow Session sends the default maximum.
	narrow, narrowTurn := v.root("narrow")
	for _, c := range []struct {
		tool string
		a    args
	}{
		{"spawn", args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "n"}},
		{"cancel_session", args{"session_id": w.SessionID}},
		{"list_computers", args{}},
	} {
		_, err := v.call(narrow, narrowTurn, max, c.tool, c.a)
		wantCode(t, err, helmrtype.CodeForbidden, "forged scope: "+c.tool)
	}
	// Its own maximum works for what it grants, and only that.
	nmax := v.max(narrow)
	nw := v.create(narrow, narrowTurn, nmax, "spawn", "worker", "n")
	var ts helmrtype.TurnState
	v.must(narrow, narrowTurn, nmax, "inspect_turn", args{"session_id": nw.SessionID, "turn_id": nw.TurnID}, &ts)
	if ts.ID != nw.TurnID || ts.Status != helmrtype.TurnQueued {
		t.Errorf("inspect_turn: %+v", ts)
	}
	var wr helmrtype.TimedTurnWaitResult
	v.must(narrow, narrowTurn, nmax, "wait_turn", args{"session_id": nw.SessionID, "turn_id": nw.TurnID, "timeout": "1ms"}, &wr)
	if wr.Status != "timeout" {
		t.Errorf("wait_turn derived from inspect_turn: %+v", wr)
	}
	_, err = v.call(narrow, narrowTurn, nmax, "inspect_session", args{"session_id": nw.SessionID})
	wantCode(t, err, helmrtype.CodeForbidden, "inspect_session under narrow")

	// An empty maximum grants no tool at all.
	mute, muteTurn := v.root("mute")
	mmax := v.max(mute)
	create := args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": "m"}
	for _, c := range []struct {
		tool string
		a    args
	}{
		{"spawn", create}, {"start", create}, {"list_agents", args{}}, {"list_sessions", args{}}, {"list_computers", args{}},
	} {
		_, err := v.call(mute, muteTurn, mmax, c.tool, c.a)
		wantCode(t, err, helmrtype.CodeForbidden, c.tool+" under an empty maximum")
	}

	// Scopes that are not policies of the caller's manifest are invalid.
	for _, bad := range []string{`{"allow":[{"operation":"inspect_session","agents":["ghost"]}]}`, `{}`, `null`, ``} {
		_, err := v.d.Call(v.ctx, root, turn, json.RawMessage(bad), "list_sessions", json.RawMessage(`{}`))
		wantCode(t, err, helmrtype.CodePolicyInvalid, "scope "+bad)
	}
	_, err = v.call(root, turn, max, "delete_everything", args{})
	wantCode(t, err, helmrtype.CodeNotFound, "an unknown tool")
	_, err = v.call(root, turn, max, "inspect_session", args{"session_id": w.SessionID, "verbose": true})
	wantCode(t, err, helmrtype.CodeInvalidRequest, "an unknown argument")
	_, err = v.call(root, turn, max, "inspect_session", args{})
	wantCode(t, err, helmrtype.CodeInvalidRequest, "no session_id")
}

func TestOwnershipLimitsReach(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("planner")
	max := v.max(root)
	a := v.create(root, turn, max, "spawn", "worker", "a")
	b := v.create(root, turn, max, "spawn", "worker", "b")
	aTurn := v.launch(a.SessionID)
	aMax := v.max(a.SessionID)

	// A child cannot see its sibling, nor its parent: out of reach is not found.
	for _, c := range []struct {
		name, tool string
		a          args
	}{
		{"inspect a sibling", "inspect_session", args{"session_id": b.SessionID}},
		{"inspect a sibling's turn", "inspect_turn", args{"session_id": b.SessionID, "turn_id": b.TurnID}},
		{"enqueue to a sibling", "enqueue", args{"session_id": b.SessionID, "input": inputFor("worker")}},
		{"cancel a sibling", "cancel_session", args{"session_id": b.SessionID}},
		{"inspect the parent", "inspect_session", args{"session_id": root}},
		{"enqueue to the parent", "enqueue", args{"session_id": root, "input": text("hi")}},
	} {
		_, err := v.call(a.SessionID, aTurn, aMax, c.tool, c.a)
		wantCode(t, err, helmrtype.CodeNotFound, c.name)
	}
	// Nor can the root reach a Session someone else created.
	stranger, _ := v.root("worker")
	_, err := v.call(root, turn, max, "inspect_session", args{"session_id": stranger})
	wantCode(t, err, helmrtype.CodeNotFound, "inspect an unrelated Session")

	// A Session the caller started: enqueue, inspect and send work; the
	// controls, which are for owned children only, are forbidden.
	s := v.create(root, turn, max, "start", "planner", "s")
	sTurn := v.launch(s.SessionID)
	var got helmrtype.Session
	v.must(root, turn, max, "inspect_session", args{"session_id": s.SessionID}, &got)
	if got.ID != s.SessionID {
		t.Errorf("inspect_session: %+v", got)
	}
	var queued helmrtype.TurnState
	v.must(root, turn, max, "enqueue", args{"session_id": s.SessionID, "input": text("more")}, &queued)
	if queued.Sequence != 2 || queued.Status != helmrtype.TurnQueued ||
		queued.Source != (helmrtype.InputSource{Kind: helmrtype.SourceSession, RequesterSessionID: root, OriginTurnID: turn}) {
		t.Errorf("enqueue to a started Session: %+v", queued)
	}
	v.must(root, turn, max, "inspect_turn", args{"session_id": s.SessionID, "turn_id": sTurn}, nil)
	v.must(root, turn, max, "send_turn", args{"session_id": s.SessionID, "turn_id": sTurn, "content": text("note")}, nil)
	for _, c := range []struct {
		tool string
		a    args
	}{
		{"interrupt_session", args{"session_id": s.SessionID}},
		{"resume_session", args{"session_id": s.SessionID, "hold_id": "h"}},
		{"close_session", args{"session_id": s.SessionID}},
		{"cancel_session", args{"session_id": s.SessionID}},
		{"interrupt_turn", args{"session_id": s.SessionID, "turn_id": sTurn}},
	} {
		_, err := v.call(root, turn, max, c.tool, c.a)
		wantCode(t, err, helmrtype.CodeForbidden, c.tool+" on a started Session")
	}
	if ss := v.session(s.SessionID); ss.Status != helmrtype.SessionOpen || len(ss.Holds) != 0 {
		t.Errorf("refused controls changed the started Session: %+v", ss)
	}
	if ts := v.turn(s.SessionID, sTurn); ts.Status != helmrtype.TurnRunning {
		t.Errorf("started Session's turn is %s after a refused interrupt", ts.Status)
	}

	// interrupt_turn reaches an owned child's running Turn.
	var ir helmrtype.TurnInterruptReceipt
	v.must(root, turn, max, "interrupt_turn", args{"session_id": a.SessionID, "turn_id": aTurn}, &ir)
	if ir.Status != "accepted" || ir.TurnID != aTurn {
		t.Errorf("interrupt_turn: %+v", ir)
	}

	// cancel_session on an owned child closes it and cancels its queued Turns.
	var q1, q2 helmrtype.TurnState
	v.must(root, turn, max, "enqueue", args{"session_id": b.SessionID, "input": inputFor("worker")}, &q1)
	v.must(root, turn, max, "enqueue", args{"session_id": b.SessionID, "input": inputFor("worker")}, &q2)
	var rc helmrtype.SessionStatusReceipt
	v.must(root, turn, max, "cancel_session", args{"session_id": b.SessionID}, &rc)
	if rc.SessionID != b.SessionID || (rc.Status != helmrtype.SessionClosed && rc.Status != helmrtype.SessionClosing) {
		t.Errorf("cancel receipt: %+v", rc)
	}
	if st := v.session(b.SessionID).Status; st != helmrtype.SessionClosed && st != helmrtype.SessionClosing {
		t.Errorf("cancelled child is %s", st)
	}
	for _, tid := range []string{b.TurnID, q1.ID, q2.ID} {
		if ts := v.turn(b.SessionID, tid); ts.Status != helmrtype.TurnCancelled {
			t.Errorf("queued turn %d of the cancelled child is %s", ts.Sequence, ts.Status)
		}
	}
	_, err = v.call(root, turn, max, "enqueue", args{"session_id": b.SessionID, "input": inputFor("worker")})
	wantCode(t, err, helmrtype.CodeSessionClosed, "enqueue to a cancelled child")
	if st := v.session(root).Status; st != helmrtype.SessionOpen {
		t.Errorf("the caller is %s after cancelling its child", st)
	}
	if st := v.session(a.SessionID).Status; st != helmrtype.SessionOpen {
		t.Errorf("the sibling is %s after cancelling its sibling", st)
	}

	// close_session on an owned child stops admission.
	v.must(root, turn, max, "close_session", args{"session_id": a.SessionID}, &rc)
	if rc.Status != helmrtype.SessionClosing && rc.Status != helmrtype.SessionClosed {
		t.Errorf("close receipt: %+v", rc)
	}
	_, err = v.call(root, turn, max, "enqueue", args{"session_id": a.SessionID, "input": inputFor("worker")})
	wantCode(t, err, helmrtype.CodeSessionClosed, "enqueue to a closing child")
}

func TestResumeReleasesOnlyTheCallersHold(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("planner")
	max := v.max(root)
	c := v.create(root, turn, max, "spawn", "worker", "c")

	var ir helmrtype.SessionControlReceipt
	v.must(root, turn, max, "interrupt_session", args{"session_id": c.SessionID}, &ir)
	if ir.HoldID == "" || ir.SessionID != c.SessionID {
		t.Fatalf("interrupt_session receipt: %+v", ir)
	}
	held := v.session(c.SessionID)
	if len(held.Holds) != 1 || str(held.Holds[0].ID) != ir.HoldID || held.Holds[0].Kind != helmrtype.HoldInterrupt {
		t.Errorf("holds after interrupt_session: %+v", held.Holds)
	}
	if ok, _ := v.e.CanStart(v.ctx, c.SessionID); ok {
		t.Error("a held child's queued turn may start")
	}

	_, err := v.call(root, turn, max, "resume_session", args{"session_id": c.SessionID})
	wantCode(t, err, helmrtype.CodeInvalidRequest, "resume_session without hold_id")

	var rr helmrtype.SessionControlReceipt
	v.must(root, turn, max, "resume_session", args{"session_id": c.SessionID, "hold_id": ir.HoldID}, &rr)
	if rr.HoldID != ir.HoldID {
		t.Errorf("resume receipt: %+v", rr)
	}
	if hs := v.session(c.SessionID).Holds; len(hs) != 0 {
		t.Errorf("holds after resume_session: %+v", hs)
	}
	if ok, _ := v.e.CanStart(v.ctx, c.SessionID); !ok {
		t.Error("the resumed child's queued turn may not start")
	}
	_, err = v.call(root, turn, max, "resume_session", args{"session_id": c.SessionID, "hold_id": ir.HoldID})
	wantCode(t, err, helmrtype.CodeConflict, "resuming a released hold")

	// A hold placed through the API is not the caller's to release.
	api, err := v.e.InterruptSession(v.ctx, c.SessionID, helmrtype.ControlRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.call(root, turn, max, "resume_session", args{"session_id": c.SessionID, "hold_id": api.HoldID})
	wantCode(t, err, helmrtype.CodeForbidden, "resume_session of an API hold")
	if hs := v.session(c.SessionID).Holds; len(hs) != 1 || str(hs[0].ID) != api.HoldID {
		t.Errorf("the API hold after a refused resume: %+v", hs)
	}
	if _, err := v.e.ResumeSession(v.ctx, c.SessionID, helmrtype.ResumeRequest{HoldID: api.HoldID}); err != nil {
		t.Errorf("the API resumes its own hold: %v", err)
	}

	// Nor is a hold another caller placed on its own child.
	other, otherTurn := v.root("planner")
	oc := v.create(other, otherTurn, v.max(other), "spawn", "worker", "c")
	var oir helmrtype.SessionControlReceipt
	v.must(other, otherTurn, v.max(other), "interrupt_session", args{"session_id": oc.SessionID}, &oir)
	_, err = v.call(root, turn, max, "resume_session", args{"session_id": c.SessionID, "hold_id": oir.HoldID})
	if err == nil {
		t.Error("resume_session released another Session's hold")
	}
	_, err = v.call(root, turn, max, "resume_session", args{"session_id": oc.SessionID, "hold_id": oir.HoldID})
	wantCode(t, err, helmrtype.CodeNotFound, "resume_session of another caller's child")
	if hs := v.session(oc.SessionID).Holds; len(hs) != 1 {
		t.Errorf("another caller's hold after refused resumes: %+v", hs)
	}
}

func TestListTools(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("planner")
	max := v.max(root)
	spawned := v.create(root, turn, max, "spawn", "worker", "a")
	started := v.create(root, turn, max, "start", "planner", "b")
	v.create(started.SessionID, "", v.max(started.SessionID), "spawn", "worker", "grandchild")
	v.root("worker") // someone else's

	ids := func(p helmrtype.SessionPage) []string {
		var out []string
		for _, s := range p.Sessions {
			out = append(out, s.ID)
		}
		return out
	}
	t.Run("list_sessions", func(t *testing.T) {
		var page helmrtype.SessionPage
		v.must(root, turn, max, "list_sessions", args{}, &page)
		if got, want := ids(page), []string{spawned.SessionID, started.SessionID}; !slices.Equal(got, want) {
			t.Errorf("list_sessions: %v, want the spawned and started Sessions %v", got, want)
		}
		v.must(root, turn, max, "list_sessions", args{"agent": "worker"}, &page)
		if got := ids(page); !slices.Equal(got, []string{spawned.SessionID}) {
			t.Errorf("list_sessions agent=worker: %v", got)
		}
		v.must(root, turn, max, "list_sessions", args{"limit": 1}, &page)
		if got := ids(page); !slices.Equal(got, []string{spawned.SessionID}) || page.NextCursor == "" {
			t.Errorf("list_sessions limit=1: %v cursor %q", got, page.NextCursor)
		}
		v.must(root, turn, max, "list_sessions", args{"limit": 1, "cursor": page.NextCursor}, &page)
		if got := ids(page); !slices.Equal(got, []string{started.SessionID}) {
			t.Errorf("list_sessions second page: %v", got)
		}
		// Only Sessions of Agents the scope may inspect are listed.
		workers := v.scope(root, `{"allow":[{"operation":"inspect_session","agents":["worker"]}]}`)
		v.must(root, turn, workers, "list_sessions", args{}, &page)
		if got := ids(page); !slices.Equal(got, []string{spawned.SessionID}) {
			t.Errorf("list_sessions under a worker scope: %v", got)
		}
		_, err := v.call(root, turn, max, "list_sessions", args{"status": "asleep"})
		wantCode(t, err, helmrtype.CodeInvalidRequest, "list_sessions with a bad status")
		// A fresh caller has created nothing.
		fresh, freshTurn := v.root("planner")
		v.must(fresh, freshTurn, v.max(fresh), "list_sessions", args{}, &page)
		if len(page.Sessions) != 0 {
			t.Errorf("a fresh caller lists %v", ids(page))
		}
	})

	type agentEntry struct {
		Agent     string   `json:"agent"`
		InputKind string   `json:"input_kind"`
		Spawn     []string `json:"spawn"`
		Start     []string `json:"start"`
	}
	listAgents := func(sid, tid string, scope json.RawMessage) []agentEntry {
		var out struct {
			Agents []agentEntry `json:"agents"`
		}
		v.must(sid, tid, scope, "list_agents", args{}, &out)
		return out.Agents
	}
	t.Run("list_agents", func(t *testing.T) {
		got := listAgents(root, turn, max)
		var names []string
		for _, a := range got {
			names = append(names, a.Agent)
			kind := helmrtype.InputKindText
			if a.Agent == "worker" {
				kind = helmrtype.InputKindJSON
			}
			if a.InputKind != kind || !slices.Equal(a.Spawn, []string{"new"}) || !slices.Equal(a.Start, []string{"new"}) {
				t.Errorf("list_agents entry %+v, want input_kind %s, spawn and start [new]", a, kind)
			}
		}
		if !slices.Equal(names, allAgents) {
			t.Errorf("list_agents: %v, want %v", names, allAgents)
		}
		placer, placerTurn := v.root("placer")
		if got := listAgents(placer, placerTurn, v.max(placer)); len(got) != 1 ||
			got[0].Agent != "worker" || got[0].InputKind != "json" || !slices.Equal(got[0].Spawn, []string{"new", "caller"}) || got[0].Start != nil {
			t.Errorf("list_agents of placer: %+v", got)
		}
		spawnPlanner := v.scope(root, `{"allow":[{"operation":"spawn","agents":["planner"]}]}`)
		if got := listAgents(root, turn, spawnPlanner); len(got) != 1 || got[0].Agent != "planner" || got[0].Start != nil {
			t.Errorf("list_agents under a spawn-planner scope: %+v", got)
		}
		_, err := v.call(root, turn, max, "list_agents", args{"agent": "x"})
		wantCode(t, err, helmrtype.CodeInvalidRequest, "list_agents with an argument")
	})

	type computers struct {
		Computers []struct {
			ID     string `json:"id"`
			Caller bool   `json:"caller"`
		} `json:"computers"`
	}
	t.Run("list_computers", func(t *testing.T) {
		var got computers
		v.must(root, turn, max, "list_computers", args{}, &got)
		mine := str(v.session(root).ComputerID)
		if mine == "" || len(got.Computers) != 1 || got.Computers[0].ID != mine || !got.Computers[0].Caller {
			t.Errorf("list_computers of a launched Session on %q: %+v", mine, got)
		}
		// A Session not launched yet has no Computer: the list is empty, not null.
		notLaunched := spawned.SessionID
		res, err := v.call(notLaunched, "", v.max(notLaunched), "list_computers", args{})
		if err != nil || string(res) != `{"computers":[]}` {
			t.Errorf("list_computers before launch: %s %v", res, err)
		}
	})
}

func TestLaterDeploymentsNeverWidenAPin(t *testing.T) {
	v := newEnv(t)
	narrow, narrowTurn := v.root("narrow")
	planner, plannerTurn := v.root("planner")
	oldNarrowMax := string(v.max(narrow))
	oldPlannerMax := string(v.max(planner))

	// The second Deployment drops narrow's limit (default maximum) and
	// adds an Agent, which widens the default maximum too.
	m := testManifest()
	for i := range m.Agents {
		if m.Agents[i].ID == "narrow" {
			m.Agents[i].RuntimeMCP = nil
		}
	}
	m.Agents = append(m.Agents, agentManifest("extra", helmrtype.InputKindText, ""))
	dep2, err := v.e.PublishDeployment(v.ctx, "sha256:two", m, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if dep2.ID == v.dep {
		t.Fatal("a new digest reused the Deployment")
	}

	if got := string(v.max(narrow)); got != oldNarrowMax {
		t.Errorf("pinned narrow maximum after a wider Deployment:\n got %s\nwant %s", got, oldNarrowMax)
	}
	if got := string(v.max(planner)); got != oldPlannerMax {
		t.Errorf("pinned planner maximum after a wider Deployment:\n got %s\nwant %s", got, oldPlannerMax)
	}
	_, err = v.d.Scope(v.ctx, narrow, json.RawMessage(`{"allow":[{"operation":"cancel_session","agents":["worker"]}]}`))
	wantCode(t, err, helmrtype.CodeForbidden, "widening a pinned maximum after a wider Deployment")
	_, err = v.d.Scope(v.ctx, planner, json.RawMessage(`{"allow":[{"operation":"spawn","agents":["extra"]}]}`))
	wantCode(t, err, helmrtype.CodePolicyInvalid, "an Agent only the new Deployment has")

	// New Sessions get the new maxima.
	newNarrow, newNarrowTurn := v.root("narrow")
	if d := v.session(newNarrow).DeploymentID; d != dep2.ID {
		t.Fatalf("new Session on %s, want %s", d, dep2.ID)
	}
	newMax := v.max(newNarrow)
	want := jsonOf(t, helmrtype.DefaultRuntimeMCP(append(slices.Clone(allAgents), "extra")))
	if string(newMax) != want {
		t.Errorf("new narrow maximum:\n got %s\nwant %s", newMax, want)
	}
	// The old Session cannot borrow the new maximum: it names an Agent its
	// pinned manifest lacks, and without that Agent it is still wider.
	_, err = v.call(narrow, narrowTurn, newMax, "list_computers", args{})
	wantCode(t, err, helmrtype.CodePolicyInvalid, "a pinned Session using the new maximum")
	_, err = v.call(narrow, narrowTurn, json.RawMessage(oldPlannerMax), "list_computers", args{})
	wantCode(t, err, helmrtype.CodeForbidden, "a pinned Session using the default maximum it lost")
	v.must(newNarrow, newNarrowTurn, newMax, "list_computers", args{}, nil)

	// spawn creates on the caller's pinned Deployment, start on the current one.
	pmax := v.max(planner)
	sp := v.create(planner, plannerTurn, pmax, "spawn", "planner", "sp")
	st := v.create(planner, plannerTurn, pmax, "start", "planner", "st")
	if d := v.session(sp.SessionID).DeploymentID; d != v.dep {
		t.Errorf("spawned child on %s, want the caller's %s", d, v.dep)
	}
	if d := v.session(st.SessionID).DeploymentID; d != dep2.ID {
		t.Errorf("started Session on %s, want the current %s", d, dep2.ID)
	}
	// The spawned child inherits the old pin's maximum.
	if got := string(v.max(sp.SessionID)); got != oldPlannerMax {
		t.Errorf("spawned child's maximum:\n got %s\nwant %s", got, oldPlannerMax)
	}
}

func TestPublicationChecksRuntimeMCP(t *testing.T) {
	v := newEnv(t)
	withNarrow := func(policy string) helmrtype.Manifest {
		m := testManifest()
		for i := range m.Agents {
			if m.Agents[i].ID == "narrow" {
				m.Agents[i].RuntimeMCP = json.RawMessage(policy)
			}
		}
		return m
	}
	for _, bad := range []string{
		`{}`,
		`null`,
		`true`,
		`[]`,
		`{"allow":null}`,
		`{"blockAll":true}`,
		`{"allow":[],"blockAll":false}`,
		`{"allow":[{"operation":"spawn","agents":["ghost"]}]}`,
		`{"allow":[{"operation":"spawn","agents":[]}]}`,
		`{"allow":[{"operation":"spawn","agents":["worker","worker"]}]}`,
		`{"allow":[{"operation":"spawn","agents":["worker"],"computer":"any"}]}`,
		`{"allow":[{"operation":"enqueue","agents":["worker"],"computer":"new"}]}`,
		`{"allow":[{"operation":"list_computers","agents":["worker"]}]}`,
		`{"allow":[{"operation":"wait_turn","agents":["worker"]}]}`,
		`{"allow":[{"operation":"spawn","agents":["worker"],"why":"x"}]}`,
		`{"allow":[{"operation":"spawn"}]}`,
	} {
		_, err := v.e.PublishDeployment(v.ctx, "sha256:bad", withNarrow(bad), "", "")
		wantCode(t, err, helmrtype.CodePolicyInvalid, "publishing runtime_mcp "+bad)
	}
	// A manifest read from JSON keeps an explicit null: it is not omission.
	raw, err := json.Marshal(withNarrow(`null`))
	if err != nil {
		t.Fatal(err)
	}
	var decoded helmrtype.Manifest
	if err := json.Unmarshal(raw, &decoded); err != nil {
		t.Fatal(err)
	}
	_, err = v.e.PublishDeployment(v.ctx, "sha256:bad", decoded, "", "")
	wantCode(t, err, helmrtype.CodePolicyInvalid, "publishing a decoded runtime_mcp null")

	cur, err := v.e.GetDeployment(v.ctx, "current")
	if err != nil || cur.ID != v.dep {
		t.Fatalf("current Deployment after refused publications: %+v %v", cur, err)
	}

	// The Agent API shows each resolved, normalized maximum.
	for _, c := range []struct{ agent, want string }{
		{"mute", `{"allow":[]}`},
		{"narrow", `{"allow":[{"operation":"spawn","agents":["worker"],"computer":"new"},{"operation":"inspect_turn","agents":["worker"]}]}`},
		{"placer", `{"allow":[{"operation":"spawn","agents":["worker"],"computer":"new"},{"operation":"spawn","agents":["worker"],"computer":"caller"},{"operation":"inspect_session","agents":["worker"]},{"operation":"list_computers"}]}`},
		{"planner", jsonOf(t, helmrtype.DefaultRuntimeMCP(allAgents))},
	} {
		info, err := v.e.GetAgent(v.ctx, c.agent, "")
		if err != nil {
			t.Fatal(err)
		}
		if string(info.RuntimeMCP) != c.want {
			t.Errorf("GetAgent(%s).RuntimeMCP\n got %s\nwant %s", c.agent, info.RuntimeMCP, c.want)
		}
		// A Session's maximum is what the Agent API shows.
		sid, _ := v.root(c.agent)
		if got := string(v.max(sid)); got != c.want {
			t.Errorf("maximum of a %s Session %s, GetAgent shows %s", c.agent, got, c.want)
		}
	}
	// The default maximum names exactly the manifest's Agents.
	var def helmrtype.RuntimeMCPPolicy
	info, _ := v.e.GetAgent(v.ctx, "worker", v.dep)
	if err := json.Unmarshal(info.RuntimeMCP, &def); err != nil {
		t.Fatal(err)
	}
	for _, r := range def.Allow {
		if r.Operation != helmrtype.MCPListComputers && !slices.Equal(r.Agents, allAgents) {
			t.Errorf("default rule %+v names %v, want %v", r, r.Agents, allAgents)
		}
		if (r.Operation == helmrtype.MCPSpawn || r.Operation == helmrtype.MCPStart) && r.Computer != helmrtype.PlacementNew {
			t.Errorf("default creation rule %+v is not new-Computer only", r)
		}
	}
}

// A closing caller creates nothing more, but a replay of what it created
// before still answers with the first Session.
func TestClosingCallerCreatesNothing(t *testing.T) {
	v := newEnv(t)
	root, turn := v.root("planner")
	max := v.max(root)
	started := v.create(root, turn, max, "start", "worker", "s1")
	spawned := v.create(root, turn, max, "spawn", "worker", "c1")
	if _, err := v.e.CloseSession(v.ctx, root, helmrtype.ControlRequest{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		op, key string
		first   engine.DelegatedCreate
	}{{"start", "s1", started}, {"spawn", "c1", spawned}} {
		again := v.create(root, turn, max, c.op, "worker", c.key)
		if again.SessionID != c.first.SessionID || again.Created {
			t.Errorf("%s replay from a closing caller: %+v, want %+v with created false", c.op, again, c.first)
		}
		_, err := v.call(root, turn, max, c.op, args{"agent": "worker", "input": inputFor("worker"), "idempotency_key": c.key + "-new"})
		wantCode(t, err, helmrtype.CodeSessionClosed, c.op+" from a closing caller")
	}
}
