package slackbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/slack-go/slack"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// maxPostChars bounds the text of one post (Slack truncates messages over
// 40,000 characters).
const maxPostChars = 39000

// post is one bot message of a thread as the timeline says it should be.
type post struct {
	key    string
	turnID string
	text   string
	blocks []slack.Block
	// once: posted and never edited (a Turn's end, a notice).
	once bool
	// ts and shown are what Slack has (ts "" until posted); known tells
	// that they were read from the store.
	ts, shown string
	known     bool
	failed    bool
	dirty     bool
	lastEdit  time.Time
}

// projection is the state of one thread's projector: its posts, in order
// of first appearance.
type projection struct {
	th    store.SlackThread
	posts map[string]*post
	order []string
	// closed is set once the Session's session.closed is projected.
	closed bool
	// botUserID is the app's bot user, whose posts are ours.
	botUserID string
	// lookup: before a new post, look in the thread for one an earlier run
	// made but did not record (it stopped between Slack's answer and the
	// store), by the post key in the message's metadata; remote caches
	// what the thread has (nil: not read yet).
	lookup bool
	remote map[string]remotePost
}

// remotePost is a post of ours found in the thread.
type remotePost struct{ ts, text string }

// postEventType is the metadata event type of the projector's thread
// posts; its payload names the Session and the post key, so that a post
// made but not recorded is found again instead of posted twice.
const postEventType = "helmr_post"

func (p *projection) get(key, turnID string) *post {
	if q, ok := p.posts[key]; ok {
		return q
	}
	q := &post{key: key, turnID: turnID}
	p.posts[key] = q
	p.order = append(p.order, key)
	return q
}

func (p *projection) set(key, turnID, text string, blocks []slack.Block, once bool) {
	q := p.get(key, turnID)
	q.text, q.blocks, q.once, q.dirty = truncate(text), blocks, once, true
}

func truncate(s string) string {
	if r := []rune(s); len(r) > maxPostChars {
		return string(r[:maxPostChars]) + "…"
	}
	return s
}

