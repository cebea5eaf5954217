package helmrtype

import (
	"encoding/json"
	"path"
	"sort"
	"strings"
	"time"
)

// Input kinds of an Agent.
const (
	InputKindText = "text"
	InputKindJSON = "json"
)

// ManifestVersion names the manifest format a binary prints.
const ManifestVersion = "helmr.manifest.v1"

// Runtimes of an agent program's artifact (Manifest.Runtime).
const (
	// RuntimeNative is a native executable, run as it is (the Go SDK).
	RuntimeNative = ""
	// RuntimeNode is one self-contained ES module bundle run by Node
	// (`node agent.mjs`), as the TypeScript SDK builds it.
	RuntimeNode = "node"
)

// Manifest describes the Agents and Templates of one agent program. The
// binary prints it when run with the manifest flag; Deployments store it.
type Manifest struct {
	Version string `json:"version"`
	SDK     string `json:"sdk"`
	// Runtime says how the artifact runs: "" (RuntimeNative) for a native
	// executable, "node" (RuntimeNode) for an ES module bundle run by Node.
	Runtime   string             `json:"runtime,omitempty"`
	Agents    []AgentManifest    `json:"agents"`
	Templates []TemplateManifest `json:"templates"`
}

// AgentManifest is one Agent's entry in a Manifest.
type AgentManifest struct {
	ID                 string          `json:"id"`
	Template           string          `json:"template"`
	InputKind          string          `json:"input_kind"`
	InputSchema        json.RawMessage `json:"input_schema,omitempty"`
	ResultSchema       json.RawMessage `json:"result_schema,omitempty"`
	CloseAfterIdle     string          `json:"close_after_idle"`
	HibernateAfterIdle string          `json:"hibernate_after_idle"`
	MaxTurnDuration    string          `json:"max_turn_duration,omitempty"`
	RuntimeMCP         json.RawMessage `json:"runtime_mcp,omitempty"`
	HasInit            bool            `json:"has_init"`
	// Actor is true for an Agent that receives its Turns in one loop
	// (session.receive) instead of one handler call per Turn.
	Actor bool `json:"actor,omitempty"`
	// IdleTimeout is the default hot-wait of the Agent's waits, and for an
	// Actor how long it stays hot between Turns (1ms–1h; default 30s).
	IdleTimeout string `json:"idle_timeout,omitempty"`
	// Triggers start Sessions of the Agent on their own.
	Triggers []TriggerManifest `json:"triggers,omitempty"`
}

// Kinds of trigger.
const TriggerCron = "cron"

// Overlap policies of a trigger: what a fire does while the previous
// fire's Session still has queued or running Turns.
const (
	OverlapSkip  = "skip"
	OverlapAllow = "allow"
)

// TriggerManifest is one trigger of an Agent: a cron pattern read in an
// IANA time zone, and each fire's initial Turn input.
type TriggerManifest struct {
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Pattern  string          `json:"pattern"`
	Timezone string          `json:"timezone"`
	Input    json.RawMessage `json:"input,omitempty"`
	Overlap  string          `json:"overlap"`
}

// TemplateManifest is one Template's entry in a Manifest.
type TemplateManifest struct {
	ID        string            `json:"id"`
	Image     ImageManifest     `json:"image"`
	Resources ResourcesManifest `json:"resources"`
	// Network gives the Template's Computers outbound network access
	// through a network namespace of their own (never the host's loopback,
	// link-local addresses or the host's own addresses); without it their
	// processes have only their own loopback.
	Network bool `json:"network,omitempty"`
	// NetworkAllow, when set, limits a networked Computer to these
	// destinations (see ParseNetworkAllow); they may name host addresses
	// that are otherwise unreachable.
	NetworkAllow []string `json:"network_allow,omitempty"`
}

// ImageManifest describes how a Template's image is made.
type ImageManifest struct {
	Name  string      `json:"name"`
	From  string      `json:"from,omitempty"`
	Host  bool        `json:"host,omitempty"`
	Steps []ImageStep `json:"steps,omitempty"`
}

// ImageStep is one build step of an image.
type ImageStep struct {
	Op   string   `json:"op"`
	Args []string `json:"args,omitempty"`
}

// ResourcesManifest is a Template's resource request.
type ResourcesManifest struct {
	CPU    float64 `json:"cpu"`
	Memory string  `json:"memory,omitempty"`
	// Processes caps the number of processes and threads of the Computer
	// (0: DefaultProcesses).
	Processes int `json:"processes,omitempty"`
	// Disk caps the size of the Computer's /workspace and /tmp, such as
	// "10GiB" ("" for no cap but the host's free-space floor).
	Disk string `json:"disk,omitempty"`
}

// Deployment is an immutable, content-addressed agent program.
type Deployment struct {
	ID     string `json:"id"`
	Digest string `json:"digest"`
	// SourcesDigest is the digest of the sources archive uploaded for the
	// Templates' Copy steps; empty when there is none.
	SourcesDigest string    `json:"sources_digest,omitempty"`
	Current       bool      `json:"current"`
	Agents        []string  `json:"agents"`
	Manifest      Manifest  `json:"manifest"`
	CreatedAt     time.Time `json:"created_at"`
}

// AgentInfo is an Agent as discovered on a Deployment.
type AgentInfo struct {
	Agent              string          `json:"agent"`
	Template           string          `json:"template"`
	DeploymentID       string          `json:"deployment_id"`
	InputKind          string          `json:"input_kind"`
	InputSchema        json.RawMessage `json:"input_schema,omitempty"`
	ResultSchema       json.RawMessage `json:"result_schema,omitempty"`
	CloseAfterIdle     string          `json:"close_after_idle"`
	HibernateAfterIdle string          `json:"hibernate_after_idle"`
	MaxTurnDuration    string          `json:"max_turn_duration,omitempty"`
	RuntimeMCP         json.RawMessage `json:"runtime_mcp"`
}

// AgentPage is one page of Agents of a Deployment.
type AgentPage struct {
	DeploymentID string      `json:"deployment_id"`
	Agents       []AgentInfo `json:"agents"`
	NextCursor   string      `json:"next_cursor,omitempty"`
}

// DeploymentPage is one page of Deployments, newest first.
type DeploymentPage struct {
	Deployments []Deployment `json:"deployments"`
	NextCursor  string       `json:"next_cursor,omitempty"`
}

// CopySources returns the sources that the Templates' Copy steps name,
// relative to the agent package directory, cleaned (slash-separated),
// sorted and without duplicates; nil when no Template has a Copy step. A
// source that is empty, absolute or leaves the package directory is kept
// as written, for the caller to refuse.
func (m Manifest) CopySources() []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range m.Templates {
		for _, s := range t.Image.Steps {
			if s.Op != "copy" || len(s.Args) != 2 {
				continue
			}
			src := s.Args[1]
			if c := path.Clean(strings.ReplaceAll(src, "\\", "/")); src != "" && !path.IsAbs(c) {
				src = c
			}
			if !seen[src] {
				seen[src] = true
				out = append(out, src)
			}
		}
	}
	sort.Strings(out)
	return out
}
