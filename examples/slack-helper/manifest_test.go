package main

import (
	"os"
	"slices"
	"testing"

	"github.com/slack-go/slack"
	"go.yaml.in/yaml/v4"
)

// TestManifest checks slack-app-manifest.yaml against Slack's manifest
// schema (slack-go's Manifest, unknown fields refused) and against what
// Helmr's Slack feature needs: each event it subscribes to has the scope
// Slack requires for it, and the Web API methods it calls are allowed.
func TestManifest(t *testing.T) {
	f, err := os.Open("slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	var m slack.Manifest
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not a Slack app manifest: %v", err)
	}
	s := m.Settings
	if !s.SocketModeEnabled || s.Interactivity == nil || !s.Interactivity.IsEnabled || s.EventSubscriptions == nil {
		t.Fatalf("Socket Mode, interactivity and event subscriptions must be on: %+v", s)
	}
	if s.EventSubscriptions.RequestUrl != "" || s.Interactivity.RequestUrl != "" {
		t.Fatal("with Socket Mode on, the Request URLs stay commented out")
	}
	if m.Features.BotUser.DisplayName == "" || m.Display.Name == "" {
		t.Fatal("the app needs a name and a bot user")
	}
	scopes := m.OAuthConfig.Scopes.Bot
	eventScope := map[string]string{"app_mention": "app_mentions:read", "message.channels": "channels:history",
		"message.groups": "groups:history", "message.im": "im:history"}
	for _, e := range []string{"app_mention", "message.channels", "message.groups"} {
		if !slices.Contains(s.EventSubscriptions.BotEvents, e) {
			t.Errorf("bot event %s is not subscribed", e)
		}
	}
	for _, e := range s.EventSubscriptions.BotEvents {
		if want, ok := eventScope[e]; !ok {
			t.Errorf("bot event %s is not one the feature handles", e)
		} else if !slices.Contains(scopes, want) {
			t.Errorf("bot event %s needs scope %s", e, want)
		}
	}
	// chat.postMessage, chat.update, chat.postEphemeral; users.info; conversations.info.
	for _, want := range []string{"chat:write", "users:read", "channels:read", "groups:read"} {
		if !slices.Contains(scopes, want) {
			t.Errorf("missing bot scope %s", want)
		}
	}
}
