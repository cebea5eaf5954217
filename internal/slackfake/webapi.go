package slackfake

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxTextLen is the longest text chat.postMessage and chat.update accept
// (characters); longer gives msg_too_long.
const maxTextLen = 40000

// apiError is a Web API refusal: Slack's error code and, for invalid_blocks,
// the per-field reasons Slack lists in "errors".
type apiError struct {
	code    string
	reasons []string
}

// params are a Web API call's arguments, from a form (query and body) or a
// JSON object body; JSON values other than strings keep their JSON text.
type params map[string]string

func (f *Fake) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := r.PathValue("method")
	now := time.Now()
	f.mu.Lock()
	f.calls[method] = append(f.calls[method], now)
	var fail *Failure
	if fs := f.failures[method]; len(fs) > 0 {
		fail = &fs[0]
		f.failures[method] = fs[1:]
	} else if wait, limited := f.limitedLocked(method, now); limited {
		fail = &Failure{Status: http.StatusTooManyRequests, RetryAfter: max(wait, time.Second), Error: "ratelimited"}
	}
	f.mu.Unlock()
	if fail != nil && !fail.Applied {
		writeFailure(w, *fail)
		return
	}
	p, token, err := readParams(r)
	if err != nil {
		writeError(w, apiError{code: "invalid_form_data"})
		return
	}
	want := f.botToken
	if method == "apps.connections.open" {
		want = f.appToken
	}
	switch {
	case token == "":
		writeError(w, apiError{code: "not_authed"})
		return
	case token != want:
		writeError(w, apiError{code: "invalid_auth"})
		return
	}
	var res map[string]any
	var aerr *apiError
	switch method {
	case "auth.test":
		res = map[string]any{"url": "https://" + teamDomain + ".slack.com/", "team": teamName, "user": botName,
			"team_id": teamID, "user_id": botUserID, "bot_id": botID, "is_enterprise_install": false}
	case "apps.connections.open":
		res = f.connectionsOpen()
	case "chat.postMessage":
		res, aerr = f.postMessage(p, false)
	case "chat.postEphemeral":
		res, aerr = f.postMessage(p, true)
	case "chat.update":
		res, aerr = f.updateMessage(p)
	case "chat.delete":
		res, aerr = f.deleteMessage(p)
	case "chat.getPermalink":
		res, aerr = f.permalink(p)
	case "conversations.replies":
		res, aerr = f.replies(p)
	case "conversations.history":
		res, aerr = f.history(p)
	case "users.info":
		res, aerr = f.userInfo(p)
	case "conversations.info":
		res, aerr = f.conversationInfo(p)
	default:
		aerr = &apiError{code: "unknown_method"}
	}
	switch {
	case fail != nil: // applied, and its answer lost
		writeFailure(w, *fail)
		return
	case aerr != nil:
		writeError(w, *aerr)
		return
	}
	res["ok"] = true
	writeJSON(w, http.StatusOK, res)
}

// readParams reads a call's arguments and its token (Authorization: Bearer,
// or the "token" argument as slack-go's form methods send it).
func readParams(r *http.Request) (params, string, error) {
	p := params{}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" {
		var raw map[string]json.RawMessage
		if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 8<<20)).Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
			return nil, "", err
		}
		for k, v := range raw {
			var s string
			if json.Unmarshal(v, &s) == nil {
				p[k] = s
			} else {
				p[k] = string(v)
			}
		}
		for k, v := range r.URL.Query() {
			p[k] = v[0]
		}
	} else {
		r.Body = http.MaxBytesReader(nil, r.Body, 8<<20)
		if err := r.ParseForm(); err != nil {
			return nil, "", err
		}
		for k, v := range r.Form {
			p[k] = v[0]
		}
	}
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if token == "" {
		token = p["token"]
	}
	return p, token, nil
}

func (f *Fake) connectionsOpen() map[string]any {
	ticket := randomHex(16)
	f.mu.Lock()
	f.tickets[ticket] = true
	f.mu.Unlock()
	u := "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/link/?" + url.Values{"ticket": {ticket}, "app_id": {appID}}.Encode()
	return map[string]any{"url": u}
}

