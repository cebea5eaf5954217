package agent

import (
	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newList returns "agent list".
func newList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.AgentListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the Agents of a Deployment (the current one by default)",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := clienv.Limit(opts.Limit, 100); err != nil {
				return err
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			page, err := c.Agents.List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(page)
			}
			return writeAgentPage(g.Streams, page)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.DeploymentID, "deployment", "", "Deployment ID (default: the current Deployment)")
	clienv.PageFlags(f, &opts.Limit, &opts.Cursor, 50)
	return cmd
}

// writeAgentPage writes a page of Agents as a table, and the next cursor on
// stderr.
func writeAgentPage(s clienv.Streams, page *helmrtype.AgentPage) error {
	t := clienv.NewTable(s.Out, "AGENT", "TEMPLATE", "INPUT", "CLOSE AFTER IDLE", "MAX TURN")
	for _, a := range page.Agents {
		t.Row(a.Agent, a.Template, a.InputKind, a.CloseAfterIdle, a.MaxTurnDuration)
	}
	if err := t.Flush(); err != nil {
		return err
	}
	clienv.More(s.Err, "Agents", page.NextCursor)
	return nil
}
