package session

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newGet returns "session get".
func newGet(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get SESSION",
		Short: "Show a Session's current state",
		Args:  clienv.Args("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			s, err := c.Sessions.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(s)
			}
			return writeSession(g.Streams.Out, s)
		},
	}
}

// writeSession writes a Session's fields for a person.
func writeSession(w io.Writer, s *helmrtype.Session) error {
	initial := ""
	if s.InitialTurn != nil {
		initial = s.InitialTurn.ID + " (" + s.InitialTurn.Status + ")"
	}
	root := s.RootSessionID
	if root == s.ID {
		root = ""
	}
	return clienv.WriteFields(w,
		clienv.Field{Name: "Session", Value: s.ID},
		clienv.Field{Name: "Agent", Value: s.Agent},
		clienv.Field{Name: "Template", Value: s.Template},
		clienv.Field{Name: "Status", Value: s.Status},
		clienv.Field{Name: "Key", Value: s.Key},
		clienv.Field{Name: "Deployment", Value: s.DeploymentID},
		clienv.Field{Name: "Computer", Value: clienv.Str(s.ComputerID)},
		clienv.Field{Name: "Root", Value: root},
		clienv.Field{Name: "Parent", Value: clienv.Str(s.ParentSessionID)},
		clienv.Field{Name: "Requester", Value: clienv.Str(s.RequesterSessionID)},
		clienv.Field{Name: "Slack channel", Value: s.SlackChannelID},
		clienv.Field{Name: "Initial Turn", Value: initial},
		clienv.Field{Name: "Holds", Value: holds(s.Holds)},
		clienv.Field{Name: "Close after idle", Value: s.CloseAfterIdle},
		clienv.Field{Name: "Hibernate after idle", Value: s.HibernateAfterIdle},
		clienv.Field{Name: "Max Turn duration", Value: s.MaxTurnDuration},
		clienv.Field{Name: "Idle since", Value: clienv.TimePtr(s.IdleSince)},
		clienv.Field{Name: "Created", Value: clienv.Time(s.CreatedAt)},
	)
}

// holds renders a Session's holds on one line.
func holds(hs []helmrtype.Hold) string {
	var parts []string
	for _, h := range hs {
		p := h.Kind
		if id := clienv.Str(h.ID); id != "" {
			p += " " + id
		}
		if sid := clienv.Str(h.SessionID); sid != "" {
			p += " on " + sid
		}
		if !h.CanRelease {
			p += " (cannot release)"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%d: %s", len(parts), strings.Join(parts, "; "))
}
