// Package slackfake is an in-process fake Slack for tests: one workspace
// with one app, speaking the Web API, the Events API (signed HTTP
// deliveries with Slack's retries) and Socket Mode (WebSocket), close
// enough to Slack's wire formats that slack-go's real clients
// (slack.New with slack.OptionAPIURL, socketmode.New) work against it
// unmodified.
//
// Tests drive the people side (Say, Edit, Click, Deliver) and read the bot
// side (Messages, WaitMessage, Calls, Deliveries); FailNext and
// SetRateLimit inject Web API failures. A typical test:
//
//	fake := slackfake.Start(t)
//	fake.AddChannel("C1", "general")
//	fake.AddUser("U1", "ada")
//	// point the code under test at fake.APIURL() with fake.BotToken() and
//	// fake.AppToken() (Socket Mode), or set fake.SetEventsURL(…) and
//	// fake.SetInteractivityURL(…) and verify with fake.SigningSecret();
//	// with Socket Mode, wait for fake.WaitSocketConnections(ctx, 1).
//	ts, err := fake.Say(ctx, "C1", "", "U1", "<@"+fake.BotUserID()+"> hi")
//	reply, err := fake.WaitMessage(ctx, "C1", func(m slackfake.Message) bool {
//		return m.ThreadTS == ts && strings.Contains(m.Text, "hello")
//	})
//
// docs/decisions/0020-slack-fake.md says where the fake follows Slack and where
// it simplifies (retries at once unless SetRetryDelays, one workspace, one app).
package slackfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Identity of the fake workspace and app.
const (
	teamID            = "T0FAKE"
	teamName          = "Fake Workspace"
	teamDomain        = "fake"
	appID             = "A0FAKE"
	botUserID         = "U0BOT"
	botID             = "B0BOT"
	botName           = "helmr"
	defaultAckTimeout = 3 * time.Second
	defaultPing       = 2 * time.Second
	maxRetries        = 3
)

// Errors the fake's own methods return (Web API errors travel to the client
// as Slack's ok:false codes instead).
var (
	// ErrNotAcknowledged means a delivery was never acknowledged: no ack or
	// 2xx within the ack timeout, after every retry Slack would make.
	ErrNotAcknowledged = errors.New("slackfake: delivery not acknowledged")
	// ErrNoReceiver means no Socket Mode client was connected and no
	// Request URL was set for the delivery.
	ErrNoReceiver = errors.New("slackfake: no Socket Mode connection and no Request URL")
	// ErrUnknown means a channel, message or action a test named does not
	// exist in the fake workspace.
	ErrUnknown = errors.New("slackfake: unknown channel, message or action")
	// ErrVerifyFailed means the Events URL did not echo the url_verification
	// challenge.
	ErrVerifyFailed = errors.New("slackfake: url_verification failed")
)

// Fake is one fake Slack workspace with one installed app. All methods are
// safe for concurrent use.
type Fake struct {
	srv    *httptest.Server
	ctx    context.Context // ends at cleanup: stops sockets and deliveries
	cancel context.CancelFunc
	wg     sync.WaitGroup
	client *http.Client // for HTTP deliveries to the app

	botToken, appToken, signingSecret, verificationToken string

	mu               sync.Mutex
	users            map[string]string // id -> name
	channels         map[string]string // id -> name
	outside          map[string]bool   // channels the bot is not a member of
	posts            map[string][]*post
	versions         map[string][]Message // every version of every bot message, per channel, in order
	changed          chan struct{}        // closed and replaced on every change a waiter may want
	lastTS           int64                // microseconds of the last ts handed out
	failures         map[string][]Failure
	calls            map[string][]time.Time
	eventsURL        string
	interactivityURL string
	tickets          map[string]bool // unused Socket Mode tickets
	sockets          []*socket
	nextSocket       int
	acks             map[string]*ackWait // envelope_id -> its delivery's ack
	ackTimeout       time.Duration
	retryDelays      []time.Duration
	pingInterval     time.Duration
	echoBot          bool
	responseURLs     map[string]*responseURL // by token
	limits           map[string]rateLimit
	served           map[string][]time.Time // per method, calls that were not refused by a limit
	deliveries       []Delivery
}

// post is one message in a channel, a person's or the bot's.
type post struct {
	msg Message
	bot bool
}

// Message is what the bot posted (chat.postMessage, chat.update,
// chat.postEphemeral), as the fake holds it now.
type Message struct {
	Channel, TS, ThreadTS, Text, User string
	Blocks                            json.RawMessage
	Edits                             []string // texts of earlier versions, oldest first
	Ephemeral                         bool
	EphemeralUser                     string
	Deleted                           bool // removed by chat.delete or a response_url delete_original
	// Metadata is the message metadata the post carried ({"event_type",
	// "event_payload"}), which conversations.replies and .history list
	// with include_all_metadata.
	Metadata json.RawMessage
}

