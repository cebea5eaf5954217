package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// Runtime MCP delegation end to end: real agent processes connect to their
// runtime MCP server with the official Go MCP SDK client (the driver test
// agent) and start, wait for, steer and cancel other Sessions.

type call struct {
	Tool string         `json:"tool"`
	Args map[string]any `json:"args,omitempty"`
}

type driveIn struct {
	Write  map[string]string             `json:"write,omitempty"`
	Policy *helmrtype.RuntimeMCPPolicy   `json:"policy,omitempty"`
	Scopes []*helmrtype.RuntimeMCPPolicy `json:"scopes,omitempty"`
	Calls  []call                        `json:"calls,omitempty"`
	Park   bool                          `json:"park,omitempty"`
}

type driveOut struct {
	Scopes []struct {
		Auth, URL, Error string
	} `json:"scopes"`
	Tools []string `json:"tools"`
	Calls []struct {
		Result map[string]any `json:"result"`
		Error  string         `json:"error"`
	} `json:"calls"`
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// drive runs one Turn of the driver-like agent in session sid (a new
// Session of agent when sid is "") and returns its result.
func (p *plane) drive(agent, sid string, in driveIn) (string, string, driveOut) {
	p.t.Helper()
	var turnID string
	if sid == "" {
		r := p.create(agent, mustJSON(p.t, in))
		sid, turnID = r.Session.ID, r.Turn.ID
	} else {
		var ts helmrtype.TurnState
		p.must("POST", "/v1/sessions/"+sid+"/turns", helmrtype.EnqueueRequest{Input: mustJSON(p.t, in)}, &ts)
		turnID = ts.ID
	}
	o := p.wait(sid, turnID)
	if o.Status != helmrtype.TurnCompleted {
		p.t.Fatalf("%s turn: %s %+v", agent, o.Status, o.Error)
	}
	var out driveOut
	if err := json.Unmarshal(o.Result, &out); err != nil {
		p.t.Fatal(err)
	}
	return sid, turnID, out
}

func errCode(s string) string {
	var env struct {
		Error helmrtype.Error `json:"error"`
	}
	if json.Unmarshal([]byte(s), &env) != nil {
		return ""
	}
	return string(env.Error.Code)
}

func TestDelegationPlannerSpawnsWorkers(t *testing.T) {
	p := startPlane(t, "")
	spawn := func(n int, key string) call {
		return call{Tool: "spawn", Args: map[string]any{"agent": "worker", "input": map[string]any{"n": n}, "idempotency_key": key}}
	}
	wait := func(i int) call {
		return call{Tool: "wait_turn", Args: map[string]any{"session_id": fmt.Sprintf("$%d.session_id", i), "turn_id": fmt.Sprintf("$%d.turn_id", i), "timeout": "30s"}}
	}
	planner, plannerTurn, out := p.drive("driver", "", driveIn{Calls: []call{
		spawn(3, "w1"), spawn(4, "w2"), wait(0), wait(1),
		spawn(3, "w1"), // a retry: the same Session
		{Tool: "inspect_session", Args: map[string]any{"session_id": "$0.session_id"}},
		{Tool: "list_sessions"},
		{Tool: "list_agents"},
	}})
	for _, want := range []string{"spawn", "start", "wait_turn", "cancel_session", "list_agents", "list_computers"} {
		if !slices.Contains(out.Tools, want) {
			t.Errorf("the default scope lacks tool %s: %v", want, out.Tools)
		}
	}
	for i, c := range out.Calls {
		if c.Error != "" {
			t.Fatalf("call %d: %s", i, c.Error)
		}
	}
	w1, w2 := out.Calls[0].Result, out.Calls[1].Result
	if w1["created"] != true || w2["created"] != true || w1["sequence"] != 1.0 || w1["session_id"] == w2["session_id"] {
		t.Fatalf("spawns: %v %v", w1, w2)
	}
	if r := out.Calls[4].Result; r["created"] != false || r["session_id"] != w1["session_id"] || r["turn_id"] != w1["turn_id"] {
		t.Fatalf("retried spawn: %v, first %v", r, w1)
	}
	for i, want := range []float64{9, 16} {
		w := out.Calls[2+i].Result
		o, _ := w["outcome"].(map[string]any)
		res, _ := o["result"].(map[string]any)
		if w["status"] != "settled" || o["status"] != "completed" || res["square"] != want || res["parent"] != planner {
			t.Fatalf("worker %d: %v", i, w)
		}
		src, _ := res["source"].(map[string]any)
		if src["kind"] != "session" || src["requester_session_id"] != planner || src["origin_turn_id"] != plannerTurn {
			t.Fatalf("worker %d source: %v", i, src)
		}
	}
	if s := out.Calls[5].Result; s["parent_session_id"] != planner || s["root_session_id"] != planner || s["requester_session_id"] != planner {
		t.Fatalf("inspect_session: %v", s)
	}
	if list, _ := out.Calls[6].Result["sessions"].([]any); len(list) != 2 {
		t.Fatalf("list_sessions: %v", out.Calls[6].Result)
	}
	agents, _ := out.Calls[7].Result["agents"].([]any)
	var names []string
	for _, a := range agents {
		m := a.(map[string]any)
		names = append(names, m["agent"].(string))
		if m["agent"] == "worker" && (m["input_kind"] != "json" || fmt.Sprint(m["spawn"]) != "[new]") {
			t.Errorf("list_agents worker: %v", m)
		}
	}
	if !slices.Contains(names, "worker") || !slices.Contains(names, "echo") {
		t.Errorf("list_agents: %v", names)
	}
	// The planner's Turn ended; its children stay open (and were created
	// on the planner's Deployment).
	for _, w := range []map[string]any{w1, w2} {
		s := p.session(w["session_id"].(string))
		if s.Status != helmrtype.SessionOpen || s.DeploymentID != p.session(planner).DeploymentID || *s.ParentSessionID != planner {
			t.Fatalf("child after the planner's Turn: %+v", s)
		}
	}
}

func TestDelegationScopesAndOwnership(t *testing.T) {
	delegationOwnership(t, startPlane(t, ""))
}

func TestDelegationOnPostgreSQL(t *testing.T) {
	delegationOwnership(t, startPlaneWith(t, t.TempDir(), "127.0.0.1:0", pgtest.URL(t)))
}

func delegationOwnership(t *testing.T, p *plane) {
	// Turn 1: the root spawns a worker that blocks until cancelled.
	root, _, out := p.drive("driver", "", driveIn{Calls: []call{
		{Tool: "spawn", Args: map[string]any{"agent": "worker", "input": map[string]any{"block": true}, "idempotency_key": "blocker"}},
	}})
	if out.Calls[0].Error != "" {
		t.Fatal(out.Calls[0].Error)
	}
	blocker, blockerTurn := out.Calls[0].Result["session_id"].(string), out.Calls[0].Result["turn_id"].(string)
	waitRunning(t, p, blocker, blockerTurn)

	// Turn 2: the root spawns a second child, a driver, that tries to reach
	// its sibling and to spawn; the root waits for it.
	sibling := driveIn{Calls: []call{
		{Tool: "inspect_session", Args: map[string]any{"session_id": blocker}},
		{Tool: "cancel_session", Args: map[string]any{"session_id": blocker}},
		{Tool: "spawn", Args: map[string]any{"agent": "worker", "input": map[string]any{"n": 1}, "idempotency_key": "grandchild"}},
	}}
	_, _, out = p.drive("driver", root, driveIn{Calls: []call{
		{Tool: "spawn", Args: map[string]any{"agent": "driver", "input": sibling, "idempotency_key": "sibling"}},
		{Tool: "wait_turn", Args: map[string]any{"session_id": "$0.session_id", "turn_id": "$0.turn_id", "timeout": "60s"}},
	}})
	if out.Calls[1].Error != "" {
		t.Fatal(out.Calls[1].Error)
	}
	sib := out.Calls[0].Result["session_id"].(string)
	o := out.Calls[1].Result["outcome"].(map[string]any)
	var sibOut driveOut
	b, _ := json.Marshal(o["result"])
	json.Unmarshal(b, &sibOut)
	if len(sibOut.Calls) != 3 {
		t.Fatalf("sibling driver: %v", o)
	}
	if c := errCode(sibOut.Calls[0].Error); c != "not_found" {
		t.Errorf("a child inspecting its sibling: %q, want not_found", sibOut.Calls[0].Error)
	}
	if c := errCode(sibOut.Calls[1].Error); c != "not_found" {
		t.Errorf("a child cancelling its sibling: %q, want not_found", sibOut.Calls[1].Error)
	}
	if c := errCode(sibOut.Calls[2].Error); c != "forbidden" {
		t.Errorf("a child spawning: %q, want forbidden", sibOut.Calls[2].Error)
	}
	if s := p.session(blocker); s.Status != helmrtype.SessionOpen {
		t.Fatalf("the sibling's cancel reached the blocker: %s", s.Status)
	}

	// Turn 3: a scope without cancel_session cannot cancel (the tool is not
	// offered), and a narrower scope cannot be widened.
	narrow := &helmrtype.RuntimeMCPPolicy{Allow: []helmrtype.RuntimeMCPRule{
		{Operation: "inspect_session", Agents: []string{"worker"}},
		{Operation: "spawn", Agents: []string{"worker"}},
	}}
	_, _, out = p.drive("driver", root, driveIn{Policy: narrow, Calls: []call{
		{Tool: "cancel_session", Args: map[string]any{"session_id": blocker}},
		{Tool: "inspect_session", Args: map[string]any{"session_id": blocker}},
		{Tool: "inspect_session", Args: map[string]any{"session_id": sib}}, // a driver: outside the scope
	}})
	if slices.Contains(out.Tools, "cancel_session") || !slices.Contains(out.Tools, "inspect_session") || len(out.Tools) != 4 {
		t.Errorf("narrow scope offers %v, want inspect_session, list_sessions, spawn, list_agents", out.Tools)
	}
	if out.Calls[0].Error == "" || out.Calls[1].Error != "" || errCode(out.Calls[2].Error) != "forbidden" {
		t.Fatalf("narrow scope calls: %+v", out.Calls)
	}
	if s := p.session(blocker); s.Status != helmrtype.SessionOpen {
		t.Fatalf("a scope without cancel_session cancelled: %s", s.Status)
	}

	// Turn 4: interrupt and resume an owned child through its own hold;
	// a hold the API placed is not the caller's to resume.
	var apiHold helmrtype.SessionControlReceipt
	p.must("POST", "/v1/sessions/"+sib+"/interrupt", helmrtype.ControlRequest{}, &apiHold)
	_, _, out = p.drive("driver", root, driveIn{Calls: []call{
		{Tool: "interrupt_session", Args: map[string]any{"session_id": sib}},
		{Tool: "resume_session", Args: map[string]any{"session_id": sib, "hold_id": apiHold.HoldID}},
		{Tool: "resume_session", Args: map[string]any{"session_id": sib, "hold_id": "$0.hold_id"}},
	}})
	if out.Calls[0].Error != "" || out.Calls[0].Result["hold_id"] == "" || errCode(out.Calls[1].Error) != "forbidden" || out.Calls[2].Error != "" {
		t.Fatalf("interrupt/resume: %+v", out.Calls)
	}
	holds := p.session(sib).Holds
	if len(holds) != 1 || holds[0].ID == nil || *holds[0].ID != apiHold.HoldID {
		t.Fatalf("holds after resume: %+v (the API's %s should remain)", holds, apiHold.HoldID)
	}

	// Cancelling the root cancels its owned tree: the blocked worker's
	// Turn is stopped and both children close.
	p.must("POST", "/v1/sessions/"+root+"/cancel", helmrtype.ControlRequest{}, nil)
	if o := p.wait(blocker, blockerTurn); o.Status != helmrtype.TurnCancelled && o.Status != helmrtype.TurnInterrupted {
		t.Fatalf("blocker turn after the root's cancel: %+v %+v", o, o.Error)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range []string{root, blocker, sib} {
		for p.session(id).Status != helmrtype.SessionClosed && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if s := p.session(id); s.Status != helmrtype.SessionClosed {
			t.Fatalf("session %s after the root's cancel: %s", id, s.Status)
		}
	}
}

func TestDelegationScopes(t *testing.T) {
	p := startPlane(t, "")
	// 16 distinct scopes (the maximum counts), the first again, then a 17th.
	ops := append(slices.Clone(helmrtype.MCPTargetOperations), helmrtype.MCPSpawn, helmrtype.MCPStart)
	scopes := []*helmrtype.RuntimeMCPPolicy{nil}
	for i := 0; len(scopes) < 17; i++ {
		scopes = append(scopes, &helmrtype.RuntimeMCPPolicy{Allow: []helmrtype.RuntimeMCPRule{
			{Operation: ops[i%len(ops)], Agents: []string{[]string{"worker", "echo"}[i/len(ops)]}}}})
	}
	// The same grants as scope 1, written differently.
	again := &helmrtype.RuntimeMCPPolicy{Allow: []helmrtype.RuntimeMCPRule{scopes[1].Allow[0], scopes[1].Allow[0]}}
	in := driveIn{Scopes: append(append(slices.Clone(scopes[:16]), again), scopes[16])}
	_, _, out := p.drive("driver", "", in)
	if len(out.Scopes) != 18 {
		t.Fatalf("scopes: %+v", out.Scopes)
	}
	seen := map[string]bool{}
	for i, s := range out.Scopes[:16] {
		if s.Error != "" || s.Auth == "" || !strings.HasPrefix(s.URL, "http://127.0.0.1:") {
			t.Fatalf("scope %d: %+v", i, s)
		}
		seen[s.Auth] = true
	}
	if len(seen) != 16 {
		t.Fatalf("16 distinct scopes got %d distinct credentials", len(seen))
	}
	if out.Scopes[16].Auth != out.Scopes[1].Auth {
		t.Fatalf("an equal policy got other credentials: %+v vs %+v", out.Scopes[16], out.Scopes[1])
	}
	if e := out.Scopes[17].Error; !strings.Contains(e, "16") || out.Scopes[17].Auth != "" {
		t.Fatalf("the 17th scope: %+v", out.Scopes[17])
	}

	// limited's maximum: spawn of worker and driver, inspect_turn of
	// both, inspect_session of worker. Narrowing works; widening fails.
	_, _, out = p.drive("limited", "", driveIn{Scopes: []*helmrtype.RuntimeMCPPolicy{
		{Allow: []helmrtype.RuntimeMCPRule{{Operation: "spawn", Agents: []string{"worker"}}}},
		{Allow: []helmrtype.RuntimeMCPRule{{Operation: "cancel_session", Agents: []string{"worker"}}}},
		{Allow: []helmrtype.RuntimeMCPRule{{Operation: "spawn", Agents: []string{"worker"}, Computer: "caller"}}},
		{Allow: []helmrtype.RuntimeMCPRule{{Operation: "spawn", Agents: []string{"nobody"}}}},
		{Allow: []helmrtype.RuntimeMCPRule{}},
	}})
	if out.Scopes[0].Error != "" || out.Scopes[4].Error != "" {
		t.Fatalf("narrowing: %+v", out.Scopes)
	}
	for i, want := range map[int]string{1: "cancel_session", 2: "caller", 3: "nobody"} {
		if e := out.Scopes[i].Error; e == "" || !strings.Contains(e, want) {
			t.Errorf("scope %d: %q, want an error naming %s", i, e, want)
		}
	}

	// The Agent view shows the resolved, normalized maximum.
	var a helmrtype.AgentInfo
	p.must("GET", "/v1/agents/limited", nil, &a)
	want := `{"allow":[{"operation":"spawn","agents":["driver","worker"],"computer":"new"},{"operation":"inspect_session","agents":["worker"]},{"operation":"inspect_turn","agents":["driver","worker"]}]}`
	if string(a.RuntimeMCP) != want {
		t.Fatalf("limited runtime_mcp:\n%s\nwant\n%s", a.RuntimeMCP, want)
	}
	p.must("GET", "/v1/agents/echo", nil, &a)
	var def helmrtype.RuntimeMCPPolicy
	json.Unmarshal(a.RuntimeMCP, &def)
	if len(def.Allow) != 12 || def.Allow[0].Computer != "new" || def.Allow[11].Operation != "list_computers" {
		t.Fatalf("echo's default maximum: %s", a.RuntimeMCP)
	}
}
