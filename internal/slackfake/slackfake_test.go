package slackfake_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
	"go.uber.org/goleak"

	"github.com/helmr-go/helmr/internal/slackfake"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// setup starts a fake with one channel and one person, and a slack-go Web
// API client for the bot.
func setup(t *testing.T) (*slackfake.Fake, *slack.Client) {
	t.Helper()
	f := slackfake.Start(t)
	f.AddChannel("C1", "general")
	f.AddUser("U1", "ada")
	return f, client(t, f)
}

func client(t *testing.T, f *slackfake.Fake, opts ...slack.Option) *slack.Client {
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	opts = append([]slack.Option{slack.OptionAPIURL(f.APIURL()), slack.OptionAppLevelToken(f.AppToken()), slack.OptionHTTPClient(hc)}, opts...)
	return slack.New(f.BotToken(), opts...)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// slackCode is the ok:false error code slack-go returned, or "".
func slackCode(err error) string {
	var e slack.SlackErrorResponse
	if errors.As(err, &e) {
		return e.Err
	}
	return ""
}

func approvalBlocks(prompt string) []slack.Block {
	return []slack.Block{
		slack.NewSectionBlock(slack.NewTextBlockObject(slack.MarkdownType, prompt, false, false), nil, nil),
		slack.NewActionBlock("q1",
			slack.NewButtonBlockElement("approve", "yes", slack.NewTextBlockObject(slack.PlainTextType, "Approve", false, false)).WithStyle(slack.StylePrimary),
			slack.NewButtonBlockElement("reject", "no", slack.NewTextBlockObject(slack.PlainTextType, "Reject", false, false)).WithStyle(slack.StyleDanger)),
	}
}

func TestWebAPI(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)

	auth, err := api.AuthTestContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if auth.UserID != f.BotUserID() || auth.TeamID != f.TeamID() || auth.BotID == "" {
		t.Fatalf("auth.test %+v", auth)
	}

	ch, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("thinking…", false), slack.MsgOptionBlocks(approvalBlocks("Deploy?")...))
	if err != nil || ch != "C1" || ts == "" {
		t.Fatalf("post: %q %q %v", ch, ts, err)
	}
	_, reply, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("in the thread", false), slack.MsgOptionTS(ts))
	if err != nil || reply <= ts {
		t.Fatalf("thread reply ts %q after %q: %v", reply, ts, err)
	}
	_, uts, _, err := api.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("done", false))
	if err != nil || uts != ts {
		t.Fatalf("update: %q %v", uts, err)
	}
	ets, err := api.PostEphemeralContext(ctx, "C1", "U1", slack.MsgOptionText("only you", false))
	if err != nil || ets == "" {
		t.Fatalf("ephemeral: %q %v", ets, err)
	}

	msgs := f.Messages("C1")
	if len(msgs) != 3 {
		t.Fatalf("messages %+v", msgs)
	}
	first, second, third := msgs[0], msgs[1], msgs[2]
	if first.TS != ts || first.Text != "done" || len(first.Edits) != 1 || first.Edits[0] != "thinking…" || first.User != f.BotUserID() {
		t.Fatalf("updated message %+v", first)
	}
	var blocks []map[string]any
	if err := json.Unmarshal(first.Blocks, &blocks); err != nil || len(blocks) != 2 || blocks[1]["block_id"] != "q1" {
		t.Fatalf("update without blocks must keep them: %s (%v)", first.Blocks, err)
	}
	if second.ThreadTS != ts || second.Text != "in the thread" || second.Blocks != nil {
		t.Fatalf("thread reply %+v", second)
	}
	if !third.Ephemeral || third.EphemeralUser != "U1" || third.TS != ets {
		t.Fatalf("ephemeral %+v", third)
	}

	// WaitMessage sees every version, also the one already replaced.
	m, err := f.WaitMessage(ctx, "C1", func(m slackfake.Message) bool { return m.Text == "thinking…" })
	if err != nil || m.TS != ts || len(m.Edits) != 0 {
		t.Fatalf("wait for the first version: %+v %v", m, err)
	}

	u, err := api.GetUserInfoContext(ctx, "U1")
	if err != nil || u.ID != "U1" || u.Name != "ada" || u.TeamID != f.TeamID() || u.IsBot {
		t.Fatalf("users.info %+v %v", u, err)
	}
	if bot, err := api.GetUserInfoContext(ctx, f.BotUserID()); err != nil || !bot.IsBot {
		t.Fatalf("users.info of the bot %+v %v", bot, err)
	}
	if _, err := api.GetUserInfoContext(ctx, "U404"); slackCode(err) != "user_not_found" {
		t.Fatalf("unknown user: %v", err)
	}
	c, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "C1"})
	if err != nil || c.ID != "C1" || c.Name != "general" || !c.IsMember || c.IsPrivate {
		t.Fatalf("conversations.info %+v %v", c, err)
	}
	if _, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "C404"}); slackCode(err) != "channel_not_found" {
		t.Fatalf("unknown channel: %v", err)
	}

	// Refusals: elsewhere, nothing to say, not the bot's message, bad blocks.
	if _, _, err := api.PostMessageContext(ctx, "C404", slack.MsgOptionText("x", false)); slackCode(err) != "channel_not_found" {
		t.Fatalf("post in an unknown channel: %v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C1"); slackCode(err) != "no_text" {
		t.Fatalf("post without text: %v", err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", "1.000001", slack.MsgOptionText("x", false)); slackCode(err) != "message_not_found" {
		t.Fatalf("update of an unknown message: %v", err)
	}
	long := slack.NewButtonBlockElement("a", "v", slack.NewTextBlockObject(slack.PlainTextType, strings.Repeat("x", 76), false, false))
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(slack.NewActionBlock("", long))); slackCode(err) != "invalid_blocks" {
		t.Fatalf("button text over 75 characters: %v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText(strings.Repeat("x", 40001), false)); slackCode(err) != "msg_too_long" {
		t.Fatalf("text over 40000 characters: %v", err)
	}
	if len(f.Messages("C1")) != 3 {
		t.Fatal("a refused call posted something")
	}

	// Tokens: only the bot token, and only the app token for connections.
	if _, err := client(t, f, slack.OptionAppLevelToken(f.BotToken())).AuthTestContext(ctx); err != nil {
		t.Fatal(err)
	}
	other := slack.New(f.AppToken(), slack.OptionAPIURL(f.APIURL()))
	if _, err := other.AuthTestContext(ctx); slackCode(err) != "invalid_auth" {
		t.Fatalf("app token on auth.test: %v", err)
	}
	if _, _, err := client(t, f, slack.OptionAppLevelToken(f.BotToken())).StartSocketModeContext(ctx); slackCode(err) != "invalid_auth" {
		t.Fatalf("bot token on apps.connections.open: %v", err)
	}
	if code := rawCall(t, f.APIURL()+"chat.postMessage", "", "channel=C1&text=x"); code != "not_authed" {
		t.Fatalf("no token: %s", code)
	}
	if code := rawCall(t, f.APIURL()+"chat.meMessage", f.BotToken(), "channel=C1&text=x"); code != "unknown_method" {
		t.Fatalf("unknown method: %s", code)
	}
	if n := f.Calls("chat.postMessage"); n != 7 {
		t.Fatalf("chat.postMessage calls %d, want 7", n)
	}
}

// rawCall POSTs a form with a bearer token and returns the error code.
func rawCall(t *testing.T, url, token, form string) string {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r slack.SlackResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Error
}

func TestFailNext(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	f.FailNext("chat.postMessage",
		slackfake.Failure{Status: 429, RetryAfter: 2 * time.Second},
		slackfake.Failure{Status: 503},
		slackfake.Failure{Error: "not_in_channel"})
	_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("a", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second {
		t.Fatalf("429: %v", err)
	}
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("a", false))
	var sc slack.StatusCodeError
	if !errors.As(err, &sc) || sc.Code != 503 {
		t.Fatalf("503: %v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("a", false)); slackCode(err) != "not_in_channel" {
		t.Fatalf("ok:false: %v", err)
	}
	if len(f.Messages("C1")) != 0 {
		t.Fatal("a failed call posted")
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("a", false)); err != nil {
		t.Fatal(err)
	}
	if n := f.Calls("chat.postMessage"); n != 4 || len(f.Messages("C1")) != 1 {
		t.Fatalf("calls %d, messages %d", n, len(f.Messages("C1")))
	}

	// A client that retries honours Retry-After, and CallTimes shows it.
	f.FailNext("chat.update", slackfake.Failure{Status: 429, RetryAfter: 1500 * time.Millisecond})
	retrying := client(t, f, slack.OptionRetryConfig(slack.RetryConfig{MaxRetries: 1}))
	ts := f.Messages("C1")[0].TS
	if _, _, _, err := retrying.UpdateMessageContext(ctx, "C1", ts, slack.MsgOptionText("b", false)); err != nil {
		t.Fatal(err)
	}
	times := f.CallTimes("chat.update")
	if len(times) != 2 || times[1].Sub(times[0]) < 2*time.Second {
		t.Fatalf("call times %v: the retry came before Retry-After (rounded up to 2 s)", times)
	}
}

// socketApp runs slack-go's Socket Mode client against f and hands every
// event to handle until the test ends.
type socketApp struct {
	client    *socketmode.Client
	mu        sync.Mutex
	connected int
}

func runSocketApp(t *testing.T, f *slackfake.Fake, handle func(c *socketmode.Client, e socketmode.Event), opts ...socketmode.Option) *socketApp {
	t.Helper()
	app := &socketApp{client: socketmode.New(client(t, f), opts...)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = app.client.RunContext(ctx) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-app.client.Events:
				if e.Type == socketmode.EventTypeConnected {
					app.mu.Lock()
					app.connected++
					app.mu.Unlock()
				}
				if handle != nil {
					handle(app.client, e)
				}
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := f.WaitSocketConnections(wctx, 1); err != nil {
		t.Fatalf("no Socket Mode connection: %v", err)
	}
	return app
}

func (a *socketApp) connections() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.connected
}

// received is one Socket Mode envelope an app saw.
type received struct {
	req   socketmode.Request
	event slackevents.EventsAPIEvent
}

func TestSocketModeSay(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	got := make(chan received, 10)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeEventsAPI {
			_ = c.Ack(*e.Request)
			got <- received{req: *e.Request, event: e.Data.(slackevents.EventsAPIEvent)}
		}
	})
	if n := f.SocketConnections(); n != 1 {
		t.Fatalf("socket connections %d", n)
	}
	ts, err := f.Say(ctx, "C1", "", "U1", "hi <@"+f.BotUserID()+"> please help")
	if err != nil {
		t.Fatal(err)
	}
	msg, mention := <-got, <-got
	me, ok := msg.event.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || me.TimeStamp != ts || me.Channel != "C1" || me.User != "U1" || me.ChannelType != "channel" || me.ThreadTimeStamp != "" {
		t.Fatalf("message event %#v", msg.event.InnerEvent.Data)
	}
	am, ok := mention.event.InnerEvent.Data.(*slackevents.AppMentionEvent)
	if !ok || am.TimeStamp != ts || am.Text != me.Text || am.User != "U1" {
		t.Fatalf("app_mention event %#v", mention.event.InnerEvent.Data)
	}
	cb := msg.event.Data.(*slackevents.EventsAPICallbackEvent)
	if msg.event.TeamID != f.TeamID() || msg.event.APIAppID != f.AppID() || cb.EventID == "" || msg.req.RetryAttempt != 0 {
		t.Fatalf("envelope %+v / %+v", msg.req, cb)
	}
	if cb.EventID == mention.event.Data.(*slackevents.EventsAPICallbackEvent).EventID {
		t.Fatal("message and app_mention share an event_id")
	}

	// A reply in the thread the bot started carries thread_ts and parent_user_id.
	_, bts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("on it", false), slack.MsgOptionTS(ts))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Say(ctx, "C1", bts, "U1", "thanks"); err == nil {
		t.Fatal("a reply to a reply must be refused (threads hang off top-level messages)")
	}
	rts, err := f.Say(ctx, "C1", ts, "U1", "thanks")
	if err != nil {
		t.Fatal(err)
	}
	r := <-got
	re := r.event.InnerEvent.Data.(*slackevents.MessageEvent)
	if re.TimeStamp != rts || re.ThreadTimeStamp != ts || re.Text != "thanks" {
		t.Fatalf("thread reply event %+v", re)
	}
	select {
	case extra := <-got:
		t.Fatalf("no app_mention without a mention, got %+v", extra.event.InnerEvent)
	default:
	}
}

