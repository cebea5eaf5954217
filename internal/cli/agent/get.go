package agent

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newGet returns "agent get".
func newGet(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.AgentGetOptions
	cmd := &cobra.Command{
		Use:   "get AGENT",
		Short: "Show one Agent: its template, input contract and policies",
		Args:  clienv.Args("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return clienv.Show(g, cmd, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.AgentInfo, error) {
				return c.Agents.Get(ctx, args[0], opts)
			}, writeAgent)
		},
	}
	cmd.Flags().StringVar(&opts.DeploymentID, "deployment", "", "Deployment ID (default: the current Deployment)")
	return cmd
}

// writeAgent writes one Agent's fields.
func writeAgent(w io.Writer, a *helmrtype.AgentInfo) error {
	return clienv.WriteFields(w,
		clienv.Field{Name: "Agent", Value: a.Agent},
		clienv.Field{Name: "Template", Value: a.Template},
		clienv.Field{Name: "Deployment", Value: a.DeploymentID},
		clienv.Field{Name: "Input", Value: a.InputKind},
		clienv.Field{Name: "Input schema", Value: clienv.CompactJSON(a.InputSchema)},
		clienv.Field{Name: "Result schema", Value: clienv.CompactJSON(a.ResultSchema)},
		clienv.Field{Name: "Close after idle", Value: a.CloseAfterIdle},
		clienv.Field{Name: "Hibernate after idle", Value: a.HibernateAfterIdle},
		clienv.Field{Name: "Max Turn duration", Value: a.MaxTurnDuration},
		clienv.Field{Name: "Runtime MCP", Value: clienv.CompactJSON(a.RuntimeMCP)},
	)
}
