package slackfake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Envelope types of Socket Mode deliveries.
const (
	kindEvents      = "events_api"
	kindInteractive = "interactive"
)

// ackWait is one delivery's acknowledgement: closed by the first ack of any
// of its envelopes (a late ack of an earlier attempt counts).
type ackWait struct {
	ch   chan struct{}
	once sync.Once
}

func (f *Fake) acked(envelopeID string) {
	f.mu.Lock()
	w := f.acks[envelopeID]
	f.mu.Unlock()
	if w != nil {
		w.once.Do(func() { close(w.ch) })
	}
}

// Delivery is one attempt to deliver an event or interaction to the app.
type Delivery struct {
	Kind        string    // "events_api" or "interactive"
	Type        string    // inner event type ("message", "app_mention") or "block_actions"
	EventID     string    // the event's event_id, the same on every retry; "" for interactions
	Attempt     int       // 0 for the first delivery, then 1..3 for retries
	RetryReason string    // why this attempt is a retry ("timeout", "http_error", "http_timeout", …)
	Transport   string    // "socket", "http", or "" when nobody was there to deliver to
	Acked       bool      // acknowledged (Socket Mode ack, or a 2xx answer)
	At          time.Time // when the attempt started
}

// Deliveries returns every delivery attempt so far, in order of their
// ends (echoes of the bot's own messages included).
func (f *Fake) Deliveries() []Delivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deliveries)
}

// deliveryMeta names a delivery for Deliveries.
type deliveryMeta struct{ kind, typ, eventID string }

// DeliverOptions shape a raw signed-HTTP delivery.
type DeliverOptions struct {
	Timestamp    time.Time // X-Slack-Request-Timestamp; zero means now
	BadSignature bool      // sign with a wrong secret
	Signature    string    // X-Slack-Signature as given (overrides signing)
	ContentType  string    // default: form for a body starting "payload=", JSON otherwise
}

// Deliver POSTs body to url as Slack would, with X-Slack-Request-Timestamp
// and X-Slack-Signature computed from opt, once, without retries; it
// returns the HTTP status and body of the answer.
func (f *Fake) Deliver(ctx context.Context, url string, body []byte, opt DeliverOptions) (status int, respBody []byte, err error) {
	ts := opt.Timestamp
	if ts.IsZero() {
		ts = time.Now()
	}
	h := http.Header{}
	h.Set("Content-Type", opt.ContentType)
	if opt.ContentType == "" {
		h.Set("Content-Type", contentTypeOf(body))
	}
	secret := f.signingSecret
	if opt.BadSignature {
		secret = "not-" + secret
	}
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
	h.Set("X-Slack-Signature", sign(secret, ts.Unix(), body))
	if opt.Signature != "" {
		h.Set("X-Slack-Signature", opt.Signature)
	}
	resp, err := f.post(ctx, url, body, h)
	if err != nil {
		return 0, nil, err
	}
	return resp.status, resp.body, nil
}

// VerifyURL sends url_verification to the Events URL, as Slack does when
// the Request URL is saved, and checks the challenge comes back (as the
// plain body, JSON {"challenge":…} or a form field).
func (f *Fake) VerifyURL(ctx context.Context) error {
	f.mu.Lock()
	target := f.eventsURL
	f.mu.Unlock()
	if target == "" {
		return fmt.Errorf("%w: no Events URL set", ErrNoReceiver)
	}
	challenge := randomHex(24)
	body, _ := json.Marshal(map[string]any{"token": f.verificationToken, "challenge": challenge, "type": "url_verification"})
	status, resp, err := f.Deliver(ctx, target, body, DeliverOptions{})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("%w: HTTP %d: %.200s", ErrVerifyFailed, status, resp)
	}
	var j struct {
		Challenge string `json:"challenge"`
	}
	form, _ := url.ParseQuery(string(resp))
	switch {
	case strings.TrimSpace(string(resp)) == challenge,
		json.Unmarshal(resp, &j) == nil && j.Challenge == challenge,
		form.Get("challenge") == challenge:
		return nil
	}
	return fmt.Errorf("%w: challenge not echoed: %.200s", ErrVerifyFailed, resp)
}

