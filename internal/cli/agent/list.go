package agent

import (
	"fmt"

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
	f.IntVar(&opts.Limit, "limit", 50, "page size, 1–100")
	f.StringVar(&opts.Cursor, "cursor", "", "continue from a previous page's cursor")
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
	if page.NextCursor != "" {
		fmt.Fprintf(s.Err, "More Agents: --cursor %s\n", page.NextCursor)
	}
	return nil
}
