package helmrtype

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Runtime MCP operations a policy rule can grant.
const (
	MCPStart            = "start"
	MCPSpawn            = "spawn"
	MCPEnqueue          = "enqueue"
	MCPSendTurn         = "send_turn"
	MCPInspectSession   = "inspect_session"
	MCPInspectTurn      = "inspect_turn"
	MCPInterruptTurn    = "interrupt_turn"
	MCPInterruptSession = "interrupt_session"
	MCPResumeSession    = "resume_session"
	MCPCloseSession     = "close_session"
	MCPCancelSession    = "cancel_session"
	MCPListComputers    = "list_computers"
)

// Placements of a creation rule: a new Computer, or the caller's.
const (
	PlacementNew    = "new"
	PlacementCaller = "caller"
)

// MCPCreationOperations are the operations that create Sessions; their
// rules name Agents and a placement.
var MCPCreationOperations = []string{MCPStart, MCPSpawn}

// MCPTargetOperations are the operations on existing Sessions and Turns;
// their rules name Agents and no placement.
var MCPTargetOperations = []string{MCPEnqueue, MCPSendTurn, MCPInspectSession, MCPInspectTurn,
	MCPInterruptTurn, MCPInterruptSession, MCPResumeSession, MCPCloseSession, MCPCancelSession}

// MaxMCPRules is the most rules a policy may have; MaxMCPAgents the most
// Agent keys one rule may name.
const (
	MaxMCPRules  = 256
	MaxMCPAgents = 256
)

// RuntimeMCPRule grants one operation: for start and spawn on the named
// Agents with a placement ("new" when empty), for the targeted operations
// on Sessions of the named Agents, and list_computers with neither.
type RuntimeMCPRule struct {
	Operation string   `json:"operation"`
	Agents    []string `json:"agents,omitempty"`
	Computer  string   `json:"computer,omitempty"`
}

// RuntimeMCPPolicy is a runtime MCP allowlist. An empty Allow grants
// nothing; rules union and their order does not matter.
type RuntimeMCPPolicy struct {
	Allow []RuntimeMCPRule `json:"allow"`
}

// MarshalJSON writes an empty allowlist as "allow": [] (never null).
func (p RuntimeMCPPolicy) MarshalJSON() ([]byte, error) {
	type plain RuntimeMCPPolicy
	if p.Allow == nil {
		p.Allow = []RuntimeMCPRule{}
	}
	return json.Marshal(plain(p))
}

func policyErr(format string, args ...any) error {
	return &Error{Code: CodePolicyInvalid, Message: "runtime MCP policy: " + fmt.Sprintf(format, args...)}
}

// ParseRuntimeMCPPolicy reads a policy strictly: it must be an object with
// exactly an "allow" array of well-formed rules. null, booleans, {}, unknown
// fields and blockAll are refused with CodePolicyInvalid. It does not check
// Agent keys against a manifest; see RuntimeMCPPolicy.Check.
func ParseRuntimeMCPPolicy(raw []byte) (*RuntimeMCPPolicy, error) {
	obj, err := strictObject(raw, "the policy", "allow", "blockAll")
	if err != nil {
		return nil, policyErr("%v", err)
	}
	if _, ok := obj["blockAll"]; ok {
		return nil, policyErr(`"blockAll" is not supported; use {"allow": []} to grant nothing`)
	}
	allowRaw, ok := obj["allow"]
	if !ok {
		return nil, policyErr(`"allow" is required (use {"allow": []} to grant nothing)`)
	}
	var items []json.RawMessage
	if t := bytes.TrimSpace(allowRaw); len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &items) != nil {
		return nil, policyErr(`"allow" must be an array of rules`)
	}
	if len(items) > MaxMCPRules {
		return nil, policyErr("%d rules; at most %d are allowed", len(items), MaxMCPRules)
	}
	p := &RuntimeMCPPolicy{Allow: make([]RuntimeMCPRule, 0, len(items))}
	for i, it := range items {
		r, err := parseRule(it, i)
		if err != nil {
			return nil, err
		}
		p.Allow = append(p.Allow, r)
	}
	return p, nil
}

