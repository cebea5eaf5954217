package mcp

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/helmr-go/helmr/helmrtype"
)

// MaxScopes is how many distinct scopes one session process may hold,
// its maximum included; there is no eviction.
const MaxScopes = 16

// Backend is the session process's link to the control plane.
type Backend interface {
	// ResolveScope checks policy (nil for the Agent's maximum) against the
	// Session's pinned maximum and returns its normalized JSON.
	ResolveScope(ctx context.Context, policy json.RawMessage) (json.RawMessage, error)
	// Call carries out one tool call under scope (normalized JSON) and
	// returns the tool's JSON result.
	Call(ctx context.Context, scope json.RawMessage, tool string, args json.RawMessage) (json.RawMessage, error)
}

// Connection is what an MCP client needs: the endpoint URL and the headers
// (Authorization) to send with every request.
type Connection struct {
	URL     string
	Headers map[string]string
}

// Runtime is the runtime MCP server of one session process. It listens on
// loopback only once the first connection is asked for.
type Runtime struct {
	backend Backend
	log     *slog.Logger

	mu       sync.Mutex
	srv      *http.Server
	url      string
	closed   bool
	scopes   map[string]*scope   // by normalized policy
	byToken  map[[32]byte]*scope // by SHA-256 of the bearer credential
	maxScope *scope              // the maximum, once resolved
}

type scope struct {
	policy  json.RawMessage
	token   string
	handler http.Handler
}

// NewRuntime returns a runtime MCP server that forwards to backend.
func NewRuntime(backend Backend, log *slog.Logger) *Runtime {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{backend: backend, log: log, scopes: map[string]*scope{}, byToken: map[[32]byte]*scope{}}
}

// ConnectionOptions returns the URL and headers of a scope: policy nil is
// the Agent's maximum; a policy must be within it. Equal normalized
// policies get the same credentials.
func (r *Runtime) ConnectionOptions(ctx context.Context, policy *helmrtype.RuntimeMCPPolicy) (*Connection, error) {
	var raw json.RawMessage
	if policy != nil {
		if err := policy.Check(nil); err != nil {
			return nil, err
		}
		raw, _ = json.Marshal(policy)
	} else {
		r.mu.Lock()
		s := r.maxScope
		r.mu.Unlock()
		if s != nil {
			return r.connection(s)
		}
	}
	norm, err := r.backend.ResolveScope(ctx, raw)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, helmrtype.Errorf(helmrtype.CodeUnavailable, "the session process is shutting down")
	}
	s, ok := r.scopes[string(norm)]
	if !ok {
		if len(r.scopes) >= MaxScopes {
			return nil, helmrtype.Errorf(helmrtype.CodeLimitExceeded, "this session process already has %d distinct runtime MCP scopes, the most it may have; reuse one", MaxScopes)
		}
		if s, err = r.newScope(norm); err != nil {
			return nil, err
		}
		r.scopes[string(norm)] = s
		r.byToken[sha256.Sum256([]byte(s.token))] = s
	}
	if policy == nil {
		r.maxScope = s
	}
	if err := r.listen(); err != nil {
		return nil, err
	}
	return &Connection{URL: r.url, Headers: map[string]string{"Authorization": "Bearer " + s.token}}, nil
}

func (r *Runtime) connection(s *scope) (*Connection, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Connection{URL: r.url, Headers: map[string]string{"Authorization": "Bearer " + s.token}}, nil
}

// newScope makes a scope's MCP server with the tools its grants offer.
func (r *Runtime) newScope(norm json.RawMessage) (*scope, error) {
	p, err := helmrtype.ParseRuntimeMCPPolicy(norm)
	if err != nil {
		return nil, err
	}
	g := p.Grants()
	b := make([]byte, 32)
	rand.Read(b)
	s := &scope{policy: norm, token: base64.RawURLEncoding.EncodeToString(b)}
	srv := sdk.NewServer(&sdk.Implementation{Name: "helmr-runtime", Version: "v1"}, &sdk.ServerOptions{Logger: r.log})
	for i := range Tools {
		t := &Tools[i]
		if !t.Available(g) {
			continue
		}
		srv.AddTool(&sdk.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, r.handler(s, t.Name))
	}
	s.handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Logger: r.log})
	return s, nil
}

// handler forwards one tool's calls to the backend. Errors come back as
// tool results with IsError and the error envelope, so a model reads the
// code and message.
func (r *Runtime) handler(s *scope, tool string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		res, err := r.backend.Call(ctx, s.policy, tool, args)
		if err != nil {
			var he *helmrtype.Error
			if !errors.As(err, &he) {
				he = &helmrtype.Error{Code: helmrtype.CodeUnavailable, Message: err.Error()}
			}
			env, _ := json.Marshal(map[string]any{"error": he})
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: string(env)}},
				StructuredContent: json.RawMessage(env)}, nil
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(res)}}, StructuredContent: res}, nil
	}
}

// listen starts the loopback listener once; r.mu is held.
func (r *Runtime) listen() error {
	if r.srv != nil {
		return nil
	}
	// Plain TCP, not Multipath TCP (Go's default for listeners on
	// Linux): CRIU cannot checkpoint an MPTCP socket, and a session
	// process with one could not be parked.
	lc := net.ListenConfig{}
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return helmrtype.Errorf(helmrtype.CodeUnavailable, "runtime MCP: listen on loopback: %v", err)
	}
	r.url = "http://" + ln.Addr().String() + "/mcp"
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return nil
}

func (r *Runtime) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != "/mcp" {
		http.NotFound(w, req)
		return
	}
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	r.mu.Lock()
	s := r.byToken[sha256.Sum256([]byte(tok))]
	r.mu.Unlock()
	if !ok || s == nil {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("WWW-Authenticate", "Bearer")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"error":{"code":"unauthorized","message":"a runtime MCP bearer credential from ConnectionOptions is required"}}`))
		return
	}
	s.handler.ServeHTTP(w, req)
}

// Close stops the endpoint; the scopes' credentials die with it.
func (r *Runtime) Close() {
	r.mu.Lock()
	srv := r.srv
	r.closed = true
	r.scopes, r.byToken, r.maxScope = map[string]*scope{}, map[[32]byte]*scope{}, nil
	r.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		srv.Close()
	}
}