// Say is a person (userID) posting text in channel, in the thread of
// threadTS ("" = top level): a message event, and an app_mention event too
// when text contains "<@BOTUSERID>", each delivered (and retried) until
// acknowledged; nothing when the bot is not in the channel. text is as Slack sends it: mentions as <@U…>, and &, <, >
// of typed text escaped as &amp; &lt; &gt;. It returns the new message's
// ts; the error says when a delivery was never acknowledged.
func (f *Fake) Say(ctx context.Context, channel, threadTS, userID, text string) (ts string, err error) {
	f.mu.Lock()
	if _, ok := f.channels[channel]; !ok {
		f.mu.Unlock()
		return "", fmt.Errorf("%w: channel %q (AddChannel it)", ErrUnknown, channel)
	}
	if _, ok := f.users[userID]; !ok {
		f.mu.Unlock()
		return "", fmt.Errorf("%w: user %q (AddUser it)", ErrUnknown, userID)
	}
	parentUser := ""
	if threadTS != "" {
		parent := f.findLocked(channel, threadTS)
		if parent == nil || parent.msg.Ephemeral || parent.msg.Deleted || parent.msg.ThreadTS != "" && parent.msg.ThreadTS != parent.msg.TS {
			f.mu.Unlock()
			return "", fmt.Errorf("%w: no top-level message %s in %s to reply to", ErrUnknown, threadTS, channel)
		}
		parentUser = parent.msg.User
	}
	ts = f.nextTSLocked()
	f.posts[channel] = append(f.posts[channel], &post{msg: Message{Channel: channel, TS: ts, ThreadTS: threadTS, Text: text, User: userID}})
	outside := f.outside[channel]
	f.mu.Unlock()
	if outside {
		return ts, nil // Slack sends the app nothing from a channel its bot is not in
	}

	ev := map[string]any{"client_msg_id": uuid.NewString(), "type": "message", "text": text, "user": userID,
		"ts": ts, "blocks": richText(text), "team": teamID, "channel": channel, "event_ts": ts,
		"channel_type": channelType(channel)}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
		ev["parent_user_id"] = parentUser
	}
	body, meta := f.eventCallback(ev)
	if err := f.deliver(ctx, meta, body, true); err != nil {
		return ts, err
	}
	if !strings.Contains(text, "<@"+botUserID+">") {
		return ts, nil
	}
	mention := map[string]any{"client_msg_id": ev["client_msg_id"], "type": "app_mention", "text": text,
		"user": userID, "ts": ts, "blocks": ev["blocks"], "team": teamID, "channel": channel, "event_ts": ts}
	if threadTS != "" {
		mention["thread_ts"] = threadTS
	}
	body, meta = f.eventCallback(mention)
	return ts, f.deliver(ctx, meta, body, true)
}

// Edit is a person changing the text of their message ts in channel: a
// message event with subtype message_changed (the new message and the
// previous one), delivered and retried like Say's.
func (f *Fake) Edit(ctx context.Context, channel, ts, text string) error {
	f.mu.Lock()
	p := f.findLocked(channel, ts)
	if p == nil || p.bot || p.msg.Deleted {
		f.mu.Unlock()
		return fmt.Errorf("%w: no person's message %s in %s", ErrUnknown, ts, channel)
	}
	prev := p.msg.clone()
	p.msg.Edits = append(p.msg.Edits, p.msg.Text)
	p.msg.Text = text
	cur := p.msg.clone()
	eventTS := f.nextTSLocked()
	f.mu.Unlock()
	show := func(m Message) map[string]any {
		out := map[string]any{"type": "message", "user": m.User, "text": m.Text, "ts": m.TS, "team": teamID, "blocks": richText(m.Text)}
		if m.ThreadTS != "" {
			out["thread_ts"] = m.ThreadTS
		}
		return out
	}
	now := show(cur)
	now["edited"] = map[string]any{"user": prev.User, "ts": eventTS}
	ev := map[string]any{"type": "message", "subtype": "message_changed", "hidden": true, "channel": channel,
		"ts": eventTS, "event_ts": eventTS, "channel_type": channelType(channel), "message": now, "previous_message": show(prev)}
	body, meta := f.eventCallback(ev)
	return f.deliver(ctx, meta, body, true)
}

