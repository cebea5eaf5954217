package server

// The console: server-rendered HTML pages (html/template, embedded with
// go:embed) under /console, and one small hand-written script for live
// updates. A person logs in with an API key; the console keeps a session
// cookie mapped here to the key's ID, and every page and action names
// the /v1 route it stands for, so that it needs that route's role from
// routeTable and calls the same engine method. See
// docs/decisions/0016-console.md.

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

//go:embed console
var consoleFS embed.FS

// Console timings.
const (
	// consoleSessionTTL is how long a console login lasts.
	consoleSessionTTL = 12 * time.Hour
	// loginTokenTTL is how long a one-time login link is valid.
	loginTokenTTL = 5 * time.Minute
	// consoleCookie names the console's session cookie.
	consoleCookie = "helmr_console"
	// maxConsoleForm bounds a console form's body.
	maxConsoleForm = 1 << 20
)

// consoleSession is one logged-in browser: the API key it logged in with
// (by ID; the secret is not kept) and its CSRF token.
type consoleSession struct {
	keyID   string
	keyName string
	role    helmrtype.Role
	csrf    string
	expires time.Time
}

// loginToken is a one-time login link's token.
type loginToken struct {
	keyID   string
	expires time.Time
}

// consoleState holds the console's sessions and one-time login tokens, in
// memory: a restart logs everyone out, and with several nodes a browser
// stays logged in on the node it logged in on (see the decision record).
type consoleState struct {
	mu       sync.Mutex
	sessions map[string]*consoleSession
	logins   map[string]loginToken
	pages    map[string]*template.Template
}

func randomToken() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sweep forgets expired sessions and login tokens; the caller holds mu.
func (c *consoleState) sweep(now time.Time) {
	for id, cs := range c.sessions {
		if now.After(cs.expires) {
			delete(c.sessions, id)
		}
	}
	for t, l := range c.logins {
		if now.After(l.expires) {
			delete(c.logins, t)
		}
	}
}

// ConsoleLoginPath returns a one-time path (under /console/login) that
// logs a browser in as the API key whose secret is given, once, within a
// few minutes. helmr dev prints it, so that its console opens logged in
// without the key in a URL.
func (s *Server) ConsoleLoginPath(ctx context.Context, secret string) (string, error) {
	k, err := s.eng.Authenticate(ctx, secret)
	if err != nil {
		return "", err
	}
	t := randomToken()
	now := time.Now()
	s.console.mu.Lock()
	s.console.sweep(now)
	s.console.logins[t] = loginToken{keyID: k.ID, expires: now.Add(loginTokenTTL)}
	s.console.mu.Unlock()
	return "/console/login?token=" + t, nil
}

// consoleHandler serves a console page or action for a logged-in session.
type consoleHandler func(w http.ResponseWriter, r *http.Request, cs *consoleSession) error

// consoleRoutes registers the console. Each page or action names the
// /v1 route whose role it needs (and whose engine call it makes).
func (s *Server) consoleRoutes() {
	s.console = &consoleState{sessions: map[string]*consoleSession{}, logins: map[string]loginToken{}, pages: parsePages()}
	static, _ := fs.Sub(consoleFS, "console/static")
	fileServer := http.StripPrefix("/console/static/", http.FileServerFS(static))
	s.mux.Handle("GET /console/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		fileServer.ServeHTTP(w, r)
	}))
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	s.mux.HandleFunc("GET /console/login", s.consoleLoginPage)
	s.mux.HandleFunc("POST /console/login", s.consoleLogin)
	s.mux.Handle("POST /console/logout", s.consolePage("", s.consoleLogout))
	for pattern, p := range s.consoleTable() {
		if _, ok := s.patterns[p.api]; !ok {
			panic("server: console route " + pattern + " names no API route " + p.api)
		}
		s.mux.Handle(pattern, s.consolePage(p.api, p.h))
	}
}

// consolePageRoute is a console page or action and the /v1 route it
// stands for.
type consolePageRoute struct {
	api string
	h   consoleHandler
}

