// Package slackbridge connects Sessions to Slack threads (docs/slack.md):
// it receives Slack events over Socket Mode or the Events API (signatures
// verified, retries recognised by event ID), hands what they ask for to
// the engine, and projects each Slack Session's timeline into its thread
// (posts and edits, with a durable cursor, back-off and Retry-After). It
// talks to Slack with github.com/slack-go/slack; the engine stays the only
// writer of state.
package slackbridge

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/secretbox"
	"github.com/helmr-go/helmr/internal/store"
)

// Options configure a Bridge.
type Options struct {
	Logger *slog.Logger
	// Box seals the apps' credentials; nil refuses to connect apps (and
	// leaves connected ones idle), with a clear error.
	Box *secretbox.Box
	// APIURL is the Slack Web API base, ending with "/api/" (default
	// Slack's own); tests point it at a fake.
	APIURL string
	// HTTPClient makes the Web API calls (default a client with a 30 s
	// timeout).
	HTTPClient *http.Client
	// EditInterval is the least time between two edits of one post while
	// output streams (default 1 s: Slack's chat.update allows about 50 a
	// minute).
	EditInterval time.Duration
	// MaxAttempts bounds the tries of one Slack call that keeps failing
	// for a transient reason (429, 5xx, network) before the delivery is
	// recorded unavailable (default 8).
	MaxAttempts int
	// LeaseTTL is how long this node holds a Socket Mode connection or a
	// thread's projector among nodes sharing a database (default 15 s).
	LeaseTTL time.Duration
	// Rescan is how often the bridge looks for apps and threads that
	// another node created (default 2 s); this node's own wake it at once.
	Rescan time.Duration
}

// Bridge is the Slack side of a control plane.
type Bridge struct {
	eng  *engine.Engine
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	running map[string]context.CancelFunc // lease name -> its work
	wg      sync.WaitGroup
	stop    context.CancelFunc
	done    chan struct{}
	// seen holds the signatures of Events API requests already handled,
	// until they leave the 5-minute window: a replayed request is refused.
	seen map[string]time.Time
	// openings has a lock per channel, held (write) while a thread's
	// opening message there is posted and its ts recorded, and (read)
	// while an inbound message of the channel is decided: a reply that
	// follows an opening message at once finds its thread. (Across nodes
	// the engine answers unavailable meanwhile; see handleMessage.)
	openings map[string]*sync.RWMutex
}

// opening returns the opening lock of an app's channel.
func (b *Bridge) opening(appID, channelID string) *sync.RWMutex {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := appID + "/" + channelID
	l, ok := b.openings[k]
	if !ok {
		l = &sync.RWMutex{}
		b.openings[k] = l
	}
	return l
}

// New returns a Bridge; Start runs it.
func New(eng *engine.Engine, opts Options) *Bridge {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.APIURL == "" {
		opts.APIURL = slack.APIURL
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.EditInterval <= 0 {
		opts.EditInterval = time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 15 * time.Second
	}
	if opts.Rescan <= 0 {
		opts.Rescan = 2 * time.Second
	}
	return &Bridge{eng: eng, opts: opts, log: opts.Logger.With("component", "slack"), running: map[string]context.CancelFunc{}, seen: map[string]time.Time{},
		openings: map[string]*sync.RWMutex{}}
}

// Start runs the bridge in the background until Close: a Socket Mode
// connection per app in that mode, and a projector per Slack Session.
func (b *Bridge) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	b.stop, b.done = cancel, make(chan struct{})
	go b.manage(ctx)
}

// Close stops the bridge and waits for its connections and projectors.
func (b *Bridge) Close() {
	if b.stop == nil {
		return
	}
	b.stop()
	<-b.done
	b.wg.Wait()
}

// credentials are what an app's Sealed opens to.
type credentials struct {
	BotToken      string `json:"bot_token"`
	SigningSecret string `json:"signing_secret,omitempty"`
	AppToken      string `json:"app_token,omitempty"`
}

func (b *Bridge) credentials(a *store.SlackApp) (credentials, error) {
	var c credentials
	if b.opts.Box == nil {
		return c, errNoKey
	}
	plain, err := b.opts.Box.Open(a.Sealed, []byte(a.TeamID))
	if err != nil {
		return c, helmrtype.Errorf(helmrtype.CodeInternal, "the credentials of Slack app %s do not open with this control plane's secrets key", a.ID)
	}
	err = json.Unmarshal(plain, &c)
	return c, err
}

var errNoKey = helmrtype.Errorf(helmrtype.CodeInvalidRequest,
	"this control plane has no secrets key: start helmr server with --secrets-key-file (helmr dev makes one) to connect Slack apps")

// client returns a Web API client with a token.
func (b *Bridge) client(token string, more ...slack.Option) *slack.Client {
	opts := append([]slack.Option{slack.OptionAPIURL(b.opts.APIURL), slack.OptionHTTPClient(b.opts.HTTPClient)}, more...)
	return slack.New(token, opts...)
}

