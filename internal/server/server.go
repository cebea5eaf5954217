// Package server is the control plane's HTTP face: the /v1 REST API with
// API-key auth, JSON in snake_case, the error envelope, and SSE event
// streams. Handlers decode, call the engine and encode; they decide no
// state transition themselves.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log"
	"log/slog"
	"maps"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/store"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// maxJSONBody bounds a JSON request body.
const maxJSONBody = 2 << 20

// maxWait caps one wait request; clients loop for longer waits.
const maxWait = 60 * time.Second

// Timeouts of the API's HTTP server (see HTTPServer).
const (
	// ReadTimeout bounds reading one request, body included.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds one non-streaming response; it exceeds the
	// longest wait a request may ask for. Event streams have none.
	WriteTimeout = maxWait + 30*time.Second
	// IdleTimeout closes a kept-alive connection with no request.
	IdleTimeout = 2 * time.Minute
	// UploadTimeout bounds reading a Deployment upload.
	UploadTimeout = 10 * time.Minute
	// MaxHeaderBytes bounds a request's header.
	MaxHeaderBytes = 64 << 10
)

// HTTPServer returns the http.Server that serves h as the API: with read,
// write and idle timeouts and a header size limit, so that idle or slow
// clients cannot hold connections open.
func HTTPServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes, ErrorLog: errorLog}
}

// Options configure New.
type Options struct {
	Logger *slog.Logger
	// DeploymentsDir keeps uploaded agent binaries.
	DeploymentsDir string
	// Ready reports readiness for /readyz; nil means always ready.
	Ready func() error
	// Publish publishes an uploaded Deployment (its binary at path, and the
	// digest of its sources archive, kept in DeploymentsDir, or ""),
	// calling progress (which may be nil) as it prepares the images; nil
	// publishes it with the engine alone. The control plane adds preparing
	// the Templates' images and keeping the binary and the sources where
	// other nodes find them.
	Publish func(ctx context.Context, digest string, m helmrtype.Manifest, path, sourcesDigest string, progress func(helmrtype.DeployProgress)) (*helmrtype.Deployment, error)
	// ReadManifest runs an uploaded artifact (at path, for runtime) with
	// the manifest flag; the control plane runs it in a sandbox. nil runs
	// it on this host (deploy.ReadManifestAs).
	ReadManifest func(ctx context.Context, path, runtime string) (helmrtype.Manifest, error)
	// Metrics count the API's requests and event streams and are served
	// at /metrics; nil uses the engine's.
	Metrics *obs.Metrics
	// Slack is the Slack bridge (docs/slack.md); nil answers the Slack
	// routes unavailable.
	Slack Slack
}

// Slack is what the server needs of the Slack bridge: connecting an app
// (its credentials checked with Slack and sealed) and the Events API and
// interactivity endpoints, which Slack signs instead of an API key.
type Slack interface {
	Connect(ctx context.Context, req helmrtype.SlackAppConnect) (*helmrtype.SlackApp, error)
	EventsHandler() http.Handler
	InteractivityHandler() http.Handler
}

// Server serves the REST API.
type Server struct {
	eng  *engine.Engine
	log  *slog.Logger
	opts Options
	mux  *http.ServeMux
	// metrics: see Options.Metrics.
	metrics *obs.Metrics
	// stopping is closed by Stop: event streams and waits end.
	stopping chan struct{}
	stopOnce sync.Once
	// authFails limits failed authentication per client address.
	authFails *failLimiter
	// patterns are the registered /v1 routes and their roles.
	patterns map[string]helmrtype.Role
	// console is the web console's state (console.go).
	console *consoleState
}

// Stop ends open event streams and waits, so that a graceful shutdown does
// not wait for them.
func (s *Server) Stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

// New returns a Server over eng.
func New(eng *engine.Engine, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = eng.Metrics()
	}
	s := &Server{eng: eng, log: opts.Logger, opts: opts, mux: http.NewServeMux(), stopping: make(chan struct{}),
		authFails: newFailLimiter(), patterns: map[string]helmrtype.Role{}, metrics: opts.Metrics}
	s.routes()
	return s
}

