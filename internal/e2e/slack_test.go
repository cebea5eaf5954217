package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/helmr-go/helmr/internal/slackbridge"
	"github.com/helmr-go/helmr/internal/slackfake"
	"github.com/helmr-go/helmr/internal/store/pgstore/pgtest"
)

// The Slack channel Sessions' end-to-end tests run a control plane (real
// SQLite, real session processes) against the in-process fake Slack
// (internal/slackfake), over Socket Mode or the Events API.

const slackChannel = "C0GENERAL"

// slackPlane is a control plane connected to a fake Slack.
type slackPlane struct {
	*plane
	fake *slackfake.Fake
	app  helmrtype.SlackApp
}

// startSlackPlane starts a control plane on dataDir ("" a new one) talking
// to fake, and connects the fake's app in mode (again only when connect).
func startSlackPlane(t *testing.T, fake *slackfake.Fake, dataDir, mode string, connect bool) *slackPlane {
	t.Helper()
	return startSlackPlaneConfig(t, fake, controlplane.Config{DataDir: dataDir, GenerateSecretsKey: true}, mode, connect)
}

// startSlackPlaneConfig is startSlackPlane with cfg (its Slack options
// pointed at fake).
func startSlackPlaneConfig(t *testing.T, fake *slackfake.Fake, cfg controlplane.Config, mode string, connect bool) *slackPlane {
	t.Helper()
	cfg.Slack = slackbridge.Options{APIURL: fake.APIURL(), EditInterval: 50 * time.Millisecond, Rescan: 200 * time.Millisecond, MaxAttempts: 4,
		LeaseTTL: 2 * time.Second}
	p := startPlaneConfig(t, "127.0.0.1:0", cfg)
	sp := &slackPlane{plane: p, fake: fake}
	if mode == helmrtype.SlackModeEvents {
		fake.SetEventsURL(p.url + "/slack/events")
		fake.SetInteractivityURL(p.url + "/slack/interactivity")
	}
	if connect {
		req := helmrtype.SlackAppConnect{BotToken: fake.BotToken(), Mode: mode, MentionAgent: "echo"}
		if mode == helmrtype.SlackModeSocket {
			req.AppToken = fake.AppToken()
		} else {
			req.SigningSecret = fake.SigningSecret()
		}
		p.must("POST", "/v1/slack/apps", req, &sp.app)
	} else {
		var l helmrtype.SlackAppList
		p.must("GET", "/v1/slack/apps", nil, &l)
		sp.app = l.Apps[0]
	}
	if mode == helmrtype.SlackModeSocket {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := fake.WaitSocketConnections(ctx, 1); err != nil {
			t.Fatalf("no Socket Mode connection: %v", err)
		}
	}
	return sp
}