// consoleTable is every console page and action (but login and logout)
// with the /v1 route whose role it needs and whose engine call it makes.
func (s *Server) consoleTable() map[string]consolePageRoute {
	return map[string]consolePageRoute{
		"GET /console/{$}":   {"GET /v1/asks", s.consoleInbox},
		"GET /console/inbox": {"GET /v1/asks", s.consoleInbox},
		"POST /console/sessions/{id}/turns/{turn_id}/asks/{ask_id}": {"POST /v1/sessions/{id}/turns/{turn_id}/asks/{ask_id}/respond", s.consoleAnswer},
		"POST /console/tokens/{id}/complete":                        {"POST /v1/tokens/{id}/complete", s.consoleCompleteToken},
		"POST /console/tokens/{id}/cancel":                          {"POST /v1/tokens/{id}/cancel", s.consoleCancelToken},
		"GET /console/sessions":                                     {"GET /v1/sessions", s.consoleSessions},
		"GET /console/counts":                                       {"GET /v1/sessions", s.consoleCounts},
		"POST /console/sessions":                                    {"POST /v1/sessions", s.consoleCreateSession},
		"GET /console/sessions/{id}":                                {"GET /v1/sessions/{id}", s.consoleSession},
		"GET /console/sessions/{id}/events":                         {"GET /v1/sessions/{id}/events", s.consoleEvents},
		"POST /console/sessions/{id}/turns":                         {"POST /v1/sessions/{id}/turns", s.consoleEnqueue},
		"GET /console/sessions/{id}/turns/{turn_id}":                {"GET /v1/sessions/{id}/turns/{turn_id}", s.consoleTurn},
		"POST /console/sessions/{id}/turns/{turn_id}/messages":      {"POST /v1/sessions/{id}/turns/{turn_id}/messages", s.consoleMessage},
		"POST /console/sessions/{id}/turns/{turn_id}/interrupt":     {"POST /v1/sessions/{id}/turns/{turn_id}/interrupt", s.consoleInterruptTurn},
		"POST /console/sessions/{id}/interrupt":                     {"POST /v1/sessions/{id}/interrupt", s.consoleControl("interrupt")},
		"POST /console/sessions/{id}/resume":                        {"POST /v1/sessions/{id}/resume", s.consoleControl("resume")},
		"POST /console/sessions/{id}/close":                         {"POST /v1/sessions/{id}/close", s.consoleControl("close")},
		"POST /console/sessions/{id}/cancel":                        {"POST /v1/sessions/{id}/cancel", s.consoleControl("cancel")},
		"GET /console/agents":                                       {"GET /v1/agents", s.consoleAgents},
		"GET /console/deployments":                                  {"GET /v1/deployments", s.consoleDeployments},
		"GET /console/computers":                                    {"GET /v1/computers", s.consoleComputers},
		"GET /console/computers/{id}":                               {"GET /v1/computers/{id}/members", s.consoleComputer},
		"POST /console/computers/{id}/commands":                     {"POST /v1/computers/{id}/commands", s.consoleExec},
		"GET /console/commands/{id}":                                {"GET /v1/commands/{id}", s.consoleCommand},
		"GET /console/commands/{id}/logs":                           {"GET /v1/commands/{id}/logs", s.consoleCommandLogs},
		"POST /console/commands/{id}/cancel":                        {"POST /v1/commands/{id}/cancel", s.consoleCancelCommand},
	}
}

// ConsolePatterns returns every console page and action pattern with the
// /v1 route whose role it needs.
func (s *Server) ConsolePatterns() map[string]string {
	out := map[string]string{}
	for p, r := range s.consoleTable() {
		out[p] = r.api
	}
	return out
}

// can reports whether the session's role may use the /v1 route api; the
// pages show only the actions it may take (the server checks anyway).
func (s *Server) can(cs *consoleSession, api string) bool {
	need, ok := s.patterns[api]
	return ok && cs.role.Allows(need)
}