// Failure is one injected Web API failure.
type Failure struct {
	Status     int           // 429 or 5xx; 0 means 200 with ok:false
	RetryAfter time.Duration // Retry-After header for 429, rounded up to whole seconds
	Error      string        // Slack error code, e.g. "channel_not_found", "not_in_channel", "ratelimited"
	// Applied makes the call take effect before it answers the failure:
	// a response lost on the way back (a post made whose ts the app never
	// learns).
	Applied bool
}

// Start starts an in-process fake Slack (httptest) and closes it with
// t.Cleanup, after closing its Socket Mode connections and ending its
// deliveries.
func Start(t testing.TB) *Fake {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fake{
		ctx: ctx, cancel: cancel,
		client:            &http.Client{Transport: &http.Transport{}},
		botToken:          "xoxb-" + randomHex(12),
		appToken:          "xapp-1-" + appID + "-" + randomHex(12),
		signingSecret:     randomHex(16),
		verificationToken: randomHex(12),
		users:             map[string]string{botUserID: botName},
		channels:          map[string]string{},
		outside:           map[string]bool{},
		posts:             map[string][]*post{},
		versions:          map[string][]Message{},
		changed:           make(chan struct{}),
		failures:          map[string][]Failure{},
		calls:             map[string][]time.Time{},
		tickets:           map[string]bool{},
		acks:              map[string]*ackWait{},
		responseURLs:      map[string]*responseURL{},
		limits:            map[string]rateLimit{},
		served:            map[string][]time.Time{},
		ackTimeout:        defaultAckTimeout,
		pingInterval:      defaultPing,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/{method}", f.serveAPI)
	mux.HandleFunc("/link/", f.serveSocket)
	mux.HandleFunc("POST /actions/{token}", f.serveResponseURL)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.close)
	return f
}

func (f *Fake) close() {
	f.cancel()
	f.mu.Lock()
	for _, s := range f.sockets {
		s.cancel()
	}
	f.mu.Unlock()
	f.wg.Wait()
	f.srv.CloseClientConnections()
	f.srv.Close()
	f.client.CloseIdleConnections()
}

// APIURL is the Web API base for slack.OptionAPIURL; it ends with "/api/".
func (f *Fake) APIURL() string { return f.srv.URL + "/api/" }

// TeamID is the fake workspace's ID.
func (f *Fake) TeamID() string { return teamID }

// AppID is the installed app's ID (api_app_id in deliveries).
func (f *Fake) AppID() string { return appID }

// BotUserID is the app's bot user; "<@BOTUSERID>" in a message mentions it.
func (f *Fake) BotUserID() string { return botUserID }

// BotToken is the bot token ("xoxb-…"); the Web API refuses every other
// token with invalid_auth.
func (f *Fake) BotToken() string { return f.botToken }

// AppToken is the app-level token ("xapp-…") that apps.connections.open
// requires.
func (f *Fake) AppToken() string { return f.appToken }

// SigningSecret signs every HTTP delivery (X-Slack-Signature).
func (f *Fake) SigningSecret() string { return f.signingSecret }

// VerificationToken is the deprecated verification token carried in the
// "token" field of every delivery's payload.
func (f *Fake) VerificationToken() string { return f.verificationToken }

// AddUser adds a person to the workspace; users.info knows them.
func (f *Fake) AddUser(id, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[id] = name
}

// AddChannel adds a conversation the bot is a member of; conversations.info
// knows it and the bot may post in it. IDs starting with "G" are private
// channels, "D" direct messages, others public channels.
func (f *Fake) AddChannel(id, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.channels[id] = name
	delete(f.outside, id)
}

// SetBotMember adds the bot to a channel added with AddChannel, or removes
// it, as /invite and /kick do. Outside a channel the bot gets no events
// from it and cannot post there (not_in_channel; a private channel or DM
// is channel_not_found to it).
func (f *Fake) SetBotMember(id string, member bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if member {
		delete(f.outside, id)
	} else {
		f.outside[id] = true
	}
}

// channelErrLocked is the error a Web API call about channel gets: ""
// when the bot may use it, not_in_channel for a public channel it is not
// in (when public is an error at all: reads of public channels' info
// succeed), channel_not_found otherwise. f.mu must be held.
func (f *Fake) channelErrLocked(channel string, readInfo bool) string {
	if _, ok := f.channels[channel]; !ok {
		return "channel_not_found"
	}
	switch {
	case !f.outside[channel]:
		return ""
	case channelType(channel) != "channel":
		return "channel_not_found"
	case readInfo:
		return ""
	}
	return "not_in_channel"
}

// SetEventsURL sets the Events API Request URL that HTTP deliveries go to
// when no Socket Mode client is connected.
func (f *Fake) SetEventsURL(url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eventsURL = url
}

// SetInteractivityURL sets the Interactivity Request URL that block_actions
// payloads go to (form field payload=JSON) when no Socket Mode client is
// connected.
func (f *Fake) SetInteractivityURL(url string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.interactivityURL = url
}

// SetAckTimeout changes how long a delivery waits for its ack (Socket Mode)
// or 2xx answer (HTTP) before it counts as failed; Slack's is 3 s, the
// default. Tests of retries shorten it.
func (f *Fake) SetAckTimeout(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ackTimeout = d
}

