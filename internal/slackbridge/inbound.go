package slackbridge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
)

// replayWindow is how far a request's timestamp may be from now, and how
// long a handled request's signature is remembered.
const replayWindow = 5 * time.Minute

// maxBody bounds an Events API or interactivity request.
const maxBody = 1 << 20

// EventsHandler serves the Events API Request URL (POST /slack/events):
// the signature is verified with a connected app's signing secret, the
// timestamp must be within 5 minutes and a request is taken once;
// url_verification is answered. The request is durable before the 200.
func (b *Bridge) EventsHandler() http.Handler {
	return b.verified(func(ctx context.Context, w http.ResponseWriter, app *store.SlackApp, body []byte) error {
		var probe struct {
			Type      string `json:"type"`
			Challenge string `json:"challenge"`
		}
		if err := json.Unmarshal(body, &probe); err != nil {
			return &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "the body is not JSON"}
		}
		if probe.Type == "url_verification" {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]string{"challenge": probe.Challenge})
			return nil
		}
		if err := b.handleCallback(ctx, app, body); err != nil {
			return err
		}
		w.WriteHeader(http.StatusOK)
		return nil
	})
}

// InteractivityHandler serves the Interactivity Request URL (POST
// /slack/interactivity): button clicks on questions, verified as the
// Events API's requests are.
func (b *Bridge) InteractivityHandler() http.Handler {
	return b.verified(func(ctx context.Context, w http.ResponseWriter, app *store.SlackApp, body []byte) error {
		form, err := parseForm(body)
		if err != nil {
			return &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "the body is not a form with a payload field"}
		}
		var cb slack.InteractionCallback
		if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
			return &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "payload is not an interaction JSON"}
		}
		b.handleInteraction(ctx, app, &cb)
		w.WriteHeader(http.StatusOK)
		return nil
	})
}

// verified checks a request's Slack signature against every app in
// Events API mode and runs h with the app whose secret signs it.
func (b *Bridge) verified(h func(context.Context, http.ResponseWriter, *store.SlackApp, []byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			writeError(w, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "use POST"}, http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			writeError(w, &helmrtype.Error{Code: helmrtype.CodeLimitExceeded, Message: "the body is over 1 MiB"}, 0)
			return
		}
		app, err := b.verify(r.Context(), r.Header, body)
		if err != nil {
			b.log.Warn("slack request refused", "path", r.URL.Path, "reason", errMessage(err))
			writeError(w, err, 0)
			return
		}
		sig := r.Header.Get("X-Slack-Signature")
		if err := h(r.Context(), w, app, body); err != nil {
			b.log.Error("slack request failed", "path", r.URL.Path, "err", err)
			writeError(w, err, 0)
			return
		}
		b.remember(sig)
	})
}

// verify finds the app whose signing secret signs the request.
func (b *Bridge) verify(ctx context.Context, h http.Header, body []byte) (*store.SlackApp, error) {
	apps, err := b.eng.SlackApps(ctx)
	if err != nil {
		return nil, err
	}
	stale := false
	for i := range apps {
		a := &apps[i]
		if a.Mode != helmrtype.SlackModeEvents {
			continue
		}
		c, err := b.credentials(a)
		if err != nil || c.SigningSecret == "" {
			continue
		}
		v, err := slack.NewSecretsVerifier(h, c.SigningSecret)
		if errors.Is(err, slack.ErrExpiredTimestamp) {
			stale = true
			continue
		}
		if err != nil {
			continue
		}
		v.Write(body)
		if v.Ensure() != nil {
			continue
		}
		if b.replayed(h.Get("X-Slack-Signature")) {
			return nil, &helmrtype.Error{Code: helmrtype.CodeUnauthorized, Message: "this signed request was already taken (replay)"}
		}
		return a, nil
	}
	if stale {
		return nil, &helmrtype.Error{Code: helmrtype.CodeUnauthorized, Message: "the request's timestamp is more than 5 minutes from now"}
	}
	return nil, &helmrtype.Error{Code: helmrtype.CodeUnauthorized, Message: "the request's Slack signature does not match a connected app's signing secret"}
}

func (b *Bridge) replayed(sig string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for s, at := range b.seen {
		if now.Sub(at) > replayWindow {
			delete(b.seen, s)
		}
	}
	_, ok := b.seen[sig]
	return ok
}

func (b *Bridge) remember(sig string) {
	b.mu.Lock()
	b.seen[sig] = time.Now()
	b.mu.Unlock()
}