// consolePage wraps a console handler: it needs a logged-in session whose
// API key is still valid, the role of the /v1 route api ("" for any
// role), and on a POST the session's CSRF token and a same-origin request.
func (s *Server) consolePage(api string, h consoleHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		w.Header().Set("Referrer-Policy", "same-origin")
		cs := s.consoleSessionOf(r)
		if cs != nil {
			if k, err := s.eng.ActiveKey(r.Context(), cs.keyID); err != nil {
				if helmrtype.CodeOf(err) != helmrtype.CodeUnauthorized {
					s.consoleError(w, r, nil, err)
					return
				}
				s.dropConsoleSession(r)
				cs = nil
			} else if helmrtype.Role(k.Role) != cs.role {
				cs.role = helmrtype.Role(k.Role)
			}
		}
		if cs == nil {
			if r.Method == http.MethodGet && !strings.HasSuffix(r.URL.Path, "/events") && !strings.HasSuffix(r.URL.Path, "/logs") {
				http.Redirect(w, r, "/console/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.consoleError(w, r, nil, helmrtype.Errorf(helmrtype.CodeUnauthorized, "log in to the console first"))
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxConsoleForm)
			if !sameOrigin(r) {
				s.consoleError(w, r, cs, helmrtype.Errorf(helmrtype.CodeForbidden, "this form was sent from another site"))
				return
			}
			if err := r.ParseForm(); err != nil {
				s.consoleError(w, r, cs, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the form could not be read: %v", err))
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(cs.csrf)) != 1 {
				s.consoleError(w, r, cs, helmrtype.Errorf(helmrtype.CodeForbidden, "the form's security token is missing or out of date; reload the page and try again"))
				return
			}
		}
		if api != "" {
			if need := s.patterns[api]; !cs.role.Allows(need) {
				s.consoleError(w, r, cs, &helmrtype.Error{Code: helmrtype.CodeForbidden,
					Message: "your API key's role (" + string(cs.role) + ") may not do this; it needs " + string(need) + " or above",
					Details: map[string]any{"role": string(cs.role), "required": string(need)}})
				return
			}
		}
		if err := h(w, r, cs); err != nil {
			s.consoleError(w, r, cs, err)
		}
	})
}

// sameOrigin reports whether a POST came from the console's own pages:
// browsers send Origin (or Sec-Fetch-Site) on form posts.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (s *Server) consoleSessionOf(r *http.Request) *consoleSession {
	c, err := r.Cookie(consoleCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	s.console.mu.Lock()
	defer s.console.mu.Unlock()
	cs := s.console.sessions[c.Value]
	if cs == nil || time.Now().After(cs.expires) {
		delete(s.console.sessions, c.Value)
		return nil
	}
	return cs
}

func (s *Server) dropConsoleSession(r *http.Request) {
	if c, err := r.Cookie(consoleCookie); err == nil {
		s.console.mu.Lock()
		delete(s.console.sessions, c.Value)
		s.console.mu.Unlock()
	}
}