func TestSocketModeRetry(t *testing.T) {
	f, _ := setup(t)
	ctx := ctxT(t)
	f.SetAckTimeout(300 * time.Millisecond)
	got := make(chan received, 10)
	ackFrom := 2 // ack only the third attempt
	var mu sync.Mutex
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type != socketmode.EventTypeEventsAPI {
			return
		}
		mu.Lock()
		from := ackFrom
		mu.Unlock()
		if e.Request.RetryAttempt >= from {
			_ = c.Ack(*e.Request)
		}
		got <- received{req: *e.Request, event: e.Data.(slackevents.EventsAPIEvent)}
	})
	if _, err := f.Say(ctx, "C1", "", "U1", "hello"); err != nil {
		t.Fatal(err)
	}
	var eventID string
	for attempt := range 3 {
		r := <-got
		id := r.event.Data.(*slackevents.EventsAPICallbackEvent).EventID
		if eventID == "" {
			eventID = id
		}
		if r.req.RetryAttempt != attempt || id != eventID {
			t.Fatalf("attempt %d: %+v, event_id %s (first %s)", attempt, r.req, id, eventID)
		}
		if (attempt > 0) != (r.req.RetryReason == "timeout") {
			t.Fatalf("attempt %d: retry_reason %q", attempt, r.req.RetryReason)
		}
	}

	// Never acked: the first delivery and three retries, then an error.
	mu.Lock()
	ackFrom = 99
	mu.Unlock()
	_, err := f.Say(ctx, "C1", "", "U1", "anyone?")
	if !errors.Is(err, slackfake.ErrNotAcknowledged) {
		t.Fatalf("unacked Say: %v", err)
	}
	for attempt := 0; attempt < 4; {
		r := <-got
		if r.event.Data.(*slackevents.EventsAPICallbackEvent).EventID == eventID {
			continue // the first message's attempts, if an ack came too late
		}
		if r.req.RetryAttempt != attempt {
			t.Fatalf("attempt %d: %+v", attempt, r.req)
		}
		attempt++
	}
	// Deliveries: the first message acked on its third attempt (or later,
	// should an ack be slow), the second never, each with one event_id.
	byEvent := map[string][]slackfake.Delivery{}
	var order []string
	for _, d := range f.Deliveries() {
		if d.Transport != "socket" || d.Type != "message" {
			t.Fatalf("delivery %+v", d)
		}
		if byEvent[d.EventID] == nil {
			order = append(order, d.EventID)
		}
		byEvent[d.EventID] = append(byEvent[d.EventID], d)
	}
	if len(order) != 2 || order[0] != eventID {
		t.Fatalf("deliveries of %v", order)
	}
	for i, id := range order {
		ds := byEvent[id]
		if (i == 0 && (len(ds) < 3 || !ds[len(ds)-1].Acked)) || (i == 1 && len(ds) != 4) {
			t.Fatalf("deliveries of event %d: %+v", i, ds)
		}
		for a, d := range ds {
			if d.Attempt != a || d.Acked != (i == 0 && a == len(ds)-1) || (a > 0) != (d.RetryReason == "timeout") {
				t.Fatalf("event %d attempt %d: %+v", i, a, d)
			}
		}
	}
}

