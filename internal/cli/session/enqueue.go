package session

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newEnqueue returns "session enqueue".
func newEnqueue(g *clienv.Globals) *cobra.Command {
	var (
		in   clienv.InputFlags
		opts helmrclient.EnqueueOptions
	)
	cmd := &cobra.Command{
		Use:   "enqueue SESSION (--text T | --input-json J | --input-file F)",
		Short: "Admit a new Turn at the end of a Session's queue",
		Args:  clienv.Args("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			input, _, err := in.Input(cmd, g.Streams.In)
			if err != nil {
				return err
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			t, err := c.Sessions.Ref(args[0]).Enqueue(cmd.Context(), input, opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(t.State())
			}
			st := t.State()
			fmt.Fprintf(g.Streams.Out, "Turn %s %s (sequence %d) in Session %s\n", st.ID, st.Status, st.Sequence, t.SessionID())
			return nil
		},
	}
	in.Register(cmd, true)
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "retry identity (default: a new one per call)")
	return cmd
}
