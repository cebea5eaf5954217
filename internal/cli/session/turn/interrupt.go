package turn

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newInterrupt returns "session turn interrupt".
func newInterrupt(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.InterruptOptions
	cmd := &cobra.Command{
		Use:   "interrupt SESSION TURN",
		Short: "Interrupt a running Turn (the Session is not held)",
		Long:  "Interrupt a running Turn without holding its Session. The receipt confirms acceptance, not that the Turn has stopped; use \"session turn wait\" for that.",
		Args:  clienv.Args("SESSION", "TURN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			r, err := c.Sessions.Ref(args[0]).Turns.Ref(args[1]).Interrupt(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(r)
			}
			fmt.Fprintf(g.Streams.Out, "Interrupt %s %s for Turn %s\n", r.ID, r.Status, r.TurnID)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "retry identity (default: a new one per call)")
	return cmd
}