// httpApp is an app behind Request URLs: it verifies every request with
// slack.NewSecretsVerifier and answers url_verification.
type httpApp struct {
	srv    *httptest.Server
	mu     sync.Mutex
	events []httpEvent
	answer func(n int) (status int, delay time.Duration) // per delivery, from 0
}

type httpEvent struct {
	header http.Header
	event  slackevents.EventsAPIEvent
	click  slack.InteractionCallback
}

func startHTTPApp(t *testing.T, f *slackfake.Fake) *httpApp {
	app := &httpApp{answer: func(int) (int, time.Duration) { return http.StatusOK, 0 }}
	mux := http.NewServeMux()
	verify := func(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
		body, _ := io.ReadAll(r.Body)
		sv, err := slack.NewSecretsVerifier(r.Header, f.SigningSecret())
		if err == nil {
			_, _ = sv.Write(body)
			err = sv.Ensure()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return nil, false
		}
		return body, true
	}
	respond := func(w http.ResponseWriter, r *http.Request, e httpEvent) {
		app.mu.Lock()
		n := len(app.events)
		app.events = append(app.events, e)
		status, delay := app.answer(n)
		app.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
		w.WriteHeader(status)
	}
	mux.HandleFunc("POST /slack/events", func(w http.ResponseWriter, r *http.Request) {
		body, ok := verify(w, r)
		if !ok {
			return
		}
		ev, err := slackevents.ParseEvent(body, slackevents.OptionVerifyToken(&slackevents.TokenComparator{VerificationToken: f.VerificationToken()}))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if ev.Type == slackevents.URLVerification {
			var c slackevents.ChallengeResponse
			_ = json.Unmarshal(body, &c)
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(c.Challenge))
			return
		}
		respond(w, r, httpEvent{header: r.Header.Clone(), event: ev})
	})
	mux.HandleFunc("POST /slack/interactivity", func(w http.ResponseWriter, r *http.Request) {
		body, ok := verify(w, r)
		if !ok {
			return
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		cb, err := slack.InteractionCallbackParse(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		respond(w, r, httpEvent{header: r.Header.Clone(), click: cb})
	})
	app.srv = httptest.NewServer(mux)
	t.Cleanup(app.srv.Close)
	f.SetEventsURL(app.srv.URL + "/slack/events")
	f.SetInteractivityURL(app.srv.URL + "/slack/interactivity")
	return app
}

func (a *httpApp) received() []httpEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]httpEvent(nil), a.events...)
}

