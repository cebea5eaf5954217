// Package slack holds the helmr slack commands: connect Slack apps and map
// Slack users to responder identities (docs/slack.md).
package slack

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// New returns the "slack" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "slack",
		Short: "Connect Slack apps and map Slack users",
		Long: "A connected Slack app lets Sessions live in Slack threads (session create --slack-channel).\n" +
			"Its credentials are read from files or the environment, never from flags, sealed at rest with the\n" +
			"server's secrets key and never shown again. Socket Mode (an app-level token) needs no public URL;\n" +
			"the Events API (a signing secret) needs POST /slack/events reachable by Slack.",
	})
	cmd.AddCommand(newConnect(g), newApps(g), newDisconnect(g), newUsers(g))
	return cmd
}

// secret reads a credential from a file, else from an environment variable.
func secret(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", clienv.Usagef("%v", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return os.Getenv(env), nil
}

func newConnect(g *clienv.Globals) *cobra.Command {
	var botFile, appFile, signingFile string
	var req helmrtype.SlackAppConnect
	cmd := &cobra.Command{
		Use:   "connect [--bot-token-file F] [--app-token-file F | --signing-secret-file F]",
		Short: "Connect a Slack app: Socket Mode with an app-level token, or the Events API with a signing secret",
		Long: "Reads the bot token (xoxb-…) from --bot-token-file or SLACK_BOT_TOKEN, the app-level token (xapp-…,\n" +
			"Socket Mode) from --app-token-file or SLACK_APP_TOKEN, and the signing secret (Events API) from\n" +
			"--signing-secret-file or SLACK_SIGNING_SECRET. With an app-level token the mode is socket unless\n" +
			"--mode events is given.",
		Args: clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if req.BotToken, err = secret(botFile, "SLACK_BOT_TOKEN"); err != nil {
				return err
			}
			if req.AppToken, err = secret(appFile, "SLACK_APP_TOKEN"); err != nil {
				return err
			}
			if req.SigningSecret, err = secret(signingFile, "SLACK_SIGNING_SECRET"); err != nil {
				return err
			}
			if req.BotToken == "" {
				return clienv.Usagef("give the bot token with --bot-token-file or SLACK_BOT_TOKEN")
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			app, err := c.Slack.Connect(cmd.Context(), req)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(app)
			}
			return writeApp(g, app)
		},
	}
	f := cmd.Flags()
	f.StringVar(&botFile, "bot-token-file", "", "file holding the bot token (default: SLACK_BOT_TOKEN)")
	f.StringVar(&appFile, "app-token-file", "", "file holding the app-level token for Socket Mode (default: SLACK_APP_TOKEN)")
	f.StringVar(&signingFile, "signing-secret-file", "", "file holding the signing secret for the Events API (default: SLACK_SIGNING_SECRET)")
	f.StringVar(&req.Mode, "mode", "", "socket or events (default: socket with an app-level token, else events)")
	f.StringVar(&req.Name, "name", "", "a label (default the workspace's name)")
	f.StringVar(&req.MentionAgent, "mention-agent", "", "the Agent a mention of the bot outside a Session's thread opens a Session of (default: none)")
	return cmd
}

func writeApp(g *clienv.Globals, a *helmrtype.SlackApp) error {
	return clienv.WriteFields(g.Streams.Out,
		clienv.Field{Name: "App", Value: a.ID},
		clienv.Field{Name: "Name", Value: a.Name},
		clienv.Field{Name: "Team", Value: a.TeamID},
		clienv.Field{Name: "Bot user", Value: a.BotUserID},
		clienv.Field{Name: "Mode", Value: a.Mode},
		clienv.Field{Name: "Mention agent", Value: a.MentionAgent},
	)
}

func newApps(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "apps",
		Short: "List the connected Slack apps",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			l, err := c.Slack.Apps(cmd.Context())
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(l)
			}
			t := clienv.NewTable(g.Streams.Out, "APP", "NAME", "TEAM", "MODE", "MENTION AGENT", "CREATED")
			for _, a := range l.Apps {
				t.Row(a.ID, a.Name, a.TeamID, a.Mode, a.MentionAgent, clienv.Time(a.CreatedAt))
			}
			return t.Flush()
		},
	}
}

func newDisconnect(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "disconnect APP",
		Short: "Disconnect a Slack app and drop its credentials",
		Args:  clienv.Args("APP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			a, err := c.Slack.Disconnect(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(a)
			}
			fmt.Fprintf(g.Streams.Out, "Slack app %s (team %s) disconnected\n", a.ID, a.TeamID)
			return nil
		},
	}
}

func newUsers(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "users",
		Short: "Map Slack users to responder identities",
		Long: "Only a mapped Slack user with the responder role or above answers questions from Slack; seeing a\n" +
			"question in a channel is no authority.",
	})
	var role string
	add := &cobra.Command{
		Use:   "add TEAM_ID USER_ID IDENTITY [--role responder]",
		Short: "Map a Slack user to an identity with a role",
		Args:  clienv.Args("TEAM_ID", "USER_ID", "IDENTITY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			m, err := c.Slack.MapUser(cmd.Context(), helmrtype.SlackUserMapping{TeamID: args[0], UserID: args[1], Identity: args[2], Role: helmrtype.Role(role)})
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(m)
			}
			fmt.Fprintf(g.Streams.Out, "Slack user %s of %s is %s (%s)\n", m.UserID, m.TeamID, m.Identity, m.Role)
			return nil
		},
	}
	add.Flags().StringVar(&role, "role", "responder", "viewer (talks to Sessions only), responder, operator or admin")
	var team string
	list := &cobra.Command{
		Use:   "list [--team TEAM_ID]",
		Short: "List the Slack user mappings",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			l, err := c.Slack.Users(cmd.Context(), team)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(l)
			}
			t := clienv.NewTable(g.Streams.Out, "TEAM", "USER", "IDENTITY", "ROLE", "CREATED")
			for _, u := range l.Users {
				t.Row(u.TeamID, u.UserID, u.Identity, string(u.Role), clienv.Time(u.CreatedAt))
			}
			return t.Flush()
		},
	}
	list.Flags().StringVar(&team, "team", "", "only this workspace")
	remove := &cobra.Command{
		Use:   "remove TEAM_ID USER_ID",
		Short: "Remove a Slack user's mapping",
		Args:  clienv.Args("TEAM_ID", "USER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			m, err := c.Slack.UnmapUser(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(m)
			}
			fmt.Fprintf(g.Streams.Out, "Slack user %s of %s unmapped\n", m.UserID, m.TeamID)
			return nil
		},
	}
	cmd.AddCommand(add, list, remove)
	return cmd
}
