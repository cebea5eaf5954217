package helmrtype_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
)

// requirePolicyInvalid fails unless err is a *helmrtype.Error with code
// CodePolicyInvalid, reachable both through errors.As and errors.Is.
func requirePolicyInvalid(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("error = nil, want policy_invalid")
	}
	var e *helmrtype.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *helmrtype.Error", err, err)
	}
	if e.Code != helmrtype.CodePolicyInvalid {
		t.Fatalf("code = %q, want %q (%v)", e.Code, helmrtype.CodePolicyInvalid, err)
	}
	if !errors.Is(err, &helmrtype.Error{Code: helmrtype.CodePolicyInvalid}) || !errors.Is(err, helmrtype.CodePolicyInvalid) {
		t.Fatalf("errors.Is(%v, policy_invalid) = false", err)
	}
	if !strings.HasPrefix(e.Message, "runtime MCP policy: ") {
		t.Errorf("message %q does not name the runtime MCP policy", e.Message)
	}
}

func mustParse(t testing.TB, raw string) *helmrtype.RuntimeMCPPolicy {
	t.Helper()
	p, err := helmrtype.ParseRuntimeMCPPolicy([]byte(raw))
	if err != nil {
		t.Fatalf("ParseRuntimeMCPPolicy(%s): %v", raw, err)
	}
	if p == nil {
		t.Fatalf("ParseRuntimeMCPPolicy(%s) = nil, nil", raw)
	}
	return p
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(b)
}

// normJSON is the JSON of p's normal form.
func normJSON(t testing.TB, p *helmrtype.RuntimeMCPPolicy) string {
	t.Helper()
	return mustJSON(t, p.Normalize())
}

// agentKeys returns n distinct Agent keys prefix0000, prefix0001, ….
func agentKeys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

// agentsJSON writes keys as a JSON array.
func agentsJSON(keys []string) string {
	b, _ := json.Marshal(keys)
	return string(b)
}

// repeatRules writes {"allow":[rule, rule, …]} with n copies of rule.
func repeatRules(rule string, n int) string {
	return `{"allow":[` + strings.TrimSuffix(strings.Repeat(rule+",", n), ",") + `]}`
}

func TestParseRuntimeMCPPolicyInvalid(t *testing.T) {
	const list = `{"operation":"list_computers"}`
	tests := []struct {
		name string
		raw  string
	}{
		// The policy itself.
		{"null", `null`},
		{"true", `true`},
		{"false", `false`},
		{"array", `[]`},
		{"string", `"x"`},
		{"number", `1`},
		{"empty object", `{}`},
		{"allow null", `{"allow":null}`},
		{"allow object", `{"allow":{}}`},
		{"allow string", `{"allow":"x"}`},
		{"allow true", `{"allow":true}`},
		{"unknown field", `{"allow":[],"x":1}`},
		{"field case differs", `{"Allow":[]}`},
		{"blockAll alone", `{"blockAll":true}`},
		{"blockAll with allow", `{"allow":[],"blockAll":true}`},
		{"blockAll false", `{"allow":[],"blockAll":false}`},
		{"257 rules", repeatRules(list, helmrtype.MaxMCPRules+1)},
		{"trailing object", `{"allow":[]} {}`},
		{"trailing garbage", `{"allow":[]}x`},
		{"trailing bracket", `{"allow":[]}]`},
		{"trailing null", `{"allow":[]}null`},
		{"invalid JSON", `{"allow":[}`},
		{"unterminated", `{"allow":[]`},
		{"trailing comma", `{"allow":[` + list + `,]}`},
		{"empty input", ``},
		{"only whitespace", " \n\t"},

		// Rules.
		{"rule number", `{"allow":[1]}`},
		{"rule null", `{"allow":[null]}`},
		{"rule string", `{"allow":["start"]}`},
		{"rule array", `{"allow":[[]]}`},
		{"rule unknown field", `{"allow":[{"operation":"start","agents":["a"],"x":1}]}`},
		{"rule unknown field on list_computers", `{"allow":[{"operation":"list_computers","note":"x"}]}`},
		{"rule field case differs", `{"allow":[{"Operation":"start","agents":["a"]}]}`},
		{"rule empty object", `{"allow":[{}]}`},
		{"operation missing", `{"allow":[{"agents":["a"]}]}`},
		{"operation null", `{"allow":[{"operation":null,"agents":["a"]}]}`},
		{"operation number", `{"allow":[{"operation":1,"agents":["a"]}]}`},
		{"operation empty", `{"allow":[{"operation":"","agents":["a"]}]}`},
		{"unknown operation", `{"allow":[{"operation":"delete_session","agents":["a"]}]}`},
		{"operation case differs", `{"allow":[{"operation":"Start","agents":["a"]}]}`},
		{"wait_turn", `{"allow":[{"operation":"wait_turn","agents":["a"]}]}`},
		{"list_sessions", `{"allow":[{"operation":"list_sessions","agents":["a"]}]}`},
		{"list_agents", `{"allow":[{"operation":"list_agents"}]}`},
		{"bad rule after good rules", `{"allow":[` + list + `,{"operation":"enqueue","agents":["a"]},{"operation":"nope"}]}`},

		// Creation rules.
		{"start without agents", `{"allow":[{"operation":"start"}]}`},
		{"spawn without agents", `{"allow":[{"operation":"spawn","computer":"new"}]}`},
		{"computer other", `{"allow":[{"operation":"spawn","agents":["a"],"computer":"other"}]}`},
		{"computer number", `{"allow":[{"operation":"start","agents":["a"],"computer":1}]}`},
		{"computer null", `{"allow":[{"operation":"start","agents":["a"],"computer":null}]}`},
		{"computer empty", `{"allow":[{"operation":"start","agents":["a"],"computer":""}]}`},
		{"computer case differs", `{"allow":[{"operation":"start","agents":["a"],"computer":"New"}]}`},
		{"computer array", `{"allow":[{"operation":"start","agents":["a"],"computer":["new","caller"]}]}`},

		// Agent lists (checked the same for every Agent-targeted operation).
		{"agents empty", `{"allow":[{"operation":"start","agents":[]}]}`},
		{"agents 257", `{"allow":[{"operation":"enqueue","agents":` + agentsJSON(agentKeys("a", helmrtype.MaxMCPAgents+1)) + `}]}`},
		{"agents duplicate", `{"allow":[{"operation":"spawn","agents":["a","b","a"]}]}`},
		{"agents duplicate by escape", `{"allow":[{"operation":"spawn","agents":["a","\u0061"]}]}`},
		{"agents string", `{"allow":[{"operation":"start","agents":"a"}]}`},
		{"agents object", `{"allow":[{"operation":"start","agents":{"a":true}}]}`},
		{"agents null", `{"allow":[{"operation":"inspect_turn","agents":null}]}`},
		{"agents number", `{"allow":[{"operation":"inspect_turn","agents":1}]}`},
		{"agent key number", `{"allow":[{"operation":"start","agents":[1]}]}`},
		{"agent key null", `{"allow":[{"operation":"start","agents":[null]}]}`},
		{"agent key empty", `{"allow":[{"operation":"start","agents":[""]}]}`},
		{"agent key empty among others", `{"allow":[{"operation":"send_turn","agents":["a",""]}]}`},

		// list_computers.
		{"list_computers with agents", `{"allow":[{"operation":"list_computers","agents":["a"]}]}`},
		{"list_computers with empty agents", `{"allow":[{"operation":"list_computers","agents":[]}]}`},
		{"list_computers with null agents", `{"allow":[{"operation":"list_computers","agents":null}]}`},
		{"list_computers with computer", `{"allow":[{"operation":"list_computers","computer":"new"}]}`},
		{"list_computers with null computer", `{"allow":[{"operation":"list_computers","computer":null}]}`},
	}
	// Every targeted operation requires agents and forbids computer.
	for _, op := range helmrtype.MCPTargetOperations {
		tests = append(tests,
			struct{ name, raw string }{op + " without agents", `{"allow":[{"operation":"` + op + `"}]}`},
			struct{ name, raw string }{op + " with computer new", `{"allow":[{"operation":"` + op + `","agents":["a"],"computer":"new"}]}`},
			struct{ name, raw string }{op + " with computer caller", `{"allow":[{"operation":"` + op + `","agents":["a"],"computer":"caller"}]}`},
			struct{ name, raw string }{op + " with computer null", `{"allow":[{"operation":"` + op + `","agents":["a"],"computer":null}]}`},
		)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := helmrtype.ParseRuntimeMCPPolicy([]byte(tt.raw))
			if p != nil {
				t.Errorf("policy = %+v, want nil", p)
			}
			requirePolicyInvalid(t, err)
		})
	}
}