// ServeHTTP implements http.Handler. A /v1 path that is not in clean form
// (.., //, a trailing dot segment) names no route: it gets the error
// envelope rather than the router's plain-text redirect or 404.
//
// Every /v1 answer carries an X-Request-Id header, which every log line
// about the request names (request_id, with session_id and turn_id when
// the route names them), so that a client's report of an error can be
// found. Each request is counted by route pattern and status, and logged
// at info (debug for /healthz, /readyz and /metrics).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ids := &obs.IDs{}
	if strings.HasPrefix(r.URL.Path, "/v1") {
		var id [12]byte
		rand.Read(id[:])
		ids.Request = hex.EncodeToString(id[:])
		w.Header().Set("X-Request-Id", ids.Request)
	}
	ctx := obs.WithIDs(r.Context(), ids)
	var span trace.Span
	if tr := s.eng.Tracer(); tr.Enabled() && ids.Request != "" {
		// The API request's span: a child of the caller's traceparent
		// header when it sends one. A Turn it admits joins its trace.
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header))
		ctx, span = tr.Start(ctx, r.Method+" /v1", trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
				attribute.String(obs.AttrRequestID, ids.Request)))
	}
	r = r.WithContext(ctx)
	sw := &statusWriter{ResponseWriter: w}
	if p := r.URL.Path; (p == "/v1" || strings.HasPrefix(p, "/v1/")) && path.Clean(p) != strings.TrimSuffix(p, "/") {
		s.writeError(sw, r, helmrtype.Errorf(helmrtype.CodeNotFound, "no route %s %s", r.Method, p))
	} else {
		s.mux.ServeHTTP(sw, r)
	}
	route := r.Pattern
	if route == "" || route == "/v1/" {
		route = "unmatched"
	}
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	d := time.Since(start)
	s.metrics.HTTPRequests.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
	if span != nil {
		span.SetName(route)
		span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
		span.End()
	}
	lvl := slog.LevelInfo
	if !strings.HasPrefix(r.URL.Path, "/v1") {
		lvl = slog.LevelDebug
	}
	if s.log.Enabled(r.Context(), lvl) {
		s.log.LogAttrs(r.Context(), lvl, "request", slog.String("method", r.Method), slog.String("route", route),
			slog.String("path", r.URL.Path), slog.Int("status", status), slog.Duration("took", d))
	}
}

// statusWriter remembers a response's status for the request log and
// metrics; Unwrap keeps http.ResponseController working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher for event streams.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the underlying ResponseWriter.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noteIDs names the request's Session and Turn, from its path, in the
// request's log lines.
func noteIDs(r *http.Request) {
	ids := obs.IDsFrom(r.Context())
	if ids == nil {
		return
	}
	if strings.HasPrefix(r.Pattern, "GET /v1/sessions/{id}") || strings.HasPrefix(r.Pattern, "POST /v1/sessions/{id}") {
		ids.Session = r.PathValue("id")
	}
	ids.Turn = r.PathValue("turn_id")
}