func (f *Fake) postMessage(p params, ephemeral bool) (map[string]any, *apiError) {
	channel := p["channel"]
	blocks, aerr := checkContent(p, true)
	if aerr != nil {
		return nil, aerr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if code := f.channelErrLocked(channel, false); code != "" {
		return nil, &apiError{code: code}
	}
	m := Message{Channel: channel, ThreadTS: p["thread_ts"], Text: p["text"], User: botUserID, Blocks: blocks, Ephemeral: ephemeral}
	if raw := p["metadata"]; raw != "" {
		var md struct {
			EventType    string         `json:"event_type"`
			EventPayload map[string]any `json:"event_payload"`
		}
		if json.Unmarshal([]byte(raw), &md) != nil || md.EventType == "" || md.EventPayload == nil || ephemeral {
			return nil, &apiError{code: "invalid_metadata_format"}
		}
		m.Metadata = json.RawMessage(raw)
	}
	if ephemeral {
		if _, ok := f.users[p["user"]]; !ok || p["user"] == "" {
			return nil, &apiError{code: "user_not_in_channel"}
		}
		m.EphemeralUser = p["user"]
	}
	m = f.addBotPostLocked(m)
	if ephemeral {
		return map[string]any{"message_ts": m.TS}, nil
	}
	return map[string]any{"channel": channel, "ts": m.TS, "message": messageJSON(m)}, nil
}

func (f *Fake) updateMessage(p params) (map[string]any, *apiError) {
	channel, ts := p["channel"], p["ts"]
	blocks, aerr := checkContent(p, false)
	if aerr != nil {
		return nil, aerr
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	target, aerr := f.botMessageLocked(channel, ts, "cant_update_message")
	if aerr != nil {
		return nil, aerr
	}
	text, hasText := p["text"]
	m := f.editLocked(target, text, hasText, blocks)
	return map[string]any{"channel": channel, "ts": ts, "text": m.Text, "message": messageJSON(m)}, nil
}

// addBotPostLocked posts m as the bot with a new ts (echoing it to the
// app when SetEchoBotMessages is on); f.mu must be held.
func (f *Fake) addBotPostLocked(m Message) Message {
	m.TS = f.nextTSLocked()
	f.posts[m.Channel] = append(f.posts[m.Channel], &post{msg: m, bot: true})
	f.versions[m.Channel] = append(f.versions[m.Channel], m.clone())
	f.notifyLocked()
	if f.echoBot && !m.Ephemeral {
		f.echoLocked(m)
	}
	return m
}

// botMessageLocked finds the bot's (not ephemeral, not deleted) message ts
// in channel, for a change; notOwn is the error code when the message is a
// person's. f.mu must be held.
func (f *Fake) botMessageLocked(channel, ts, notOwn string) (*post, *apiError) {
	if code := f.channelErrLocked(channel, false); code != "" {
		return nil, &apiError{code: code}
	}
	target := f.findLocked(channel, ts)
	switch {
	case target == nil || target.msg.Ephemeral || target.msg.Deleted:
		return nil, &apiError{code: "message_not_found"}
	case !target.bot:
		return nil, &apiError{code: notOwn}
	}
	return target, nil
}

// editLocked records a new version of a bot message: text when hasText,
// blocks when not nil (Slack keeps what an update leaves out). f.mu must
// be held.
func (f *Fake) editLocked(target *post, text string, hasText bool, blocks json.RawMessage) Message {
	m := &target.msg
	m.Edits = append(m.Edits, m.Text)
	if hasText {
		m.Text = text
	}
	if blocks != nil {
		m.Blocks = blocks
	}
	f.versions[m.Channel] = append(f.versions[m.Channel], m.clone())
	f.notifyLocked()
	return m.clone()
}

// deleteLocked marks a bot message deleted; f.mu must be held.
func (f *Fake) deleteLocked(target *post) {
	target.msg.Deleted = true
	f.versions[target.msg.Channel] = append(f.versions[target.msg.Channel], target.msg.clone())
	f.notifyLocked()
}

func (f *Fake) deleteMessage(p params) (map[string]any, *apiError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	target, aerr := f.botMessageLocked(p["channel"], p["ts"], "cant_delete_message")
	if aerr != nil {
		return nil, aerr
	}
	f.deleteLocked(target)
	return map[string]any{"channel": p["channel"], "ts": p["ts"]}, nil
}

func (f *Fake) permalink(p params) (map[string]any, *apiError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	channel, ts := p["channel"], p["message_ts"]
	if code := f.channelErrLocked(channel, false); code != "" {
		return nil, &apiError{code: code}
	}
	if q := f.findLocked(channel, ts); q == nil || q.msg.Deleted || q.msg.Ephemeral {
		return nil, &apiError{code: "message_not_found"}
	}
	return map[string]any{"channel": channel,
		"permalink": "https://" + teamDomain + ".slack.com/archives/" + channel + "/p" + strings.ReplaceAll(ts, ".", "")}, nil
}

// replies is conversations.replies: the thread's parent and its replies,
// oldest first, in one page.
func (f *Fake) replies(p params) (map[string]any, *apiError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	channel, ts := p["channel"], p["ts"]
	if code := f.channelErrLocked(channel, false); code != "" {
		return nil, &apiError{code: code}
	}
	parent := f.findLocked(channel, ts)
	if parent == nil || parent.msg.Deleted || parent.msg.Ephemeral {
		return nil, &apiError{code: "thread_not_found"}
	}
	root := ts
	if parent.msg.ThreadTS != "" {
		root = parent.msg.ThreadTS
	}
	msgs := []any{}
	for _, q := range f.posts[channel] {
		if q.msg.Deleted || q.msg.Ephemeral || (q.msg.TS != root && q.msg.ThreadTS != root) {
			continue
		}
		msgs = append(msgs, f.listedJSONLocked(q, p))
	}
	return map[string]any{"messages": msgs, "has_more": false, "response_metadata": map[string]any{"next_cursor": ""}}, nil
}

// history is conversations.history: the channel's top-level messages,
// newest first, in one page.
func (f *Fake) history(p params) (map[string]any, *apiError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	channel := p["channel"]
	if code := f.channelErrLocked(channel, false); code != "" {
		return nil, &apiError{code: code}
	}
	msgs := []any{}
	ps := f.posts[channel]
	for i := len(ps) - 1; i >= 0; i-- {
		q := ps[i]
		if q.msg.Deleted || q.msg.Ephemeral || (q.msg.ThreadTS != "" && q.msg.ThreadTS != q.msg.TS) {
			continue
		}
		msgs = append(msgs, f.listedJSONLocked(q, p))
	}
	return map[string]any{"messages": msgs, "has_more": false, "pin_count": 0,
		"response_metadata": map[string]any{"next_cursor": ""}}, nil
}

// listedJSONLocked is a message as conversations.replies and .history
// list it: with its metadata when the call asks for include_all_metadata.
func (f *Fake) listedJSONLocked(q *post, p params) map[string]any {
	out := f.postJSONLocked(q)
	if len(q.msg.Metadata) > 0 && (p["include_all_metadata"] == "1" || p["include_all_metadata"] == "true") {
		out["metadata"] = q.msg.Metadata
	}
	return out
}

// postJSONLocked is a message as conversations.* show it, with the
// thread's reply count on a parent; f.mu must be held.
func (f *Fake) postJSONLocked(q *post) map[string]any {
	var out map[string]any
	if q.bot {
		out = messageJSON(q.msg)
	} else {
		out = map[string]any{"type": "message", "user": q.msg.User, "text": q.msg.Text, "ts": q.msg.TS, "team": teamID}
		if q.msg.ThreadTS != "" {
			out["thread_ts"] = q.msg.ThreadTS
		}
	}
	replies := 0
	for _, r := range f.posts[q.msg.Channel] {
		if r.msg.ThreadTS == q.msg.TS && r.msg.TS != q.msg.TS && !r.msg.Deleted && !r.msg.Ephemeral {
			replies++
		}
	}
	if replies > 0 {
		out["thread_ts"], out["reply_count"] = q.msg.TS, replies
	}
	return out
}

// checkContent checks a message's text and blocks as Slack does and returns
// the blocks (nil when the call had none). needed: a post must have text or
// blocks.
func checkContent(p params, needed bool) (json.RawMessage, *apiError) {
	if utf8.RuneCountInString(p["text"]) > maxTextLen {
		return nil, &apiError{code: "msg_too_long"}
	}
	raw, ok := p["blocks"]
	if !ok || raw == "" {
		if needed && p["text"] == "" && p["attachments"] == "" {
			return nil, &apiError{code: "no_text"}
		}
		return nil, nil
	}
	if reasons := checkBlocks([]byte(raw)); len(reasons) > 0 {
		return nil, &apiError{code: "invalid_blocks", reasons: reasons}
	}
	return json.RawMessage(raw), nil
}

func (f *Fake) userInfo(p params) (map[string]any, *apiError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := p["user"]
	name, ok := f.users[id]
	if !ok {
		return nil, &apiError{code: "user_not_found"}
	}
	bot := id == botUserID
	u := map[string]any{"id": id, "team_id": teamID, "name": name, "real_name": name, "deleted": false,
		"is_bot": bot, "is_admin": false, "tz": "Etc/UTC", "tz_label": "UTC", "tz_offset": 0,
		"profile": map[string]any{"real_name": name, "display_name": name, "team": teamID}}
	if bot {
		u["profile"].(map[string]any)["bot_id"] = botID
	}
	return map[string]any{"user": u}, nil
}

func (f *Fake) conversationInfo(p params) (map[string]any, *apiError) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := p["channel"]
	if code := f.channelErrLocked(id, true); code != "" {
		return nil, &apiError{code: code}
	}
	name := f.channels[id]
	typ := channelType(id)
	c := map[string]any{"id": id, "name": name, "is_channel": typ == "channel", "is_group": typ == "group",
		"is_im": typ == "im", "is_private": typ != "channel", "is_member": !f.outside[id], "is_archived": false,
		"context_team_id": teamID, "created": 1700000000}
	return map[string]any{"channel": c}, nil
}

// messageJSON is a bot message as the Web API and events show it.
func messageJSON(m Message) map[string]any {
	out := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": m.User,
		"bot_id": botID, "app_id": appID, "team": teamID}
	if m.ThreadTS != "" {
		out["thread_ts"] = m.ThreadTS
	}
	if m.Blocks != nil {
		out["blocks"] = m.Blocks
	}
	if len(m.Edits) > 0 {
		out["edited"] = map[string]any{"user": m.User, "ts": m.TS}
	}
	return out
}

func writeFailure(w http.ResponseWriter, fail Failure) {
	switch {
	case fail.Status == http.StatusTooManyRequests:
		secs := int64(math.Ceil(fail.RetryAfter.Seconds()))
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		code := fail.Error
		if code == "" {
			code = "ratelimited"
		}
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": code})
	case fail.Status >= 500:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(fail.Status)
		_, _ = w.Write([]byte("<html><body>" + http.StatusText(fail.Status) + "</body></html>"))
	case fail.Status == 0 || fail.Status == http.StatusOK:
		code := fail.Error
		if code == "" {
			code = "internal_error"
		}
		writeError(w, apiError{code: code})
	default:
		w.WriteHeader(fail.Status)
	}
}

func writeError(w http.ResponseWriter, e apiError) {
	body := map[string]any{"ok": false, "error": e.code}
	if len(e.reasons) > 0 {
		body["errors"] = e.reasons
		msgs := make([]string, len(e.reasons))
		for i, r := range e.reasons {
			msgs[i] = "[ERROR] " + r
		}
		body["response_metadata"] = map[string]any{"messages": msgs}
	}
	writeJSON(w, http.StatusOK, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