func TestHTTPEvents(t *testing.T) {
	f, _ := setup(t)
	ctx := ctxT(t)
	app := startHTTPApp(t, f)
	if err := f.VerifyURL(ctx); err != nil {
		t.Fatal(err)
	}
	ts, err := f.Say(ctx, "C1", "", "U1", "<@"+f.BotUserID()+"> hello")
	if err != nil {
		t.Fatal(err)
	}
	evs := app.received()
	if len(evs) != 2 {
		t.Fatalf("deliveries %d, want message + app_mention", len(evs))
	}
	if me, ok := evs[0].event.InnerEvent.Data.(*slackevents.MessageEvent); !ok || me.TimeStamp != ts {
		t.Fatalf("message event %#v", evs[0].event.InnerEvent.Data)
	}
	if _, ok := evs[1].event.InnerEvent.Data.(*slackevents.AppMentionEvent); !ok || evs[0].header.Get("X-Slack-Retry-Num") != "" {
		t.Fatalf("app_mention %#v, headers %v", evs[1].event.InnerEvent.Data, evs[0].header)
	}

	// Two errors, then a timeout, then 200: retried with the same event_id.
	f.SetAckTimeout(300 * time.Millisecond)
	app.mu.Lock()
	base := len(app.events)
	app.answer = func(n int) (int, time.Duration) {
		switch n - base {
		case 0, 1:
			return http.StatusInternalServerError, 0
		case 2:
			return http.StatusOK, 2 * time.Second
		}
		return http.StatusOK, 0
	}
	app.mu.Unlock()
	if _, err := f.Say(ctx, "C1", "", "U1", "again"); err != nil {
		t.Fatal(err)
	}
	evs = app.received()[base:]
	if len(evs) != 4 {
		t.Fatalf("deliveries %d, want 4", len(evs))
	}
	first := evs[0].event.Data.(*slackevents.EventsAPICallbackEvent).EventID
	reasons := []string{"", "http_error", "http_error", "http_timeout"}
	for i, e := range evs {
		num, reason := e.header.Get("X-Slack-Retry-Num"), e.header.Get("X-Slack-Retry-Reason")
		if id := e.event.Data.(*slackevents.EventsAPICallbackEvent).EventID; id != first {
			t.Fatalf("attempt %d has event_id %s, want %s", i, id, first)
		}
		if (i == 0 && num != "") || (i > 0 && num != strconv.Itoa(i)) || reason != reasons[i] {
			t.Fatalf("attempt %d: X-Slack-Retry-Num %q, X-Slack-Retry-Reason %q", i, num, reason)
		}
	}

	// X-Slack-No-Retry stops the retries.
	noRetry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Slack-No-Retry", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer noRetry.Close()
	f.SetEventsURL(noRetry.URL)
	if _, err := f.Say(ctx, "C1", "", "U1", "x"); !errors.Is(err, slackfake.ErrNotAcknowledged) || strings.Count(err.Error(), "http_error") != 1 {
		t.Fatalf("no-retry answer: %v", err)
	}
}

func TestDeliverSignatures(t *testing.T) {
	f, _ := setup(t)
	ctx := ctxT(t)
	app := startHTTPApp(t, f)
	url := app.srv.URL + "/slack/events"
	body := []byte(`{"token":"` + f.VerificationToken() + `","team_id":"T0FAKE","api_app_id":"A0FAKE","type":"event_callback","event_id":"Ev1","event_time":1,"event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"1.000001"}}`)
	at := time.Now().Add(-time.Minute)
	cases := []struct {
		name   string
		opt    slackfake.DeliverOptions
		status int
		why    error
	}{
		{"good", slackfake.DeliverOptions{Timestamp: at}, 200, nil},
		{"bad signature", slackfake.DeliverOptions{BadSignature: true}, 401, slack.ErrInvalidSignature},
		{"stale timestamp", slackfake.DeliverOptions{Timestamp: time.Now().Add(-6 * time.Minute)}, 401, slack.ErrExpiredTimestamp},
		{"future timestamp", slackfake.DeliverOptions{Timestamp: time.Now().Add(6 * time.Minute)}, 401, slack.ErrExpiredTimestamp},
		{"garbage signature", slackfake.DeliverOptions{Signature: "v0=" + strings.Repeat("ab", 32)}, 401, slack.ErrInvalidSignature},
	}
	var goodSig string
	for _, c := range cases {
		status, resp, err := f.Deliver(ctx, url, body, c.opt)
		if err != nil {
			t.Fatal(err)
		}
		if status != c.status || (c.why != nil && strings.TrimSpace(string(resp)) != c.why.Error()) {
			t.Fatalf("%s: %d %s", c.name, status, resp)
		}
		if c.name == "good" {
			goodSig = app.received()[0].header.Get("X-Slack-Signature")
		}
	}
	// The same timestamp and signature again verifies (a verifier does not
	// deduplicate: replay protection is the app's event_id check).
	status, _, err := f.Deliver(ctx, url, body, slackfake.DeliverOptions{Timestamp: at, Signature: goodSig})
	if err != nil || status != 200 {
		t.Fatalf("replayed delivery: %d %v", status, err)
	}
	evs := app.received()
	if len(evs) != 2 || evs[1].header.Get("X-Slack-Signature") != goodSig ||
		evs[1].header.Get("X-Slack-Request-Timestamp") != strconv.FormatInt(at.Unix(), 10) {
		t.Fatalf("replay headers %v", evs)
	}
	// The same signature over another body does not.
	status, _, _ = f.Deliver(ctx, url, append(body[:len(body):len(body)], ' '), slackfake.DeliverOptions{Timestamp: at, Signature: goodSig})
	if status != 401 {
		t.Fatalf("signature reused for another body: %d", status)
	}
}

