package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
)

// consolePages are the page templates; each is parsed with layout.html.
var consolePages = []string{"login", "error", "inbox", "sessions", "session", "turn", "agents", "deployments", "computers", "computer", "command"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"when":     when,
		"ago":      func(t time.Time) string { return ago(time.Now(), t) },
		"text":     contentText,
		"pretty":   prettyJSON,
		"summary":  eventSummary,
		"output":   outputText,
		"deref":    func(p *string) string { return deref(p) },
		"terminal": helmrtype.TurnTerminal,
		"newkey":   engine.NewID,
		"join":     strings.Join,
		"dur":      duration,
		"qs":       url.QueryEscape,
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
		"limits": func() map[string]int {
			return map[string]int{"AnswerText": helmrtype.MaxAnswerTextBytes, "Answer": helmrtype.MaxAnswerBytes, "Input": helmrtype.MaxInputBytes,
				"TokenData": helmrtype.MaxTokenDataBytes}
		},
	}
	out := map[string]*template.Template{}
	for _, p := range consolePages {
		out[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(consoleFS, "console/layout.html", "console/"+p+".html"))
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func when(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return ""
		}
		return v.UTC().Format("2006-01-02 15:04:05Z")
	case *time.Time:
		if v == nil {
			return ""
		}
		return when(*v)
	}
	return ""
}

func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// duration is the time from a to b ("" when either is unknown).
func duration(a, b *time.Time) string {
	if a == nil || b == nil {
		return ""
	}
	return b.Sub(*a).Round(time.Millisecond).String()
}

// contentText shows Content (JSON) as text: text parts as they are, JSON
// parts as JSON; anything else as indented JSON.
func contentText(raw any) string {
	var b []byte
	switch v := raw.(type) {
	case json.RawMessage:
		b = v
	case helmrtype.Content:
		b, _ = json.Marshal(v)
	default:
		b, _ = json.Marshal(v)
	}
	if len(b) == 0 || string(b) == "null" {
		return ""
	}
	var c helmrtype.Content
	if err := json.Unmarshal(b, &c); err != nil {
		return prettyJSON(b)
	}
	var s strings.Builder
	for _, p := range c {
		if p.Type == helmrtype.PartText {
			s.WriteString(p.Text)
		} else {
			s.Write(p.Value)
		}
	}
	return s.String()
}

func prettyJSON(raw any) string {
	var b []byte
	switch v := raw.(type) {
	case json.RawMessage:
		b = v
	case []byte:
		b = v
	default:
		b, _ = json.Marshal(v)
	}
	if len(b) == 0 {
		return ""
	}
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return string(b)
	}
	return out.String()
}