func parseRule(raw json.RawMessage, i int) (RuntimeMCPRule, error) {
	where := "rule " + strconv.Itoa(i)
	obj, err := strictObject(raw, where, "operation", "agents", "computer")
	if err != nil {
		return RuntimeMCPRule{}, policyErr("%v", err)
	}
	var r RuntimeMCPRule
	if err := json.Unmarshal(obj["operation"], &r.Operation); err != nil || r.Operation == "" {
		return r, policyErr("%s: \"operation\" must be one of the operation names", where)
	}
	agentsRaw, hasAgents := obj["agents"]
	compRaw, hasComp := obj["computer"]
	switch kind := operationKind(r.Operation); kind {
	case "":
		if r.Operation == "wait_turn" {
			return r, policyErr("%s: wait_turn is derived from inspect_turn; grant inspect_turn", where)
		}
		return r, policyErr("%s: unknown operation %q", where, r.Operation)
	case "list":
		if hasAgents || hasComp {
			return r, policyErr("%s: list_computers takes neither \"agents\" nor \"computer\"", where)
		}
		return r, nil
	case "target":
		if hasComp {
			return r, policyErr("%s: %s takes no \"computer\"", where, r.Operation)
		}
	case "create":
		if hasComp {
			if err := json.Unmarshal(compRaw, &r.Computer); err != nil || (r.Computer != PlacementNew && r.Computer != PlacementCaller) {
				return r, policyErr("%s: \"computer\" must be \"new\" or \"caller\"", where)
			}
		}
	}
	if !hasAgents {
		return r, policyErr("%s: %s requires \"agents\"", where, r.Operation)
	}
	if t := bytes.TrimSpace(agentsRaw); len(t) == 0 || t[0] != '[' || json.Unmarshal(t, &r.Agents) != nil {
		return r, policyErr("%s: \"agents\" must be an array of Agent keys", where)
	}
	if err := checkAgentList(r.Agents, where); err != nil {
		return r, err
	}
	return r, nil
}

func checkAgentList(agents []string, where string) error {
	if len(agents) == 0 || len(agents) > MaxMCPAgents {
		return policyErr("%s: \"agents\" must name 1 to %d Agent keys (has %d)", where, MaxMCPAgents, len(agents))
	}
	seen := make(map[string]bool, len(agents))
	for _, a := range agents {
		if a == "" {
			return policyErr("%s: an Agent key is empty", where)
		}
		if seen[a] {
			return policyErr("%s: Agent key %q is listed twice", where, a)
		}
		seen[a] = true
	}
	return nil
}

// operationKind tells "create", "target", "list" or "" (unknown).
func operationKind(op string) string {
	switch {
	case slices.Contains(MCPCreationOperations, op):
		return "create"
	case slices.Contains(MCPTargetOperations, op):
		return "target"
	case op == MCPListComputers:
		return "list"
	}
	return ""
}

// Check validates a policy built in Go the way ParseRuntimeMCPPolicy
// validates JSON, and that every Agent key is one of agents (the keys of
// the same manifest).
func (p *RuntimeMCPPolicy) Check(agents []string) error {
	if p == nil {
		return policyErr("the policy is null; omit it to inherit, or use {\"allow\": []}")
	}
	if len(p.Allow) > MaxMCPRules {
		return policyErr("%d rules; at most %d are allowed", len(p.Allow), MaxMCPRules)
	}
	for i, r := range p.Allow {
		where := "rule " + strconv.Itoa(i)
		switch operationKind(r.Operation) {
		case "":
			if r.Operation == "wait_turn" {
				return policyErr("%s: wait_turn is derived from inspect_turn; grant inspect_turn", where)
			}
			return policyErr("%s: unknown operation %q", where, r.Operation)
		case "list":
			if len(r.Agents) > 0 || r.Computer != "" {
				return policyErr("%s: list_computers takes neither \"agents\" nor \"computer\"", where)
			}
			continue
		case "target":
			if r.Computer != "" {
				return policyErr("%s: %s takes no \"computer\"", where, r.Operation)
			}
		case "create":
			if r.Computer != "" && r.Computer != PlacementNew && r.Computer != PlacementCaller {
				return policyErr("%s: \"computer\" must be \"new\" or \"caller\"", where)
			}
		}
		if err := checkAgentList(r.Agents, where); err != nil {
			return err
		}
		if agents != nil {
			for _, a := range r.Agents {
				if !slices.Contains(agents, a) {
					return policyErr("%s: Agent %q is not in this manifest (it has %s)", where, a, strings.Join(agents, ", "))
				}
			}
		}
	}
	return nil
}