func TestParseRuntimeMCPPolicyValid(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		// norm is the JSON of the normal form.
		norm string
	}{
		{"empty allow", `{"allow":[]}`, `{"allow":[]}`},
		{"whitespace around", " \n{ \"allow\" : [ ] }\t\n", `{"allow":[]}`},
		{"start without computer", `{"allow":[{"operation":"start","agents":["a"]}]}`,
			`{"allow":[{"operation":"start","agents":["a"],"computer":"new"}]}`},
		{"start new", `{"allow":[{"operation":"start","agents":["a"],"computer":"new"}]}`,
			`{"allow":[{"operation":"start","agents":["a"],"computer":"new"}]}`},
		{"start caller", `{"allow":[{"operation":"start","agents":["a"],"computer":"caller"}]}`,
			`{"allow":[{"operation":"start","agents":["a"],"computer":"caller"}]}`},
		{"spawn without computer", `{"allow":[{"operation":"spawn","agents":["b","a"]}]}`,
			`{"allow":[{"operation":"spawn","agents":["a","b"],"computer":"new"}]}`},
		{"spawn caller", `{"allow":[{"operation":"spawn","agents":["a"],"computer":"caller"}]}`,
			`{"allow":[{"operation":"spawn","agents":["a"],"computer":"caller"}]}`},
		{"field order free", `{"allow":[{"computer":"caller","agents":["a"],"operation":"spawn"}]}`,
			`{"allow":[{"operation":"spawn","agents":["a"],"computer":"caller"}]}`},
		{"list_computers", `{"allow":[{"operation":"list_computers"}]}`,
			`{"allow":[{"operation":"list_computers"}]}`},
		{"escaped names", `{"allow":[{"operation":"st\u0061rt","agents":["\u00e9t\u00e9"]}]}`,
			`{"allow":[{"operation":"start","agents":["été"],"computer":"new"}]}`},
		{"256 rules", repeatRules(`{"operation":"list_computers"}`, helmrtype.MaxMCPRules),
			`{"allow":[{"operation":"list_computers"}]}`},
	}
	for _, op := range helmrtype.MCPTargetOperations {
		tests = append(tests, struct{ name, raw, norm string }{
			op, `{"allow":[{"operation":"` + op + `","agents":["a"]}]}`,
			`{"allow":[{"operation":"` + op + `","agents":["a"]}]}`,
		})
	}
	full := agentKeys("k", helmrtype.MaxMCPAgents)
	tests = append(tests, struct{ name, raw, norm string }{
		"256 agents", `{"allow":[{"operation":"enqueue","agents":` + agentsJSON(full) + `}]}`,
		`{"allow":[{"operation":"enqueue","agents":` + agentsJSON(full) + `}]}`,
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.raw)
			if p.Allow == nil {
				t.Error("Allow = nil, want a non-nil slice")
			}
			if err := p.Check(nil); err != nil {
				t.Errorf("Check(nil) of a parsed policy: %v", err)
			}
			if got := normJSON(t, p); got != tt.norm {
				t.Errorf("normalized =\n  %s\nwant\n  %s", got, tt.norm)
			}
		})
	}
}

func TestParseRuntimeMCPPolicyKeepsRules(t *testing.T) {
	p := mustParse(t, `{"allow":[{"operation":"spawn","agents":["b","a"]},{"operation":"list_computers"},{"operation":"start","agents":["c"],"computer":"caller"}]}`)
	want := []helmrtype.RuntimeMCPRule{
		{Operation: "spawn", Agents: []string{"b", "a"}},
		{Operation: "list_computers"},
		{Operation: "start", Agents: []string{"c"}, Computer: "caller"},
	}
	if len(p.Allow) != len(want) {
		t.Fatalf("Allow = %+v, want %+v", p.Allow, want)
	}
	for i := range want {
		got := p.Allow[i]
		if got.Operation != want[i].Operation || got.Computer != want[i].Computer || !slices.Equal(got.Agents, want[i].Agents) {
			t.Errorf("rule %d = %+v, want %+v", i, got, want[i])
		}
	}
}

