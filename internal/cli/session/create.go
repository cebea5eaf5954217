package session

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// createdWithOutcome is what "session create --wait --json" prints: the
// creation receipt and, once the Turn settled, its outcome.
type createdWithOutcome struct {
	helmrtype.SessionCreateReceipt
	Outcome *helmrtype.TurnOutcome `json:"outcome,omitempty"`
	// Output is what the Turn wrote (its turn.output events) before it settled.
	Output helmrtype.Content `json:"output,omitempty"`
}

// newCreate returns "session create".
func newCreate(g *clienv.Globals) *cobra.Command {
	var (
		agent   string
		in      clienv.InputFlags
		opts    helmrclient.CreateOptions
		wait    bool
		timeout time.Duration

		slackChannel, slackTeam string
	)
	cmd := &cobra.Command{
		Use:   "create --agent AGENT [--text T | --input-json J | --input-file F]",
		Short: "Create a Session, with its first Turn when input is given",
		Long: "Create a Session of an Agent in the current Deployment. With input, the Session's " +
			"first Turn is admitted; without, the Session starts with no Turn.\n\n" +
			"With --wait, wait for that Turn to settle and print the output it wrote and its outcome; the exit code is 5 " +
			"when --timeout passes first and 6 when the Turn failed, was interrupted or cancelled.",
		Args: clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if slackChannel != "" {
				opts.Slack = &helmrtype.SlackChannelRequest{ChannelID: slackChannel, TeamID: slackTeam}
			}
			input, given, err := in.Input(cmd, g.Streams.In)
			if err != nil {
				return err
			}
			if wait && !given {
				return clienv.Usagef("--wait needs input: without it no Turn is created")
			}
			if timeout < 0 {
				return clienv.Usagef("--timeout must not be negative")
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			start := time.Now()
			if wait {
				// One request admits the Turn and waits for it (up to a
				// minute); waitTurn waits on when it took longer.
				opts.Wait = helmrclient.MaxWaitPerRequest
				if timeout > 0 {
					opts.Wait = min(timeout, opts.Wait)
				}
			}
			r, err := c.Sessions.Create(cmd.Context(), agent, input, opts)
			if err != nil {
				return err
			}
			if !wait || r.Turn == nil {
				if g.JSON {
					return g.PrintJSON(r.Receipt)
				}
				writeReceipt(g.Streams.Out, r)
				return nil
			}
			if !g.JSON {
				writeReceipt(g.Streams.Out, r)
			}
			left := timeout
			if timeout > 0 {
				left = max(timeout-time.Since(start), time.Millisecond)
			}
			o, err := waitTurn(cmd, r.Turn, left, timeout)
			if err != nil {
				if g.JSON {
					_ = g.PrintJSON(createdWithOutcome{SessionCreateReceipt: r.Receipt})
				}
				return err
			}
			output := clienv.TurnOutputOrNote(cmd.Context(), c, r.Turn.SessionID(), r.Turn.ID(), g.Streams.Err)
			if g.JSON {
				if err := g.PrintJSON(createdWithOutcome{SessionCreateReceipt: r.Receipt, Outcome: o, Output: output}); err != nil {
					return err
				}
			} else {
				clienv.WriteTurnOutput(g.Streams.Out, output)
				clienv.WriteOutcome(g.Streams.Out, r.Turn.ID(), o)
			}
			return clienv.OutcomeExit(r.Turn.ID(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "Agent ID (required)")
	_ = cmd.MarkFlagRequired("agent")
	in.Register(cmd, false)
	f.StringVar(&opts.Key, "key", "", "Session key, unique within the Agent")
	f.StringVar(&opts.ComputerID, "computer", "", "run on this existing Computer")
	f.StringVar(&slackChannel, "slack-channel", "", "open the Session in this Slack channel (raw channel ID, C…): it posts there and owns the thread")
	f.StringVar(&slackTeam, "slack-team", "", "with --slack-channel: the workspace's team ID, when several Slack apps are connected")
	f.StringVar(&opts.IdempotencyKey, "idempotency-key", "", "retry identity (default: a new one per call)")
	f.BoolVar(&wait, "wait", false, "wait for the first Turn to settle and print its outcome")
	f.DurationVar(&timeout, "timeout", 0, "with --wait, give up waiting after this long (0: no limit)")
	return cmd
}

// waitTurn waits for t, at most timeout when it is positive; a timeout is an
// exit-5 error that names asked, the whole wait asked for.
func waitTurn(cmd *cobra.Command, t *helmrclient.TurnRef, timeout, asked time.Duration) (*helmrtype.TurnOutcome, error) {
	if timeout <= 0 {
		return t.Wait(cmd.Context())
	}
	r, err := t.WaitTimeout(cmd.Context(), timeout)
	if err != nil {
		return nil, err
	}
	if r.Status != helmrtype.WaitSettled || r.Outcome == nil {
		return nil, clienv.Exitf(clienv.ExitWaitTimeout, "Turn %s did not settle within %s; it goes on", t.ID(), asked)
	}
	return r.Outcome, nil
}

// writeReceipt writes a creation receipt for a person.
func writeReceipt(w io.Writer, r *helmrclient.CreateReceipt) {
	s := r.Receipt.Session
	line := fmt.Sprintf("Session %s created (agent %s)", s.ID, s.Agent)
	if r.Replayed {
		line = fmt.Sprintf("Session %s (agent %s): replayed the earlier creation with this idempotency key", s.ID, s.Agent)
	}
	fmt.Fprintln(w, line)
	if t := r.Receipt.Turn; t != nil {
		fmt.Fprintf(w, "Turn %s %s (sequence %d)\n", t.ID, t.Status, t.Sequence)
	}
}