// Click is a person (userID) clicking a button (block_actions) in the bot's
// message messageTS in channel: actionID must name a button in that
// message's blocks and value, when not "", must be the button's value.
// Slack does not retry interactions: the error says when the delivery was
// not acknowledged within the ack timeout.
func (f *Fake) Click(ctx context.Context, userID, channel, messageTS, actionID, value string) error {
	f.mu.Lock()
	p := f.findLocked(channel, messageTS)
	userName, knownUser := f.users[userID]
	channelName := f.channels[channel]
	var m Message
	if p != nil {
		m = p.msg.clone()
	}
	f.mu.Unlock()
	switch {
	case !knownUser:
		return fmt.Errorf("%w: user %q (AddUser it)", ErrUnknown, userID)
	case p == nil || !p.bot || m.Deleted:
		return fmt.Errorf("%w: no bot message %s in %s", ErrUnknown, messageTS, channel)
	case m.Ephemeral && m.EphemeralUser != userID:
		return fmt.Errorf("%w: ephemeral message %s is shown to %s only", ErrUnknown, messageTS, m.EphemeralUser)
	}
	act, ok := findAction(m.Blocks, actionID)
	if !ok {
		return fmt.Errorf("%w: message %s has no element with action_id %q", ErrUnknown, messageTS, actionID)
	}
	if value != "" && value != act.Value {
		return fmt.Errorf("%w: element %q has value %q, not %q", ErrUnknown, actionID, act.Value, value)
	}
	action := map[string]any{"action_id": actionID, "block_id": act.BlockID, "type": act.Type,
		"action_ts": formatTS(time.Now().UnixMicro())}
	if act.Text != nil {
		action["text"] = act.Text
	}
	if act.Value != "" {
		action["value"] = act.Value
	}
	if act.Style != "" {
		action["style"] = act.Style
	}
	container := map[string]any{"type": "message", "message_ts": m.TS, "channel_id": channel, "is_ephemeral": m.Ephemeral}
	if m.ThreadTS != "" {
		container["thread_ts"] = m.ThreadTS
	}
	payload := map[string]any{"type": "block_actions",
		"user":       map[string]any{"id": userID, "username": userName, "name": userName, "team_id": teamID},
		"api_app_id": appID, "token": f.verificationToken, "container": container,
		"trigger_id": fmt.Sprintf("%d.%s", time.Now().UnixMilli(), randomHex(8)),
		"team":       map[string]any{"id": teamID, "domain": teamDomain}, "enterprise": nil, "is_enterprise_install": false,
		"channel": map[string]any{"id": channel, "name": channelName},
		"state":   map[string]any{"values": map[string]any{}},
		"actions": []any{action}}
	if !m.Ephemeral {
		payload["message"] = messageJSON(m)
	}
	f.mu.Lock()
	payload["response_url"] = f.newResponseURLLocked(channel, m.TS, userID)
	f.mu.Unlock()
	b, _ := json.Marshal(payload)
	return f.deliver(ctx, deliveryMeta{kind: kindInteractive, typ: "block_actions"}, b, false)
}

// action is a clickable element found in a message's blocks.
type action struct {
	BlockID, Type, Value, Style string
	Text                        json.RawMessage
}

// findAction looks for the element with actionID in blocks (actions
// blocks' elements and sections' accessories). A block without block_id
// gets a stable generated one, as Slack assigns one to every block.
func findAction(blocks json.RawMessage, actionID string) (action, bool) {
	var bs []struct {
		Type      string            `json:"type"`
		BlockID   string            `json:"block_id"`
		Elements  []json.RawMessage `json:"elements"`
		Accessory json.RawMessage   `json:"accessory"`
	}
	if json.Unmarshal(blocks, &bs) != nil {
		return action{}, false
	}
	for i, b := range bs {
		elems := b.Elements
		if b.Accessory != nil {
			elems = append(elems, b.Accessory)
		}
		for _, raw := range elems {
			var e struct {
				ActionID string          `json:"action_id"`
				Type     string          `json:"type"`
				Value    string          `json:"value"`
				Style    string          `json:"style"`
				Text     json.RawMessage `json:"text"`
			}
			if json.Unmarshal(raw, &e) != nil || e.ActionID != actionID {
				continue
			}
			id := b.BlockID
			if id == "" {
				id = fmt.Sprintf("b%03d", i)
			}
			return action{BlockID: id, Type: e.Type, Value: e.Value, Style: e.Style, Text: e.Text}, true
		}
	}
	return action{}, false
}

// findLocked is the post with ts in channel, or nil; f.mu must be held.
func (f *Fake) findLocked(channel, ts string) *post {
	for _, p := range f.posts[channel] {
		if p.msg.TS == ts {
			return p
		}
	}
	return nil
}

