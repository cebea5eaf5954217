package helmr

import (
	"context"
	"net/http"

	"github.com/helmr-go/helmr/internal/mcp"
	"github.com/helmr-go/helmr/internal/sessionproc"
)

// SessionInfo identifies the Session a process serves.
type SessionInfo struct {
	ID  string
	Key string
	// ParentID is the parent Session of owned child work, "" for a root.
	ParentID string
}

// Recovery says whether this process is the Session's first ("initial") or
// an explicit reconstruction ("reconstructed") that ran init again.
type Recovery struct {
	Kind   string
	Reason string
}

// InitContext is what init receives; AgentContext embeds it.
type InitContext struct {
	Session      SessionInfo
	ComputerID   string
	DeploymentID string
	Recovery     Recovery
	// MCP is the Session's runtime MCP server, through which agent code
	// starts and steers other Sessions.
	MCP *MCP
	ctx context.Context
}

// MCP is a session process's runtime MCP server: a loopback endpoint that
// any MCP client can use with the URL and headers ConnectionOptions gives.
type MCP struct{ rt *mcp.Runtime }

// MCPConnection is where an MCP client connects (streamable HTTP) and the
// headers it must send with every request.
type MCPConnection struct {
	URL     string
	Headers map[string]string
}

// HTTPClient returns an HTTP client that sends the connection's headers
// with every request, for MCP clients that take one (such as the official
// Go SDK's StreamableClientTransport).
func (c *MCPConnection) HTTPClient() *http.Client {
	return &http.Client{Transport: headerTransport{headers: c.Headers, base: http.DefaultTransport}}
}

type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// ConnectionOptions returns a scoped connection to the runtime MCP
// server. policy nil inherits the Agent's maximum (AgentSpec.RuntimeMCP);
// a policy must be within it, or ConnectionOptions fails with code
// forbidden. Equal normalized policies share one credential; a process
// may hold at most 16 distinct scopes (code limit_exceeded after that).
// The credentials are bound to this Session and end with its process.
func (m *MCP) ConnectionOptions(ctx context.Context, policy *RuntimeMCPPolicy) (*MCPConnection, error) {
	c, err := m.rt.ConnectionOptions(ctx, policy)
	if err != nil {
		return nil, err
	}
	return &MCPConnection{URL: c.URL, Headers: c.Headers}, nil
}

// Context ends when the session process shuts down, including during init.
func (ic *InitContext) Context() context.Context { return ic.ctx }

// AgentContext is what a Turn handler receives besides the Turn.
type AgentContext[S any] struct {
	*InitContext
	// InitResult is what init returned (the zero S without init).
	InitResult S
}

func newInitContext(info *sessionproc.Info) *InitContext {
	return &InitContext{Session: SessionInfo{ID: info.SessionID, Key: info.SessionKey, ParentID: info.ParentID},
		ComputerID: info.ComputerID, DeploymentID: info.DeploymentID,
		Recovery: Recovery{Kind: info.RecoveryKind, Reason: info.RecoveryReason}, MCP: &MCP{rt: info.MCP}, ctx: info.Ctx}
}

func newInitContextFromTurn(rt *sessionproc.Turn, _ any) *InitContext {
	return newInitContext(rt.Info())
}