// outputText is the text of a turn.output event ("" for other kinds).
func outputText(ev helmrtype.SessionEvent) string {
	if ev.Kind != helmrtype.EventTurnOutput {
		return ""
	}
	var d struct {
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(ev.Data, &d)
	return contentText(d.Content)
}

// eventSummary is an event's data in one short line; console.js's
// summary does the same for events that arrive live.
func eventSummary(ev helmrtype.SessionEvent) string {
	s := string(ev.Data)
	if s == "null" || s == "{}" {
		return ""
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// textContent is form text as Content JSON.
func textContent(s string) json.RawMessage {
	b, _ := json.Marshal(helmrtype.Text(s))
	return b
}

// formInput is a form's input as JSON: Content text, or a JSON value when
// the form says so.
func formInput(r *http.Request, field string) (json.RawMessage, error) {
	v := r.PostForm.Get(field)
	if r.PostForm.Get(field+"_kind") == "json" {
		if !json.Valid([]byte(v)) {
			return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the input is not valid JSON")
		}
		return json.RawMessage(v), nil
	}
	return textContent(v), nil
}

func (s *Server) consoleInbox(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	return s.renderInbox(w, r, cs, http.StatusOK, nil)
}

// inboxToken is a pending Token as the inbox shows it: its name and
// description, when its metadata has them as strings, and its schema.
type inboxToken struct {
	T           helmrtype.TokenState
	Name        string
	Description string
	// Data and Error are a refused completion's data and why it was
	// refused, shown again in its form.
	Data  string
	Error *helmrtype.Error
}

// tokenRefusal is a completion the inbox refused, shown in place.
type tokenRefusal struct {
	id   string
	data string
	err  *helmrtype.Error
}

// renderInbox renders the inbox: the pending questions, then the pending
// Tokens (the tokens a viewer may list: the page needs GET /v1/asks, the
// Tokens GET /v1/tokens, both viewer routes). A refused completion is
// shown with its Token, with the status of its error.
func (s *Server) renderInbox(w http.ResponseWriter, r *http.Request, cs *consoleSession, status int, refused *tokenRefusal) error {
	q := r.URL.Query()
	page, err := s.eng.ListAllAsks(r.Context(), helmrtype.AskPending, q.Get("cursor"), 50)
	if err != nil {
		return err
	}
	data := map[string]any{"Title": "Inbox", "Asks": page.Asks, "Next": page.NextCursor}
	if s.can(cs, "GET /v1/tokens") {
		tp, err := s.eng.ListTokens(r.Context(), helmrtype.TokenPending, q.Get("tcursor"), 50)
		if err != nil {
			return err
		}
		toks := make([]inboxToken, 0, len(tp.Tokens))
		for _, t := range tp.Tokens {
			it := inboxToken{T: t}
			var meta map[string]any
			if json.Unmarshal(t.Metadata, &meta) == nil {
				it.Name, _ = meta["name"].(string)
				it.Description, _ = meta["description"].(string)
			}
			if refused != nil && refused.id == t.ID {
				it.Data, it.Error = refused.data, refused.err
			}
			toks = append(toks, it)
		}
		data["Tokens"], data["TokensNext"] = toks, tp.NextCursor
	}
	if refused != nil {
		data["Refused"] = refused.err
	}
	s.render(w, r, status, "inbox", cs, data)
	return nil
}

// consoleCompleteToken completes a Token with the JSON of the form's
// "data", through the engine call of POST /v1/tokens/{id}/complete. Data
// that is not JSON, or that the Token's schema refuses (input_invalid: the
// Token stays pending), is shown in the inbox with the message.
func (s *Server) consoleCompleteToken(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	id := r.PathValue("id")
	data := r.PostForm.Get("data")
	refuse := func(err error) error {
		he := s.apiError(r, err)
		if he == nil {
			return nil
		}
		return s.renderInbox(w, r, cs, helmrtype.HTTPStatus(he.Code), &tokenRefusal{id: id, data: data, err: he})
	}
	if strings.TrimSpace(data) == "" {
		return refuse(helmrtype.Errorf(helmrtype.CodeInvalidRequest, "give the Token's data as JSON (null, a number, a string in quotes, an array or an object)"))
	}
	if !json.Valid([]byte(data)) {
		var v any
		err := json.Unmarshal([]byte(data), &v)
		return refuse(helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the data is not valid JSON (%v); a string needs quotes", err))
	}
	var buf bytes.Buffer
	json.Compact(&buf, []byte(data))
	if _, err := s.eng.CompleteToken(r.Context(), id, buf.Bytes()); err != nil {
		switch helmrtype.CodeOf(err) {
		case helmrtype.CodeInvalidRequest, helmrtype.CodeInputInvalid, helmrtype.CodeLimitExceeded:
			return refuse(err)
		}
		return err
	}
	redirect(w, r, safeNext(r.PostForm.Get("back")), "completed")
	return nil
}

// consoleCancelToken cancels a Token, through the engine call of
// POST /v1/tokens/{id}/cancel.
func (s *Server) consoleCancelToken(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	if _, err := s.eng.CancelToken(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	redirect(w, r, safeNext(r.PostForm.Get("back")), "tokcancel")
	return nil
}

// consoleAnswer answers a question from a form: a text question's
// "text", or a choice's "option" values with its optional "text".
func (s *Server) consoleAnswer(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	sid, tid, aid := r.PathValue("id"), r.PathValue("turn_id"), r.PathValue("ask_id")
	a, err := s.eng.GetAsk(r.Context(), sid, tid, aid)
	if err != nil {
		return err
	}
	f := r.PostForm
	var value any
	if a.Question.Answer.Type == helmrtype.AnswerChoice {
		opts := f["option"]
		if len(opts) == 0 {
			return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "choose an option")
		}
		choice := map[string]any{"selected": opts}
		if t := f.Get("text"); t != "" {
			choice["text"] = t
		}
		value = choice
	} else {
		value = f.Get("text")
	}
	raw, _ := json.Marshal(value)
	by := helmrtype.Responder{Kind: helmrtype.SourceAPIKey, ID: cs.keyID}
	rid := f.Get("response_id")
	if rid == "" {
		rid = engine.NewID()
	}
	if _, err := s.eng.RespondAsk(r.Context(), sid, tid, aid, helmrtype.AskRespond{Answer: raw, ResponseID: rid}, by); err != nil {
		return err
	}
	redirect(w, r, safeNext(f.Get("back")), "answered")
	return nil
}

func (s *Server) consoleSessions(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	q := r.URL.Query()
	var statuses []string
	if v := q.Get("status"); v != "" {
		statuses = []string{v}
	}
	page, err := s.eng.ListSessions(r.Context(), engine.SessionQuery{Agent: q.Get("agent"), Key: q.Get("key"), Statuses: statuses, Cursor: q.Get("cursor"), Limit: 50})
	if err != nil {
		return err
	}
	var agents []helmrtype.AgentInfo
	if ap, err := s.eng.ListAgents(r.Context(), "", "", 100); err == nil {
		agents = ap.Agents
	}
	next := ""
	if page.NextCursor != "" {
		nq := url.Values{"agent": {q.Get("agent")}, "key": {q.Get("key")}, "status": {q.Get("status")}, "cursor": {page.NextCursor}}
		next = "/console/sessions?" + nq.Encode()
	}
	counts, err := s.counts(r)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "sessions", cs, map[string]any{"Title": "Sessions", "Sessions": page.Sessions, "Next": next, "Counts": counts,
		"Agent": q.Get("agent"), "Key": q.Get("key"), "Status": q.Get("status"), "Agents": agents,
		"Statuses": []string{helmrtype.SessionOpen, helmrtype.SessionClosing, helmrtype.SessionClosed}})
	return nil
}

// liveCounts are the counts the Sessions page shows and keeps up to date.
type liveCounts struct {
	Open          int64 `json:"open"`
	Closing       int64 `json:"closing"`
	Closed        int64 `json:"closed"`
	PendingAsks   int64 `json:"pending_asks"`
	PendingTokens int64 `json:"pending_tokens"`
}

// counts reads the live counts from the store (grouped counts, as the
// metrics' gauges).
func (s *Server) counts(r *http.Request) (liveCounts, error) {
	c, err := s.eng.Counts(r.Context())
	if err != nil {
		return liveCounts{}, err
	}
	return liveCounts{Open: c.SessionsByStatus[helmrtype.SessionOpen], Closing: c.SessionsByStatus[helmrtype.SessionClosing],
		Closed: c.SessionsByStatus[helmrtype.SessionClosed], PendingAsks: c.PendingAsks, PendingTokens: c.PendingTokens}, nil
}

// consoleCounts answers the Sessions page's live counts as JSON.
func (s *Server) consoleCounts(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	c, err := s.counts(r)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) consoleCreateSession(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	in, err := formInput(r, "input")
	if err != nil {
		return err
	}
	req := helmrtype.SessionCreateRequest{Agent: r.PostForm.Get("agent"), Key: r.PostForm.Get("key"), Input: in, IdempotencyKey: r.PostForm.Get("idempotency_key")}
	if strings.TrimSpace(r.PostForm.Get("input")) == "" {
		req.Input = nil
	}
	rec, _, err := s.eng.CreateSession(r.Context(), req, engine.APICaller)
	if err != nil {
		return err
	}
	redirect(w, r, "/console/sessions/"+rec.Session.ID, "created")
	return nil
}

func (s *Server) consoleSession(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	ctx := r.Context()
	id := r.PathValue("id")
	sess, err := s.eng.GetSession(ctx, id)
	if err != nil {
		return err
	}
	turns, err := s.eng.ListTurns(ctx, id, "", 100)
	if err != nil {
		return err
	}
	var asks []helmrtype.AskState
	var open []helmrtype.TurnState
	for _, t := range turns.Turns {
		if helmrtype.TurnTerminal(t.Status) {
			continue
		}
		open = append(open, t)
		if ap, err := s.eng.ListAsks(ctx, id, t.ID, "", 100); err == nil {
			for _, a := range ap.Asks {
				if a.Status == helmrtype.AskPending {
					asks = append(asks, a)
				}
			}
		}
	}
	events, err := s.eng.ListEvents(ctx, id, 0, 1000)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "session", cs, map[string]any{"Title": "Session " + sess.Agent, "S": sess, "Turns": turns.Turns,
		"Open": open, "Asks": asks, "Events": events.Records, "After": events.NextAfter, "Back": "/console/sessions/" + id})
	return nil
}

// consoleEvents is the Session's event stream (the API's, SSE) for the
// console's script, authenticated by the session cookie.
func (s *Server) consoleEvents(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	r.Header.Set("Accept", "text/event-stream")
	return s.events(w, r)
}

func (s *Server) consoleEnqueue(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	in, err := formInput(r, "input")
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, _, err := s.eng.Enqueue(r.Context(), id, helmrtype.EnqueueRequest{Input: in, IdempotencyKey: r.PostForm.Get("idempotency_key")}, engine.APICaller); err != nil {
		return err
	}
	redirect(w, r, "/console/sessions/"+id, "enqueued")
	return nil
}

func (s *Server) consoleMessage(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	in, err := formInput(r, "content")
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := s.eng.SendMessage(r.Context(), id, r.PathValue("turn_id"),
		helmrtype.MessageRequest{Content: in, IdempotencyKey: r.PostForm.Get("idempotency_key")}, engine.APICaller); err != nil {
		return err
	}
	redirect(w, r, "/console/sessions/"+id, "sent")
	return nil
}

func (s *Server) consoleInterruptTurn(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	id := r.PathValue("id")
	if _, err := s.eng.InterruptTurn(r.Context(), id, r.PathValue("turn_id"), helmrtype.ControlRequest{IdempotencyKey: r.PostForm.Get("idempotency_key")}); err != nil {
		return err
	}
	redirect(w, r, "/console/sessions/"+id, "turninter")
	return nil
}

// consoleControl is a Session control: interrupt, resume (a hold), close
// or cancel.
func (s *Server) consoleControl(what string) consoleHandler {
	return func(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
		ctx, id := r.Context(), r.PathValue("id")
		req := helmrtype.ControlRequest{IdempotencyKey: r.PostForm.Get("idempotency_key")}
		var err error
		switch what {
		case "interrupt":
			_, err = s.eng.InterruptSession(ctx, id, req)
		case "resume":
			_, err = s.eng.ResumeSession(ctx, id, helmrtype.ResumeRequest{HoldID: r.PostForm.Get("hold_id"), IdempotencyKey: req.IdempotencyKey})
		case "close":
			_, err = s.eng.CloseSession(ctx, id, req)
		case "cancel":
			_, err = s.eng.CancelSession(ctx, id, req)
		}
		if err != nil {
			return err
		}
		redirect(w, r, "/console/sessions/"+id, what)
		return nil
	}
}

func (s *Server) consoleTurn(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	ctx, id, tid := r.Context(), r.PathValue("id"), r.PathValue("turn_id")
	t, err := s.eng.GetTurn(ctx, id, tid)
	if err != nil {
		return err
	}
	var out strings.Builder
	var after int64
	for {
		page, err := s.eng.ListEvents(ctx, id, after, 1000)
		if err != nil {
			return err
		}
		for _, ev := range page.Records {
			if ev.TurnID != nil && *ev.TurnID == tid {
				out.WriteString(outputText(ev))
			}
		}
		after = page.NextAfter
		if !page.HasMore || out.Len() > helmrtype.MaxTurnOutputBytes {
			break
		}
	}
	asks, _ := s.eng.ListAsks(ctx, id, tid, "", 100)
	var askList []helmrtype.AskState
	if asks != nil {
		askList = asks.Asks
	}
	s.render(w, r, http.StatusOK, "turn", cs, map[string]any{"Title": fmt.Sprintf("Turn %d", t.Sequence), "T": t, "Output": out.String(), "Asks": askList})
	return nil
}

func (s *Server) consoleAgents(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	page, err := s.eng.ListAgents(r.Context(), r.URL.Query().Get("deployment_id"), r.URL.Query().Get("cursor"), 100)
	if err != nil {
		if helmrtype.CodeOf(err) != helmrtype.CodeNotFound {
			return err
		}
		page = &helmrtype.AgentPage{}
	}
	s.render(w, r, http.StatusOK, "agents", cs, map[string]any{"Title": "Agents", "Page": page})
	return nil
}

func (s *Server) consoleDeployments(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	page, err := s.eng.ListDeployments(r.Context(), r.URL.Query().Get("cursor"), 100)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "deployments", cs, map[string]any{"Title": "Deployments", "Page": page})
	return nil
}

func (s *Server) consoleComputers(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	page, err := s.eng.ListComputers(r.Context(), r.URL.Query().Get("cursor"), 100)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "computers", cs, map[string]any{"Title": "Computers", "Page": page})
	return nil
}