type handler func(w http.ResponseWriter, r *http.Request) error

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Ready != nil {
			if err := s.opts.Ready(); err != nil {
				var he *helmrtype.Error
				if !errors.Is(err, store.ErrUnavailable) && !errors.As(err, &he) {
					err = &helmrtype.Error{Code: helmrtype.CodeUnavailable, Message: err.Error()}
				}
				// Not ready is for now: a probe may ask again.
				w.Header().Set("Retry-After", strconv.Itoa(int(unreachableRetryAfter/time.Second)))
				s.writeError(w, r, err)
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	// Metrics are a read: a viewer key or better (or --metrics-addr,
	// without a key).
	s.mux.Handle("GET /metrics", s.auth(viewer, func(w http.ResponseWriter, r *http.Request) error {
		s.metrics.Handler().ServeHTTP(w, r)
		return nil
	}))
	s.mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	// Slack signs these requests with the app's signing secret: no API key.
	if s.opts.Slack != nil {
		s.mux.Handle("POST /slack/events", s.opts.Slack.EventsHandler())
		s.mux.Handle("POST /slack/interactivity", s.opts.Slack.InteractivityHandler())
	}
	for pattern, rt := range s.routeTable() {
		if !rt.role.Valid() {
			panic("server: route " + pattern + " has no role")
		}
		s.route(pattern, rt)
	}
	s.consoleRoutes()
}

// route is one /v1 route: its handler and the least role that may call it.
type route struct {
	role helmrtype.Role
	h    handler
	// token admits a Token's public access credential as well, which
	// completes the Token named in the path and opens nothing else.
	token bool
}

// Roles in the route table, short.
const (
	viewer    = helmrtype.RoleViewer
	responder = helmrtype.RoleResponder
	operator  = helmrtype.RoleOperator
	admin     = helmrtype.RoleAdmin
)

// routeTable is every /v1 route with the least role that may call it: the
// one place that says what each role may do (docs/api.md, "Roles").
// Viewers read; responders also answer questions and complete Tokens;
// operators also run Sessions, Turns, controls, Computers and Commands;
// admins also deploy and manage API keys. "/v1/" answers not_found to any
// key.
func (s *Server) routeTable() map[string]route {
	return map[string]route{
		"POST /v1/sessions":                                            {operator, s.createSession, false},
		"GET /v1/sessions":                                             {viewer, s.listSessions, false},
		"GET /v1/sessions/{id}":                                        {viewer, s.getSession, false},
		"POST /v1/sessions/{id}/turns":                                 {operator, s.enqueue, false},
		"GET /v1/sessions/{id}/turns":                                  {viewer, s.listTurns, false},
		"GET /v1/sessions/{id}/turns/{turn_id}":                        {viewer, s.getTurn, false},
		"GET /v1/sessions/{id}/turns/{turn_id}/wait":                   {viewer, s.waitTurn, false},
		"POST /v1/sessions/{id}/turns/{turn_id}/messages":              {operator, s.sendMessage, false},
		"POST /v1/sessions/{id}/turns/{turn_id}/interrupt":             {operator, s.interruptTurn, false},
		"GET /v1/sessions/{id}/events":                                 {viewer, s.events, false},
		"GET /v1/agents":                                               {viewer, s.listAgents, false},
		"GET /v1/agents/{id}":                                          {viewer, s.getAgent, false},
		"GET /v1/deployments":                                          {viewer, s.listDeployments, false},
		"GET /v1/deployments/{id}":                                     {viewer, s.getDeployment, false},
		"POST /v1/deployments/{id}/promote":                            {admin, s.promoteDeployment, false},
		"GET /v1/schedules":                                            {viewer, s.listSchedules, false},
		"GET /v1/schedules/{id}":                                       {viewer, s.getSchedule, false},
		"POST /v1/deployments":                                         {admin, s.createDeployment, false},
		"GET /v1/asks":                                                 {viewer, s.listAllAsks, false},
		"GET /v1/asks/{ask_id}":                                        {viewer, s.getAskByID, false},
		"GET /v1/sessions/{id}/turns/{turn_id}/asks":                   {viewer, s.listAsks, false},
		"GET /v1/sessions/{id}/turns/{turn_id}/asks/{ask_id}":          {viewer, s.getAsk, false},
		"POST /v1/sessions/{id}/turns/{turn_id}/asks/{ask_id}/respond": {responder, s.respondAsk, false},
		"GET /v1/tokens":                                               {viewer, s.listTokens, false},
		"GET /v1/tokens/{id}":                                          {viewer, s.getToken, false},
		"POST /v1/tokens/{id}/complete":                                {responder, s.completeToken, true},
		"POST /v1/sessions/{id}/interrupt":                             {operator, s.interruptSession, false},
		"POST /v1/sessions/{id}/resume":                                {operator, s.resumeSession, false},
		"POST /v1/sessions/{id}/close":                                 {operator, s.closeSession, false},
		"POST /v1/sessions/{id}/cancel":                                {operator, s.cancelSession, false},
		"POST /v1/tokens/{id}/cancel":                                  {operator, s.cancelToken, false},
		"POST /v1/computers":                                           {operator, s.createComputer, false},
		"GET /v1/computers":                                            {viewer, s.listComputers, false},
		"GET /v1/computers/{id}":                                       {viewer, s.getComputer, false},
		"DELETE /v1/computers/{id}":                                    {operator, s.deleteComputer, false},
		"GET /v1/computers/{id}/members":                               {viewer, s.computerMembers, false},
		"POST /v1/computers/{id}/commands":                             {operator, s.execCommand, false},
		"GET /v1/commands/{id}":                                        {viewer, s.getCommand, false},
		"POST /v1/commands/{id}/cancel":                                {operator, s.cancelCommand, false},
		"GET /v1/commands/{id}/wait":                                   {viewer, s.waitCommand, false},
		"GET /v1/commands/{id}/logs":                                   {viewer, s.commandLogs, false},
		"POST /v1/keys":                                                {admin, s.createKey, false},
		"GET /v1/keys":                                                 {admin, s.listKeys, false},
		"DELETE /v1/keys/{id}":                                         {admin, s.revokeKey, false},
		"POST /v1/slack/apps":                                          {admin, s.connectSlackApp, false},
		"GET /v1/slack/apps":                                           {viewer, s.listSlackApps, false},
		"DELETE /v1/slack/apps/{id}":                                   {admin, s.disconnectSlackApp, false},
		"POST /v1/slack/users":                                         {admin, s.putSlackUser, false},
		"GET /v1/slack/users":                                          {viewer, s.listSlackUsers, false},
		"DELETE /v1/slack/users/{team_id}/{user_id}":                   {admin, s.deleteSlackUser, false},
		"/v1/": {viewer, func(w http.ResponseWriter, r *http.Request) error {
			return &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path}
		}, false},
	}
}

