// Package server is the control plane's HTTP face: the /v1 REST API with
// API-key auth, JSON in snake_case, the error envelope, and SSE event
// streams. Handlers decode, call the engine and encode; they decide no
// state transition themselves.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/deploy"
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

// maxBinary bounds an uploaded agent binary.
const maxBinary = 512 << 20

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
				if !errors.As(err, &he) {
					he = &helmrtype.Error{Code: helmrtype.CodeUnavailable, Message: err.Error()}
				}
				s.writeError(w, r, he)
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

// createdStatus is 201 for a new resource and 200 for an idempotent replay.
func createdStatus(replayed bool) int {
	if replayed {
		return http.StatusOK
	}
	return http.StatusCreated
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if he := s.apiError(r, err); he != nil {
		writeJSON(w, helmrtype.HTTPStatus(he.Code), helmrtype.ErrorEnvelope{Error: he})
	}
}

// apiError is the error a failed request answers with: err itself when it
// has a code, else one chosen (and logged) for it; nil when the client is
// gone and nothing is to be answered.
func (s *Server) apiError(r *http.Request, err error) *helmrtype.Error {
	var he *helmrtype.Error
	switch {
	case errors.As(err, &he):
	case errors.Is(err, store.ErrNoSpace), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		// A write that found the disk full: nothing was stored, and the
		// client may retry once space is back.
		s.log.ErrorContext(r.Context(), "storage full", "method", r.Method, "path", r.URL.Path, "err", err)
		he = &helmrtype.Error{Code: helmrtype.CodeStoragePressure, Message: "the control plane's disk is full; nothing was stored, retry once space is freed"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if r.Context().Err() != nil {
			return nil // the client is gone
		}
		he = &helmrtype.Error{Code: helmrtype.CodeUnavailable, Message: "the request timed out"}
	default:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		he = &helmrtype.Error{Code: helmrtype.CodeInternal, Message: "internal error"}
	}
	return he
}

// decode reads a JSON body strictly: unknown fields and trailing data are errors.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxJSONBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the request body is larger than %d bytes", maxJSONBody)
		}
		if errors.Is(err, io.EOF) {
			return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the request body is empty; send a JSON object")
		}
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the request body is not valid: %v", err)
	}
	if dec.More() {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the request body has data after the JSON object")
	}
	return nil
}

// decodeOptional is decode for bodies that may be empty.
func decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	err := decode(w, r, v)
	var he *helmrtype.Error
	if errors.As(err, &he) && strings.Contains(he.Message, "body is empty") {
		return nil
	}
	return err
}

// queryInt reads a positive integer query parameter such as limit; 0 means
// absent (the default applies).
func queryInt(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "%s must be a positive integer", name)
	}
	return n, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.SessionCreateRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	d, err := s.enqueueWait(r)
	if err != nil {
		return err
	}
	rec, replayed, err := s.eng.CreateSession(r.Context(), req, engine.APICaller)
	if err != nil {
		return err
	}
	if rec.Turn != nil && d > 0 {
		rec.Turn = s.settledOr(r, rec.Turn, d)
	}
	writeJSON(w, createdStatus(replayed), rec)
	return nil
}

// enqueueWait parses the wait query of an admission (POST /v1/sessions,
// POST …/turns): how long to wait for the admitted Turn to settle before
// answering, as the timeout of GET …/wait; absent or zero answers at
// once.
func (s *Server) enqueueWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := parseWait(v)
	if err != nil {
		return 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "wait: %v", err)
	}
	return min(d, maxWait), nil
}