// echoLocked delivers the bot's own new message back to the app, in the
// background and without retries, as Slack does; f.mu must be held.
func (f *Fake) echoLocked(m Message) {
	ev := messageJSON(m)
	ev["channel"], ev["event_ts"], ev["channel_type"] = m.Channel, m.TS, channelType(m.Channel)
	ev["bot_profile"] = map[string]any{"id": botID, "app_id": appID, "name": botName, "team_id": teamID}
	body, meta := f.eventCallback(ev)
	if f.ctx.Err() != nil {
		return
	}
	f.wg.Go(func() { _ = f.deliver(f.ctx, meta, body, false) })
}

// eventCallback wraps an inner event in the Events API envelope
// (type event_callback) with a fresh event_id.
func (f *Fake) eventCallback(inner map[string]any) ([]byte, deliveryMeta) {
	id := randomID("Ev0")
	b, _ := json.Marshal(map[string]any{"token": f.verificationToken, "team_id": teamID, "context_team_id": teamID,
		"api_app_id": appID, "event": inner, "type": "event_callback", "event_id": id,
		"event_time": time.Now().Unix(), "is_ext_shared_channel": false, "event_context": "4-" + randomHex(20),
		"authorizations": []any{map[string]any{"enterprise_id": nil, "team_id": teamID, "user_id": botUserID,
			"is_bot": true, "is_enterprise_install": false}}})
	typ, _ := inner["type"].(string)
	return b, deliveryMeta{kind: kindEvents, typ: typ, eventID: id}
}

var mentionRE = regexp.MustCompile(`<@([A-Z0-9]+)>`)

// richText is the rich_text block Slack's clients attach to a typed
// message: text runs and user mentions.
func richText(text string) []any {
	var elems []any
	last := 0
	for _, loc := range mentionRE.FindAllStringSubmatchIndex(text, -1) {
		if loc[0] > last {
			elems = append(elems, map[string]any{"type": "text", "text": text[last:loc[0]]})
		}
		elems = append(elems, map[string]any{"type": "user", "user_id": text[loc[2]:loc[3]]})
		last = loc[1]
	}
	if last < len(text) {
		elems = append(elems, map[string]any{"type": "text", "text": text[last:]})
	}
	return []any{map[string]any{"type": "rich_text", "block_id": randomHex(3),
		"elements": []any{map[string]any{"type": "rich_text_section", "elements": elems}}}}
}

// deliver sends one payload until acknowledged: over Socket Mode when a
// client is connected, else as a signed POST to the Request URL; with
// retries, up to maxRetries more attempts with the same payload (so the
// same event_id), as Slack retries events.
func (f *Fake) deliver(ctx context.Context, meta deliveryMeta, payload []byte, retry bool) error {
	attempts := 1
	if retry {
		attempts += maxRetries
	}
	w := &ackWait{ch: make(chan struct{})}
	var envelopes []string
	defer func() {
		f.mu.Lock()
		for _, id := range envelopes {
			delete(f.acks, id)
		}
		f.mu.Unlock()
	}()
	var reason string
	var why []string
	for a := range attempts {
		if a > 0 {
			if err := f.retryWait(ctx, a, w); err != nil {
				return err
			}
		}
		select {
		case <-w.ch: // a late ack of the last attempt: no retry needed
			return nil
		default:
		}
		d := Delivery{Kind: meta.kind, Type: meta.typ, EventID: meta.eventID, Attempt: a, RetryReason: reason, At: time.Now()}
		ok, r, stop := f.attempt(ctx, meta.kind, payload, a, reason, w, &envelopes, &d)
		d.Acked = ok
		f.mu.Lock()
		f.deliveries = append(f.deliveries, d)
		f.mu.Unlock()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ok {
			return nil
		}
		reason = r
		why = append(why, r)
		if stop {
			break
		}
	}
	return fmt.Errorf("%w: %s %s delivery, attempts: %s", ErrNotAcknowledged, meta.kind, meta.typ, strings.Join(why, ", "))
}

// retryWait waits out the delay before retry n (SetRetryDelays), or
// until a late ack makes the retry needless.
func (f *Fake) retryWait(ctx context.Context, n int, w *ackWait) error {
	f.mu.Lock()
	ds := f.retryDelays
	f.mu.Unlock()
	if len(ds) == 0 {
		return nil
	}
	t := time.NewTimer(ds[min(n, len(ds))-1])
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.ch:
	case <-ctx.Done():
		return ctx.Err()
	case <-f.ctx.Done():
		return f.ctx.Err()
	}
	return nil
}

