package helmrtype

import "time"

// EventSlackDeliveryUnavailable is the event recorded when a Session's
// Slack thread cannot be posted to (a permanent Slack error, or retries
// used up); the timeline keeps everything it would have posted.
const EventSlackDeliveryUnavailable = "slack.delivery_unavailable"

// MaxSlackTextChars is the longest text, in characters, a Slack message
// may carry as input to a Session.
const MaxSlackTextChars = 3000

// Slack connection modes: Socket Mode (an app-level token, no public URL)
// or the Events API over HTTP (a signing secret, a public Request URL).
const (
	SlackModeSocket = "socket"
	SlackModeEvents = "events"
)

// SlackChannelRequest opens a Session in a Slack channel: the Session
// posts an opening message there and owns its thread. TeamID picks the
// connected app when more than one is connected.
type SlackChannelRequest struct {
	ChannelID string `json:"channel_id"`
	TeamID    string `json:"team_id,omitempty"`
}

// SlackInputSource is the Slack origin of a user's input: the workspace,
// channel, thread and message, and the Slack user who wrote it.
type SlackInputSource struct {
	TeamID    string `json:"team_id"`
	ChannelID string `json:"channel_id"`
	ThreadTS  string `json:"thread_ts"`
	MessageTS string `json:"message_ts"`
	UserID    string `json:"user_id"`
}

// SlackUserRef names a Slack user of a workspace.
type SlackUserRef struct {
	TeamID string `json:"team_id"`
	UserID string `json:"user_id"`
}

// SlackAppConnect is the body of POST /v1/slack/apps: a Slack app's
// credentials. They are encrypted at rest and never returned.
type SlackAppConnect struct {
	// Name labels the app (default the workspace's name).
	Name string `json:"name,omitempty"`
	// Mode is SlackModeSocket (default when AppToken is set) or
	// SlackModeEvents.
	Mode          string `json:"mode,omitempty"`
	BotToken      string `json:"bot_token"`
	SigningSecret string `json:"signing_secret,omitempty"`
	AppToken      string `json:"app_token,omitempty"`
	// MentionAgent is the Agent a mention of the bot opens a new Session
	// of ("" for none: mentions outside a Session's thread are ignored).
	MentionAgent string `json:"mention_agent,omitempty"`
}

// SlackApp is a connected Slack app, without its credentials.
type SlackApp struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	TeamID       string    `json:"team_id"`
	BotUserID    string    `json:"bot_user_id"`
	Mode         string    `json:"mode"`
	MentionAgent string    `json:"mention_agent,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

// SlackAppList is the answer of GET /v1/slack/apps.
type SlackAppList struct {
	Apps []SlackApp `json:"apps"`
}

// SlackUserMapping maps a Slack user to the responder identity it acts as
// and the role it has: a responder (or above) may answer questions from
// Slack; a viewer may only talk to Sessions.
type SlackUserMapping struct {
	TeamID    string    `json:"team_id"`
	UserID    string    `json:"user_id"`
	Identity  string    `json:"identity"`
	Role      Role      `json:"role"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// SlackUserList is the answer of GET /v1/slack/users.
type SlackUserList struct {
	Users []SlackUserMapping `json:"users"`
}