// settledOr waits up to d for the admitted Turn t to settle and returns
// it settled, or t (the receipt) when d runs out first, the server stops,
// or the wait fails: the admission stands either way, and the client
// waits with GET …/wait.
func (s *Server) settledOr(r *http.Request, t *helmrtype.TurnState, d time.Duration) *helmrtype.TurnState {
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	settled, err := s.eng.SettledTurn(ctx, t.SessionID, t.ID, d)
	if err != nil || settled == nil {
		return t
	}
	out := *settled
	out.Input = t.Input
	return &out
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	var statuses []string
	for _, v := range q["status"] {
		for _, s := range strings.Split(v, ",") {
			if s != "" {
				statuses = append(statuses, s)
			}
		}
	}
	page, err := s.eng.ListSessions(r.Context(), engine.SessionQuery{Agent: q.Get("agent"), Key: q.Get("key"), Statuses: statuses,
		ParentSessionID: q.Get("parent_session_id"), RequesterSessionID: q.Get("requester_session_id"), Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) error {
	v, err := s.eng.GetSession(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.EnqueueRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	d, err := s.enqueueWait(r)
	if err != nil {
		return err
	}
	t, replayed, err := s.eng.Enqueue(r.Context(), r.PathValue("id"), req, engine.APICaller)
	if err != nil {
		return err
	}
	if d > 0 {
		t = s.settledOr(r, t, d)
	}
	writeJSON(w, createdStatus(replayed), t)
	return nil
}

func (s *Server) listTurns(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListTurns(r.Context(), r.PathValue("id"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getTurn(w http.ResponseWriter, r *http.Request) error {
	t, err := s.eng.GetTurn(r.Context(), r.PathValue("id"), r.PathValue("turn_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

// parseWait parses a wait timeout: a Duration string ("30s", "1m", "500ms")
// or a number of milliseconds.
func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return maxWait, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
		return min(time.Duration(ms), maxWait/time.Millisecond) * time.Millisecond, nil
	}
	if num := strings.TrimRight(v, "mshd"); num != "" && strings.Trim(num, "0") == "" {
		return 0, nil // "0s", "0ms", …
	}
	d, err := helmrtype.ParseDuration(v)
	if err != nil {
		return 0, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "timeout: %v", err)
	}
	return d, nil
}

func (s *Server) waitTurn(w http.ResponseWriter, r *http.Request) error {
	d, err := parseWait(r.URL.Query().Get("timeout"))
	if err != nil {
		return err
	}
	ctx, cancel := s.untilStopping(r.Context())
	defer cancel()
	res, err := s.eng.WaitTurn(ctx, r.PathValue("id"), r.PathValue("turn_id"), min(d, maxWait))
	if err != nil && r.Context().Err() == nil && ctx.Err() != nil {
		// Shutting down: answer as a timeout; the client waits again.
		res, err = &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitTimeout}, nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.MessageRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	rec, err := s.eng.SendMessage(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), req, engine.APICaller)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}

func (s *Server) interruptTurn(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.ControlRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	rec, err := s.eng.InterruptTurn(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := s.eng.ListAgents(r.Context(), q.Get("deployment_id"), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	a, err := s.eng.GetAgent(r.Context(), r.PathValue("id"), r.URL.Query().Get("deployment_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListDeployments(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListSchedules(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	sc, err := s.eng.GetSchedule(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Server) getDeployment(w http.ResponseWriter, r *http.Request) error {
	d, err := s.eng.GetDeployment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// promoteDeployment makes an earlier Deployment current again.
func (s *Server) promoteDeployment(w http.ResponseWriter, r *http.Request) error {
	d, err := s.eng.PromoteDeployment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// uploadError reports a failed upload read: too large is 413.
func uploadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the upload is larger than %d bytes", int64(maxBinary+deploy.MaxSources))
	}
	return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "reading the upload: %v", err)
}

// createDeployment takes a multipart upload with the agent program's
// artifact in the part "binary". The manifest is read from the artifact
// itself; a "manifest" part, when sent, must agree with it, and its
// "runtime" says how to run the artifact: absent for a native binary,
// "node" for a Node bundle (run as `node bundle --helmr-manifest`). When
// the manifest's Templates have Copy steps, the part "sources" carries the
// tar archive of what they copy (see internal/deploy/sources.go); it is
// checked, kept content-addressed and unpacked before the Deployment is
// published.
func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request) error {
	if s.opts.DeploymentsDir == "" {
		return helmrtype.Errorf(helmrtype.CodeUnavailable, "this server takes no deployment uploads")
	}
	// An agent binary may take longer to send than the server's read
	// timeout allows an ordinary request.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(UploadTimeout))
	rc.SetWriteDeadline(time.Now().Add(UploadTimeout + time.Minute))
	r.Body = http.MaxBytesReader(w, r.Body, maxBinary+deploy.MaxSources)
	mr, err := r.MultipartReader()
	if err != nil {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "send multipart/form-data with a part named binary: %v", err)
	}
	var digest, path, sourcesDigest, sourceDir string
	var sent *helmrtype.Manifest
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return uploadError(err)
		}
		switch part.FormName() {
		case "binary":
			if digest, path, err = deploy.Store(s.opts.DeploymentsDir, io.LimitReader(part, maxBinary+1)); err != nil {
				return uploadError(err)
			}
			if fi, err := os.Stat(path); err == nil && fi.Size() > maxBinary {
				os.Remove(path)
				return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the agent binary is larger than %d bytes", int64(maxBinary))
			}
		case "sources":
			if sourcesDigest != "" {
				return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the upload has more than one part named sources")
			}
			if sourcesDigest, sourceDir, err = deploy.StoreSources(s.opts.DeploymentsDir, part); err != nil {
				if c := helmrtype.CodeOf(err); c == helmrtype.CodeSourcesInvalid || c == helmrtype.CodeLimitExceeded {
					return err
				}
				return uploadError(err)
			}
		case "manifest":
			var m helmrtype.Manifest
			if err := json.NewDecoder(io.LimitReader(part, maxJSONBody)).Decode(&m); err != nil {
				return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "manifest: %v", err)
			}
			sent = &m
		}
	}
	if path == "" {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the upload has no part named binary")
	}
	runtime := helmrtype.RuntimeNative
	if sent != nil {
		runtime = sent.Runtime
	}
	readManifest := s.opts.ReadManifest
	if readManifest == nil {
		readManifest = deploy.ReadManifestAs
	}
	m, err := readManifest(r.Context(), path, runtime)
	if err != nil {
		return err
	}
	if sent != nil {
		a, _ := json.Marshal(sent)
		b, _ := json.Marshal(m)
		if string(a) != string(b) {
			return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the manifest sent does not match the one the binary prints")
		}
	}
	if srcs := m.CopySources(); len(srcs) > 0 && sourcesDigest == "" {
		return helmrtype.Errorf(helmrtype.CodeSourcesInvalid,
			"the manifest's Templates copy %q from the agent package; send those files in a part named sources (helmr deploy does)", srcs)
	}
	if sourcesDigest != "" {
		if err := deploy.CheckSources(sourceDir, m); err != nil {
			return err
		}
	}
	publish := func(ctx context.Context, digest string, m helmrtype.Manifest, path, sourcesDigest string, _ func(helmrtype.DeployProgress)) (*helmrtype.Deployment, error) {
		return s.eng.PublishDeployment(ctx, digest, m, path, sourcesDigest)
	}
	if s.opts.Publish != nil {
		publish = s.opts.Publish
	}
	if !acceptsNDJSON(r) {
		d, err := publish(r.Context(), digest, m, path, sourcesDigest, nil)
		// Preparing the images may take longer than the upload's deadline.
		rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, d)
		return nil
	}
	st := &progressStream{w: w, rc: rc}
	st.start()
	d, err := publish(r.Context(), digest, m, path, sourcesDigest, func(p helmrtype.DeployProgress) {
		st.line(progressLine{Progress: &p})
	})
	if err != nil {
		if he := s.apiError(r, err); he != nil {
			st.line(progressLine{Error: he})
		}
		return nil
	}
	st.line(progressLine{Deployment: d})
	return nil
}

// ndjson is the media type of the Deployment upload's progress stream.
const ndjson = "application/x-ndjson"

// acceptsNDJSON reports whether the request's Accept header names ndjson.
func acceptsNDJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if t, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && t == ndjson {
				return true
			}
		}
	}
	return false
}