// attempt is one delivery attempt; it reports whether it was acknowledged,
// the retry reason if not, and whether the app asked for no retries.
func (f *Fake) attempt(ctx context.Context, kind string, payload []byte, attempt int, reason string, w *ackWait, envelopes *[]string, d *Delivery) (ok bool, why string, stop bool) {
	f.mu.Lock()
	timeout := f.ackTimeout
	f.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for {
		f.mu.Lock()
		s := f.pickSocketLocked()
		target := f.eventsURL
		if kind == kindInteractive {
			target = f.interactivityURL
		}
		changed := f.changed
		f.mu.Unlock()
		d.Transport = ""
		switch {
		case s != nil:
			d.Transport = "socket"
			ok, why, stop, sent := f.socketAttempt(ctx, s, kind, payload, attempt, reason, w, envelopes, deadline)
			if sent || time.Now().After(deadline) {
				return ok, why, stop
			}
			continue // the connection broke under the write: try another, or wait for one
		case target != "":
			d.Transport = "http"
			return f.httpAttempt(ctx, target, kind, payload, attempt, reason, deadline)
		}
		// Nobody to deliver to (a Socket Mode client may be reconnecting):
		// wait for a connection until the attempt's time is up.
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-changed:
			t.Stop()
		case <-t.C:
			return false, "connection_failed (" + ErrNoReceiver.Error() + ")", false
		case <-ctx.Done():
			t.Stop()
			return false, "", true
		case <-f.ctx.Done():
			t.Stop()
			return false, "fake closed", true
		}
	}
}

// socketAttempt sends one envelope and waits for its ack; sent is false
// when the write failed (the connection is then closed).
func (f *Fake) socketAttempt(ctx context.Context, s *socket, kind string, payload []byte, attempt int, reason string, w *ackWait, envelopes *[]string, deadline time.Time) (ok bool, why string, stop, sent bool) {
	id := uuid.NewString()
	f.mu.Lock()
	f.acks[id] = w
	*envelopes = append(*envelopes, id)
	f.mu.Unlock()
	env := map[string]any{"envelope_id": id, "payload": json.RawMessage(payload), "type": kind, "accepts_response_payload": false}
	if kind == kindEvents {
		env["retry_attempt"], env["retry_reason"] = attempt, reason
	}
	b, _ := json.Marshal(env)
	if err := s.write(b); err != nil {
		s.cancel()
		return false, "timeout", false, false
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-w.ch:
		return true, "", false, true
	case <-t.C:
		return false, "timeout", false, true
	case <-s.ctx.Done():
		return false, "timeout", false, true
	case <-ctx.Done():
		return false, "", true, true
	}
}

func (f *Fake) httpAttempt(ctx context.Context, target, kind string, payload []byte, attempt int, reason string, deadline time.Time) (bool, string, bool) {
	body := payload
	if kind == kindInteractive {
		body = []byte("payload=" + url.QueryEscape(string(payload)))
	}
	now := time.Now().Unix()
	h := http.Header{}
	h.Set("Content-Type", contentTypeOf(body))
	h.Set("X-Slack-Request-Timestamp", strconv.FormatInt(now, 10))
	h.Set("X-Slack-Signature", sign(f.signingSecret, now, body))
	if attempt > 0 {
		h.Set("X-Slack-Retry-Num", strconv.Itoa(attempt))
		h.Set("X-Slack-Retry-Reason", reason)
	}
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	resp, err := f.post(actx, target, body, h)
	switch {
	case ctx.Err() != nil:
		return false, "", true
	case errors.Is(err, context.DeadlineExceeded):
		return false, "http_timeout", false
	case err != nil:
		return false, "connection_failed", false
	case resp.status/100 == 2:
		return true, "", false
	default:
		return false, "http_error", resp.noRetry
	}
}

// answer is an app's HTTP answer to a delivery.
type answer struct {
	status  int
	body    []byte
	noRetry bool // X-Slack-No-Retry: 1
}

func (f *Fake) post(ctx context.Context, target string, body []byte, h http.Header) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header = h
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	resp, err := f.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return answer{}, err
	}
	return answer{status: resp.StatusCode, body: b, noRetry: resp.Header.Get("X-Slack-No-Retry") == "1"}, nil
}

func contentTypeOf(body []byte) string {
	if bytes.HasPrefix(body, []byte("payload=")) {
		return "application/x-www-form-urlencoded"
	}
	return "application/json"
}

// sign is Slack's v0 request signature of body at unix time ts.
func sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%d:", ts)
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}
