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
	// digest of its sources archive, kept in DeploymentsDir, or ""); nil
	// publishes it with the engine alone. The control plane adds keeping
	// the binary and the sources where other nodes find them.
	Publish func(ctx context.Context, digest string, m helmrtype.Manifest, path, sourcesDigest string) (*helmrtype.Deployment, error)
	// ReadManifest runs an uploaded artifact (at path, for runtime) with
	// the manifest flag; the control plane runs it in a sandbox. nil runs
	// it on this host (deploy.ReadManifestAs).
	ReadManifest func(ctx context.Context, path, runtime string) (helmrtype.Manifest, error)
	// Metrics count the API's requests and event streams and are served
	// at /metrics; nil uses the engine's.
	Metrics *obs.Metrics
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
		authFails: newFailLimiter(), metrics: opts.Metrics}
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
	r = r.WithContext(obs.WithIDs(r.Context(), ids))
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
	s.mux.Handle("GET /metrics", s.auth(func(w http.ResponseWriter, r *http.Request) error {
		s.metrics.Handler().ServeHTTP(w, r)
		return nil
	}))
	s.mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	for pattern, h := range s.apiRoutes() {
		s.mux.Handle(pattern, s.auth(h))
	}
	// A Token's public access credential completes that Token and opens
	// nothing else; an API key works here too.
	s.mux.Handle(tokenCompleteRoute, s.tokenAuth(s.completeToken))
	s.mux.Handle("/v1/", s.auth(func(w http.ResponseWriter, r *http.Request) error {
		return &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "no route " + r.Method + " " + r.URL.Path}
	}))
}

// tokenCompleteRoute is the one route a Token's access credential opens.
const tokenCompleteRoute = "POST /v1/tokens/{id}/complete"

// apiRoutes are the /v1 routes that take an API key, by pattern.
func (s *Server) apiRoutes() map[string]handler {
	return map[string]handler{
		"POST /v1/sessions":                                            s.createSession,
		"GET /v1/sessions":                                             s.listSessions,
		"GET /v1/sessions/{id}":                                        s.getSession,
		"POST /v1/sessions/{id}/turns":                                 s.enqueue,
		"GET /v1/sessions/{id}/turns":                                  s.listTurns,
		"GET /v1/sessions/{id}/turns/{turn_id}":                        s.getTurn,
		"GET /v1/sessions/{id}/turns/{turn_id}/wait":                   s.waitTurn,
		"POST /v1/sessions/{id}/turns/{turn_id}/messages":              s.sendMessage,
		"POST /v1/sessions/{id}/turns/{turn_id}/interrupt":             s.interruptTurn,
		"GET /v1/sessions/{id}/events":                                 s.events,
		"GET /v1/agents":                                               s.listAgents,
		"GET /v1/agents/{id}":                                          s.getAgent,
		"GET /v1/deployments":                                          s.listDeployments,
		"GET /v1/deployments/{id}":                                     s.getDeployment,
		"POST /v1/deployments/{id}/promote":                            s.promoteDeployment,
		"GET /v1/schedules":                                            s.listSchedules,
		"GET /v1/schedules/{id}":                                       s.getSchedule,
		"POST /v1/deployments":                                         s.createDeployment,
		"GET /v1/sessions/{id}/turns/{turn_id}/asks":                   s.listAsks,
		"GET /v1/sessions/{id}/turns/{turn_id}/asks/{ask_id}":          s.getAsk,
		"POST /v1/sessions/{id}/turns/{turn_id}/asks/{ask_id}/respond": s.respondAsk,
		"GET /v1/tokens/{id}":                                          s.getToken,
		"POST /v1/sessions/{id}/interrupt":                             s.interruptSession,
		"POST /v1/sessions/{id}/resume":                                s.resumeSession,
		"POST /v1/sessions/{id}/close":                                 s.closeSession,
		"POST /v1/sessions/{id}/cancel":                                s.cancelSession,
		"POST /v1/tokens/{id}/cancel":                                  s.cancelToken,
		"POST /v1/computers":                                           s.createComputer,
		"GET /v1/computers":                                            s.listComputers,
		"GET /v1/computers/{id}":                                       s.getComputer,
		"DELETE /v1/computers/{id}":                                    s.deleteComputer,
		"GET /v1/computers/{id}/members":                               s.computerMembers,
		"POST /v1/computers/{id}/commands":                             s.execCommand,
		"GET /v1/commands/{id}":                                        s.getCommand,
		"POST /v1/commands/{id}/cancel":                                s.cancelCommand,
		"GET /v1/commands/{id}/wait":                                   s.waitCommand,
		"GET /v1/commands/{id}/logs":                                   s.commandLogs,
	}
}

// auth checks the API key of every /v1 request.
func (s *Server) auth(h handler) http.Handler {
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
			return // the client is gone
		}
		he = &helmrtype.Error{Code: helmrtype.CodeUnavailable, Message: "the request timed out"}
	default:
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		he = &helmrtype.Error{Code: helmrtype.CodeInternal, Message: "internal error"}
	}
	writeJSON(w, helmrtype.HTTPStatus(he.Code), helmrtype.ErrorEnvelope{Error: he})
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
	rec, replayed, err := s.eng.CreateSession(r.Context(), req, engine.APICaller)
	if err != nil {
		return err
	}
	writeJSON(w, createdStatus(replayed), rec)
	return nil
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
	t, replayed, err := s.eng.Enqueue(r.Context(), r.PathValue("id"), req, engine.APICaller)
	if err != nil {
		return err
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
	publish := s.eng.PublishDeployment
	if s.opts.Publish != nil {
		publish = s.opts.Publish
	}
	d, err := publish(r.Context(), digest, m, path, sourcesDigest)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, d)
	return nil
}

type apiKeyCtx struct{}

// callerKey is the API key a request was authenticated with.
func callerKey(r *http.Request) *store.APIKey {
	k, _ := r.Context().Value(apiKeyCtx{}).(*store.APIKey)
	return k
}

// tokenAuth admits an API key, or the public access credential of the
// Token named in the path.
func (s *Server) tokenAuth(h handler) http.Handler {
	api := s.auth(h)
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