// Connect checks a Slack app's credentials with Slack (auth.test), seals
// them and stores the app. The credentials are never returned or logged.
func (b *Bridge) Connect(ctx context.Context, req helmrtype.SlackAppConnect) (*helmrtype.SlackApp, error) {
	if b.opts.Box == nil {
		return nil, errNoKey
	}
	if !strings.HasPrefix(req.BotToken, "xoxb-") {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "bot_token must be the app's bot token (xoxb-…)"}
	}
	if req.Mode == "" {
		req.Mode = helmrtype.SlackModeEvents
		if req.AppToken != "" {
			req.Mode = helmrtype.SlackModeSocket
		}
	}
	switch req.Mode {
	case helmrtype.SlackModeSocket:
		if !strings.HasPrefix(req.AppToken, "xapp-") {
			return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "Socket Mode needs the app-level token (xapp-…, scope connections:write) as app_token"}
		}
	case helmrtype.SlackModeEvents:
		if req.SigningSecret == "" {
			return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "the Events API needs the app's signing_secret"}
		}
	default:
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "mode must be socket or events"}
	}
	auth, err := b.client(req.BotToken).AuthTestContext(ctx)
	if err != nil {
		return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "Slack refused the bot token (auth.test): " + slackErrText(err)}
	}
	if req.Mode == helmrtype.SlackModeSocket {
		if _, _, err := b.client(req.BotToken, slack.OptionAppLevelToken(req.AppToken)).StartSocketModeContext(ctx); err != nil {
			return nil, &helmrtype.Error{Code: helmrtype.CodeInvalidRequest, Message: "Slack refused the app-level token (apps.connections.open): " + slackErrText(err)}
		}
	}
	plain, _ := json.Marshal(credentials{BotToken: req.BotToken, SigningSecret: req.SigningSecret, AppToken: req.AppToken})
	name := req.Name
	if name == "" {
		name = auth.Team
	}
	return b.eng.ConnectSlackApp(ctx, &store.SlackApp{Name: name, TeamID: auth.TeamID, BotUserID: auth.UserID, Mode: req.Mode,
		MentionAgent: req.MentionAgent, Sealed: b.opts.Box.Seal(plain, []byte(auth.TeamID))})
}

// slackErrText is a Slack error for a person, without secrets (Slack's
// errors carry none).
func slackErrText(err error) string {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		return se.Err
	}
	return err.Error()
}

// manage starts and stops the bridge's work as apps and threads come and
// go, until ctx ends.
func (b *Bridge) manage(ctx context.Context) {
	defer close(b.done)
	for {
		changed, stop := b.eng.WatchSlack()
		b.reconcile(ctx)
		t := time.NewTimer(b.opts.Rescan)
		select {
		case <-ctx.Done():
		case <-changed:
		case <-t.C:
		}
		t.Stop()
		stop()
		if ctx.Err() != nil {
			b.mu.Lock()
			for _, c := range b.running {
				c()
			}
			b.mu.Unlock()
			return
		}
	}
}

// reconcile runs a Socket Mode connection for every app in that mode and
// a projector for every thread not done, each under its lease.
func (b *Bridge) reconcile(ctx context.Context) {
	want := map[string]func(context.Context){}
	apps, err := b.eng.SlackApps(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Error("list slack apps", "err", err)
		}
		return
	}
	appByID := map[string]store.SlackApp{}
	for _, a := range apps {
		appByID[a.ID] = a
		if a.Mode == helmrtype.SlackModeSocket && b.opts.Box != nil {
			a := a
			want["app:"+a.ID] = func(ctx context.Context) { b.runSocket(ctx, a) }
		}
	}
	after := ""
	for {
		ths, err := b.eng.SlackThreads(ctx, after, 100)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Error("list slack threads", "err", err)
			}
			return
		}
		for _, th := range ths {
			if a, ok := appByID[th.AppID]; ok && b.opts.Box != nil {
				th := th
				want["thread:"+th.SessionID] = func(ctx context.Context) { b.project(ctx, a, th) }
			}
		}
		if len(ths) < 100 {
			break
		}
		after = ths[len(ths)-1].SessionID
	}
	for name, run := range want {
		held, err := b.eng.SlackLease(ctx, name, b.opts.LeaseTTL)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Error("slack lease", "name", name, "err", err)
			}
			continue
		}
		b.mu.Lock()
		cancel, on := b.running[name]
		switch {
		case held && !on:
			wctx, c := context.WithCancel(ctx)
			b.running[name] = c
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				run(wctx)
				b.mu.Lock()
				delete(b.running, name)
				b.mu.Unlock()
				c()
				if ctx.Err() == nil {
					b.eng.ReleaseSlackLease(context.WithoutCancel(ctx), name)
				}
			}()
		case !held && on:
			cancel()
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	for name, c := range b.running {
		if _, ok := want[name]; !ok {
			c()
		}
	}
	b.mu.Unlock()
}

// Holds reports whether this node runs a piece of the bridge's work now:
// "app:APP_ID" (a Socket Mode connection) or "thread:SESSION_ID".
func (b *Bridge) Holds(name string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.running[name]
	return ok
}
