package session

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newInterrupt returns "session interrupt".
func newInterrupt(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.ControlOptions
	cmd := &cobra.Command{
		Use:   "interrupt SESSION [--idempotency-key K]",
		Short: "Hold a Session and the Sessions it owns: running Turns are interrupted, queued Turns wait",
		Long: "Hold a Session and every Session it owns. Running Turns are interrupted; queued Turns stay queued\n" +
			"until the hold is released with `helmr session resume SESSION --hold HOLD`. Prints the hold ID.",
		Args: clienv.Args("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			r, err := c.Sessions.Ref(args[0]).Interrupt(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(r)
			}
			fmt.Fprintf(g.Streams.Out, "Session %s interrupt %s; hold %s\n", r.SessionID, r.Status, r.HoldID)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "retry identity (default: a new one per call)")
	return cmd
}

// newResume returns "session resume".
func newResume(g *clienv.Globals) *cobra.Command {
	var (
		opts helmrclient.ControlOptions
		hold string
	)
	cmd := &cobra.Command{
		Use:   "resume SESSION --hold HOLD [--idempotency-key K]",
		Short: "Release exactly one hold placed on this Session",
		Long: "Release one exact hold (see `helmr session get`). An inherited hold is resumed on the Session that\n" +
			"owns it; a released or foreign hold is refused (exit 4).",
		Args: clienv.Args("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			r, err := c.Sessions.Ref(args[0]).Resume(cmd.Context(), hold, opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(r)
			}
			fmt.Fprintf(g.Streams.Out, "Session %s resume %s; hold %s released\n", r.SessionID, r.Status, r.HoldID)
			return nil
		},
	}
	cmd.Flags().StringVar(&hold, "hold", "", "the hold ID to release (required)")
	_ = cmd.MarkFlagRequired("hold")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "retry identity (default: a new one per call)")
	return cmd
}

// newStatusControl returns "session close" or "session cancel".
func newStatusControl(g *clienv.Globals, verb, short string) *cobra.Command {
	var opts helmrclient.ControlOptions
	cmd := &cobra.Command{
		Use:   verb + " SESSION [--idempotency-key K]",
		Short: short,
		Args:  clienv.Args("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			ref := c.Sessions.Ref(args[0])
			do := ref.Close
			if verb == "cancel" {
				do = ref.Cancel
			}
			r, err := do(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(r)
			}
			fmt.Fprintf(g.Streams.Out, "Session %s is %s\n", r.SessionID, r.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "retry identity (default: a new one per call)")
	return cmd
}