func TestClick(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("Deploy?", false), slack.MsgOptionBlocks(approvalBlocks("Deploy?")...))
	if err != nil {
		t.Fatal(err)
	}
	check := func(cb slack.InteractionCallback) {
		t.Helper()
		if cb.Type != slack.InteractionTypeBlockActions || len(cb.ActionCallback.BlockActions) != 1 {
			t.Fatalf("callback %+v", cb)
		}
		a := cb.ActionCallback.BlockActions[0]
		if a.ActionID != "approve" || a.Value != "yes" || a.BlockID != "q1" || a.Type != "button" ||
			cb.User.ID != "U1" || cb.Channel.ID != "C1" || cb.Container.MessageTs != ts || cb.Container.ChannelID != "C1" ||
			cb.Message.Timestamp != ts || cb.Team.ID != f.TeamID() || cb.TriggerID == "" || cb.ResponseURL == "" {
			t.Fatalf("block action %+v in %+v", a, cb)
		}
	}

	// Over HTTP: a signed form post with payload=.
	app := startHTTPApp(t, f)
	if err := f.Click(ctx, "U1", "C1", ts, "approve", "yes"); err != nil {
		t.Fatal(err)
	}
	evs := app.received()
	if len(evs) != 1 || evs[0].header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		t.Fatalf("deliveries %+v", evs)
	}
	check(evs[0].click)

	// Over Socket Mode: an interactive envelope.
	got := make(chan slack.InteractionCallback, 1)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeInteractive {
			_ = c.Ack(*e.Request)
			got <- e.Data.(slack.InteractionCallback)
		}
	})
	if err := f.Click(ctx, "U1", "C1", ts, "approve", ""); err != nil {
		t.Fatal(err)
	}
	check(<-got)
	if len(app.received()) != 1 {
		t.Fatal("with Socket Mode connected, the click also went over HTTP")
	}

	// Only what the message holds can be clicked.
	for _, c := range [][3]string{{ts, "deploy", ""}, {ts, "approve", "no"}, {"1.000001", "approve", ""}} {
		if err := f.Click(ctx, "U1", "C1", c[0], c[1], c[2]); !errors.Is(err, slackfake.ErrUnknown) {
			t.Fatalf("click %v: %v", c, err)
		}
	}
}

func TestClickNotAcknowledged(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	f.SetAckTimeout(200 * time.Millisecond)
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(approvalBlocks("Deploy?")...))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := 0
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeInteractive {
			mu.Lock()
			seen++
			mu.Unlock()
		}
	})
	if err := f.Click(ctx, "U1", "C1", ts, "reject", "no"); !errors.Is(err, slackfake.ErrNotAcknowledged) {
		t.Fatalf("unacked click: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 1 {
		t.Fatalf("an interaction is delivered once (Slack does not retry them), saw %d", seen)
	}
}

func TestSocketModeConnections(t *testing.T) {
	f, _ := setup(t)
	ctx := ctxT(t)
	f.SetPingInterval(100 * time.Millisecond)
	acked := make(chan string, 10)
	app := runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeEventsAPI {
			_ = c.Ack(*e.Request)
			acked <- e.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent).Text
		}
	}, socketmode.OptionPingInterval(time.Second))

	// Pinged often enough, the client keeps its one connection.
	time.Sleep(2500 * time.Millisecond)
	if n := app.connections(); n != 1 || f.SocketConnections() != 1 {
		t.Fatalf("connected %d times, %d open", n, f.SocketConnections())
	}

	// disconnect: the client opens a new connection and keeps receiving.
	f.Disconnect("refresh_requested")
	waitFor(t, func() bool { return app.connections() == 2 && f.SocketConnections() == 1 })
	if _, err := f.Say(ctx, "C1", "", "U1", "after refresh"); err != nil || <-acked != "after refresh" {
		t.Fatal(err)
	}

	// A dropped connection: the client reconnects; a Say meanwhile waits for it.
	f.CloseSockets()
	if _, err := f.Say(ctx, "C1", "", "U1", "after drop"); err != nil || <-acked != "after drop" {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return app.connections() == 3 })
}

func TestSocketModePingTimeout(t *testing.T) {
	f, _ := setup(t)
	f.SetPingInterval(0)
	app := runSocketApp(t, f, nil, socketmode.OptionPingInterval(300*time.Millisecond))
	waitFor(t, func() bool { return app.connections() >= 2 })
}

