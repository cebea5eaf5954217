// Package schedule holds the helmr schedule commands: list and get (read
// only; Schedules change by publishing a Deployment).
package schedule

import (
	"context"
	"io"
	"strconv"

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
			return clienv.ShowPage(g, cmd, opts.Limit, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.SchedulePage, error) {
				return c.Schedules.List(ctx, opts)
			}, clienv.List[*helmrtype.SchedulePage]{
				Header: []string{"ID", "AGENT", "TRIGGER", "PATTERN", "TIMEZONE", "LAST FIRE", "NEXT FIRE", "MISSED"},
				Rows: func(t *clienv.Table, page *helmrtype.SchedulePage) string {
					for _, s := range page.Schedules {
						t.Row(s.ID, s.Agent, s.Name, s.Pattern, s.Timezone, clienv.TimePtr(s.LastFireAt), clienv.Time(s.NextFireAt), strconv.FormatInt(s.MissedCount, 10))
					}
					return page.NextCursor
				},
				What: "Schedules",
			})
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
			return clienv.Show(g, cmd, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.Schedule, error) {
				return c.Schedules.Get(ctx, args[0])
			}, writeSchedule)
		},
	}
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
		clienv.Field{Name: "Last fire", Value: clienv.TimePtr(s.LastFireAt)},
		clienv.Field{Name: "Last Session", Value: s.LastSessionID},
		clienv.Field{Name: "Next fire", Value: clienv.Time(s.NextFireAt)},
		clienv.Field{Name: "Missed", Value: strconv.FormatInt(s.MissedCount, 10)},
	)
}
