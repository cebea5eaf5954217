package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/slackfake"
)

// TestSlackHelperExample is examples/slack-helper's README against a fake
// Slack: `helmr dev examples/slack-helper`, the app connected in Socket
// Mode with mention agent "helper" and one mapped responder; a mention
// opens a Session whose question shows as buttons in the thread, a click
// on Approve answers it, and a reply in the thread is the next Turn; the
// bot's own posts, echoed back as Slack does, start nothing.
func TestSlackHelperExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/slack-helper")
	}
	bin := helmrBinary(t)
	if err := exec.Command(bin, "dev", "--slack-api-url", "http://127.0.0.1:1/api/", "--help").Run(); err != nil {
		t.Skip("this helmr has no Slack bridge (helmr dev --slack-api-url): ", err)
	}
	const channel, ada = "C0HELPER", "U0HELPADA"
	fake := slackfake.Start(t)
	fake.AddChannel(channel, "ops")
	fake.SetEchoBotMessages(true) // as Slack does: the bot's own posts come back as message events
	fake.AddUser(ada, "ada")
	s := startServer(t, t.TempDir(), "dev", "--slack-api-url", fake.APIURL(), "../../examples/slack-helper")
	for !strings.Contains(s.output(), "deployed ") {
		select {
		case <-s.done:
			t.Fatalf("helmr dev exited: %s", s.output())
		case <-time.After(50 * time.Millisecond):
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	connect := map[string]any{"bot_token": fake.BotToken(), "app_token": fake.AppToken(), "mention_agent": "helper"}
	if err := apiCall(s.url, s.key, "POST", "/v1/slack/apps", connect, nil); err != nil {
		t.Fatal(err)
	}
	mapping := map[string]any{"team_id": fake.TeamID(), "user_id": ada, "identity": "ada@example.com", "role": "responder"}
	if err := apiCall(s.url, s.key, "POST", "/v1/slack/users", mapping, nil); err != nil {
		t.Fatal(err)
	}
	if err := fake.WaitSocketConnections(ctx, 1); err != nil {
		t.Fatalf("no Socket Mode connection: %v; helmr dev: %s", err, s.output())
	}

	top, err := fake.Say(ctx, channel, "", ada, "<@"+fake.BotUserID()+"> deploy v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	inThread := func(what string, pred func(slackfake.Message) bool) slackfake.Message {
		t.Helper()
		m, err := fake.WaitMessage(ctx, channel, func(m slackfake.Message) bool { return m.ThreadTS == top && !m.Ephemeral && pred(m) })
		if err != nil {
			t.Fatalf("no %s in the thread: %v; posts: %+v; helmr dev: %s", what, err, fake.Messages(channel), s.output())
		}
		return m
	}
	var approve string
	q := inThread("question with an Approve button", func(m slackfake.Message) bool {
		approve = buttonAction(m.Blocks, "Approve")
		return approve != "" && strings.Contains(m.Text, "Deploy v1.2.3 to production?")
	})
	if err := fake.Click(ctx, ada, channel, q.TS, approve, ""); err != nil {
		t.Fatal(err)
	}
	inThread("answer", func(m slackfake.Message) bool { return strings.Contains(m.Text, "Deployed v1.2.3.") })

	// A reply in the Session's thread, without a mention, is its next Turn.
	if _, err := fake.Say(ctx, channel, top, ada, "status"); err != nil {
		t.Fatal(err)
	}
	inThread("status", func(m slackfake.Message) bool { return strings.Contains(m.Text, "Deployed: v1.2.3.") })

	// One Session with two Turns: the bot's echoed posts were no input.
	var sessions helmrtype.SessionPage
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions?agent=helper", nil, &sessions); err != nil {
		t.Fatal(err)
	}
	if len(sessions.Sessions) != 1 {
		t.Fatalf("sessions %+v", sessions.Sessions)
	}
	var turns helmrtype.TurnPage
	if err := apiCall(s.url, s.key, "GET", "/v1/sessions/"+sessions.Sessions[0].ID+"/turns", nil, &turns); err != nil {
		t.Fatal(err)
	}
	if len(turns.Turns) != 2 {
		t.Fatalf("%d Turns, want 2 (deploy, status): %+v", len(turns.Turns), turns.Turns)
	}
}

// buttonAction is the action_id of the button labelled label in blocks,
// or "".
func buttonAction(blocks json.RawMessage, label string) string {
	var bs []struct {
		Elements []struct {
			Type     string `json:"type"`
			ActionID string `json:"action_id"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	if json.Unmarshal(blocks, &bs) != nil {
		return ""
	}
	for _, b := range bs {
		for _, e := range b.Elements {
			if e.Type == "button" && e.Text.Text == label {
				return e.ActionID
			}
		}
	}
	return ""
}