// contentText is the text parts of Content, joined.
func contentText(raw json.RawMessage) string {
	var c helmrtype.Content
	if json.Unmarshal(raw, &c) != nil {
		return ""
	}
	var parts []string
	for _, p := range c {
		if p.Type == "text" && p.Text != "" {
			parts = append(parts, p.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// apply folds one timeline event into the projection.
func (p *projection) apply(ev helmrtype.SessionEvent) {
	turnID := ""
	if ev.TurnID != nil {
		turnID = *ev.TurnID
	}
	var d map[string]json.RawMessage
	json.Unmarshal(ev.Data, &d)
	switch ev.Kind {
	case helmrtype.EventTurnOutput:
		if t := contentText(d["content"]); t != "" {
			q := p.get("out:"+turnID, turnID)
			q.text, q.dirty = truncate(q.text+t), true
		}
	case helmrtype.EventTurnCompleted:
		// The response is human text; a structured result is not (a
		// child's result is never posted as text either).
		if t := contentText(d["response"]); t != "" {
			p.set("end:"+turnID, turnID, t, nil, true)
		}
	case helmrtype.EventTurnFailed, helmrtype.EventTurnInterrupted, helmrtype.EventTurnCancelled:
		var e helmrtype.TurnError
		json.Unmarshal(d["error"], &e)
		what := strings.TrimPrefix(ev.Kind, "turn.")
		text := "The Turn " + what + "."
		if e.Code != "" {
			text = fmt.Sprintf("The Turn %s (%s): %s", what, e.Code, e.Message)
		}
		p.set("end:"+turnID, turnID, text, nil, true)
	case helmrtype.EventAskCreated:
		var id string
		json.Unmarshal(d["ask_id"], &id)
		var q helmrtype.Question
		json.Unmarshal(d["question"], &q)
		text, blocks := questionPost(id, &q)
		p.set("ask:"+id, turnID, text, blocks, false)
	case helmrtype.EventAskResponded:
		var id string
		json.Unmarshal(d["ask_id"], &id)
		var by helmrtype.Responder
		json.Unmarshal(d["responded_by"], &by)
		q := p.get("ask:"+id, turnID)
		prompt, _, _ := strings.Cut(q.text, "\n")
		who := by.ID
		if by.Slack != nil {
			who = "<@" + by.Slack.UserID + ">"
		}
		p.set("ask:"+id, turnID, prompt+"\nAnswered by "+who+": "+answerText(d["answer"]), nil, false)
	case helmrtype.EventAskCancelled:
		var id string
		json.Unmarshal(d["ask_id"], &id)
		q := p.get("ask:"+id, turnID)
		prompt, _, _ := strings.Cut(q.text, "\n")
		p.set("ask:"+id, turnID, prompt+"\nWithdrawn: the question no longer takes an answer.", nil, false)
	case helmrtype.EventSlackDeliveryUnavailable:
		var key string
		json.Unmarshal(d["post"], &key)
		if q, ok := p.posts[key]; ok {
			q.failed = true
		}
	case helmrtype.EventSessionClosed:
		p.set("closed", "", "This Session is closed.", nil, true)
		p.closed = true
	}
}

// questionPost is the text and blocks of a question: a button per option
// of a choice, or a prompt to reply in the thread for text.
func questionPost(askID string, q *helmrtype.Question) (string, []slack.Block) {
	prompt := contentTextOf(q.Prompt)
	if prompt == "" {
		prompt = "A question"
	}
	if q.Answer.Type != helmrtype.AnswerChoice {
		text := prompt + "\nReply in this thread to answer."
		return text, []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, truncate3000(text), false, false), nil, nil)}
	}
	var buttons []slack.BlockElement
	for _, o := range q.Answer.Options {
		buttons = append(buttons, slack.NewButtonBlockElement(askAction+askID+":"+o.ID, o.ID, slack.NewTextBlockObject(slack.PlainTextType, truncateN(o.Label, 75), false, false)))
	}
	blocks := []slack.Block{slack.NewSectionBlock(slack.NewTextBlockObject(slack.PlainTextType, truncate3000(prompt), false, false), nil, nil)}
	// Slack takes at most 25 elements per actions block.
	for i := 0; i < len(buttons); i += 25 {
		blocks = append(blocks, slack.NewActionBlock("", buttons[i:min(i+25, len(buttons))]...))
	}
	return prompt, blocks
}

func contentTextOf(c helmrtype.Content) string {
	b, _ := json.Marshal(c)
	return contentText(b)
}

func truncate3000(s string) string { return truncateN(s, 3000) }

func truncateN(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// answerText shows an answer: the text, or the selected option IDs.
func answerText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var c helmrtype.ChoiceAnswer
	if json.Unmarshal(raw, &c) == nil {
		var ids []string
		for _, o := range c.Selected {
			ids = append(ids, o.ID)
		}
		out := strings.Join(ids, ", ")
		if c.Text != "" {
			out += " (" + c.Text + ")"
		}
		return out
	}
	return string(raw)
}

// project keeps a Session's thread in step with its timeline until the
// Session is closed and projected, or ctx ends. Events up to the stored
// cursor are folded in without posting (they were posted); each post's
// ts and shown text are in the store, so a restart edits what it posted
// and posts nothing twice.
func (b *Bridge) project(ctx context.Context, app store.SlackApp, th store.SlackThread) {
	c, err := b.credentials(&app)
	if err != nil {
		b.log.Error("slack app credentials", "app", app.ID, "err", err)
		return
	}
	api := b.client(c.BotToken)
	// A thread that exists may hold a post an earlier run made and did
	// not record.
	p := &projection{th: th, posts: map[string]*post{}, botUserID: app.BotUserID, lookup: th.ThreadTS != ""}
	log := b.log.With("session_id", th.SessionID)
	// Fold in what was projected before.
	var after int64
	for after < th.Cursor {
		page, err := b.eng.ListEvents(ctx, th.SessionID, after, 1000)
		if err != nil {
			if ctx.Err() == nil {
				log.Error("slack projector: read timeline", "err", err)
			}
			return
		}
		for _, ev := range page.Records {
			if ev.Sequence > th.Cursor {
				break
			}
			p.apply(ev)
			after = ev.Sequence
		}
		if !page.HasMore {
			break
		}
	}
	for _, q := range p.posts {
		q.dirty = true // compared with the store's record at the next flush
	}
	if p.th.ThreadTS == "" {
		if !b.open(ctx, api, p, app) {
			return
		}
	}
	for {
		changed, stop := b.eng.Watch(th.SessionID)
		page, err := b.eng.ListEvents(ctx, th.SessionID, p.th.Cursor, 1000)
		if err != nil {
			stop()
			if ctx.Err() == nil {
				log.Error("slack projector: read timeline", "err", err)
			}
			return
		}
		for _, ev := range page.Records {
			p.apply(ev)
		}
		if err := b.flush(ctx, api, p); err != nil {
			stop()
			if ctx.Err() == nil {
				log.Error("slack projector: post", "err", err)
			}
			return
		}
		next := p.th
		next.Cursor = page.NextAfter
		next.Done = p.closed && !page.HasMore
		if next != p.th {
			if err := b.eng.SlackProjected(ctx, &next); err != nil {
				stop()
				if ctx.Err() == nil {
					log.Error("slack projector: record cursor", "err", err)
				}
				return
			}
			p.th = next
		}
		if p.th.Done {
			stop()
			return
		}
		if page.HasMore {
			stop()
			continue
		}
		select {
		case <-ctx.Done():
			stop()
			return
		case <-changed:
		}
		stop()
		// Let streaming output gather: at most one edit a post per
		// EditInterval.
		if sleep(ctx, b.opts.EditInterval) != nil {
			return
		}
	}
}

// open posts the opening message of a Session opened through the API;
// the Session then owns its thread.
func (b *Bridge) open(ctx context.Context, api *slack.Client, p *projection, app store.SlackApp) bool {
	s, err := b.eng.GetSession(ctx, p.th.SessionID)
	if err != nil {
		return false
	}
	text := fmt.Sprintf("Session of %s (%s) started here. Reply in this thread to talk to it.", s.Agent, s.ID)
	l := b.opening(app.ID, p.th.ChannelID)
	l.Lock()
	defer l.Unlock()
	var ts string
	err = b.call(ctx, func() error {
		var err error
		_, ts, err = api.PostMessageContext(ctx, p.th.ChannelID, slack.MsgOptionText(text, false))
		return err
	})
	if err != nil {
		var pe *permanentError
		if errors.As(err, &pe) {
			b.eng.SlackDeliveryUnavailable(context.WithoutCancel(ctx), p.th.SessionID, "", map[string]any{
				"post": "open", "channel_id": p.th.ChannelID, "error": pe.Code})
			next := p.th
			next.Done = true // nowhere to post: the timeline keeps everything
			b.eng.SlackProjected(context.WithoutCancel(ctx), &next)
		}
		return false
	}
	next := p.th
	next.ThreadTS = ts
	if err := b.eng.SlackProjected(context.WithoutCancel(ctx), &next); err != nil {
		b.log.Error("slack projector: record thread", "err", err)
		return false
	}
	p.th = next
	return true
}

// flush brings every changed post to Slack: a new post, or an edit of
// one whose text changed. A permanent failure of a post records
// slack.delivery_unavailable and the post is given up; the others go on.
func (b *Bridge) flush(ctx context.Context, api *slack.Client, p *projection) error {
	for _, key := range p.order {
		q := p.posts[key]
		if !q.dirty || q.failed {
			continue
		}
		if !q.known {
			rec, err := b.eng.SlackPost(ctx, p.th.SessionID, key)
			switch {
			case err == nil:
				q.ts, q.shown = rec.TS, rec.Text
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
			q.known = true
		}
		if q.ts == "" && p.lookup {
			r, err := b.findPost(ctx, api, p, key, false)
			if err != nil {
				return err
			}
			if r.ts != "" {
				q.ts, q.shown = r.ts, r.text
				if err := b.eng.PutSlackPost(ctx, &store.SlackPost{SessionID: p.th.SessionID, Key: key, TS: q.ts, Text: q.shown}); err != nil {
					return err
				}
			}
		}
		if q.text == q.shown || (q.once && q.ts != "") {
			q.dirty = false
			continue
		}
		if q.ts != "" {
			if err := sleep(ctx, b.opts.EditInterval-time.Since(q.lastEdit)); err != nil {
				return err
			}
		}
		opts := []slack.MsgOption{slack.MsgOptionText(q.text, false)}
		if len(q.blocks) > 0 {
			opts = append(opts, slack.MsgOptionBlocks(q.blocks...))
		} else if q.ts != "" {
			opts = append(opts, slack.MsgOptionBlocks()) // the edit drops earlier buttons
		}
		var ts string
		tried := false
		err := b.call(ctx, func() error {
			var err error
			if q.ts == "" {
				// A try that failed may have posted all the same (its
				// answer lost): look before posting again.
				if tried {
					r, err := b.findPost(ctx, api, p, key, true)
					if err != nil {
						return err
					}
					if r.ts != "" {
						ts = r.ts
						return nil
					}
				}
				tried = true
				_, ts, err = api.PostMessageContext(ctx, p.th.ChannelID, append(opts, slack.MsgOptionTS(p.th.ThreadTS),
					slack.MsgOptionMetadata(slack.SlackMetadata{EventType: postEventType,
						EventPayload: map[string]any{"session_id": p.th.SessionID, "post": key}}))...)
			} else {
				_, ts, _, err = api.UpdateMessageContext(ctx, p.th.ChannelID, q.ts, opts...)
			}
			return err
		})
		var pe *permanentError
		if errors.As(err, &pe) {
			q.failed = true
			if err := b.eng.SlackDeliveryUnavailable(ctx, p.th.SessionID, q.turnID, map[string]any{
				"post": key, "channel_id": p.th.ChannelID, "thread_ts": p.th.ThreadTS, "error": pe.Code}); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		if q.ts == "" {
			q.ts = ts
		}
		if err := b.eng.PutSlackPost(ctx, &store.SlackPost{SessionID: p.th.SessionID, Key: key, TS: q.ts, Text: q.text}); err != nil {
			return err
		}
		q.shown, q.dirty, q.lastEdit = q.text, false, time.Now()
	}
	return nil
}

// findPost looks in the thread for our post key (reading the thread again
// when fresh, else once per projector run). A thread that cannot be read
// (a missing history scope, say) turns the lookup off: posting goes on.
func (b *Bridge) findPost(ctx context.Context, api *slack.Client, p *projection, key string, fresh bool) (remotePost, error) {
	if p.remote == nil || fresh {
		remote := map[string]remotePost{}
		params := &slack.GetConversationRepliesParameters{ChannelID: p.th.ChannelID, Timestamp: p.th.ThreadTS, Limit: 200, IncludeAllMetadata: true}
		for {
			var msgs []slack.Message
			var more bool
			var next string
			err := b.call(ctx, func() error {
				var err error
				msgs, more, next, err = api.GetConversationRepliesContext(ctx, params)
				return err
			})
			var pe *permanentError
			if errors.As(err, &pe) {
				b.log.Warn("slack projector: the thread cannot be read, so a post made but not recorded before a stop may show twice",
					"session_id", p.th.SessionID, "error", pe.Code)
				p.lookup, p.remote = false, map[string]remotePost{}
				return remotePost{}, nil
			}
			if err != nil {
				return remotePost{}, err
			}
			for _, m := range msgs {
				md := m.Metadata
				if md.EventType != postEventType || (p.botUserID != "" && m.User != p.botUserID) {
					continue
				}
				if sid, _ := md.EventPayload["session_id"].(string); sid != p.th.SessionID {
					continue
				}
				if k, _ := md.EventPayload["post"].(string); k != "" {
					remote[k] = remotePost{ts: m.Timestamp, text: m.Text}
				}
			}
			if !more || next == "" {
				break
			}
			params.Cursor = next
		}
		p.remote = remote
	}
	return p.remote[key], nil
}