func writeError(w http.ResponseWriter, err error, status int) {
	code := helmrtype.CodeOf(err)
	if code == "" {
		code = helmrtype.CodeInternal
	}
	if status == 0 {
		status = helmrtype.HTTPStatus(code)
	}
	msg := errMessage(err)
	if code == helmrtype.CodeInternal {
		msg = "internal error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg}})
}

// runSocket keeps a Socket Mode connection of the app open until ctx
// ends, acknowledging each envelope once what it asks for is durable.
func (b *Bridge) runSocket(ctx context.Context, app store.SlackApp) {
	c, err := b.credentials(&app)
	if err != nil {
		b.log.Error("slack app credentials", "app", app.ID, "err", err)
		return
	}
	smc := socketmode.New(b.client(c.BotToken, slack.OptionAppLevelToken(c.AppToken)))
	runDone := make(chan error, 1)
	go func() { runDone <- smc.RunContext(ctx) }()
	for {
		select {
		case <-ctx.Done():
			<-runDone
			return
		case err := <-runDone:
			if ctx.Err() == nil {
				b.log.Warn("slack socket mode ended; reconnecting", "app", app.ID, "err", err)
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
			return // the manager starts it again
		case evt := <-smc.Events:
			switch evt.Type {
			case socketmode.EventTypeEventsAPI:
				if err := b.handleCallback(ctx, &app, evt.Request.Payload); err != nil {
					b.log.Error("slack event", "app", app.ID, "err", err)
					continue // no ack: Slack retries
				}
				smc.Ack(*evt.Request)
			case socketmode.EventTypeInteractive:
				var cb slack.InteractionCallback
				if err := json.Unmarshal(evt.Request.Payload, &cb); err == nil {
					b.handleInteraction(ctx, &app, &cb)
				}
				smc.Ack(*evt.Request)
			case socketmode.EventTypeInvalidAuth:
				b.log.Error("slack refused the app-level token", "app", app.ID)
			case socketmode.EventTypeConnected:
				b.log.Info("slack socket mode connected", "app", app.ID)
			}
		}
	}
}

var mentionRE = regexp.MustCompile(`<@[A-Z0-9]+>`)

// parseCallback reads an event_callback: the user's message it carries
// as SlackInbound, ok false when it is nothing for a Session (another
// event type, the bot's own or another bot's message, an edit or other
// subtype, a top-level message without a mention), err when it is not
// JSON.
func parseCallback(app *store.SlackApp, body []byte) (in engine.SlackInbound, ok bool, err error) {
	var cb struct {
		Type    string          `json:"type"`
		EventID string          `json:"event_id"`
		Event   json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(body, &cb); err != nil {
		return in, false, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "the event is not JSON"}
	}
	if cb.Type != "event_callback" || cb.EventID == "" {
		return in, false, nil
	}
	var ev struct {
		Type     string `json:"type"`
		SubType  string `json:"subtype"`
		BotID    string `json:"bot_id"`
		User     string `json:"user"`
		Text     string `json:"text"`
		TS       string `json:"ts"`
		ThreadTS string `json:"thread_ts"`
		Channel  string `json:"channel"`
	}
	if err := json.Unmarshal(cb.Event, &ev); err != nil {
		return in, false, nil
	}
	if ev.Type != "message" && ev.Type != "app_mention" || ev.SubType != "" || ev.BotID != "" || ev.User == "" || ev.User == app.BotUserID ||
		ev.Channel == "" || ev.TS == "" {
		return in, false, nil
	}
	if ev.Type == "message" && ev.ThreadTS == "" {
		return in, false, nil // a top-level message opens nothing; its app_mention may
	}
	text := ev.Text
	if ev.Type == "app_mention" {
		text = strings.TrimSpace(mentionRE.ReplaceAllString(text, ""))
	}
	return engine.SlackInbound{AppID: app.ID, EventID: cb.EventID, TeamID: app.TeamID, ChannelID: ev.Channel, ThreadTS: ev.ThreadTS,
		MessageTS: ev.TS, UserID: ev.User, Text: text, Mention: ev.Type == "app_mention"}, true, nil
}

// handleCallback takes one event_callback: a user's message in a
// Session's thread, or a mention of the bot that opens a Session.
func (b *Bridge) handleCallback(ctx context.Context, app *store.SlackApp, body []byte) error {
	in, ok, err := parseCallback(app, body)
	if !ok {
		return err
	}
	out, err := b.handleMessage(ctx, in)
	if err != nil {
		if c := helmrtype.CodeOf(err); c == helmrtype.CodeInternal || c == helmrtype.CodeUnavailable || c == "" {
			return err // not acknowledged: Slack retries
		}
		// A refusal of the input (closed Session, invalid input, no
		// deployment …): say so in the thread, and take the event.
		out = &engine.SlackOutcome{Action: engine.SlackReply, Reply: "Not sent: " + errMessage(err), ThreadTS: firstNonEmpty(in.ThreadTS, in.MessageTS)}
	}
	switch out.Action {
	case engine.SlackReply:
		b.reply(ctx, app, in.ChannelID, out.ThreadTS, out.Reply)
	case engine.SlackAnswer:
		answer, _ := json.Marshal(in.Text)
		if _, err := b.eng.SlackAnswer(ctx, app.TeamID, in.UserID, out.AskID, answer, "slack:"+in.EventID); err != nil {
			b.ephemeral(ctx, app, in.ChannelID, out.ThreadTS, in.UserID, "Your reply did not answer the question: "+errMessage(err))
		}
	}
	return nil
}

// handleMessage hands a message to the engine, trying again for a while
// when a thread's opening message in its channel is being posted (on this
// node the opening lock makes that wait; on another, the engine says
// unavailable).
func (b *Bridge) handleMessage(ctx context.Context, in engine.SlackInbound) (*engine.SlackOutcome, error) {
	deadline := time.Now().Add(2 * time.Second)
	l := b.opening(in.AppID, in.ChannelID)
	for {
		l.RLock()
		out, err := b.eng.HandleSlackMessage(ctx, in)
		l.RUnlock()
		if helmrtype.CodeOf(err) != helmrtype.CodeUnavailable || time.Now().After(deadline) {
			return out, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// askAction prefixes the action_id of a question's buttons
// (helmr_ask:ASK_ID:OPTION_ID, unique in the message); the value is the
// option's ID.
const askAction = "helmr_ask:"

// handleInteraction answers a question from a button click, when the
// user may answer; otherwise it tells the user only.
func (b *Bridge) handleInteraction(ctx context.Context, app *store.SlackApp, cb *slack.InteractionCallback) {
	if cb.Type != slack.InteractionTypeBlockActions {
		return
	}
	for _, a := range cb.ActionCallback.BlockActions {
		rest, ok := strings.CutPrefix(a.ActionID, askAction)
		askID, _, _ := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		answer, _ := json.Marshal(map[string]any{"selected": []map[string]string{{"id": a.Value}}})
		_, err := b.eng.SlackAnswer(ctx, app.TeamID, cb.User.ID, askID, b.choiceAnswer(ctx, askID, a.Value, answer), "slack:"+cb.User.ID+":"+askID)
		if err != nil {
			b.ephemeral(ctx, app, cb.Channel.ID, firstNonEmpty(cb.Message.ThreadTimestamp, cb.Container.ThreadTs), cb.User.ID,
				"Your answer was not taken: "+errMessage(err))
		}
	}
}

// choiceAnswer is the answer selecting one option: its ID and value, as
// the question declares them.
func (b *Bridge) choiceAnswer(ctx context.Context, askID, optionID string, fallback json.RawMessage) json.RawMessage {
	st, err := b.eng.GetAskByID(ctx, askID)
	if err != nil {
		return fallback
	}
	for _, o := range st.Question.Answer.Options {
		if o.ID == optionID {
			out, _ := json.Marshal(helmrtype.ChoiceAnswer{Selected: []helmrtype.SelectedOption{{ID: o.ID, Value: o.Value}}})
			return out
		}
	}
	return fallback
}

// reply posts a short notice in a thread, best effort.
func (b *Bridge) reply(ctx context.Context, app *store.SlackApp, channel, threadTS, text string) {
	c, err := b.credentials(app)
	if err != nil {
		return
	}
	err = b.call(ctx, func() error {
		_, _, err := b.client(c.BotToken).PostMessageContext(ctx, channel, slack.MsgOptionText(text, false), slack.MsgOptionTS(threadTS))
		return err
	})
	if err != nil {
		b.log.Warn("slack reply not posted", "channel", channel, "err", err)
	}
}

// ephemeral tells one user something in a thread, best effort.
func (b *Bridge) ephemeral(ctx context.Context, app *store.SlackApp, channel, threadTS, user, text string) {
	c, err := b.credentials(app)
	if err != nil {
		return
	}
	err = b.call(ctx, func() error {
		opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
		if threadTS != "" {
			opts = append(opts, slack.MsgOptionTS(threadTS))
		}
		_, err := b.client(c.BotToken).PostEphemeralContext(ctx, channel, user, opts...)
		return err
	})
	if err != nil {
		b.log.Warn("slack ephemeral not posted", "channel", channel, "err", err)
	}
}

// errMessage is an error's message for a person.
func errMessage(err error) string {
	var he *helmrtype.Error
	if errors.As(err, &he) {
		return he.Message
	}
	return err.Error()
}

func parseForm(body []byte) (url.Values, error) {
	v, err := url.ParseQuery(string(body))
	if err == nil && v.Get("payload") == "" {
		err = errors.New("no payload")
	}
	return v, err
}