func TestSocketTicket(t *testing.T) {
	_, api := setup(t)
	ctx := ctxT(t)
	_, url, err := api.StartSocketModeContext(ctx)
	if err != nil || !strings.HasPrefix(url, "ws://") {
		t.Fatalf("apps.connections.open: %q %v", url, err)
	}
	dial := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http"+strings.TrimPrefix(url, "ws"), nil)
		hc := &http.Client{Transport: &http.Transport{}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// A plain GET is no WebSocket handshake but uses up the ticket.
	if code := dial(); code == http.StatusUnauthorized {
		t.Fatalf("first use refused: %d", code)
	}
	if code := dial(); code != http.StatusUnauthorized {
		t.Fatalf("second use of a ticket: %d, want 401", code)
	}
}

func TestNoReceiver(t *testing.T) {
	f, _ := setup(t)
	f.SetAckTimeout(50 * time.Millisecond)
	_, err := f.Say(ctxT(t), "C1", "", "U1", "hello?")
	if !errors.Is(err, slackfake.ErrNotAcknowledged) || !strings.Contains(err.Error(), "connection_failed") {
		t.Fatalf("Say with nobody listening: %v", err)
	}
	if _, err := f.Say(ctxT(t), "C404", "", "U1", "x"); !errors.Is(err, slackfake.ErrUnknown) {
		t.Fatalf("Say in an unknown channel: %v", err)
	}
	if _, err := f.Say(ctxT(t), "C1", "", "U404", "x"); !errors.Is(err, slackfake.ErrUnknown) {
		t.Fatalf("Say by an unknown user: %v", err)
	}
}

func TestEchoBotMessages(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	f.SetEchoBotMessages(true)
	got := make(chan *slackevents.MessageEvent, 1)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeEventsAPI {
			_ = c.Ack(*e.Request)
			got <- e.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
		}
	})
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("mine", false))
	if err != nil {
		t.Fatal(err)
	}
	if m := <-got; m.TimeStamp != ts || m.BotID == "" || m.User != f.BotUserID() {
		t.Fatalf("echo %+v", m)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 15 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestThreadsAndDeletes(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	got := make(chan string, 10)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeEventsAPI {
			_ = c.Ack(*e.Request)
			got <- e.Data.(slackevents.EventsAPIEvent).InnerEvent.Type
		}
	})
	root, err := f.Say(ctx, "C1", "", "U1", "<@"+f.BotUserID()+"> help")
	if err != nil {
		t.Fatal(err)
	}
	_, bts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("sure", false), slack.MsgOptionTS(root))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Say(ctx, "C1", root, "U1", "thanks"); err != nil {
		t.Fatal(err)
	}
	_, other, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("top level", false))
	if err != nil {
		t.Fatal(err)
	}

	msgs, more, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root})
	if err != nil || more || len(msgs) != 3 {
		t.Fatalf("replies %d %v %v", len(msgs), more, err)
	}
	if msgs[0].Timestamp != root || msgs[0].ReplyCount != 2 || msgs[1].Timestamp != bts || msgs[1].BotID == "" || msgs[2].Text != "thanks" || msgs[2].User != "U1" {
		t.Fatalf("replies %+v", msgs)
	}
	hist, err := api.GetConversationHistoryContext(ctx, &slack.GetConversationHistoryParameters{ChannelID: "C1"})
	if err != nil || len(hist.Messages) != 2 || hist.Messages[0].Timestamp != other || hist.Messages[1].Timestamp != root {
		t.Fatalf("history %+v %v", hist, err)
	}
	link, err := api.GetPermalinkContext(ctx, &slack.PermalinkParameters{Channel: "C1", Ts: bts})
	if err != nil || !strings.Contains(link, "/archives/C1/p"+strings.ReplaceAll(bts, ".", "")) {
		t.Fatalf("permalink %q %v", link, err)
	}

	if _, _, err := api.DeleteMessageContext(ctx, "C1", root); slackCode(err) != "cant_delete_message" {
		t.Fatalf("deleting a person's message: %v", err)
	}
	if _, _, err := api.DeleteMessageContext(ctx, "C1", bts); err != nil {
		t.Fatal(err)
	}
	if m := f.Messages("C1")[0]; m.TS != bts || !m.Deleted {
		t.Fatalf("deleted %+v", m)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", bts, slack.MsgOptionText("x", false)); slackCode(err) != "message_not_found" {
		t.Fatalf("update of a deleted message: %v", err)
	}
	if msgs, _, _, _ := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: root}); len(msgs) != 2 {
		t.Fatalf("replies after delete %d", len(msgs))
	}
	for range 3 { // message + app_mention, then the reply
		<-got
	}
}

