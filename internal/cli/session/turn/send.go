package turn

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newSend returns "session turn send".
func newSend(g *clienv.Globals) *cobra.Command {
	var (
		text string
		opts helmrclient.SendOptions
	)
	cmd := &cobra.Command{
		Use:   "send SESSION TURN --text T",
		Short: "Send a message to exactly this running Turn",
		Long:  "Send a message to a running Turn. Acceptance is not delivery: the Turn's handler may still reject it.",
		Args:  clienv.Args("SESSION", "TURN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			t := c.Sessions.Ref(args[0]).Turns.Ref(args[1])
			r, err := t.Send(cmd.Context(), helmrclient.Text(text), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(r)
			}
			fmt.Fprintf(g.Streams.Out, "Message %s %s for Turn %s\n", r.ID, r.Status, t.ID())
			return nil
		},
	}
	cmd.Flags().StringVar(&text, "text", "", "the message text (required)")
	_ = cmd.MarkFlagRequired("text")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "retry identity (default: a new one per call)")
	return cmd
}