// DefaultRuntimeMCP is the maximum of an Agent that declares none: every
// operation on every Agent of its manifest, creating on new Computers only.
func DefaultRuntimeMCP(agents []string) *RuntimeMCPPolicy {
	p := &RuntimeMCPPolicy{}
	if len(agents) > 0 {
		for _, op := range MCPCreationOperations {
			p.Allow = append(p.Allow, RuntimeMCPRule{Operation: op, Agents: agents, Computer: PlacementNew})
		}
		for _, op := range MCPTargetOperations {
			p.Allow = append(p.Allow, RuntimeMCPRule{Operation: op, Agents: agents})
		}
	}
	p.Allow = append(p.Allow, RuntimeMCPRule{Operation: MCPListComputers})
	return p.Normalize()
}

// MCPGrants is what a policy grants, as sets: the union of its rules.
type MCPGrants struct {
	// create maps operation → Agent → placements (bit 1 new, bit 2 caller).
	create map[string]map[string]uint8
	// target maps operation → Agents.
	target        map[string]map[string]bool
	listComputers bool
}

func placementBit(p string) uint8 {
	if p == PlacementCaller {
		return 2
	}
	return 1
}

// Grants returns the union of p's rules. p must be valid.
func (p *RuntimeMCPPolicy) Grants() *MCPGrants {
	g := &MCPGrants{create: map[string]map[string]uint8{}, target: map[string]map[string]bool{}}
	for _, r := range p.Allow {
		switch operationKind(r.Operation) {
		case "create":
			m := g.create[r.Operation]
			if m == nil {
				m = map[string]uint8{}
				g.create[r.Operation] = m
			}
			for _, a := range r.Agents {
				m[a] |= placementBit(r.Computer)
			}
		case "target":
			m := g.target[r.Operation]
			if m == nil {
				m = map[string]bool{}
				g.target[r.Operation] = m
			}
			for _, a := range r.Agents {
				m[a] = true
			}
		case "list":
			g.listComputers = true
		}
	}
	return g
}

// Normalize returns the policy's deterministic form: one rule per
// operation (and per placement for start and spawn) in the order of the
// operation lists, Agent keys sorted and deduplicated, creation rules with
// an explicit computer. Equal grants give equal normal forms whatever the
// rule order or overlap.
func (p *RuntimeMCPPolicy) Normalize() *RuntimeMCPPolicy {
	return p.Grants().Policy()
}

// Policy writes the grants as a normalized policy.
func (g *MCPGrants) Policy() *RuntimeMCPPolicy {
	out := &RuntimeMCPPolicy{Allow: []RuntimeMCPRule{}}
	emit := func(op, comp string, agents []string) {
		slices.Sort(agents)
		for len(agents) > 0 {
			n := min(len(agents), MaxMCPAgents)
			out.Allow = append(out.Allow, RuntimeMCPRule{Operation: op, Agents: agents[:n:n], Computer: comp})
			agents = agents[n:]
		}
	}
	for _, op := range MCPCreationOperations {
		for _, place := range []string{PlacementNew, PlacementCaller} {
			var agents []string
			for a, bits := range g.create[op] {
				if bits&placementBit(place) != 0 {
					agents = append(agents, a)
				}
			}
			emit(op, place, agents)
		}
	}
	for _, op := range MCPTargetOperations {
		var agents []string
		for a := range g.target[op] {
			agents = append(agents, a)
		}
		emit(op, "", agents)
	}
	if g.listComputers {
		out.Allow = append(out.Allow, RuntimeMCPRule{Operation: MCPListComputers})
	}
	return out
}