// startConsoleSession logs the browser in as key k and sends the cookie.
func (s *Server) startConsoleSession(w http.ResponseWriter, r *http.Request, keyID, name string, role helmrtype.Role) {
	id := randomToken()
	now := time.Now()
	s.console.mu.Lock()
	s.console.sweep(now)
	s.console.sessions[id] = &consoleSession{keyID: keyID, keyName: name, role: role, csrf: randomToken(), expires: now.Add(consoleSessionTTL)}
	s.console.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: id, Path: "/console", MaxAge: int(consoleSessionTTL / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// safeNext is the page to go to after logging in: a console path only.
func safeNext(v string) string {
	if strings.HasPrefix(v, "/console/") && !strings.HasPrefix(v, "//") && !strings.Contains(v, "\\") && !strings.HasPrefix(v, "/console/login") {
		return v
	}
	return "/console/"
}

func (s *Server) consoleLoginPage(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	if t := r.URL.Query().Get("token"); t != "" {
		now := time.Now()
		s.console.mu.Lock()
		l, ok := s.console.logins[t]
		delete(s.console.logins, t) // once, whatever follows
		s.console.mu.Unlock()
		if ok && now.Before(l.expires) {
			if k, err := s.eng.ActiveKey(r.Context(), l.keyID); err == nil {
				s.startConsoleSession(w, r, k.ID, k.Name, helmrtype.Role(k.Role))
				http.Redirect(w, r, "/console/", http.StatusSeeOther)
				return
			}
		}
		s.render(w, r, http.StatusUnauthorized, "login", nil, map[string]any{"Error": "This login link was used already or has expired. Log in with an API key, or restart helmr dev for a new link."})
		return
	}
	s.render(w, r, http.StatusOK, "login", nil, map[string]any{"Next": safeNext(r.URL.Query().Get("next"))})
}

func (s *Server) consoleLogin(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !sameOrigin(r) {
		s.consoleError(w, r, nil, helmrtype.Errorf(helmrtype.CodeForbidden, "this form was sent from another site"))
		return
	}
	if !s.authAllowed(w, r) {
		return
	}
	next := safeNext(r.PostFormValue("next"))
	k, err := s.eng.Authenticate(r.Context(), strings.TrimSpace(r.PostFormValue("key")))
	if err != nil {
		if helmrtype.CodeOf(err) == helmrtype.CodeUnauthorized {
			s.authFails.failed(clientAddr(r))
			s.render(w, r, http.StatusUnauthorized, "login", nil, map[string]any{"Next": next, "Error": "That API key is not valid (or was revoked)."})
			return
		}
		s.consoleError(w, r, nil, err)
		return
	}
	s.dropConsoleSession(r)
	s.startConsoleSession(w, r, k.ID, k.Name, helmrtype.Role(k.Role))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) consoleLogout(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	s.dropConsoleSession(r)
	http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: "", Path: "/console", MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
	return nil
}

// consoleError renders an error page with the error's status.
func (s *Server) consoleError(w http.ResponseWriter, r *http.Request, cs *consoleSession, err error) {
	he := s.apiError(r, err)
	if he == nil {
		return
	}
	setRetryAfter(w, err)
	if strings.HasSuffix(r.URL.Path, "/events") || strings.HasSuffix(r.URL.Path, "/logs") {
		http.Error(w, he.Message, helmrtype.HTTPStatus(he.Code))
		return
	}
	s.render(w, r, helmrtype.HTTPStatus(he.Code), "error", cs, map[string]any{"Error": he})
}

// view is what every page template gets.
type view struct {
	Title   string
	Session *consoleSession
	CSRF    string
	Nav     string
	Notice  string
	Data    map[string]any
	can     func(string) bool
}

// Can reports whether the logged-in key may use the /v1 route api.
func (v view) Can(api string) bool { return v.can != nil && v.can(api) }

// KeyName and Role name the logged-in key.
func (v view) KeyName() string {
	if v.Session == nil {
		return ""
	}
	return v.Session.keyName
}

func (v view) Role() string {
	if v.Session == nil {
		return ""
	}
	return string(v.Session.role)
}

// notices are the messages an action's redirect may show (by code, so
// that a link cannot put words on the page).
var notices = map[string]string{
	"answered":    "Answer sent.",
	"completed":   "Token completed.",
	"tokcancel":   "Token cancelled.",
	"enqueued":    "Turn enqueued.",
	"sent":        "Message sent.",
	"interrupt":   "Interrupt requested: the running Turn stops and the Session is held until resumed.",
	"resume":      "Hold released.",
	"close":       "Close requested.",
	"cancel":      "Cancel requested.",
	"created":     "Session started.",
	"turninter":   "Turn interrupt requested.",
	"cmdcancel":   "Command cancel requested.",
	"cmdstarted":  "Command started.",
	"noquestions": "",
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, cs *consoleSession, data map[string]any) {
	t := s.console.pages[page]
	v := view{Session: cs, Nav: page, Notice: notices[r.URL.Query().Get("notice")], Data: data}
	if cs != nil {
		v.CSRF = cs.csrf
		v.can = func(api string) bool { return s.can(cs, api) }
	}
	if title, ok := data["Title"].(string); ok {
		v.Title = title
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", v); err != nil {
		s.log.Error("console template", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, b.String())
}

// redirect answers an action with 303 to a page, with a notice code.
func redirect(w http.ResponseWriter, r *http.Request, to, notice string) {
	if notice != "" {
		sep := "?"
		if strings.Contains(to, "?") {
			sep = "&"
		}
		to += sep + "notice=" + notice
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}
