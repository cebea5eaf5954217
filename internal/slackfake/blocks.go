package slackfake

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Block Kit limits Slack enforces on a message's blocks.
const (
	maxBlocks         = 50
	maxBlockIDLen     = 255
	maxSectionText    = 3000
	maxSectionFields  = 10
	maxFieldText      = 2000
	maxHeaderText     = 150
	maxActionElements = 25
	maxContextElems   = 10
	maxButtonText     = 75
	maxActionIDLen    = 255
	maxButtonValue    = 2000
)

// knownBlocks are the block types a message may hold.
var knownBlocks = map[string]bool{"section": true, "divider": true, "header": true, "actions": true,
	"context": true, "image": true, "rich_text": true, "file": true, "video": true, "markdown": true,
	"table": true, "input": true, "context_actions": true}

// checkBlocks returns why Slack would refuse raw as a message's blocks, one
// reason per problem ("[json-pointer] what"), or nothing when it is valid.
func checkBlocks(raw []byte) []string {
	var blocks []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return []string{"blocks must be a JSON array of objects"}
	}
	var reasons []string
	bad := func(path, format string, a ...any) {
		reasons = append(reasons, fmt.Sprintf(format, a...)+" ["+path+"]")
	}
	if len(blocks) > maxBlocks {
		bad("json-pointer:", "must contain at most %d blocks", maxBlocks)
	}
	blockIDs := map[string]bool{}
	for i, b := range blocks {
		path := fmt.Sprintf("json-pointer:/blocks/%d", i)
		typ := str(b["type"])
		if !knownBlocks[typ] {
			bad(path+"/type", "unsupported type %q", typ)
			continue
		}
		if id := str(b["block_id"]); id != "" {
			if len(id) > maxBlockIDLen {
				bad(path+"/block_id", "must be at most %d characters", maxBlockIDLen)
			}
			if blockIDs[id] {
				bad(path+"/block_id", "block_id %q is not unique in the message", id)
			}
			blockIDs[id] = true
		}
		switch typ {
		case "section":
			_, hasText := b["text"]
			var fields []json.RawMessage
			_ = json.Unmarshal(b["fields"], &fields)
			if !hasText && len(fields) == 0 {
				bad(path, "must have text or fields")
			}
			if hasText {
				checkText(b["text"], maxSectionText, false, path+"/text", bad)
			}
			if len(fields) > maxSectionFields {
				bad(path+"/fields", "must contain at most %d items", maxSectionFields)
			}
			for j, fl := range fields {
				checkText(fl, maxFieldText, false, fmt.Sprintf("%s/fields/%d", path, j), bad)
			}
			if acc, ok := b["accessory"]; ok {
				checkElement(acc, path+"/accessory", map[string]bool{}, bad)
			}
		case "header":
			checkText(b["text"], maxHeaderText, true, path+"/text", bad)
		case "actions", "context":
			var elems []json.RawMessage
			if err := json.Unmarshal(b["elements"], &elems); err != nil || len(elems) == 0 {
				bad(path+"/elements", "must be a non-empty array")
			}
			limit := maxActionElements
			if typ == "context" {
				limit = maxContextElems
			}
			if len(elems) > limit {
				bad(path+"/elements", "must contain at most %d items", limit)
			}
			if typ == "actions" {
				ids := map[string]bool{}
				for j, e := range elems {
					checkElement(e, fmt.Sprintf("%s/elements/%d", path, j), ids, bad)
				}
			}
		}
	}
	return reasons
}

// checkElement checks an interactive element; buttons get Slack's limits.
func checkElement(raw json.RawMessage, path string, actionIDs map[string]bool, bad func(string, string, ...any)) {
	var e map[string]json.RawMessage
	if json.Unmarshal(raw, &e) != nil {
		bad(path, "must be an object")
		return
	}
	if id := str(e["action_id"]); id != "" {
		if len(id) > maxActionIDLen {
			bad(path+"/action_id", "must be at most %d characters", maxActionIDLen)
		}
		if actionIDs[id] {
			bad(path+"/action_id", "action_id %q is not unique in the block", id)
		}
		actionIDs[id] = true
	}
	if str(e["type"]) != "button" {
		return
	}
	checkText(e["text"], maxButtonText, true, path+"/text", bad)
	if v := str(e["value"]); utf8.RuneCountInString(v) > maxButtonValue {
		bad(path+"/value", "must be at most %d characters", maxButtonValue)
	}
	if s := str(e["style"]); s != "" && s != "primary" && s != "danger" {
		bad(path+"/style", "must be primary or danger")
	}
}

// checkText checks a text object: plain_text or mrkdwn (plain_text only
// when plainOnly), 1 to max characters.
func checkText(raw json.RawMessage, limit int, plainOnly bool, path string, bad func(string, string, ...any)) {
	var t struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if raw == nil || json.Unmarshal(raw, &t) != nil {
		bad(path, "must be a text object")
		return
	}
	switch {
	case plainOnly && t.Type != "plain_text":
		bad(path+"/type", "must be plain_text")
	case t.Type != "plain_text" && t.Type != "mrkdwn":
		bad(path+"/type", "must be plain_text or mrkdwn")
	case t.Text == "":
		bad(path+"/text", "must be at least 1 character")
	case utf8.RuneCountInString(t.Text) > limit:
		bad(path+"/text", "must be at most %d characters", limit)
	}
}

// str is a JSON string's value, or "" for anything else.
func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
