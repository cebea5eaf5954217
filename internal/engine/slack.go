package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Slack channel Sessions (docs/slack.md). The Slack bridge
// (internal/slackbridge) talks to Slack; every durable change it makes
// goes through the methods here.

// slackLeasePrefix names the leases of Slack work (a Socket Mode
// connection, a thread's projector) among the Session leases, so that the
// supervisor does not take them for its own.
const slackLeasePrefix = "slack:"

// ConnectSlackApp stores a Slack app whose credentials the bridge checked
// and sealed. A workspace has at most one connected app: connecting
// another is a conflict until the first is disconnected.
func (e *Engine) ConnectSlackApp(ctx context.Context, a *store.SlackApp) (*helmrtype.SlackApp, error) {
	switch a.Mode {
	case helmrtype.SlackModeSocket, helmrtype.SlackModeEvents:
	default:
		return nil, invalid("mode must be %q or %q", helmrtype.SlackModeSocket, helmrtype.SlackModeEvents)
	}
	err := e.store.Update(ctx, func(tx store.Tx) error {
		if a.MentionAgent != "" {
			dep, err := e.currentDeploymentTx(ctx, tx)
			if err != nil {
				return err
			}
			if _, ok := dep.agents[a.MentionAgent]; !ok {
				return &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "mention_agent " + a.MentionAgent + " is not in the current deployment"}
			}
		}
		a.ID, a.CreatedAt = NewID(), e.Now()
		if err := tx.InsertSlackApp(ctx, a); errors.Is(err, store.ErrDuplicate) {
			return &helmrtype.Error{Code: helmrtype.CodeConflict, Message: "workspace " + a.TeamID + " already has a connected Slack app; disconnect it first",
				Details: map[string]any{"team_id": a.TeamID}}
		} else if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.wake(slackLeasePrefix)
	v := slackAppView(a)
	return &v, nil
}

func slackAppView(a *store.SlackApp) helmrtype.SlackApp {
	return helmrtype.SlackApp{ID: a.ID, Name: a.Name, TeamID: a.TeamID, BotUserID: a.BotUserID, Mode: a.Mode,
		MentionAgent: a.MentionAgent, CreatedAt: a.CreatedAt}
}

// SlackApps returns the connected apps with their sealed credentials, for
// the bridge.
func (e *Engine) SlackApps(ctx context.Context) ([]store.SlackApp, error) {
	return read(ctx, e.store, func(tx store.Tx) ([]store.SlackApp, error) { return tx.ListSlackApps(ctx) })
}

// ListSlackApps returns the connected apps, without credentials.
func (e *Engine) ListSlackApps(ctx context.Context) (*helmrtype.SlackAppList, error) {
	apps, err := e.SlackApps(ctx)
	if err != nil {
		return nil, err
	}
	out := &helmrtype.SlackAppList{Apps: []helmrtype.SlackApp{}}
	for i := range apps {
		out.Apps = append(out.Apps, slackAppView(&apps[i]))
	}
	return out, nil
}

// DisconnectSlackApp removes a connected app and its credentials. Its
// Sessions stay; their threads are no longer posted to.
func (e *Engine) DisconnectSlackApp(ctx context.Context, id string) (*helmrtype.SlackApp, error) {
	var v helmrtype.SlackApp
	err := e.store.Update(ctx, func(tx store.Tx) error {
		a, err := tx.GetSlackApp(ctx, id)
		if err != nil {
			return err
		}
		v = slackAppView(a)
		return tx.DeleteSlackApp(ctx, id)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("slack app", id)
	}
	if err != nil {
		return nil, err
	}
	e.wake(slackLeasePrefix)
	return &v, nil
}

// WatchSlack returns a channel closed at the next change of the connected
// apps or a new Slack Session on this node, and stop.
func (e *Engine) WatchSlack() (changed <-chan struct{}, stop func()) {
	return e.Watch(slackLeasePrefix)
}

// PutSlackUser maps a Slack user to a responder identity with a role.
func (e *Engine) PutSlackUser(ctx context.Context, m helmrtype.SlackUserMapping) (*helmrtype.SlackUserMapping, error) {
	if m.TeamID == "" || m.UserID == "" || m.Identity == "" {
		return nil, invalid("team_id, user_id and identity are required")
	}
	if len(m.Identity) > 256 {
		return nil, invalid("identity is longer than 256 bytes")
	}
	if m.Role == "" {
		m.Role = helmrtype.RoleResponder
	}
	if !m.Role.Valid() {
		return nil, invalid("role must be viewer, responder, operator or admin")
	}
	m.CreatedAt = e.Now()
	err := e.store.Update(ctx, func(tx store.Tx) error {
		return tx.PutSlackUser(ctx, &store.SlackUser{TeamID: m.TeamID, UserID: m.UserID, Identity: m.Identity, Role: string(m.Role), CreatedAt: m.CreatedAt})
	})
	if err != nil {
		return nil, err
	}
	m.CreatedAt = m.CreatedAt.UTC().Truncate(time.Microsecond)
	return &m, nil
}

// ListSlackUsers returns the Slack user mappings of a workspace ("" all).
func (e *Engine) ListSlackUsers(ctx context.Context, teamID string) (*helmrtype.SlackUserList, error) {
	us, err := read(ctx, e.store, func(tx store.Tx) ([]store.SlackUser, error) { return tx.ListSlackUsers(ctx, teamID) })
	if err != nil {
		return nil, err
	}
	out := &helmrtype.SlackUserList{Users: []helmrtype.SlackUserMapping{}}
	for _, u := range us {
		out.Users = append(out.Users, helmrtype.SlackUserMapping{TeamID: u.TeamID, UserID: u.UserID, Identity: u.Identity,
			Role: helmrtype.Role(u.Role), CreatedAt: u.CreatedAt})
	}
	return out, nil
}

// DeleteSlackUser removes a Slack user's mapping.
func (e *Engine) DeleteSlackUser(ctx context.Context, teamID, userID string) (*helmrtype.SlackUserMapping, error) {
	var v helmrtype.SlackUserMapping
	err := e.store.Update(ctx, func(tx store.Tx) error {
		u, err := tx.GetSlackUser(ctx, teamID, userID)
		if err != nil {
			return err
		}
		v = helmrtype.SlackUserMapping{TeamID: u.TeamID, UserID: u.UserID, Identity: u.Identity, Role: helmrtype.Role(u.Role), CreatedAt: u.CreatedAt}
		return tx.DeleteSlackUser(ctx, teamID, userID)
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("slack user", teamID+"/"+userID)
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// slackAppForTx picks the app a new Slack Session uses: the workspace's,
// or the only one connected.
func slackAppForTx(ctx context.Context, tx store.Tx, req *helmrtype.SlackChannelRequest) (*store.SlackApp, error) {
	if req.ChannelID == "" || len(req.ChannelID) > 64 || strings.ContainsAny(req.ChannelID, " /\t\n") {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "slack.channel_id must be a raw Slack channel ID such as C0123456789"}
	}
	if req.TeamID != "" {
		a, err := tx.GetSlackAppByTeam(ctx, req.TeamID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, &helmrtype.Error{Code: helmrtype.CodeNotFound, Message: "no Slack app is connected for workspace " + req.TeamID + "; run helmr slack connect"}
		}
		return a, err
	}
	apps, err := tx.ListSlackApps(ctx)
	if err != nil {
		return nil, err
	}
	switch len(apps) {
	case 0:
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "no Slack app is connected; run helmr slack connect first"}
	case 1:
		return &apps[0], nil
	}
	return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "several Slack apps are connected: say which with slack.team_id"}
}

// SlackLease takes or keeps this node's lease of a piece of Slack work
// (one per name) for ttl, and reports whether this node holds it. With
// one node it always does.
func (e *Engine) SlackLease(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	if e.node == "" {
		return true, nil
	}
	var holder string
	err := e.store.Update(ctx, func(tx store.Tx) error {
		var err error
		holder, _, err = tx.AcquireLease(ctx, slackLeasePrefix+name, e.node, ttl)
		return err
	})
	return holder == e.node, err
}

// ReleaseSlackLease ends this node's lease of a piece of Slack work.
func (e *Engine) ReleaseSlackLease(ctx context.Context, name string) error {
	if e.node == "" {
		return nil
	}
	return e.store.Update(ctx, func(tx store.Tx) error { return tx.ReleaseLease(ctx, slackLeasePrefix+name, e.node) })
}

// SlackThreads returns the Slack threads still projected, after a Session
// ID, a page at a time.
func (e *Engine) SlackThreads(ctx context.Context, afterSessionID string, limit int) ([]store.SlackThread, error) {
	return read(ctx, e.store, func(tx store.Tx) ([]store.SlackThread, error) { return tx.ListSlackThreads(ctx, afterSessionID, limit) })
}

// SlackThread returns a Session's Slack thread.
func (e *Engine) SlackThread(ctx context.Context, sessionID string) (*store.SlackThread, error) {
	return read(ctx, e.store, func(tx store.Tx) (*store.SlackThread, error) { return tx.GetSlackThread(ctx, sessionID) })
}

// SlackApp returns a connected app with its sealed credentials.
func (e *Engine) SlackApp(ctx context.Context, id string) (*store.SlackApp, error) {
	return read(ctx, e.store, func(tx store.Tx) (*store.SlackApp, error) { return tx.GetSlackApp(ctx, id) })
}

// SlackProjected records how far a Session's thread is projected: its
// opening message's ts, the cursor, and whether it is done.
func (e *Engine) SlackProjected(ctx context.Context, th *store.SlackThread) error {
	return e.store.Update(ctx, func(tx store.Tx) error { return tx.UpdateSlackThread(ctx, th) })
}

// SlackPost returns what a thread's post shows, ErrNotFound before it is
// posted.
func (e *Engine) SlackPost(ctx context.Context, sessionID, key string) (*store.SlackPost, error) {
	return read(ctx, e.store, func(tx store.Tx) (*store.SlackPost, error) { return tx.GetSlackPost(ctx, sessionID, key) })
}

// PutSlackPost records a post of a thread right after Slack took it.
func (e *Engine) PutSlackPost(ctx context.Context, p *store.SlackPost) error {
	p.UpdatedAt = e.Now()
	return e.store.Update(ctx, func(tx store.Tx) error { return tx.PutSlackPost(ctx, p) })
}

// SlackDeliveryUnavailable records in the Session's timeline that its
// thread could not be posted to; what was to be posted stays in the
// timeline.
func (e *Engine) SlackDeliveryUnavailable(ctx context.Context, sessionID, turnID string, data map[string]any) error {
	err := e.store.Update(ctx, func(tx store.Tx) error {
		_, err := e.appendEvent(ctx, tx, sessionID, turnID, helmrtype.EventSlackDeliveryUnavailable, data, e.Now())
		return err
	})
	if err == nil {
		e.wake(sessionID)
	}
	return err
}

// SlackInbound is a message a Slack user wrote that the bridge received:
// EventID is Slack's event ID, which makes a retried delivery recognised.
// ThreadTS is "" for a top-level message; Mention tells that it mentions
// the bot.
type SlackInbound struct {
	AppID     string `json:"app_id"`
	EventID   string `json:"event_id"`
	TeamID    string `json:"team_id"`
	ChannelID string `json:"channel_id"`
	ThreadTS  string `json:"thread_ts,omitempty"`
	MessageTS string `json:"message_ts"`
	UserID    string `json:"user_id"`
	Text      string `json:"text"`
	Mention   bool   `json:"mention,omitempty"`
}

// Actions of a SlackOutcome.
const (
	SlackIgnore  = "ignore"  // not for a Session
	SlackReply   = "reply"   // refused: Reply says why, in the thread
	SlackEnqueue = "enqueue" // a new Turn
	SlackSend    = "send"    // a message to the running Turn
	SlackCreate  = "create"  // a new Session in the thread the mention starts
	SlackAnswer  = "answer"  // an answer to the Turn's pending text question
)

// SlackOutcome is what a Slack message does, decided once per event ID.
type SlackOutcome struct {
	Action    string          `json:"action"`
	SessionID string          `json:"session_id,omitempty"`
	TurnID    string          `json:"turn_id,omitempty"`
	AskID     string          `json:"ask_id,omitempty"`
	Agent     string          `json:"agent,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Reply     string          `json:"reply,omitempty"`
	// ThreadTS is the thread the outcome concerns.
	ThreadTS string `json:"thread_ts,omitempty"`
}

// HandleSlackMessage admits what a Slack message asks for and returns
// what it did; unavailable (nothing stored) while an opening message of
// the channel is being posted, since the reply may be in its thread. The outcome is decided once per event ID and stored before
// anything is admitted; each admission is idempotent on the event ID, so
// a retried delivery (Slack retries an unacknowledged one) admits nothing
// twice. It is durable when this returns, before Slack is acknowledged.
func (e *Engine) HandleSlackMessage(ctx context.Context, in SlackInbound) (*SlackOutcome, error) {
	if in.EventID == "" {
		return nil, invalid("a Slack event without event_id")
	}
	var out *SlackOutcome
	err := e.store.Update(ctx, func(tx store.Tx) error {
		var err error
		out, _, err = idempotent(ctx, tx, e.Now(), "slack.events", in.EventID, in, func() (*SlackOutcome, error) {
			return e.decideSlackTx(ctx, tx, in)
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	key := "slack:" + in.EventID
	src := helmrtype.InputSource{Kind: helmrtype.SourceUser, Slack: &helmrtype.SlackInputSource{TeamID: in.TeamID, ChannelID: in.ChannelID,
		ThreadTS: out.ThreadTS, MessageTS: in.MessageTS, UserID: in.UserID}}
	caller := Caller{Source: src}
	switch out.Action {
	case SlackEnqueue:
		t, _, err := e.Enqueue(ctx, out.SessionID, helmrtype.EnqueueRequest{Input: out.Input, IdempotencyKey: key}, caller)
		if err != nil {
			return nil, err
		}
		out.TurnID = t.ID
	case SlackSend:
		if _, err := e.SendMessage(ctx, out.SessionID, out.TurnID, helmrtype.MessageRequest{Content: out.Input, IdempotencyKey: key}, caller); err != nil {
			if helmrtype.CodeOf(err) != helmrtype.CodeTurnSettled {
				return nil, err
			}
			out.Action, out.Reply = SlackReply, "The Turn ended before your message reached it; send it again to start a new one."
		}
	case SlackCreate:
		rec, _, err := e.createSession(ctx, helmrtype.SessionCreateRequest{Agent: out.Agent, Input: out.Input, IdempotencyKey: key}, caller,
			createOpts{scope: "sessions.create", slack: &slackPlace{appID: in.AppID, channelID: in.ChannelID, threadTS: out.ThreadTS}})
		if err != nil {
			return nil, err
		}
		out.SessionID = rec.Session.ID
		if rec.Turn != nil {
			out.TurnID = rec.Turn.ID
		}
	}
	return out, nil
}

// decideSlackTx decides what a Slack message does (see HandleSlackMessage).
func (e *Engine) decideSlackTx(ctx context.Context, tx store.Tx, in SlackInbound) (*SlackOutcome, error) {
	thread := in.ThreadTS
	if thread == "" {
		thread = in.MessageTS
	}
	th, err := tx.GetSlackThreadByTS(ctx, in.AppID, in.ChannelID, thread)
	if errors.Is(err, store.ErrNotFound) && in.ThreadTS != "" {
		// A thread of the channel whose opening message is being posted
		// (on this or another node) may be this one: decide later (a
		// mention in it too, which must not open a second Session).
		if _, err := tx.GetSlackThreadByTS(ctx, in.AppID, in.ChannelID, ""); err == nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeUnavailable, Message: "a Session's opening message in this channel is being posted; try again"}
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		// None is being posted now, but another node may have recorded
		// this thread's ts between the two reads (each statement of a
		// PostgreSQL write transaction sees what was committed before
		// it): look again, or the message would be dropped.
		th, err = tx.GetSlackThreadByTS(ctx, in.AppID, in.ChannelID, thread)
	}
	if errors.Is(err, store.ErrNotFound) {
		// Only a mention outside every Session's thread opens one.
		if !in.Mention {
			return &SlackOutcome{Action: SlackIgnore}, nil
		}
		app, err := tx.GetSlackApp(ctx, in.AppID)
		if err != nil {
			return nil, err
		}
		if app.MentionAgent == "" {
			return &SlackOutcome{Action: SlackIgnore}, nil
		}
		if r := slackTooLong(in.Text); r != "" {
			return &SlackOutcome{Action: SlackReply, Reply: r, ThreadTS: thread}, nil
		}
		dep, err := e.currentDeploymentTx(ctx, tx)
		if err != nil {
			return nil, err
		}
		a, ok := dep.agents[app.MentionAgent]
		if !ok {
			return &SlackOutcome{Action: SlackReply, ThreadTS: thread, Reply: "Agent " + app.MentionAgent + " is not deployed any more; ask an operator to fix the Slack app's mention agent."}, nil
		}
		input, why := slackInput(a, in.Text)
		if why != "" {
			return &SlackOutcome{Action: SlackReply, Reply: why, ThreadTS: thread}, nil
		}
		return &SlackOutcome{Action: SlackCreate, Agent: a.ID, Input: input, ThreadTS: thread}, nil
	}
	if err != nil {
		return nil, err
	}
	if in.Mention {
		// The message event of the same post speaks for it.
		return &SlackOutcome{Action: SlackIgnore}, nil
	}
	out := &SlackOutcome{SessionID: th.SessionID, ThreadTS: th.ThreadTS, Action: SlackReply}
	if r := slackTooLong(in.Text); r != "" {
		out.Reply = r
		return out, nil
	}
	s, _, a, err := e.sessionAgentTx(ctx, tx, th.SessionID)
	if err != nil {
		return nil, err
	}
	if s.Status != helmrtype.SessionOpen {
		out.Reply = "This Session is " + s.Status + " and takes no more input."
		return out, nil
	}
	held, err := e.heldTx(ctx, tx, s.ID)
	if err != nil {
		return nil, err
	}
	content, _ := json.Marshal(helmrtype.Content{{Type: "text", Text: in.Text}})
	active, err := tx.ActiveTurn(ctx, s.ID)
	switch {
	case err == nil && active.Status == helmrtype.TurnRunning:
		// A pending text question of the running Turn takes the reply as
		// its answer; otherwise the reply is a message to the Turn.
		if active.Waited {
			asks, err := tx.PendingAsks(ctx, active.ID)
			if err != nil {
				return nil, err
			}
			for _, q := range asks {
				var qq helmrtype.Question
				if json.Unmarshal(q.Question, &qq) == nil && qq.Answer.Type == helmrtype.AnswerText {
					out.Action, out.TurnID, out.AskID = SlackAnswer, active.ID, q.ID
					return out, nil
				}
			}
		}
		if held {
			out.Reply = "This Session is on hold; your message was not sent."
			return out, nil
		}
		out.Action, out.TurnID, out.Input = SlackSend, active.ID, content
		return out, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	input, why := slackInput(a, in.Text)
	if why != "" {
		out.Reply = why
		return out, nil
	}
	out.Action, out.Input = SlackEnqueue, input
	return out, nil
}

// slackTooLong says why a Slack text is refused when it is over the limit.
func slackTooLong(text string) string {
	if n := utf8.RuneCountInString(text); n > helmrtype.MaxSlackTextChars {
		return "Your message is " + strconv.Itoa(n) + " characters long; the limit is " + strconv.Itoa(helmrtype.MaxSlackTextChars) + ". Nothing was sent."
	}
	return ""
}

// slackInput is the conversational front of an Agent: a text Agent takes
// the text as Content; a structured-input Agent takes it as the JSON
// string, or as {"text": …}, where its input schema accepts that. why says
// otherwise, for a reply in the thread.
func slackInput(a *helmrtype.AgentManifest, text string) (_ json.RawMessage, why string) {
	if a.InputKind == helmrtype.InputKindText {
		b, _ := json.Marshal(helmrtype.Content{{Type: "text", Text: text}})
		return b, ""
	}
	str, _ := json.Marshal(text)
	obj, _ := json.Marshal(map[string]string{"text": text})
	if len(a.InputSchema) == 0 {
		return str, ""
	}
	r, err := resolveSchema(a.InputSchema)
	if err == nil {
		for _, c := range []json.RawMessage{str, obj} {
			var v any
			json.Unmarshal(c, &v)
			if r.Validate(v) == nil {
				return c, ""
			}
		}
	}
	return nil, "Agent " + a.ID + " takes structured input that a Slack message cannot give it; start its Turns through the API (helmr session enqueue)."
}

// SlackAnswer answers a question from Slack: the Slack user must be mapped
// to an identity whose role may answer (responder or above); seeing the
// question is no authority. forbidden otherwise.
func (e *Engine) SlackAnswer(ctx context.Context, teamID, userID, askID string, answer json.RawMessage, responseID string) (*helmrtype.AskState, error) {
	type found struct {
		u *store.SlackUser
		a *store.Ask
	}
	f, err := read(ctx, e.store, func(tx store.Tx) (found, error) {
		a, err := tx.GetAsk(ctx, askID)
		if errors.Is(err, store.ErrNotFound) {
			return found{}, notFound("question", askID)
		} else if err != nil {
			return found{}, err
		}
		th, err := tx.GetSlackThread(ctx, a.SessionID)
		if errors.Is(err, store.ErrNotFound) {
			return found{}, notFound("question", askID) // not one posted to Slack
		} else if err != nil {
			return found{}, err
		}
		app, err := tx.GetSlackApp(ctx, th.AppID)
		if err != nil || app.TeamID != teamID {
			return found{}, notFound("question", askID)
		}
		u, err := tx.GetSlackUser(ctx, teamID, userID)
		if errors.Is(err, store.ErrNotFound) {
			return found{a: a}, nil
		}
		return found{u, a}, err
	})
	if err != nil {
		return nil, err
	}
	if f.u == nil || !helmrtype.Role(f.u.Role).Allows(helmrtype.RoleResponder) {
		return nil, &helmrtype.Error{Code: helmrtype.CodeForbidden, Message: "this Slack user may not answer questions: an operator maps Slack users to responders (helmr slack users add)",
			Details: map[string]any{"team_id": teamID, "user_id": userID}}
	}
	by := helmrtype.Responder{Kind: helmrtype.ResponderUser, ID: f.u.Identity, Slack: &helmrtype.SlackUserRef{TeamID: teamID, UserID: userID}}
	return e.RespondAsk(ctx, f.a.SessionID, f.a.TurnID, askID, helmrtype.AskRespond{Answer: answer, ResponseID: responseID}, by)
}

// slackPlace is the Slack thread a new Session owns: ThreadTS "" until its
// opening message is posted.
type slackPlace struct {
	appID, channelID, threadTS string
}

// placeSlackTx binds a new Session to its Slack thread and wakes the
// bridge when the transaction commits.
func (e *Engine) placeSlackTx(ctx context.Context, tx store.Tx, s *store.Session, p *slackPlace) error {
	s.SlackChannelID = p.channelID
	err := tx.InsertSlackThread(ctx, &store.SlackThread{SessionID: s.ID, AppID: p.appID, ChannelID: p.channelID, ThreadTS: p.threadTS, CreatedAt: s.CreatedAt})
	if errors.Is(err, store.ErrDuplicate) {
		return helmrtype.Errorf(helmrtype.CodeConflict, "Slack thread %s of channel %s already has a Session", p.threadTS, p.channelID)
	}
	return err
}
