package turn

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// waitWithOutput is what "session turn wait --json" prints: the wait's
// result and, once the Turn settled, the output it wrote.
type waitWithOutput struct {
	*helmrtype.TimedTurnWaitResult
	Output helmrtype.Content `json:"output,omitempty"`
}

// newWait returns "session turn wait".
func newWait(g *clienv.Globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait SESSION TURN",
		Short: "Wait for a Turn to settle and print its output and outcome",
		Long: "Wait for a Turn to settle and print the output it wrote and its outcome. Exit code 0 when it completed, " +
			"6 when it failed, was interrupted or cancelled, 5 when --timeout passed first " +
			"(the Turn goes on). --json prints {\"status\":\"settled\",\"outcome\":…,\"output\":[…]} or {\"status\":\"timeout\"}.",
		Args: clienv.Args("SESSION", "TURN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return clienv.Usagef("--timeout must not be negative")
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			t := c.Sessions.Ref(args[0]).Turns.Ref(args[1])
			var r *helmrtype.TimedTurnWaitResult
			if timeout > 0 {
				r, err = t.WaitTimeout(cmd.Context(), timeout)
			} else {
				var o *helmrtype.TurnOutcome
				if o, err = t.Wait(cmd.Context()); err == nil {
					r = &helmrtype.TimedTurnWaitResult{Status: helmrtype.WaitSettled, Outcome: o}
				}
			}
			if err != nil {
				return err
			}
			var output helmrtype.Content
			if r.Status == helmrtype.WaitSettled && r.Outcome != nil {
				output = clienv.TurnOutputOrNote(cmd.Context(), c, args[0], args[1], g.Streams.Err)
			}
			if g.JSON {
				if err := g.PrintJSON(waitWithOutput{TimedTurnWaitResult: r, Output: output}); err != nil {
					return err
				}
			}
			if r.Status != helmrtype.WaitSettled || r.Outcome == nil {
				return clienv.Exitf(clienv.ExitWaitTimeout, "Turn %s did not settle within %s; it goes on", t.ID(), timeout)
			}
			if !g.JSON {
				clienv.WriteTurnOutput(g.Streams.Out, output)
				clienv.WriteOutcome(g.Streams.Out, t.ID(), r.Outcome)
			}
			return clienv.OutcomeExit(t.ID(), r.Outcome)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up waiting after this long, e.g. 10m (0: no limit)")
	return cmd
}