// Key is the canonical JSON of the normalized policy: equal keys mean
// equal grants.
func (g *MCPGrants) Key() string {
	b, _ := json.Marshal(g.Policy())
	return string(b)
}

// CanCreate reports whether op (start or spawn) may create a Session of
// agent with placement ("new" or "caller").
func (g *MCPGrants) CanCreate(op, agent, placement string) bool {
	return g.create[op][agent]&placementBit(placement) != 0
}

// CanTarget reports whether the targeted op may act on a Session of agent.
// wait_turn is granted by inspect_turn.
func (g *MCPGrants) CanTarget(op, agent string) bool {
	if op == "wait_turn" {
		op = MCPInspectTurn
	}
	return g.target[op][agent]
}

// Has reports whether op is granted for at least one Agent (or, for
// list_computers, at all). wait_turn is granted by inspect_turn.
func (g *MCPGrants) Has(op string) bool {
	if op == "wait_turn" {
		op = MCPInspectTurn
	}
	if op == MCPListComputers {
		return g.listComputers
	}
	return len(g.create[op]) > 0 || len(g.target[op]) > 0
}

// CreatableAgents lists, sorted, the Agents that start or spawn may create.
func (g *MCPGrants) CreatableAgents() []string {
	var out []string
	for _, m := range g.create {
		for a := range m {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TargetAgents lists, sorted, the Agents whose Sessions op may act on.
func (g *MCPGrants) TargetAgents(op string) []string {
	if op == "wait_turn" {
		op = MCPInspectTurn
	}
	var out []string
	for a := range g.target[op] {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// SubsetOf reports whether every grant of g is also granted by max; when
// not, it returns a description of the first grant that widens.
func (g *MCPGrants) SubsetOf(max *MCPGrants) (bool, string) {
	for _, op := range MCPCreationOperations {
		for _, a := range sortedKeys(g.create[op]) {
			if bits := g.create[op][a]; bits&^max.create[op][a] != 0 {
				place := PlacementNew
				if bits&^max.create[op][a]&2 != 0 {
					place = PlacementCaller
				}
				return false, fmt.Sprintf("%s of Agent %q with computer %q", op, a, place)
			}
		}
	}
	for _, op := range MCPTargetOperations {
		for _, a := range sortedKeys(g.target[op]) {
			if !max.target[op][a] {
				return false, fmt.Sprintf("%s on Agent %q", op, a)
			}
		}
	}
	if g.listComputers && !max.listComputers {
		return false, "list_computers"
	}
	return true, ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// RuntimeMCPOf resolves the runtime MCP maximum of Agent a of manifest m:
// its declared policy, checked against m's Agents and normalized, or, when
// it declares none, DefaultRuntimeMCP of m's Agents.
func (m *Manifest) RuntimeMCPOf(a *AgentManifest) (*RuntimeMCPPolicy, error) {
	agents := make([]string, len(m.Agents))
	for i := range m.Agents {
		agents[i] = m.Agents[i].ID
	}
	slices.Sort(agents)
	if len(bytes.TrimSpace(a.RuntimeMCP)) == 0 {
		return DefaultRuntimeMCP(agents), nil
	}
	p, err := ParseRuntimeMCPPolicy(a.RuntimeMCP)
	if err == nil {
		err = p.Check(agents)
	}
	if err != nil {
		var he *Error
		if errors.As(err, &he) {
			return nil, &Error{Code: he.Code, Message: "agent " + a.ID + ": " + he.Message}
		}
		return nil, err
	}
	return p.Normalize(), nil
}

// CheckRuntimeMCP checks every Agent's runtime MCP policy in m.
func (m *Manifest) CheckRuntimeMCP() error {
	for i := range m.Agents {
		if _, err := m.RuntimeMCPOf(&m.Agents[i]); err != nil {
			return err
		}
	}
	return nil
}
