package slackbridge

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/secretbox"
	"github.com/helmr-go/helmr/internal/slackfake"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

func newEngine(t *testing.T) *engine.Engine {
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(st, engine.Options{})
	t.Cleanup(func() { eng.Close(); st.Close() })
	return eng
}

// TestConnectAndClose: connecting checks the credentials with Slack and
// seals them; a Socket Mode app is connected while the bridge runs, and
// Close leaves no goroutine behind.
func TestConnectAndClose(t *testing.T) {
	// Registered first, run last: after the fake and the store closed.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	fake := slackfake.Start(t)
	hc := &http.Client{Transport: &http.Transport{}}
	eng := newEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	noKey := New(eng, Options{APIURL: fake.APIURL(), HTTPClient: hc})
	if _, err := noKey.Connect(ctx, helmrtype.SlackAppConnect{BotToken: fake.BotToken(), AppToken: fake.AppToken()}); helmrtype.CodeOf(err) != helmrtype.CodeInvalidRequest {
		t.Fatalf("connect without a secrets key: %v, want invalid_request", err)
	}
	box, _ := secretbox.New(bytes.Repeat([]byte{3}, secretbox.KeySize))
	b := New(eng, Options{APIURL: fake.APIURL(), Box: box, Rescan: 100 * time.Millisecond, HTTPClient: hc})
	for _, bad := range []helmrtype.SlackAppConnect{
		{BotToken: "xoxb-wrong", AppToken: fake.AppToken()},
		{BotToken: fake.BotToken(), AppToken: "xapp-wrong"},
		{BotToken: fake.BotToken()}, // neither an app token nor a signing secret
		{BotToken: "not-a-bot-token", SigningSecret: "s"},
	} {
		if _, err := b.Connect(ctx, bad); helmrtype.CodeOf(err) != helmrtype.CodeInvalidRequest {
			t.Fatalf("connect %+v: %v, want invalid_request", bad, err)
		}
	}
	app, err := b.Connect(ctx, helmrtype.SlackAppConnect{BotToken: fake.BotToken(), AppToken: fake.AppToken()})
	if err != nil {
		t.Fatal(err)
	}
	if app.Mode != helmrtype.SlackModeSocket || app.TeamID != fake.TeamID() || app.BotUserID != fake.BotUserID() {
		t.Fatalf("app %+v", app)
	}
	if _, err := b.Connect(ctx, helmrtype.SlackAppConnect{BotToken: fake.BotToken(), AppToken: fake.AppToken()}); helmrtype.CodeOf(err) != helmrtype.CodeConflict {
		t.Fatalf("second app of the workspace: %v, want conflict", err)
	}
	apps, _ := eng.SlackApps(ctx)
	if bytes.Contains(apps[0].Sealed, []byte(fake.BotToken())) || bytes.Contains(apps[0].Sealed, []byte(fake.AppToken())) {
		t.Fatal("the sealed credentials hold a token in plain text")
	}
	b.Start()
	if err := fake.WaitSocketConnections(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if !b.Holds("app:" + app.ID) {
		t.Fatal("the bridge does not report its Socket Mode connection")
	}
	b.Close()
	if err := fake.WaitSocketConnections(ctx, 0); err != nil {
		t.Fatalf("Socket Mode connection left open: %v", err)
	}
	hc.CloseIdleConnections()
}

func TestParseCallback(t *testing.T) {
	app := &store.SlackApp{ID: "a", TeamID: "T1", BotUserID: "UBOT"}
	for _, c := range []struct {
		body string
		ok   bool
		text string
	}{
		{`{"type":"event_callback","event_id":"E1","event":{"type":"message","user":"U1","text":"hi","ts":"2.1","thread_ts":"1.1","channel":"C1"}}`, true, "hi"},
		{`{"type":"event_callback","event_id":"E2","event":{"type":"message","user":"U1","text":"top","ts":"2.1","channel":"C1"}}`, false, ""},
		{`{"type":"event_callback","event_id":"E3","event":{"type":"app_mention","user":"U1","text":"<@UBOT> open","ts":"2.1","channel":"C1"}}`, true, "open"},
		{`{"type":"event_callback","event_id":"E4","event":{"type":"message","user":"UBOT","text":"mine","ts":"2.1","thread_ts":"1.1","channel":"C1"}}`, false, ""},
		{`{"type":"event_callback","event_id":"E5","event":{"type":"message","subtype":"message_changed","user":"U1","ts":"2.1","thread_ts":"1.1","channel":"C1"}}`, false, ""},
		{`{"type":"event_callback","event_id":"E6","event":{"type":"message","bot_id":"B1","user":"U2","ts":"2.1","thread_ts":"1.1","channel":"C1"}}`, false, ""},
		{`{"type":"event_callback","event":{"type":"message","user":"U1","ts":"2.1","thread_ts":"1.1","channel":"C1"}}`, false, ""},
		{`{"type":"url_verification","challenge":"x"}`, false, ""},
	} {
		in, ok, err := parseCallback(app, []byte(c.body))
		if err != nil || ok != c.ok || ok && in.Text != c.text {
			t.Errorf("%s: %+v %v %v, want ok %v text %q", c.body, in, ok, err, c.ok, c.text)
		}
	}
	if _, _, err := parseCallback(app, []byte("{")); helmrtype.CodeOf(err) != helmrtype.CodeInvalidRequest {
		t.Errorf("not JSON: %v", err)
	}
}

func FuzzParseCallback(f *testing.F) {
	f.Add([]byte(`{"type":"event_callback","event_id":"E1","event":{"type":"message","user":"U1","text":"hi","ts":"2.1","thread_ts":"1.1","channel":"C1"}}`))
	f.Add([]byte(`{"type":"event_callback","event_id":"E3","event":{"type":"app_mention","user":"U1","text":"<@UBOT> open","ts":"2.1","channel":"C1"}}`))
	app := &store.SlackApp{ID: "a", TeamID: "T1", BotUserID: "UBOT"}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, ok, _ := parseCallback(app, body)
		if ok && (in.EventID == "" || in.UserID == "" || in.UserID == app.BotUserID || in.ChannelID == "" || in.MessageTS == "") {
			t.Fatalf("accepted %q as %+v", body, in)
		}
	})
}
