package slackfake

import (
	"encoding/json"
	"net/http"
	"time"
)

// Slack's limits on an interaction's response_url.
const (
	responseURLUses = 5
	responseURLLife = 30 * time.Minute
)

// responseURL is one interaction's response_url: it answers in the
// clicked message's channel, for the person who clicked.
type responseURL struct {
	channel, messageTS, user string
	uses                     int
	expires                  time.Time
}

// newResponseURLLocked hands out a response_url for a click; f.mu must be
// held.
func (f *Fake) newResponseURLLocked(channel, messageTS, user string) string {
	token := randomHex(12)
	f.responseURLs[token] = &responseURL{channel: channel, messageTS: messageTS, user: user, expires: time.Now().Add(responseURLLife)}
	return f.srv.URL + "/actions/" + token
}

// serveResponseURL is an interaction's response_url (Calls("response_url")
// counts its uses): JSON with text and blocks, and replace_original,
// delete_original or response_type ("ephemeral", the default, or
// "in_channel"); up to 5 uses within 30 minutes, as Slack allows.
func (f *Fake) serveResponseURL(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls["response_url"] = append(f.calls["response_url"], time.Now())
	f.mu.Unlock()
	var body struct {
		Text            string          `json:"text"`
		Blocks          json.RawMessage `json:"blocks"`
		ThreadTS        string          `json:"thread_ts"`
		ResponseType    string          `json:"response_type"`
		ReplaceOriginal flexBool        `json:"replace_original"`
		DeleteOriginal  flexBool        `json:"delete_original"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"ok": false, "error": "invalid_payload"})
		return
	}
	p := params{"text": body.Text}
	if len(body.Blocks) > 0 && string(body.Blocks) != "null" {
		p["blocks"] = string(body.Blocks)
	}
	blocks, aerr := checkContent(p, !bool(body.DeleteOriginal))
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ru := f.responseURLs[r.PathValue("token")]
	switch {
	case ru == nil:
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error": "invalid_url"})
		return
	case time.Now().After(ru.expires):
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error": "expired_url"})
		return
	case ru.uses >= responseURLUses:
		writeJSON(w, http.StatusNotFound, map[string]any{"ok": false, "error": "used_url"})
		return
	}
	ru.uses++
	switch {
	case bool(body.DeleteOriginal) || bool(body.ReplaceOriginal):
		target, aerr := f.botMessageLocked(ru.channel, ru.messageTS, "cant_update_message")
		if aerr != nil {
			writeError(w, *aerr)
			return
		}
		if body.DeleteOriginal {
			f.deleteLocked(target)
		} else {
			if blocks == nil {
				blocks = json.RawMessage("[]") // a replacement replaces the blocks too
			}
			f.editLocked(target, body.Text, true, blocks)
		}
	default:
		m := Message{Channel: ru.channel, ThreadTS: body.ThreadTS, Text: body.Text, User: botUserID, Blocks: blocks}
		if body.ResponseType != "in_channel" {
			m.Ephemeral, m.EphemeralUser = true, ru.user
		}
		f.addBotPostLocked(m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true})
}

// flexBool is a JSON boolean that also takes "true"/"false" strings, as
// Slack does for response_url flags.
type flexBool bool

func (b *flexBool) UnmarshalJSON(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch x := v.(type) {
	case bool:
		*b = flexBool(x)
	case string:
		*b = x == "true"
	}
	return nil
}