func newFake(t *testing.T) *slackfake.Fake {
	f := slackfake.Start(t)
	f.AddChannel(slackChannel, "general")
	f.AddUser("U0ADA", "ada")
	f.AddUser("U0BOB", "bob")
	return f
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openSlackSession creates a Session of agent in the channel and returns
// it with the ts of its opening message (its thread).
func (sp *slackPlane) openSlackSession(agent string) (helmrtype.Session, string) {
	sp.t.Helper()
	var r helmrtype.SessionCreateReceipt
	sp.must("POST", "/v1/sessions", helmrtype.SessionCreateRequest{Agent: agent, Slack: &helmrtype.SlackChannelRequest{ChannelID: slackChannel}}, &r)
	if r.Session.SlackChannelID != slackChannel {
		sp.t.Fatalf("slack_channel_id = %q, want %q", r.Session.SlackChannelID, slackChannel)
	}
	m, err := sp.fake.WaitMessage(waitCtx(sp.t), slackChannel, func(m slackfake.Message) bool {
		return m.ThreadTS == "" && strings.Contains(m.Text, r.Session.ID)
	})
	if err != nil {
		sp.t.Fatalf("no opening message for session %s: %v", r.Session.ID, err)
	}
	return r.Session, m.TS
}

// waitPost waits for a bot post in thread whose text has s.
func (sp *slackPlane) waitPost(thread, s string) slackfake.Message {
	sp.t.Helper()
	m, err := sp.fake.WaitMessage(waitCtx(sp.t), slackChannel, func(m slackfake.Message) bool {
		return m.ThreadTS == thread && strings.Contains(m.Text, s)
	})
	if err != nil {
		sp.t.Fatalf("no post with %q in thread %s: %v; posts: %+v", s, thread, err, sp.fake.Messages(slackChannel))
	}
	return m
}

// waitPostExact waits for a bot post in thread whose text is s.
func (sp *slackPlane) waitPostExact(thread, s string) slackfake.Message {
	sp.t.Helper()
	m, err := sp.fake.WaitMessage(waitCtx(sp.t), slackChannel, func(m slackfake.Message) bool {
		return m.ThreadTS == thread && m.Text == s
	})
	if err != nil {
		sp.t.Fatalf("no post %q in thread %s: %v; posts: %+v", s, thread, err, sp.fake.Messages(slackChannel))
	}
	return m
}

func (sp *slackPlane) say(thread, user, text string) string {
	sp.t.Helper()
	ts, err := sp.fake.Say(waitCtx(sp.t), slackChannel, thread, user, text)
	if err != nil {
		sp.t.Fatalf("say %q: %v", text, err)
	}
	return ts
}

func (sp *slackPlane) turns(sessionID string) []helmrtype.TurnState {
	sp.t.Helper()
	var page helmrtype.TurnPage
	sp.must("GET", "/v1/sessions/"+sessionID+"/turns", nil, &page)
	return page.Turns
}

func TestSlackThreadTurnsAndMessages(t *testing.T) {
	fake := newFake(t)
	sp := startSlackPlane(t, fake, "", helmrtype.SlackModeSocket, true)

	// A thread message becomes a Turn, with a Slack user source; its
	// output and response are posted to the thread.
	s, thread := sp.openSlackSession("echo")
	var got helmrtype.Session
	sp.must("GET", "/v1/sessions/"+s.ID, nil, &got)
	if got.SlackChannelID != slackChannel {
		t.Fatalf("GET session: slack_channel_id %q", got.SlackChannelID)
	}
	msgTS := sp.say(thread, "U0ADA", "hello there")
	sp.waitPost(thread, "echo: hello there")
	resp := sp.waitPostExact(thread, "hello there")
	ts := sp.turns(s.ID)
	if len(ts) != 1 {
		t.Fatalf("%d turns, want 1", len(ts))
	}
	src := ts[0].Source
	want := helmrtype.SlackInputSource{TeamID: fake.TeamID(), ChannelID: slackChannel, ThreadTS: thread, MessageTS: msgTS, UserID: "U0ADA"}
	if src.Kind != helmrtype.SourceUser || src.Slack == nil || *src.Slack != want {
		t.Fatalf("turn source = %+v (slack %+v), want user with %+v", src, src.Slack, want)
	}
	if o := sp.wait(s.ID, ts[0].ID); o.Status != helmrtype.TurnCompleted {
		t.Fatalf("turn %s", o.Status)
	}
	_ = resp

	// Text over 3,000 characters is refused in the thread; nothing is
	// admitted.
	sp.say(thread, "U0ADA", strings.Repeat("é", helmrtype.MaxSlackTextChars+1))
	sp.waitPost(thread, "the limit is 3000")
	if n := len(sp.turns(s.ID)); n != 1 {
		t.Fatalf("%d turns after a refused long text, want 1", n)
	}

	// A reply while a Turn runs is a message to that Turn.
	cs, cthread := sp.openSlackSession("chat")
	sp.say(cthread, "U0ADA", "start")
	sp.waitPost(cthread, "listening")
	sp.say(cthread, "U0BOB", "ok-one")
	one := sp.waitPost(cthread, "got ok-one")
	// Streaming output edits the Turn's one output post.
	sp.say(cthread, "U0BOB", "ok-two")
	two := sp.waitPost(cthread, "got ok-two")
	if two.TS != one.TS || !strings.Contains(two.Text, "listening\ngot ok-one\ngot ok-two") || len(two.Edits) == 0 {
		t.Fatalf("output post %s %q (edits %q), want %s edited to hold all the output", two.TS, two.Text, two.Edits, one.TS)
	}
	cts := sp.turns(cs.ID)
	if len(cts) != 1 {
		t.Fatalf("chat: %d turns, want 1 (the replies are messages)", len(cts))
	}
	var admitted helmrtype.SessionEvent
	for _, e := range sp.events(cs.ID) {
		if e.Kind == helmrtype.EventMessageAdmitted && admitted.Kind == "" {
			admitted = e
		}
	}
	var md struct {
		Source helmrtype.InputSource `json:"source"`
	}
	json.Unmarshal(admitted.Data, &md)
	if md.Source.Slack == nil || md.Source.Slack.UserID != "U0BOB" {
		t.Fatalf("message.admitted source = %s", admitted.Data)
	}
	sp.say(cthread, "U0ADA", "done")
	if o := sp.wait(cs.ID, cts[0].ID); o.Status != helmrtype.TurnCompleted {
		t.Fatalf("chat turn %s", o.Status)
	}

	// A structured-input Agent whose schema takes no text: a clear reply.
	ty, tthread := sp.openSlackSession("typed")
	sp.say(tthread, "U0ADA", "please review")
	sp.waitPost(tthread, "takes structured input")
	if n := len(sp.turns(ty.ID)); n != 0 {
		t.Fatalf("typed: %d turns, want 0", n)
	}

	// A closed Session says so in its thread, its projector is done, and
	// a reply gets a refusal.
	sp.must("POST", "/v1/sessions/"+s.ID+"/close", map[string]any{}, nil)
	sp.waitPostExact(thread, "This Session is closed.")
	sp.say(thread, "U0ADA", "still there?")
	sp.waitPost(thread, "takes no more input")
	deadline := time.Now().Add(30 * time.Second)
	for {
		th, err := sp.cp.Engine.SlackThread(context.Background(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if th.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed Session's thread is not done: %+v", th)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// A mention of the bot opens a Session of the app's mention Agent in
	// the mention's thread.
	top := sp.say("", "U0ADA", "<@"+fake.BotUserID()+"> ping")
	sp.waitPost(top, "echo: ping")
	var page helmrtype.SessionPage
	sp.must("GET", "/v1/sessions?agent=echo", nil, &page)
	if len(page.Sessions) != 2 {
		t.Fatalf("%d echo sessions after the mention, want 2", len(page.Sessions))
	}
}

func TestSlackEventsAPISignatures(t *testing.T) {
	fake := newFake(t)
	sp := startSlackPlane(t, fake, "", helmrtype.SlackModeEvents, true)
	ctx := waitCtx(t)
	if err := fake.VerifyURL(ctx); err != nil {
		t.Fatalf("url_verification: %v", err)
	}
	url := sp.url + "/slack/events"
	body := []byte(fmt.Sprintf(`{"type":"event_callback","team_id":%q,"event_id":"Ev0SIG","event":{"type":"message","user":"U0ADA","text":"hi","ts":"1.000001","thread_ts":"1.000000","channel":%q}}`,
		fake.TeamID(), slackChannel))
	check := func(what string, opt slackfake.DeliverOptions, want int) {
		t.Helper()
		status, resp, err := fake.Deliver(ctx, url, body, opt)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if status != want {
			t.Fatalf("%s: status %d (%s), want %d", what, status, resp, want)
		}
		if want == http.StatusUnauthorized {
			var env struct {
				Error struct{ Code string } `json:"error"`
			}
			if json.Unmarshal(resp, &env); env.Error.Code != string(helmrtype.CodeUnauthorized) {
				t.Fatalf("%s: body %s, want the error envelope with unauthorized", what, resp)
			}
		}
	}
	check("bad signature", slackfake.DeliverOptions{BadSignature: true}, http.StatusUnauthorized)
	check("stale timestamp", slackfake.DeliverOptions{Timestamp: time.Now().Add(-6 * time.Minute)}, http.StatusUnauthorized)
	at := time.Now()
	check("good", slackfake.DeliverOptions{Timestamp: at}, http.StatusOK)
	check("replay", slackfake.DeliverOptions{Timestamp: at}, http.StatusUnauthorized)

	// Over the Events API, a thread message becomes a Turn and a choice
	// question is answered with a button (TestSlackQuestionButtons does
	// Socket Mode).
	s, thread := sp.openSlackSession("echo")
	sp.say(thread, "U0ADA", "over http")
	sp.waitPost(thread, "echo: over http")
	if n := len(sp.turns(s.ID)); n != 1 {
		t.Fatalf("%d turns, want 1", n)
	}

	// Slack's retry of an event (same event_id, signed anew) admits
	// nothing twice.
	dup := []byte(fmt.Sprintf(`{"type":"event_callback","team_id":%q,"event_id":"Ev0DUP","event":{"type":"message","user":"U0ADA","text":"once only","ts":"%s.5","thread_ts":%q,"channel":%q}}`,
		fake.TeamID(), strings.Split(thread, ".")[0], thread, slackChannel))
	for i, at := range []time.Time{time.Now().Add(-time.Second), time.Now()} {
		if status, resp, err := fake.Deliver(ctx, url, dup, slackfake.DeliverOptions{Timestamp: at}); err != nil || status != http.StatusOK {
			t.Fatalf("delivery %d of the same event: %d %s %v", i+1, status, resp, err)
		}
	}
	sp.waitPost(thread, "echo: once only")
	if n := len(sp.turns(s.ID)); n != 2 {
		t.Fatalf("%d turns after a retried event, want 2", n)
	}
	testButtons(t, sp)
}

func TestSlackQuestionButtons(t *testing.T) {
	fake := newFake(t)
	sp := startSlackPlane(t, fake, "", helmrtype.SlackModeSocket, true)
	testButtons(t, sp)

	// A text question takes a reply in the thread from a mapped user.
	s, thread := sp.openSlackSession("waiter")
	sp.say(thread, "U0ADA", "asktext")
	sp.waitPost(thread, "Reply in this thread to answer")
	sp.say(thread, "U0ADA", "because it is ready")
	tt := sp.turns(s.ID)
	o := sp.wait(s.ID, tt[0].ID)
	var res map[string]any
	json.Unmarshal(o.Result, &res)
	if res["value"] != "because it is ready" || res["responded_by_id"] != "ada@example.com" {
		t.Fatalf("text answer result %s", o.Result)
	}
	if n := len(sp.turns(s.ID)); n != 1 {
		t.Fatalf("%d turns: the answer became a Turn", n)
	}
}

// testButtons: a choice question posted with buttons; a click by an
// unmapped user is refused (seeing the question is no authority), a click
// by a mapped responder answers it.
func testButtons(t *testing.T, sp *slackPlane) {
	t.Helper()
	fake := sp.fake
	sp.must("POST", "/v1/slack/users", helmrtype.SlackUserMapping{TeamID: fake.TeamID(), UserID: "U0ADA", Identity: "ada@example.com", Role: helmrtype.RoleResponder}, nil)
	sp.must("POST", "/v1/slack/users", helmrtype.SlackUserMapping{TeamID: fake.TeamID(), UserID: "U0BOB", Identity: "bob@example.com", Role: helmrtype.RoleViewer}, nil)
	s, thread := sp.openSlackSession("waiter")
	sp.say(thread, "U0ADA", "ask")
	q := sp.waitPost(thread, "Deploy to production?")
	var asks helmrtype.AskPage
	tt := sp.turns(s.ID)
	sp.must("GET", "/v1/sessions/"+s.ID+"/turns/"+tt[0].ID+"/asks", nil, &asks)
	askID := asks.Asks[0].ID
	action := "helmr_ask:" + askID + ":yes"
	ctx := waitCtx(t)
	if err := fake.Click(ctx, "U0BOB", slackChannel, q.TS, action, "yes"); err != nil {
		t.Fatalf("click: %v", err)
	}
	if _, err := fake.WaitMessage(ctx, slackChannel, func(m slackfake.Message) bool {
		return m.Ephemeral && m.EphemeralUser == "U0BOB" && strings.Contains(m.Text, "may not answer")
	}); err != nil {
		t.Fatalf("no refusal for the viewer: %v", err)
	}
	var st helmrtype.AskState
	sp.must("GET", "/v1/asks/"+askID, nil, &st)
	if st.Status != helmrtype.AskPending {
		t.Fatalf("after a viewer's click the question is %s", st.Status)
	}
	if err := fake.Click(ctx, "U0ADA", slackChannel, q.TS, action, "yes"); err != nil {
		t.Fatalf("click: %v", err)
	}
	o := sp.wait(s.ID, tt[0].ID)
	var res map[string]any
	json.Unmarshal(o.Result, &res)
	if v, _ := json.Marshal(res["value"]); string(v) != `{"selected":[{"id":"yes","value":true}]}` || res["responded_by"] != "user" || res["responded_by_id"] != "ada@example.com" {
		t.Fatalf("choice answer result %s", o.Result)
	}
	sp.must("GET", "/v1/asks/"+askID, nil, &st)
	if st.RespondedBy == nil || st.RespondedBy.Slack == nil || st.RespondedBy.Slack.UserID != "U0ADA" {
		t.Fatalf("responded_by = %+v", st.RespondedBy)
	}
	answered := sp.waitPost(thread, "Answered by <@U0ADA>")
	if answered.TS != q.TS || strings.Contains(string(answered.Blocks), "helmr_ask:") {
		t.Fatalf("the answered question's post is %s with blocks %s; want %s edited, without buttons", answered.TS, answered.Blocks, q.TS)
	}
}

func TestSlackRateLimitAndDeliveryUnavailable(t *testing.T) {
	fake := newFake(t)
	sp := startSlackPlane(t, fake, "", helmrtype.SlackModeSocket, true)
	s, thread := sp.openSlackSession("echo")

	// A 429 with Retry-After is waited out before the next try.
	before := fake.Calls("chat.postMessage")
	fake.FailNext("chat.postMessage", slackfake.Failure{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Error: "ratelimited"})
	sp.say(thread, "U0ADA", "limited")
	sp.waitPost(thread, "echo: limited")
	times := fake.CallTimes("chat.postMessage")[before:]
	if len(times) < 2 {
		t.Fatalf("chat.postMessage called %d times after the 429", len(times))
	}
	if gap := times[1].Sub(times[0]); gap < time.Second {
		t.Fatalf("retried %v after a 429 with Retry-After: 1s", gap)
	}

	// A permanent failure records slack.delivery_unavailable and loses
	// nothing: the Turn completes and its output is in the timeline.
	fake.FailNext("chat.postMessage", slackfake.Failure{Error: "not_in_channel"})
	sp.say(thread, "U0ADA", "lost post")
	ev := sp.waitEvent(s.ID, helmrtype.EventSlackDeliveryUnavailable)
	if !strings.Contains(string(ev.Data), "not_in_channel") {
		t.Fatalf("delivery_unavailable data %s", ev.Data)
	}
	tt := sp.turns(s.ID)
	if o := sp.wait(s.ID, tt[len(tt)-1].ID); o.Status != helmrtype.TurnCompleted {
		t.Fatalf("turn %s", o.Status)
	}
	if !sp.hasOutput(s.ID, "lost post") {
		t.Fatal("the output of the undelivered post is not in the timeline")
	}
}

func TestSlackRestartMidProjection(t *testing.T) {
	fake := newFake(t)
	dir := t.TempDir()
	sp := startSlackPlane(t, fake, dir, helmrtype.SlackModeSocket, true)
	s, thread := sp.openSlackSession("echo")
	sp.say(thread, "U0ADA", "first")
	sp.waitPost(thread, "echo: first")
	sp.waitPostExact(thread, "first")
	tt := sp.turns(s.ID)
	sp.wait(s.ID, tt[0].ID)

	// The next Turn's post is made but its answer lost (a 5xx after the
	// post), and the retries fail (5xx, backing off) while the control
	// plane stops: the projector is mid-flush, with a post in the thread
	// whose ts it never stored.
	fake.FailNext("chat.postMessage", slackfake.Failure{Status: 500, Applied: true}, slackfake.Failure{Status: 500}, slackfake.Failure{Status: 500})
	before := fake.Calls("chat.postMessage")
	sp.say(thread, "U0ADA", "second")
	deadline := time.Now().Add(30 * time.Second)
	for fake.Calls("chat.postMessage") == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	sp.stop()

	sp = startSlackPlane(t, fake, dir, helmrtype.SlackModeSocket, false)
	sp.waitPost(thread, "echo: second")
	// A post whose answer is lost within one run is found, not made again.
	fake.FailNext("chat.postMessage", slackfake.Failure{Status: 502, Applied: true})
	sp.say(thread, "U0ADA", "third")
	sp.waitPost(thread, "echo: third")
	tt = sp.turns(s.ID)
	sp.wait(s.ID, tt[len(tt)-1].ID)
	sp.waitPostExact(thread, "third") // the response, posted after the output

	// Every post is in the thread once: the opening, and per Turn its
	// output and its response.
	seen := map[string]int{}
	for _, m := range fake.Messages(slackChannel) {
		if m.User == fake.BotUserID() && (m.ThreadTS == thread || m.TS == thread) && !m.Ephemeral {
			seen[m.Text]++
		}
	}
	for text, n := range seen {
		if n > 1 {
			t.Errorf("posted %d times: %q (all: %v)", n, text, seen)
		}
	}
	for _, w := range []string{"echo: first", "echo: second", "echo: third", "first", "second", "third"} {
		if seen[w] != 1 {
			t.Errorf("post %q seen %d times, want 1 (all: %v)", w, seen[w], seen)
		}
	}
}

// TestSlackTwoNodes: two nodes on one PostgreSQL database, sharing the
// secrets key: one Socket Mode connection and one projector per thread
// among them, so every post is made once; when the connection's node
// stops, the other takes over.
func TestSlackTwoNodes(t *testing.T) {
	db := pgtest.URL(t)
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := newFake(t)
	a := startSlackPlaneConfig(t, fake, controlplane.Config{Database: db, SecretsKeyFile: keyFile, LeaseTTL: 2 * time.Second}, helmrtype.SlackModeSocket, true)
	b := startSlackPlaneConfig(t, fake, controlplane.Config{Database: db, SecretsKeyFile: keyFile, LeaseTTL: 2 * time.Second}, helmrtype.SlackModeSocket, false)
	time.Sleep(time.Second) // several rescans of both nodes
	if n := fake.SocketConnections(); n != 1 {
		t.Fatalf("%d Socket Mode connections across two nodes, want 1", n)
	}
	s, thread := b.openSlackSession("echo")
	a.say(thread, "U0ADA", "two nodes")
	a.waitPostExact(thread, "two nodes")
	tt := a.turns(s.ID)
	a.wait(s.ID, tt[0].ID)

	// The node holding the connection stops; the other connects.
	holder, other := a, b
	if !a.cp.Slack.Holds("app:" + a.app.ID) {
		holder, other = b, a
	}
	holder.stop()
	ctx := waitCtx(t)
	if err := fake.WaitSocketConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	other.say(thread, "U0BOB", "after failover")
	other.waitPostExact(thread, "after failover")
	seen := map[string]int{}
	for _, m := range fake.Messages(slackChannel) {
		if m.ThreadTS == thread {
			seen[m.Text]++
		}
	}
	for text, n := range seen {
		if n != 1 {
			t.Errorf("posted %d times: %q", n, text)
		}
	}
}

// TestSlackHelperExampleAPISession runs examples/slack-helper in a Session
// opened through the API (TestSlackHelperExample opens it by a mention): a
// thread asks for a deploy, approval comes by a button, the response and
// the status are posted in the thread.
func TestSlackHelperExampleAPISession(t *testing.T) {
	fake := newFake(t)
	sp := startSlackPlane(t, fake, "", helmrtype.SlackModeSocket, true)
	ctx := waitCtx(t)
	b, err := deploy.BuildDir(ctx, "../../examples/slack-helper", t.TempDir())
	if err != nil {
		t.Fatalf("build examples/slack-helper: %v", err)
	}
	if _, err := sp.cp.Engine.PublishDeployment(ctx, b.Digest, b.Manifest, b.Binary, ""); err != nil {
		t.Fatal(err)
	}
	sp.must("POST", "/v1/slack/users", helmrtype.SlackUserMapping{TeamID: fake.TeamID(), UserID: "U0ADA", Identity: "ada@example.com"}, nil)
	s, thread := sp.openSlackSession("helper")
	sp.say(thread, "U0ADA", "deploy v1.2.3")
	sp.waitPost(thread, "Waiting for approval to deploy v1.2.3")
	q := sp.waitPost(thread, "Deploy v1.2.3 to production?")
	var asks helmrtype.AskPage
	tt := sp.turns(s.ID)
	sp.must("GET", "/v1/sessions/"+s.ID+"/turns/"+tt[0].ID+"/asks", nil, &asks)
	if err := fake.Click(ctx, "U0ADA", slackChannel, q.TS, "helmr_ask:"+asks.Asks[0].ID+":approve", "approve"); err != nil {
		t.Fatalf("click Approve: %v", err)
	}
	sp.waitPostExact(thread, "Deployed v1.2.3.")
	sp.say(thread, "U0ADA", "status")
	sp.waitPostExact(thread, "Deployed: v1.2.3.")
}

// TestSlackCLIDev: helmr dev makes its secrets key (0600), helmr slack
// connect reads the tokens from the environment and connects over Socket
// Mode, session create --slack-channel opens a thread; the tokens are
// in no read, no log line and not in plain text in the database.
func TestSlackCLIDev(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example")
	}
	fake := newFake(t)
	data := t.TempDir()
	s := startServer(t, data, "dev", "--slack-api-url", fake.APIURL(), "../../examples/slack-helper")
	for !strings.Contains(s.output(), "deployed ") {
		select {
		case <-s.done:
			t.Fatalf("helmr dev exited: %s", s.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	fi, err := os.Stat(filepath.Join(data, "secrets.key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secrets.key: %v, mode %v", err, fi.Mode().Perm())
	}
	t.Setenv("SLACK_BOT_TOKEN", fake.BotToken())
	t.Setenv("SLACK_APP_TOKEN", fake.AppToken())
	out, errOut, code := s.cli(t, "slack", "connect", "--mention-agent", "helper", "--json")
	if code != 0 {
		t.Fatalf("slack connect: exit %d: %s %s", code, out, errOut)
	}
	var app helmrtype.SlackApp
	if err := json.Unmarshal([]byte(out), &app); err != nil || app.Mode != helmrtype.SlackModeSocket || app.TeamID != fake.TeamID() {
		t.Fatalf("slack connect printed %s (%v)", out, err)
	}
	ctx := waitCtx(t)
	if err := fake.WaitSocketConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := s.cli(t, "slack", "users", "add", fake.TeamID(), "U0ADA", "ada@example.com"); code != 0 {
		t.Fatalf("slack users add: exit %d: %s %s", code, out, errOut)
	}
	out, errOut, code = s.cli(t, "session", "create", "--agent", "helper", "--slack-channel", slackChannel, "--json")
	if code != 0 {
		t.Fatalf("session create --slack-channel: exit %d: %s %s", code, out, errOut)
	}
	var r helmrtype.SessionCreateReceipt
	json.Unmarshal([]byte(out), &r)
	m, err := fake.WaitMessage(ctx, slackChannel, func(m slackfake.Message) bool { return strings.Contains(m.Text, r.Session.ID) })
	if err != nil {
		t.Fatalf("no opening post: %v", err)
	}
	if _, err := fake.Say(ctx, slackChannel, m.TS, "U0ADA", "status"); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.WaitMessage(ctx, slackChannel, func(x slackfake.Message) bool {
		return x.ThreadTS == m.TS && x.Text == "Nothing deployed in this thread yet."
	}); err != nil {
		t.Fatalf("no answer in the thread: %v", err)
	}
	apps, _, _ := s.cli(t, "slack", "apps", "--json")
	for _, secret := range []string{fake.BotToken(), fake.AppToken()} {
		if strings.Contains(apps, secret) || strings.Contains(s.output(), secret) {
			t.Fatalf("a token is in slack apps or the server's output")
		}
		entries, _ := os.ReadDir(data)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "helmr.db") {
				b, _ := os.ReadFile(filepath.Join(data, e.Name()))
				if strings.Contains(string(b), secret) {
					t.Fatalf("a token is in plain text in %s", e.Name())
				}
			}
		}
	}
}