// route registers one /v1 route behind authentication and its role check,
// and records its pattern (Patterns).
func (s *Server) route(pattern string, rt route) {
	h := s.auth(rt.role, rt.h)
	if rt.token {
		h = s.tokenAuth(rt.role, rt.h)
	}
	s.mux.Handle(pattern, h)
	s.patterns[pattern] = rt.role
}

// Patterns returns every registered /v1 route pattern with the least role
// that may call it.
func (s *Server) Patterns() map[string]helmrtype.Role {
	return maps.Clone(s.patterns)
}

// auth checks the API key of every /v1 request, and that its role is at
// least role; a lesser role is answered 403 forbidden.
func (s *Server) auth(role helmrtype.Role, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authAllowed(w, r) {
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || tok == "" {
			s.writeError(w, r, helmrtype.Errorf(helmrtype.CodeUnauthorized, "send an API key as Authorization: Bearer <key>"))
			return
		}
		k, err := s.eng.Authenticate(r.Context(), tok)
		if err != nil {
			if helmrtype.CodeOf(err) == helmrtype.CodeUnauthorized {
				s.authFailed(w, r, err)
			} else {
				s.writeError(w, r, err)
			}
			return
		}
		if have := helmrtype.Role(k.Role); !have.Allows(role) {
			s.writeError(w, r, &helmrtype.Error{Code: helmrtype.CodeForbidden,
				Message: "this API key's role (" + string(have) + ") may not do this; it needs " + string(role) + " or above",
				Details: map[string]any{"role": string(have), "required": string(role)}})
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), apiKeyCtx{}, k))
		noteIDs(r)
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

// authAllowed answers 429 to a client address that failed to
// authenticate too often, and reports whether the request may go on.
func (s *Server) authAllowed(w http.ResponseWriter, r *http.Request) bool {
	ok, after := s.authFails.allowed(clientAddr(r))
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(after.Round(time.Second).Seconds()))))
		s.writeError(w, r, helmrtype.Errorf(helmrtype.CodeRateLimited, "too many failed authentications from this address; retry later"))
	}
	return ok
}

// authFailed records a failed authentication and answers it.
func (s *Server) authFailed(w http.ResponseWriter, r *http.Request, err error) {
	s.authFails.failed(clientAddr(r))
	s.writeError(w, r, err)
}

type apiKeyCtx struct{}

// callerKey is the API key a request was authenticated with.
func callerKey(r *http.Request) *store.APIKey {
	k, _ := r.Context().Value(apiKeyCtx{}).(*store.APIKey)
	return k
}

// tokenAuth admits an API key with at least role, or the public access
// credential of the Token named in the path.
func (s *Server) tokenAuth(role helmrtype.Role, h handler) http.Handler {
	api := s.auth(role, h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !strings.HasPrefix(tok, engine.TokenSecretPrefix) {
			api.ServeHTTP(w, r)
			return
		}
		if !s.authAllowed(w, r) {
			return
		}
		noteIDs(r)
		if ok, err := s.eng.TokenSecretValid(r.Context(), r.PathValue("id"), tok); err != nil {
			s.writeError(w, r, err)
			return
		} else if !ok {
			s.authFailed(w, r, helmrtype.Errorf(helmrtype.CodeUnauthorized, "this credential does not complete this token"))
			return
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}