func TestRuntimeMCPPolicyEmptyAllowGrantsNothing(t *testing.T) {
	p := mustParse(t, `{"allow":[]}`)
	if got := mustJSON(t, p); got != `{"allow":[]}` {
		t.Errorf("marshalled = %s, want {\"allow\":[]}", got)
	}
	n := p.Normalize()
	if n.Allow == nil || len(n.Allow) != 0 {
		t.Errorf("Normalize().Allow = %#v, want an empty non-nil slice", n.Allow)
	}
	if got := mustJSON(t, n); got != `{"allow":[]}` {
		t.Errorf("normalized = %s, want {\"allow\":[]}", got)
	}
	g := p.Grants()
	if got := g.Key(); got != `{"allow":[]}` {
		t.Errorf("Key() = %s, want {\"allow\":[]}", got)
	}
	for _, op := range append(append(slices.Clone(helmrtype.MCPCreationOperations), helmrtype.MCPTargetOperations...), helmrtype.MCPListComputers, "wait_turn") {
		if g.Has(op) {
			t.Errorf("Has(%q) = true for an empty policy", op)
		}
	}
	if got := g.CreatableAgents(); len(got) != 0 {
		t.Errorf("CreatableAgents() = %v", got)
	}
	// A Go-built zero policy writes "allow" as [], never null.
	for _, v := range []any{helmrtype.RuntimeMCPPolicy{}, &helmrtype.RuntimeMCPPolicy{}} {
		if got := mustJSON(t, v); got != `{"allow":[]}` {
			t.Errorf("json.Marshal(%#v) = %s, want {\"allow\":[]}", v, got)
		}
	}
}

func TestRuntimeMCPPolicyCheck(t *testing.T) {
	manifest := []string{"a", "b", "c"}
	type rule = helmrtype.RuntimeMCPRule
	pol := func(rules ...rule) *helmrtype.RuntimeMCPPolicy { return &helmrtype.RuntimeMCPPolicy{Allow: rules} }
	listRules := make([]rule, helmrtype.MaxMCPRules+1)
	for i := range listRules {
		listRules[i] = rule{Operation: helmrtype.MCPListComputers}
	}

	t.Run("nil policy", func(t *testing.T) {
		var p *helmrtype.RuntimeMCPPolicy
		requirePolicyInvalid(t, p.Check(manifest))
		requirePolicyInvalid(t, p.Check(nil))
	})

	t.Run("valid", func(t *testing.T) {
		valid := []*helmrtype.RuntimeMCPPolicy{
			pol(),
			{},
			pol(rule{Operation: "start", Agents: []string{"a"}}),
			pol(rule{Operation: "spawn", Agents: []string{"a", "b"}, Computer: "new"}, rule{Operation: "spawn", Agents: []string{"c"}, Computer: "caller"}),
			pol(rule{Operation: "inspect_turn", Agents: []string{"c", "a"}}, rule{Operation: "list_computers"}),
			pol(listRules[:helmrtype.MaxMCPRules]...),
			helmrtype.DefaultRuntimeMCP(manifest),
		}
		for i, p := range valid {
			if err := p.Check(manifest); err != nil {
				t.Errorf("policy %d Check(manifest): %v", i, err)
			}
			if err := p.Check(nil); err != nil {
				t.Errorf("policy %d Check(nil): %v", i, err)
			}
		}
	})

	t.Run("agent not in manifest", func(t *testing.T) {
		for _, raw := range []string{
			`{"allow":[{"operation":"start","agents":["a","z"]}]}`,
			`{"allow":[{"operation":"spawn","agents":["z"],"computer":"caller"}]}`,
			`{"allow":[{"operation":"list_computers"},{"operation":"cancel_session","agents":["A"]}]}`,
		} {
			p := mustParse(t, raw)
			err := p.Check(manifest)
			requirePolicyInvalid(t, err)
			// Without a manifest the same policy is well formed.
			if err := p.Check(nil); err != nil {
				t.Errorf("%s Check(nil): %v", raw, err)
			}
		}
		// An empty (non-nil) manifest admits no Agent key.
		requirePolicyInvalid(t, mustParse(t, `{"allow":[{"operation":"enqueue","agents":["a"]}]}`).Check([]string{}))
	})

	invalid := []struct {
		name string
		p    *helmrtype.RuntimeMCPPolicy
	}{
		{"257 rules", pol(listRules...)},
		{"unknown operation", pol(rule{Operation: "delete_session", Agents: []string{"a"}})},
		{"empty operation", pol(rule{Agents: []string{"a"}})},
		{"wait_turn", pol(rule{Operation: "wait_turn", Agents: []string{"a"}})},
		{"start without agents", pol(rule{Operation: "start"})},
		{"spawn with empty agents", pol(rule{Operation: "spawn", Agents: []string{}, Computer: "new"})},
		{"target without agents", pol(rule{Operation: "inspect_session"})},
		{"target with computer new", pol(rule{Operation: "enqueue", Agents: []string{"a"}, Computer: "new"})},
		{"target with computer caller", pol(rule{Operation: "send_turn", Agents: []string{"a"}, Computer: "caller"})},
		{"list_computers with agents", pol(rule{Operation: "list_computers", Agents: []string{"a"}})},
		{"list_computers with computer", pol(rule{Operation: "list_computers", Computer: "new"})},
		{"computer other", pol(rule{Operation: "start", Agents: []string{"a"}, Computer: "other"})},
		{"computer case differs", pol(rule{Operation: "spawn", Agents: []string{"a"}, Computer: "Caller"})},
		{"257 agents", pol(rule{Operation: "resume_session", Agents: agentKeys("a", helmrtype.MaxMCPAgents+1)})},
		{"duplicate agents", pol(rule{Operation: "close_session", Agents: []string{"a", "b", "a"}})},
		{"empty agent key", pol(rule{Operation: "interrupt_turn", Agents: []string{""}})},
		{"bad rule after good", pol(rule{Operation: "list_computers"}, rule{Operation: "interrupt_session", Agents: []string{"b"}}, rule{Operation: "spawn", Agents: []string{"a", "a"}})},
	}
	for _, tt := range invalid {
		t.Run(tt.name, func(t *testing.T) {
			requirePolicyInvalid(t, tt.p.Check(nil))
			// The manifest check does not hide the shape error.
			requirePolicyInvalid(t, tt.p.Check(manifest))
			// The policy's JSON is refused by the parser too.
			raw := mustJSON(t, tt.p)
			_, err := helmrtype.ParseRuntimeMCPPolicy([]byte(raw))
			if err == nil {
				t.Fatalf("Check refuses %s but ParseRuntimeMCPPolicy accepts it", raw)
			}
			requirePolicyInvalid(t, err)
		})
	}
}