func TestResponseURL(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	_, ts, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("Deploy?", false), slack.MsgOptionBlocks(approvalBlocks("Deploy?")...))
	if err != nil {
		t.Fatal(err)
	}
	clicks := make(chan slack.InteractionCallback, 1)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeInteractive {
			_ = c.Ack(*e.Request)
			clicks <- e.Data.(slack.InteractionCallback)
		}
	})
	if err := f.Click(ctx, "U1", "C1", ts, "approve", "yes"); err != nil {
		t.Fatal(err)
	}
	cb := <-clicks
	// Ephemeral by default, then in the channel's thread, then the original replaced.
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cb.ResponseURL, ""), slack.MsgOptionText("only you see this", false)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cb.ResponseURL, slack.ResponseTypeInChannel), slack.MsgOptionText("approved by ada", false), slack.MsgOptionTS(ts)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionReplaceOriginal(cb.ResponseURL), slack.MsgOptionText("Deploy? Approved", false)); err != nil {
		t.Fatal(err)
	}
	msgs := f.Messages("C1")
	if len(msgs) != 3 {
		t.Fatalf("messages %+v", msgs)
	}
	if m := msgs[0]; m.Text != "Deploy? Approved" || string(m.Blocks) != "[]" || len(m.Edits) != 1 {
		t.Fatalf("replaced original %+v", m)
	}
	if m := msgs[1]; !m.Ephemeral || m.EphemeralUser != "U1" || m.Text != "only you see this" {
		t.Fatalf("ephemeral response %+v", m)
	}
	if m := msgs[2]; m.Ephemeral || m.ThreadTS != ts || m.Text != "approved by ada" {
		t.Fatalf("in_channel response %+v", m)
	}
	if _, _, err := api.PostMessageContext(ctx, "", slack.MsgOptionDeleteOriginal(cb.ResponseURL)); err != nil {
		t.Fatal(err)
	}
	if !f.Messages("C1")[0].Deleted {
		t.Fatal("delete_original kept the message")
	}
	// Five uses, as Slack allows; the sixth is refused.
	_, _, err = api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cb.ResponseURL, ""), slack.MsgOptionText("5", false))
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = api.PostMessageContext(ctx, "", slack.MsgOptionResponseURL(cb.ResponseURL, ""), slack.MsgOptionText("6", false))
	var sc slack.StatusCodeError
	if !errors.As(err, &sc) || sc.Code != http.StatusNotFound || f.Calls("response_url") != 6 {
		t.Fatalf("sixth use: %v, calls %d", err, f.Calls("response_url"))
	}
}

func TestRateLimit(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	f.SetRateLimit("chat.postMessage", 2, 2*time.Second)
	for i := range 2 {
		if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText(strconv.Itoa(i), false)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("third", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter < time.Second || rl.RetryAfter > 2*time.Second {
		t.Fatalf("third call in the window: %v", err)
	}
	// A client that honours Retry-After gets through once the window moves.
	retrying := client(t, f, slack.OptionRetryConfig(slack.RetryConfig{MaxRetries: 2}))
	if _, _, err := retrying.PostMessageContext(ctx, "C1", slack.MsgOptionText("third", false)); err != nil {
		t.Fatal(err)
	}
	times := f.CallTimes("chat.postMessage")
	if n := len(f.Messages("C1")); n != 3 || len(times) < 5 || times[len(times)-1].Sub(times[0]) < 2*time.Second {
		t.Fatalf("%d messages, calls at %v", n, times)
	}
	f.SetRateLimit("chat.postMessage", 0, 0)
	for range 3 {
		if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("free", false)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEdit(t *testing.T) {
	f, _ := setup(t)
	ctx := ctxT(t)
	got := make(chan *slackevents.MessageEvent, 2)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeEventsAPI {
			_ = c.Ack(*e.Request)
			got <- e.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent)
		}
	})
	ts, err := f.Say(ctx, "C1", "", "U1", "deploy v1")
	if err != nil {
		t.Fatal(err)
	}
	<-got
	if err := f.Edit(ctx, "C1", ts, "deploy v2"); err != nil {
		t.Fatal(err)
	}
	e := <-got
	if e.SubType != "message_changed" || e.Message == nil || e.Message.Timestamp != ts || e.Message.Text != "deploy v2" ||
		e.PreviousMessage == nil || e.PreviousMessage.Text != "deploy v1" || e.TimeStamp == ts {
		t.Fatalf("message_changed %+v", e)
	}
	if err := f.Edit(ctx, "C1", "1.000001", "x"); !errors.Is(err, slackfake.ErrUnknown) {
		t.Fatalf("edit of an unknown message: %v", err)
	}
}

// TestConcurrentSays: deliveries in flight at once are acked each by its
// own envelope, and every message gets its own increasing ts.
func TestConcurrentSays(t *testing.T) {
	f, _ := setup(t)
	ctx := ctxT(t)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeEventsAPI {
			go func() { _ = c.Ack(*e.Request) }() // acks out of order
		}
	})
	const n = 20
	var wg sync.WaitGroup
	tss := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { tss[i], errs[i] = f.Say(ctx, "C1", "", "U1", "msg "+strconv.Itoa(i)) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil || seen[tss[i]] {
			t.Fatalf("say %d: ts %q, %v", i, tss[i], errs[i])
		}
		seen[tss[i]] = true
	}
	for _, d := range f.Deliveries() {
		if !d.Acked || d.Attempt != 0 {
			t.Fatalf("delivery %+v", d)
		}
	}
}

func TestBotMembership(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	f.AddChannel("G1", "private")
	got := make(chan string, 10)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeEventsAPI {
			_ = c.Ack(*e.Request)
			got <- e.Data.(slackevents.EventsAPIEvent).InnerEvent.Data.(*slackevents.MessageEvent).Channel
		}
	})
	f.SetBotMember("C1", false)
	f.SetBotMember("G1", false)
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false)); slackCode(err) != "not_in_channel" {
		t.Fatalf("post in a public channel the bot left: %v", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "G1", slack.MsgOptionText("x", false)); slackCode(err) != "channel_not_found" {
		t.Fatalf("post in a private channel the bot left: %v", err)
	}
	if c, err := api.GetConversationInfoContext(ctx, &slack.GetConversationInfoInput{ChannelID: "C1"}); err != nil || c.IsMember {
		t.Fatalf("conversations.info outside: %+v %v", c, err)
	}
	if _, err := f.Say(ctx, "C1", "", "U1", "<@"+f.BotUserID()+"> anyone?"); err != nil {
		t.Fatal(err)
	}
	f.SetBotMember("C1", true)
	if _, err := f.Say(ctx, "G1", "", "U1", "secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Say(ctx, "C1", "", "U1", "back"); err != nil {
		t.Fatal(err)
	}
	if ch := <-got; ch != "C1" || len(f.Deliveries()) != 1 {
		t.Fatalf("delivered from %s; deliveries %+v", ch, f.Deliveries())
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false)); err != nil {
		t.Fatal(err)
	}
}