func (s *Server) consoleComputer(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	ctx, id := r.Context(), r.PathValue("id")
	c, err := s.eng.GetComputer(ctx, id)
	if err != nil {
		return err
	}
	members, err := s.eng.ComputerMembers(ctx, id, r.URL.Query().Get("cursor"), 100)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "computer", cs, map[string]any{"Title": "Computer " + c.Template, "C": c, "Members": members})
	return nil
}

// consoleExec runs a Command from a form: the command line split at
// spaces (no shell: run sh -c '…' for one), with an optional timeout.
func (s *Server) consoleExec(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	argv := strings.Fields(r.PostForm.Get("command"))
	if len(argv) > 2 && argv[0] == "sh" && argv[1] == "-c" {
		// Keep the script as one argument.
		argv = []string{"sh", "-c", strings.TrimSpace(strings.SplitN(strings.TrimSpace(r.PostForm.Get("command")), "-c", 2)[1])}
	}
	req := helmrtype.CommandRequest{Command: argv, Timeout: r.PostForm.Get("timeout"), IdempotencyKey: r.PostForm.Get("idempotency_key")}
	c, _, err := s.eng.ExecCommand(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	redirect(w, r, "/console/commands/"+c.ID, "cmdstarted")
	return nil
}

func (s *Server) consoleCommand(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	c, err := s.eng.GetCommand(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "command", cs, map[string]any{"Title": "Command " + strings.Join(c.Command, " "), "C": c, "Done": helmrtype.CommandTerminal(c.Status)})
	return nil
}

// consoleCommandLogs follows a Command's logs (the API's SSE stream).
func (s *Server) consoleCommandLogs(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	q := r.URL.Query()
	q.Set("follow", "true")
	r.URL.RawQuery = q.Encode()
	return s.commandLogs(w, r)
}

func (s *Server) consoleCancelCommand(w http.ResponseWriter, r *http.Request, cs *consoleSession) error {
	id := r.PathValue("id")
	if _, err := s.eng.CancelCommand(r.Context(), id); err != nil {
		return err
	}
	redirect(w, r, "/console/commands/"+id, "cmdcancel")
	return nil
}