// SetRetryDelays spaces out an event's retries: the nth retry waits
// ds[n-1] (the last one repeats) after the failed attempt. Slack waits
// about 0, 1 min and 5 min; the fake retries at once unless set, so a test
// can, say, restart the app between attempts.
func (f *Fake) SetRetryDelays(ds ...time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retryDelays = slices.Clone(ds)
}

// SetPingInterval changes how often the fake sends a WebSocket ping on each
// Socket Mode connection (default 2 s); 0 stops pinging connections opened
// afterwards, so a client's ping timeout can be tested.
func (f *Fake) SetPingInterval(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pingInterval = d
}

// SetEchoBotMessages makes every message the bot posts come back to the app
// as a message event (with bot_id set), as Slack does for apps subscribed
// to message.channels; off by default. Echo deliveries run in the
// background and are not retried.
func (f *Fake) SetEchoBotMessages(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.echoBot = on
}

// Messages returns what the bot posted in channel, in post order, each in
// its current version.
func (f *Fake) Messages(channel string) []Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Message
	for _, p := range f.posts[channel] {
		if p.bot {
			out = append(out, p.msg.clone())
		}
	}
	return out
}

// WaitMessage waits until a bot message in channel satisfies pred, or ctx
// ends. pred sees every version of every bot message (each post and each
// update, including those before the call) in order; the first version it
// accepts is returned.
func (f *Fake) WaitMessage(ctx context.Context, channel string, pred func(Message) bool) (Message, error) {
	seen := 0
	for {
		f.mu.Lock()
		vs := f.versions[channel][seen:]
		seen += len(vs)
		changed := f.changed
		f.mu.Unlock()
		for _, m := range vs {
			if pred(m.clone()) {
				return m.clone(), nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// FailNext makes the next len(fs) calls of a Web API method
// ("chat.postMessage", "chat.update", …) fail as given, in order.
func (f *Fake) FailNext(method string, fs ...Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], fs...)
}

// SetRateLimit makes a Web API method refuse calls beyond calls per
// window, as Slack's rate limit tiers do: HTTP 429 with Retry-After (whole
// seconds until a call leaves the window) and error "ratelimited". calls 0
// removes the limit. Refused calls do not use up the window.
func (f *Fake) SetRateLimit(method string, calls int, per time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if calls <= 0 {
		delete(f.limits, method)
		return
	}
	f.limits[method] = rateLimit{calls: calls, per: per}
}

// rateLimit is a method's limit: at most calls per window.
type rateLimit struct {
	calls int
	per   time.Duration
}

// limitedLocked says whether a call of method now exceeds its rate limit,
// and if so for how long; otherwise it counts the call. f.mu must be held.
func (f *Fake) limitedLocked(method string, now time.Time) (time.Duration, bool) {
	l, ok := f.limits[method]
	if !ok {
		return 0, false
	}
	recent := f.served[method]
	for len(recent) > 0 && now.Sub(recent[0]) >= l.per {
		recent = recent[1:]
	}
	f.served[method] = recent
	if len(recent) >= l.calls {
		return recent[0].Add(l.per).Sub(now), true
	}
	f.served[method] = append(recent, now)
	return 0, false
}

// Calls is how many calls a Web API method got, failed ones included.
func (f *Fake) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls[method])
}

// CallTimes is when each call of a Web API method arrived, for checking
// that a Retry-After was honoured.
func (f *Fake) CallTimes(method string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls[method])
}

// SocketConnections is how many Socket Mode connections are open now.
func (f *Fake) SocketConnections() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sockets)
}

// WaitSocketConnections waits until at least n Socket Mode connections are
// open, or ctx ends.
func (f *Fake) WaitSocketConnections(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		have, changed := len(f.sockets), f.changed
		f.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notifyLocked wakes every waiter; f.mu must be held.
func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// nextTSLocked hands out a message ts ("seconds.micros"), strictly
// increasing across the workspace; f.mu must be held.
func (f *Fake) nextTSLocked() string {
	now := time.Now().UnixMicro()
	if now <= f.lastTS {
		now = f.lastTS + 1
	}
	f.lastTS = now
	return formatTS(now)
}

func formatTS(micros int64) string {
	return fmt.Sprintf("%d.%06d", micros/1e6, micros%1e6)
}

func (m Message) clone() Message {
	m.Blocks = slices.Clone(m.Blocks)
	m.Metadata = slices.Clone(m.Metadata)
	m.Edits = slices.Clone(m.Edits)
	return m
}

// channelType is the channel_type of a message event in channel id.
func channelType(id string) string {
	switch {
	case strings.HasPrefix(id, "D"):
		return "im"
	case strings.HasPrefix(id, "G"):
		return "group"
	default:
		return "channel"
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// randomID is an uppercase Slack-style ID with the given prefix.
func randomID(prefix string) string {
	return prefix + strings.ToUpper(randomHex(5))
}