// progressLine is one line of the progress stream: exactly one field is set.
type progressLine struct {
	Progress   *helmrtype.DeployProgress `json:"progress,omitempty"`
	Deployment *helmrtype.Deployment     `json:"deployment,omitempty"`
	Error      *helmrtype.Error          `json:"error,omitempty"`
}

// progressStream writes a Deployment upload's answer as NDJSON, one line
// at a time, each flushed, with the write deadline extended before each:
// images may take longer to build than any fixed deadline.
type progressStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error // a write failed: the client is gone, the rest is dropped
}

// start sends the stream's header: 200, since the outcome is not known yet.
func (p *progressStream) start() {
	p.w.Header().Set("Content-Type", ndjson)
	p.w.Header().Set("Cache-Control", "no-store")
	p.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	p.w.WriteHeader(http.StatusOK)
	p.err = p.rc.Flush()
}

// line writes v as one line and flushes it.
func (p *progressStream) line(v progressLine) {
	if p.err != nil {
		return
	}
	p.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if p.err = json.NewEncoder(p.w).Encode(v); p.err == nil {
		p.err = p.rc.Flush()
	}
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
		if !s.eng.TokenSecretValid(r.Context(), r.PathValue("id"), tok) {
			s.authFailed(w, r, helmrtype.Errorf(helmrtype.CodeUnauthorized, "this credential does not complete this token"))
			return
		}
		if err := h(w, r); err != nil {
			s.writeError(w, r, err)
		}
	})
}

