// Package schedule holds the helmr schedule commands: list and get (read
// only; Schedules change by publishing a Deployment).
package schedule

import (
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// New returns the "schedule" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "schedule",
		Short: "Read the Schedules of the Agents' cron triggers",
	})
	cmd.AddCommand(newList(g), newGet(g))
	return cmd
}

func newList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.ListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the Schedules: trigger, Agent, pattern, time zone, last and next fire",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clienv.Limit(opts.Limit, 100); err != nil {
				return err
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			page, err := c.Schedules.List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(page)
			}
			t := clienv.NewTable(g.Streams.Out, "ID", "AGENT", "TRIGGER", "PATTERN", "TIMEZONE", "LAST FIRE", "NEXT FIRE", "MISSED")
			for _, s := range page.Schedules {
				t.Row(s.ID, s.Agent, s.Name, s.Pattern, s.Timezone, when(s.LastFireAt), s.NextFireAt.Format(time.RFC3339), strconv.FormatInt(s.MissedCount, 10))
			}
			if err := t.Flush(); err != nil {
				return err
			}
			clienv.More(g.Streams.Err, "Schedules", page.NextCursor)
			return nil
		},
	}
	f := cmd.Flags()
	clienv.PageFlags(f, &opts.Limit, &opts.Cursor, 50)
	return cmd
}

func newGet(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one Schedule: its trigger, Agent and Deployment, and how its firing stands",
		Args:  clienv.Args("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			s, err := c.Schedules.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(s)
			}
			return writeSchedule(g.Streams.Out, s)
		},
	}
}

// when formats an optional time.
func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func writeSchedule(w io.Writer, s *helmrtype.Schedule) error {
	return clienv.WriteFields(w,
		clienv.Field{Name: "Schedule", Value: s.ID},
		clienv.Field{Name: "Agent", Value: s.Agent},
		clienv.Field{Name: "Trigger", Value: s.Name},
		clienv.Field{Name: "Deployment", Value: s.DeploymentID},
		clienv.Field{Name: "Pattern", Value: s.Pattern},
		clienv.Field{Name: "Time zone", Value: s.Timezone},
		clienv.Field{Name: "Overlap", Value: s.Overlap},
		clienv.Field{Name: "Input", Value: clienv.CompactJSON(s.Input)},
		clienv.Field{Name: "Last fire", Value: when(s.LastFireAt)},
		clienv.Field{Name: "Last Session", Value: s.LastSessionID},
		clienv.Field{Name: "Next fire", Value: s.NextFireAt.Format(time.RFC3339)},
		clienv.Field{Name: "Missed", Value: strconv.FormatInt(s.MissedCount, 10)},
	)
}