// TestLateAck: an ack of an earlier attempt that arrives while a retry
// waits acknowledges the delivery.
func TestLateAck(t *testing.T) {
	f, _ := setup(t)
	ctx := ctxT(t)
	f.SetAckTimeout(time.Second)
	runSocketApp(t, f, func(c *socketmode.Client, e socketmode.Event) {
		if e.Type == socketmode.EventTypeEventsAPI && e.Request.RetryAttempt == 0 {
			req := *e.Request
			time.AfterFunc(1500*time.Millisecond, func() { _ = c.Ack(req) }) // during the first retry's wait
		}
	})
	if _, err := f.Say(ctx, "C1", "", "U1", "slow"); err != nil {
		t.Fatal(err)
	}
	ds := f.Deliveries()
	if len(ds) != 2 || ds[0].Acked || !ds[1].Acked || ds[1].Attempt != 1 {
		t.Fatalf("deliveries %+v", ds)
	}
}

// BenchmarkSay is one person's message delivered over Socket Mode to
// slack-go's client and acked (message event only, no mention).
func BenchmarkSay(b *testing.B) {
	f := slackfake.Start(b)
	f.AddChannel("C1", "general")
	f.AddUser("U1", "ada")
	hc := &http.Client{Transport: &http.Transport{}}
	b.Cleanup(hc.CloseIdleConnections)
	sm := socketmode.New(slack.New(f.BotToken(), slack.OptionAPIURL(f.APIURL()), slack.OptionAppLevelToken(f.AppToken()), slack.OptionHTTPClient(hc)))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = sm.RunContext(ctx) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-sm.Events:
				if e.Type == socketmode.EventTypeEventsAPI {
					_ = sm.Ack(*e.Request)
				}
			}
		}
	})
	b.Cleanup(func() { cancel(); wg.Wait() })
	if err := f.WaitSocketConnections(ctx, 1); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := f.Say(ctx, "C1", "", "U1", "hello"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPostMessage is chat.postMessage through slack-go's client.
func BenchmarkPostMessage(b *testing.B) {
	f := slackfake.Start(b)
	f.AddChannel("C1", "general")
	hc := &http.Client{Transport: &http.Transport{}}
	b.Cleanup(hc.CloseIdleConnections)
	api := slack.New(f.BotToken(), slack.OptionAPIURL(f.APIURL()), slack.OptionHTTPClient(hc))
	ctx := context.Background()
	for b.Loop() {
		if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("hello", false)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRetryDelays: with spaced-out retries an app that comes back between
// attempts gets the event again, with the same event_id.
func TestRetryDelays(t *testing.T) {
	f, _ := setup(t)
	ctx := ctxT(t)
	f.SetRetryDelays(700 * time.Millisecond)
	app := startHTTPApp(t, f)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "restarting", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	f.SetEventsURL(down.URL)
	time.AfterFunc(200*time.Millisecond, func() { f.SetEventsURL(app.srv.URL + "/slack/events") }) // back before the retry
	if _, err := f.Say(ctx, "C1", "", "U1", "are you there?"); err != nil {
		t.Fatal(err)
	}
	ds := f.Deliveries()
	evs := app.received()
	if len(ds) != 2 || ds[0].Acked || !ds[1].Acked || ds[1].At.Sub(ds[0].At) < 700*time.Millisecond ||
		len(evs) != 1 || evs[0].header.Get("X-Slack-Retry-Num") != "1" || evs[0].header.Get("X-Slack-Retry-Reason") != "http_error" {
		t.Fatalf("deliveries %+v, app saw %d", ds, len(evs))
	}
}

// TestLostAnswerAndMetadata: an Applied failure posts and answers the
// failure; the post's metadata is listed by conversations.replies only
// with include_all_metadata; bad metadata is refused.
func TestLostAnswerAndMetadata(t *testing.T) {
	f, api := setup(t)
	ctx := ctxT(t)
	_, parent, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("thread", false))
	if err != nil {
		t.Fatal(err)
	}
	md := slack.SlackMetadata{EventType: "helmr_post", EventPayload: map[string]any{"post": "k1"}}
	f.FailNext("chat.postMessage", slackfake.Failure{Status: 500, Applied: true})
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("reply", false), slack.MsgOptionTS(parent), slack.MsgOptionMetadata(md))
	var sc slack.StatusCodeError
	if !errors.As(err, &sc) || sc.Code != 500 {
		t.Fatalf("applied 500: %v", err)
	}
	ms := f.Messages("C1")
	if len(ms) != 2 || ms[1].Text != "reply" || ms[1].ThreadTS != parent || !strings.Contains(string(ms[1].Metadata), "k1") {
		t.Fatalf("messages after the lost answer: %+v", ms)
	}
	for _, all := range []bool{false, true} {
		msgs, _, _, err := api.GetConversationRepliesContext(ctx, &slack.GetConversationRepliesParameters{ChannelID: "C1", Timestamp: parent, IncludeAllMetadata: all})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("replies: %v %+v", err, msgs)
		}
		got := msgs[1].Metadata
		if all && (got.EventType != "helmr_post" || got.EventPayload["post"] != "k1") {
			t.Fatalf("include_all_metadata: metadata %+v", got)
		}
		if !all && got.EventType != "" {
			t.Fatalf("without include_all_metadata: metadata %+v", got)
		}
	}
	bad := slack.SlackMetadata{EventType: "", EventPayload: map[string]any{"a": 1}}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false), slack.MsgOptionMetadata(bad)); slackCode(err) != "invalid_metadata_format" {
		t.Fatalf("bad metadata: %v", err)
	}
}