func (s *Server) listAsks(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListAsks(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getAsk(w http.ResponseWriter, r *http.Request) error {
	a, err := s.eng.GetAsk(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), r.PathValue("ask_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) respondAsk(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.AskRespond
	if err := decode(w, r, &req); err != nil {
		return err
	}
	by := helmrtype.Responder{Kind: helmrtype.SourceAPIKey}
	if k := callerKey(r); k != nil {
		by.ID = k.ID
	}
	a, err := s.eng.RespondAsk(r.Context(), r.PathValue("id"), r.PathValue("turn_id"), r.PathValue("ask_id"), req, by)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) getToken(w http.ResponseWriter, r *http.Request) error {
	t, err := s.eng.GetToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) completeToken(w http.ResponseWriter, r *http.Request) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, helmrtype.MaxTokenCompleteBody))
	if err != nil {
		return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the request body is larger than %d bytes", helmrtype.MaxTokenCompleteBody)
	}
	req, err := helmrtype.ParseTokenComplete(body)
	if err != nil {
		return err
	}
	c, err := s.eng.CompleteToken(r.Context(), r.PathValue("id"), req.Data)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) cancelToken(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		IdempotencyKey string `json:"idempotency_key,omitempty"`
	}
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	t, err := s.eng.CancelToken(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *Server) interruptSession(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.ControlRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	rec, err := s.eng.InterruptSession(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}

func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) error {
	var req helmrtype.ResumeRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	rec, err := s.eng.ResumeSession(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) error {
	return s.sessionStatusControl(w, r, s.eng.CloseSession)
}

func (s *Server) cancelSession(w http.ResponseWriter, r *http.Request) error {
	return s.sessionStatusControl(w, r, s.eng.CancelSession)
}

// sessionStatusControl serves close and cancel: an optional body with an
// idempotency key, answered with the Session's status.
func (s *Server) sessionStatusControl(w http.ResponseWriter, r *http.Request,
	do func(context.Context, string, helmrtype.ControlRequest) (*helmrtype.SessionStatusReceipt, error)) error {
	var req helmrtype.ControlRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	rec, err := do(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, rec)
	return nil
}