func TestRuntimeMCPPolicyNormalizeUnion(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		norm string
	}{
		{"overlapping spawn rules",
			`{"allow":[
				{"operation":"spawn","agents":["a","b"],"computer":"new"},
				{"operation":"spawn","agents":["b","c"]},
				{"operation":"spawn","agents":["a"],"computer":"caller"}]}`,
			`{"allow":[{"operation":"spawn","agents":["a","b","c"],"computer":"new"},{"operation":"spawn","agents":["a"],"computer":"caller"}]}`},
		{"repeated rules collapse",
			`{"allow":[
				{"operation":"list_computers"},
				{"operation":"inspect_turn","agents":["b"]},
				{"operation":"list_computers"},
				{"operation":"inspect_turn","agents":["a","b"]}]}`,
			`{"allow":[{"operation":"inspect_turn","agents":["a","b"]},{"operation":"list_computers"}]}`},
		{"canonical order of operations and placements",
			`{"allow":[
				{"operation":"list_computers"},
				{"operation":"cancel_session","agents":["z"]},
				{"operation":"close_session","agents":["z"]},
				{"operation":"resume_session","agents":["z"]},
				{"operation":"interrupt_session","agents":["z"]},
				{"operation":"interrupt_turn","agents":["z"]},
				{"operation":"inspect_turn","agents":["z"]},
				{"operation":"inspect_session","agents":["z"]},
				{"operation":"send_turn","agents":["z"]},
				{"operation":"enqueue","agents":["z","y"]},
				{"operation":"spawn","agents":["z"],"computer":"caller"},
				{"operation":"spawn","agents":["z"]},
				{"operation":"start","agents":["z"],"computer":"caller"},
				{"operation":"start","agents":["z"],"computer":"new"}]}`,
			`{"allow":[` +
				`{"operation":"start","agents":["z"],"computer":"new"},` +
				`{"operation":"start","agents":["z"],"computer":"caller"},` +
				`{"operation":"spawn","agents":["z"],"computer":"new"},` +
				`{"operation":"spawn","agents":["z"],"computer":"caller"},` +
				`{"operation":"enqueue","agents":["y","z"]},` +
				`{"operation":"send_turn","agents":["z"]},` +
				`{"operation":"inspect_session","agents":["z"]},` +
				`{"operation":"inspect_turn","agents":["z"]},` +
				`{"operation":"interrupt_turn","agents":["z"]},` +
				`{"operation":"interrupt_session","agents":["z"]},` +
				`{"operation":"resume_session","agents":["z"]},` +
				`{"operation":"close_session","agents":["z"]},` +
				`{"operation":"cancel_session","agents":["z"]},` +
				`{"operation":"list_computers"}]}`},
		{"creation adds no targeted grant",
			`{"allow":[{"operation":"start","agents":["a"]}]}`,
			`{"allow":[{"operation":"start","agents":["a"],"computer":"new"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.raw)
			if got := normJSON(t, p); got != tt.norm {
				t.Errorf("normalized =\n  %s\nwant\n  %s", got, tt.norm)
			}
			if got := p.Grants().Key(); got != tt.norm {
				t.Errorf("Grants().Key() =\n  %s\nwant\n  %s", got, tt.norm)
			}
		})
	}
}

func TestRuntimeMCPPolicyNormalizeDoesNotModify(t *testing.T) {
	p := mustParse(t, `{"allow":[{"operation":"enqueue","agents":["c","a","b"]},{"operation":"start","agents":["b","a"]}]}`)
	before := mustJSON(t, p)
	n := p.Normalize()
	if after := mustJSON(t, p); after != before {
		t.Errorf("Normalize modified the policy: %s → %s", before, after)
	}
	// Changing the normal form does not reach the original either.
	n.Allow[0].Agents[0] = "changed"
	if after := mustJSON(t, p); after != before {
		t.Errorf("the normal form shares Agent lists with the policy: %s → %s", before, after)
	}
}

// normalizeCorpus are valid policies exercised by the property tests.
var normalizeCorpus = []string{
	`{"allow":[]}`,
	`{"allow":[{"operation":"list_computers"}]}`,
	`{"allow":[{"operation":"spawn","agents":["a","b"],"computer":"new"},{"operation":"spawn","agents":["b","c"]},{"operation":"spawn","agents":["a"],"computer":"caller"}]}`,
	`{"allow":[{"operation":"start","agents":["x"]},{"operation":"start","agents":["x"],"computer":"caller"},{"operation":"inspect_turn","agents":["x","y"]},{"operation":"inspect_turn","agents":["y"]},{"operation":"list_computers"},{"operation":"list_computers"}]}`,
	`{"allow":[{"operation":"enqueue","agents":["c","b","a"]},{"operation":"send_turn","agents":["a"]},{"operation":"cancel_session","agents":["b"]},{"operation":"close_session","agents":["c","a"]},{"operation":"resume_session","agents":["a"]},{"operation":"interrupt_turn","agents":["b"]},{"operation":"interrupt_session","agents":["c"]},{"operation":"inspect_session","agents":["a","b","c"]}]}`,
	`{"allow":[{"operation":"spawn","agents":["m","n","o","p"],"computer":"caller"},{"operation":"start","agents":["p","o"]},{"operation":"spawn","agents":["p"]},{"operation":"enqueue","agents":["m"]},{"operation":"enqueue","agents":["n"]},{"operation":"enqueue","agents":["o","m"]}]}`,
}

// shuffled returns a copy of p with its rules and each rule's Agent keys
// in an order drawn from rng.
func shuffled(p *helmrtype.RuntimeMCPPolicy, rng *rand.Rand) *helmrtype.RuntimeMCPPolicy {
	out := &helmrtype.RuntimeMCPPolicy{Allow: make([]helmrtype.RuntimeMCPRule, len(p.Allow))}
	for i, j := range rng.Perm(len(p.Allow)) {
		r := p.Allow[j]
		r.Agents = slices.Clone(r.Agents)
		rng.Shuffle(len(r.Agents), func(a, b int) { r.Agents[a], r.Agents[b] = r.Agents[b], r.Agents[a] })
		out.Allow[i] = r
	}
	return out
}

func TestRuntimeMCPPolicyNormalizeOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(20240501, 7))
	for _, raw := range normalizeCorpus {
		p := mustParse(t, raw)
		want := normJSON(t, p)
		wantKey := p.Grants().Key()
		if wantKey != want {
			t.Errorf("%s: Grants().Key() %s differs from the normalized JSON %s", raw, wantKey, want)
		}
		for i := range 25 {
			q := shuffled(p, rng)
			if got := normJSON(t, q); got != want {
				t.Errorf("permutation %d of %s:\n  %s\nnormalizes to\n  %s\nwant\n  %s", i, raw, mustJSON(t, q), got, want)
			}
			if got := q.Grants().Key(); got != wantKey {
				t.Errorf("permutation %d of %s: Grants().Key() = %s, want %s", i, raw, got, wantKey)
			}
			// Through JSON as well.
			if got := normJSON(t, mustParse(t, mustJSON(t, q))); got != want {
				t.Errorf("permutation %d of %s re-parsed normalizes to %s, want %s", i, raw, got, want)
			}
		}
	}
}

func TestRuntimeMCPPolicyNormalizeIdempotentAndValid(t *testing.T) {
	manifest := []string{"a", "b", "c", "m", "n", "o", "p", "x", "y"}
	for _, raw := range normalizeCorpus {
		p := mustParse(t, raw)
		n := p.Normalize()
		nj := mustJSON(t, n)
		if got := mustJSON(t, n.Normalize()); got != nj {
			t.Errorf("%s: Normalize is not idempotent:\n  %s\n  %s", raw, nj, got)
		}
		// The normal form re-parses to itself and passes Check.
		rp := mustParse(t, nj)
		if got := mustJSON(t, rp); got != nj {
			t.Errorf("%s: the normal form %s re-parses as %s", raw, nj, got)
		}
		if got := normJSON(t, rp); got != nj {
			t.Errorf("%s: the re-parsed normal form normalizes to %s, want %s", raw, got, nj)
		}
		if err := n.Check(manifest); err != nil {
			t.Errorf("%s: normal form %s fails Check: %v", raw, nj, err)
		}
		if err := rp.Check(manifest); err != nil {
			t.Errorf("%s: re-parsed normal form fails Check: %v", raw, err)
		}
		// Creation rules in the normal form always name their computer.
		for _, r := range n.Allow {
			if slices.Contains(helmrtype.MCPCreationOperations, r.Operation) && r.Computer == "" {
				t.Errorf("%s: normal form has a creation rule without computer: %+v", raw, r)
			}
		}
		if n.Grants().Key() != p.Grants().Key() {
			t.Errorf("%s: the normal form grants %s, the policy %s", raw, n.Grants().Key(), p.Grants().Key())
		}
	}
}

func TestRuntimeMCPPolicyDefaultComputerIsNew(t *testing.T) {
	for _, op := range helmrtype.MCPCreationOperations {
		implicit := mustParse(t, `{"allow":[{"operation":"`+op+`","agents":["a","b"]}]}`)
		explicit := mustParse(t, `{"allow":[{"operation":"`+op+`","agents":["b","a"],"computer":"new"}]}`)
		caller := mustParse(t, `{"allow":[{"operation":"`+op+`","agents":["a","b"],"computer":"caller"}]}`)
		if a, b := normJSON(t, implicit), normJSON(t, explicit); a != b {
			t.Errorf("%s: without computer normalizes to %s, with computer new to %s", op, a, b)
		}
		if a, b := implicit.Grants().Key(), explicit.Grants().Key(); a != b {
			t.Errorf("%s: Grants().Key() %s != %s", op, a, b)
		}
		if implicit.Grants().Key() == caller.Grants().Key() {
			t.Errorf("%s: computer caller grants the same as the default", op)
		}
		if !implicit.Grants().CanCreate(op, "a", helmrtype.PlacementNew) || implicit.Grants().CanCreate(op, "a", helmrtype.PlacementCaller) {
			t.Errorf("%s: a rule without computer must allow new placement only", op)
		}
	}
	// A Go-built rule without computer grants the same.
	goBuilt := &helmrtype.RuntimeMCPPolicy{Allow: []helmrtype.RuntimeMCPRule{{Operation: "spawn", Agents: []string{"a"}}}}
	if got, want := goBuilt.Grants().Key(), mustParse(t, `{"allow":[{"operation":"spawn","agents":["a"],"computer":"new"}]}`).Grants().Key(); got != want {
		t.Errorf("Go-built rule without computer: %s, want %s", got, want)
	}
}

func TestRuntimeMCPPolicyNormalizeSplitsLongAgentLists(t *testing.T) {
	// Two rules of 200 Agents each union to 400 Agents, more than one rule
	// may name; the normal form splits them and stays valid.
	first := agentKeys("a", 400)
	p := &helmrtype.RuntimeMCPPolicy{Allow: []helmrtype.RuntimeMCPRule{
		{Operation: "inspect_turn", Agents: first[200:]},
		{Operation: "inspect_turn", Agents: first[:200]},
		{Operation: "spawn", Agents: first[:200], Computer: "caller"},
	}}
	if err := p.Check(first); err != nil {
		t.Fatalf("Check: %v", err)
	}
	n := p.Normalize()
	if err := n.Check(first); err != nil {
		t.Fatalf("normal form fails Check: %v", err)
	}
	var got []string
	for _, r := range n.Allow {
		if r.Operation == "inspect_turn" {
			if len(r.Agents) > helmrtype.MaxMCPAgents {
				t.Errorf("a normalized rule names %d Agents", len(r.Agents))
			}
			got = append(got, r.Agents...)
		}
	}
	if !slices.Equal(got, first) {
		t.Errorf("normalized inspect_turn Agents = %d keys, want all 400 sorted", len(got))
	}
	if len(n.Allow) != 3 {
		t.Errorf("normal form has %d rules, want 3 (256 + 144 inspect_turn, 1 spawn)", len(n.Allow))
	}
	nj := mustJSON(t, n)
	if got := normJSON(t, mustParse(t, nj)); got != nj {
		t.Error("the split normal form does not re-parse to itself")
	}
	if got := n.Grants().TargetAgents("wait_turn"); len(got) != 400 {
		t.Errorf("TargetAgents(wait_turn) has %d Agents, want 400", len(got))
	}
}

func TestMCPGrantsSubsetOf(t *testing.T) {
	const maxPolicy = `{"allow":[
		{"operation":"start","agents":["a","b"]},
		{"operation":"spawn","agents":["a"],"computer":"new"},
		{"operation":"spawn","agents":["b"],"computer":"caller"},
		{"operation":"enqueue","agents":["a","b"]},
		{"operation":"inspect_turn","agents":["a"]}]}`
	tests := []struct {
		name, sub string
		want      bool
		// desc must appear in the description of a widening grant.
		desc string
	}{
		{"equal", maxPolicy, true, ""},
		{"equal reordered and overlapping", `{"allow":[
			{"operation":"inspect_turn","agents":["a"]},
			{"operation":"enqueue","agents":["b"]},
			{"operation":"enqueue","agents":["a","b"]},
			{"operation":"spawn","agents":["b"],"computer":"caller"},
			{"operation":"spawn","agents":["a"]},
			{"operation":"start","agents":["b","a"],"computer":"new"}]}`, true, ""},
		{"narrower agents", `{"allow":[{"operation":"start","agents":["a"]},{"operation":"enqueue","agents":["b"]}]}`, true, ""},
		{"narrower operations", `{"allow":[{"operation":"inspect_turn","agents":["a"]}]}`, true, ""},
		{"caller spawn within max", `{"allow":[{"operation":"spawn","agents":["b"],"computer":"caller"}]}`, true, ""},
		{"empty", `{"allow":[]}`, true, ""},
		{"extra agent on creation", `{"allow":[{"operation":"start","agents":["a","c"]}]}`, false, `start of Agent "c"`},
		{"extra agent on target", `{"allow":[{"operation":"enqueue","agents":["c"]}]}`, false, `enqueue on Agent "c"`},
		{"extra operation", `{"allow":[{"operation":"send_turn","agents":["a"]}]}`, false, `send_turn on Agent "a"`},
		{"inspect_turn on another agent", `{"allow":[{"operation":"inspect_turn","agents":["b"]}]}`, false, `inspect_turn on Agent "b"`},
		{"caller placement when max has only new", `{"allow":[{"operation":"start","agents":["a"],"computer":"caller"}]}`, false, `start of Agent "a" with computer "caller"`},
		{"caller spawn when max has only new", `{"allow":[{"operation":"spawn","agents":["a"],"computer":"caller"}]}`, false, `spawn of Agent "a" with computer "caller"`},
		{"new placement when max has only caller", `{"allow":[{"operation":"spawn","agents":["b"]}]}`, false, `spawn of Agent "b" with computer "new"`},
		{"list_computers when max lacks it", `{"allow":[{"operation":"list_computers"}]}`, false, "list_computers"},
		{"one widening rule among narrower ones", `{"allow":[{"operation":"enqueue","agents":["a"]},{"operation":"cancel_session","agents":["a"]}]}`, false, "cancel_session"},
	}
	maxG := mustParse(t, maxPolicy).Grants()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, desc := mustParse(t, tt.sub).Grants().SubsetOf(maxG)
			if ok != tt.want {
				t.Fatalf("SubsetOf = %v (%q), want %v", ok, desc, tt.want)
			}
			if ok && desc != "" {
				t.Errorf("subset with description %q", desc)
			}
			if !ok && (desc == "" || !strings.Contains(desc, tt.desc)) {
				t.Errorf("description = %q, want one containing %q", desc, tt.desc)
			}
		})
	}

	t.Run("empty is a subset of everything", func(t *testing.T) {
		empty := mustParse(t, `{"allow":[]}`).Grants()
		for _, raw := range append(slices.Clone(normalizeCorpus), maxPolicy) {
			if ok, desc := empty.SubsetOf(mustParse(t, raw).Grants()); !ok {
				t.Errorf("empty ⊄ %s: %s", raw, desc)
			}
		}
		if ok, _ := empty.SubsetOf(helmrtype.DefaultRuntimeMCP(nil).Grants()); !ok {
			t.Error("empty ⊄ DefaultRuntimeMCP(nil)")
		}
	})

	t.Run("reflexive and normal form", func(t *testing.T) {
		for _, raw := range normalizeCorpus {
			p := mustParse(t, raw)
			g, ng := p.Grants(), p.Normalize().Grants()
			if ok, desc := g.SubsetOf(g); !ok {
				t.Errorf("%s ⊄ itself: %s", raw, desc)
			}
			if ok, desc := g.SubsetOf(ng); !ok {
				t.Errorf("%s ⊄ its normal form: %s", raw, desc)
			}
			if ok, desc := ng.SubsetOf(g); !ok {
				t.Errorf("normal form of %s ⊄ it: %s", raw, desc)
			}
		}
	})

	t.Run("non-empty is not a subset of empty", func(t *testing.T) {
		empty := mustParse(t, `{"allow":[]}`).Grants()
		for _, raw := range normalizeCorpus[1:] {
			if ok, _ := mustParse(t, raw).Grants().SubsetOf(empty); ok {
				t.Errorf("%s ⊆ {\"allow\":[]}", raw)
			}
		}
	})
}

func TestDefaultRuntimeMCP(t *testing.T) {
	agents := []string{"writer", "reviewer", "planner"}
	p := helmrtype.DefaultRuntimeMCP(agents)
	if err := p.Check(agents); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if got := mustJSON(t, p); got != normJSON(t, p) {
		t.Errorf("DefaultRuntimeMCP is not in normal form: %s", got)
	}
	if !slices.Equal(agents, []string{"writer", "reviewer", "planner"}) {
		t.Errorf("DefaultRuntimeMCP modified its argument: %v", agents)
	}
	g := p.Grants()
	for _, a := range agents {
		for _, op := range helmrtype.MCPCreationOperations {
			if !g.CanCreate(op, a, helmrtype.PlacementNew) {
				t.Errorf("default cannot %s %s on a new Computer", op, a)
			}
			if g.CanCreate(op, a, helmrtype.PlacementCaller) {
				t.Errorf("default can %s %s on the caller's Computer", op, a)
			}
		}
		for _, op := range append(slices.Clone(helmrtype.MCPTargetOperations), "wait_turn") {
			if !g.CanTarget(op, a) {
				t.Errorf("default cannot %s %s", op, a)
			}
		}
	}
	if !g.Has(helmrtype.MCPListComputers) {
		t.Error("default lacks list_computers")
	}
	if g.CanCreate("start", "stranger", helmrtype.PlacementNew) || g.CanTarget("enqueue", "stranger") {
		t.Error("default grants an Agent outside the manifest")
	}
	want := []string{"planner", "reviewer", "writer"}
	if got := g.CreatableAgents(); !slices.Equal(got, want) {
		t.Errorf("CreatableAgents() = %v, want %v", got, want)
	}

	// Every policy over the manifest without caller placement fits the
	// default; caller placement does not.
	for _, raw := range []string{
		`{"allow":[{"operation":"start","agents":["writer"]},{"operation":"list_computers"}]}`,
		`{"allow":[{"operation":"cancel_session","agents":["planner","reviewer","writer"]},{"operation":"spawn","agents":["planner"],"computer":"new"}]}`,
	} {
		if ok, desc := mustParse(t, raw).Grants().SubsetOf(g); !ok {
			t.Errorf("%s ⊄ default: %s", raw, desc)
		}
	}
	ok, desc := mustParse(t, `{"allow":[{"operation":"spawn","agents":["writer"],"computer":"caller"}]}`).Grants().SubsetOf(g)
	if ok || !strings.Contains(desc, "caller") {
		t.Errorf("caller placement ⊆ default = %v (%q), want false naming caller", ok, desc)
	}
	if ok, _ := g.SubsetOf(mustParse(t, `{"allow":[]}`).Grants()); ok {
		t.Error("default ⊆ empty policy")
	}

	t.Run("no agents", func(t *testing.T) {
		for _, agents := range [][]string{nil, {}} {
			p := helmrtype.DefaultRuntimeMCP(agents)
			if got, want := mustJSON(t, p), `{"allow":[{"operation":"list_computers"}]}`; got != want {
				t.Errorf("DefaultRuntimeMCP(%#v) = %s, want %s", agents, got, want)
			}
			if err := p.Check(agents); err != nil {
				t.Errorf("DefaultRuntimeMCP(%#v).Check: %v", agents, err)
			}
		}
	})

	t.Run("more agents than one rule may name", func(t *testing.T) {
		many := agentKeys("agent-", 300)
		p := helmrtype.DefaultRuntimeMCP(many)
		if err := p.Check(many); err != nil {
			t.Fatalf("Check: %v", err)
		}
		g := p.Grants()
		for _, a := range []string{many[0], many[255], many[256], many[299]} {
			if !g.CanCreate("spawn", a, helmrtype.PlacementNew) || !g.CanTarget("close_session", a) {
				t.Errorf("default over 300 Agents lacks %s", a)
			}
		}
	})
}

func TestMCPGrantsHelpers(t *testing.T) {
	g := mustParse(t, `{"allow":[
		{"operation":"start","agents":["a"]},
		{"operation":"start","agents":["b"],"computer":"caller"},
		{"operation":"spawn","agents":["c","a"],"computer":"caller"},
		{"operation":"spawn","agents":["a"],"computer":"new"},
		{"operation":"inspect_turn","agents":["b","a"]},
		{"operation":"enqueue","agents":["d"]}]}`).Grants()

	t.Run("CanCreate", func(t *testing.T) {
		tests := []struct {
			op, agent, placement string
			want                 bool
		}{
			{"start", "a", "new", true},
			{"start", "a", "caller", false},
			{"start", "b", "caller", true},
			{"start", "b", "new", false},
			{"start", "c", "caller", false},
			{"spawn", "a", "new", true},
			{"spawn", "a", "caller", true},
			{"spawn", "c", "caller", true},
			{"spawn", "c", "new", false},
			{"spawn", "b", "caller", false},
			{"spawn", "d", "new", false},
			{"start", "z", "new", false},
			{"enqueue", "d", "new", false},
			{"inspect_turn", "a", "new", false},
		}
		for _, tt := range tests {
			if got := g.CanCreate(tt.op, tt.agent, tt.placement); got != tt.want {
				t.Errorf("CanCreate(%q, %q, %q) = %v, want %v", tt.op, tt.agent, tt.placement, got, tt.want)
			}
		}
	})

	t.Run("CanTarget", func(t *testing.T) {
		tests := []struct {
			op, agent string
			want      bool
		}{
			{"inspect_turn", "a", true},
			{"inspect_turn", "b", true},
			{"inspect_turn", "c", false},
			{"wait_turn", "a", true},
			{"wait_turn", "b", true},
			{"wait_turn", "d", false},
			{"enqueue", "d", true},
			{"enqueue", "a", false},
			{"send_turn", "d", false},
			{"inspect_session", "a", false},
			// Creation grants no targeted operation.
			{"cancel_session", "c", false},
			{"start", "a", false},
			{"list_computers", "a", false},
		}
		for _, tt := range tests {
			if got := g.CanTarget(tt.op, tt.agent); got != tt.want {
				t.Errorf("CanTarget(%q, %q) = %v, want %v", tt.op, tt.agent, got, tt.want)
			}
		}
	})

	t.Run("Has", func(t *testing.T) {
		want := map[string]bool{
			"start": true, "spawn": true, "inspect_turn": true, "wait_turn": true, "enqueue": true,
			"send_turn": false, "inspect_session": false, "interrupt_turn": false, "interrupt_session": false,
			"resume_session": false, "close_session": false, "cancel_session": false,
			"list_computers": false, "list_sessions": false, "nope": false,
		}
		for op, w := range want {
			if got := g.Has(op); got != w {
				t.Errorf("Has(%q) = %v, want %v", op, got, w)
			}
		}
		lc := mustParse(t, `{"allow":[{"operation":"list_computers"}]}`).Grants()
		if !lc.Has("list_computers") || lc.Has("inspect_turn") || lc.Has("wait_turn") {
			t.Error("a list_computers policy must have list_computers only")
		}
		onlyWaitSource := mustParse(t, `{"allow":[{"operation":"enqueue","agents":["a"]}]}`).Grants()
		if onlyWaitSource.Has("wait_turn") {
			t.Error("wait_turn granted without inspect_turn")
		}
	})

	t.Run("CreatableAgents", func(t *testing.T) {
		if got, want := g.CreatableAgents(), []string{"a", "b", "c"}; !slices.Equal(got, want) {
			t.Errorf("CreatableAgents() = %v, want %v", got, want)
		}
		only := mustParse(t, `{"allow":[{"operation":"enqueue","agents":["a"]},{"operation":"list_computers"}]}`).Grants()
		if got := only.CreatableAgents(); len(got) != 0 {
			t.Errorf("CreatableAgents() without creation rules = %v", got)
		}
	})

	t.Run("TargetAgents", func(t *testing.T) {
		tests := []struct {
			op   string
			want []string
		}{
			{"inspect_turn", []string{"a", "b"}},
			{"wait_turn", []string{"a", "b"}},
			{"enqueue", []string{"d"}},
			{"send_turn", nil},
			{"start", nil},
			{"list_computers", nil},
		}
		for _, tt := range tests {
			if got := g.TargetAgents(tt.op); !slices.Equal(got, tt.want) {
				t.Errorf("TargetAgents(%q) = %v, want %v", tt.op, got, tt.want)
			}
		}
	})
}

// fuzzSeeds are valid and invalid policies for FuzzParseRuntimeMCPPolicy.
var fuzzSeeds = []string{
	`{"allow":[]}`,
	`{"allow":[{"operation":"list_computers"}]}`,
	`{"allow":[{"operation":"start","agents":["a"]}]}`,
	`{"allow":[{"operation":"spawn","agents":["a","b"],"computer":"caller"},{"operation":"spawn","agents":["b"]}]}`,
	`{"allow":[{"operation":"inspect_turn","agents":["a"]},{"operation":"enqueue","agents":["a","b"]},{"operation":"cancel_session","agents":["c"]}]}`,
	`{"allow":[{"operation":"send_turn","agents":["\u00e9"]},{"operation":"list_computers"},{"operation":"list_computers"}]}`,
	` {"allow" : [ {"computer":"new","agents":["x"],"operation":"start"} ] } `,
	`null`, `true`, `[]`, `"x"`, `1`, `{}`, ``,
	`{"allow":null}`, `{"allow":{}}`, `{"allow":[],"x":1}`, `{"blockAll":true}`, `{"allow":[],"blockAll":true}`,
	`{"allow":[{"operation":"wait_turn","agents":["a"]}]}`,
	`{"allow":[{"operation":"start"}]}`,
	`{"allow":[{"operation":"enqueue","agents":["a"],"computer":"new"}]}`,
	`{"allow":[{"operation":"list_computers","agents":["a"]}]}`,
	`{"allow":[{"operation":"start","agents":["a"],"computer":"other"}]}`,
	`{"allow":[{"operation":"start","agents":["a","a"]}]}`,
	`{"allow":[{"operation":"start","agents":[""]}]}`,
	`{"allow":[{"operation":"start","agents":[]}]}`,
	`{"allow":[{"operation":"start","agents":[null]}]}`,
	`{"allow":[]}{}`,
	`{"allow":[],"allow":[{"operation":"list_computers"}]}`,
	`{"allow":[{"operation":"start","agents":["a"],"operation":"enqueue"}]}`,
}

func FuzzParseRuntimeMCPPolicy(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range normalizeCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := helmrtype.ParseRuntimeMCPPolicy(raw)
		if err != nil {
			if p != nil {
				t.Fatalf("ParseRuntimeMCPPolicy returned a policy and an error: %v", err)
			}
			if code := helmrtype.CodeOf(err); code != helmrtype.CodePolicyInvalid {
				t.Fatalf("error code = %q, want policy_invalid: %v", code, err)
			}
			return
		}
		if err := p.Check(nil); err != nil {
			t.Fatalf("parsed policy fails Check(nil): %v\ninput: %q", err, raw)
		}
		if len(p.Allow) > helmrtype.MaxMCPRules {
			t.Fatalf("parsed %d rules", len(p.Allow))
		}
		n := p.Normalize()
		nj, err := json.Marshal(n)
		if err != nil {
			t.Fatalf("json.Marshal(normal form): %v", err)
		}
		if err := n.Check(nil); err != nil {
			t.Fatalf("normal form %s fails Check(nil): %v", nj, err)
		}
		if len(n.Allow) > len(p.Allow) {
			t.Fatalf("normal form has %d rules, the policy %d", len(n.Allow), len(p.Allow))
		}
		if again, _ := json.Marshal(n.Normalize()); string(again) != string(nj) {
			t.Fatalf("Normalize is not idempotent:\n  %s\n  %s", nj, again)
		}
		rp, err := helmrtype.ParseRuntimeMCPPolicy(nj)
		if err != nil {
			t.Fatalf("normal form %s does not re-parse: %v", nj, err)
		}
		if rj, _ := json.Marshal(rp.Normalize()); string(rj) != string(nj) {
			t.Fatalf("normal form re-parses to a different normal form:\n  %s\n  %s", nj, rj)
		}
		g, ng := p.Grants(), n.Grants()
		if ok, desc := g.SubsetOf(ng); !ok {
			t.Fatalf("policy ⊄ its normal form: %s", desc)
		}
		if ok, desc := ng.SubsetOf(g); !ok {
			t.Fatalf("normal form ⊄ the policy: %s", desc)
		}
		if g.Key() != string(nj) {
			t.Fatalf("Grants().Key() = %s, normal form %s", g.Key(), nj)
		}
	})
}
