package turn

import (
	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newGet returns "session turn get".
func newGet(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get SESSION TURN",
		Short: "Show a Turn's state, response and result",
		Args:  clienv.Args("SESSION", "TURN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			t, err := c.Sessions.Ref(args[0]).Turns.Ref(args[1]).Get(cmd.Context())
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(t)
			}
			return clienv.WriteTurn(g.Streams.Out, t)
		},
	}
}
