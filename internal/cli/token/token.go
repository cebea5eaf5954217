// Package token holds the helmr token commands: get, complete and cancel.
package token

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// New returns the "token" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "token",
		Short: "Read, complete and cancel Tokens",
		Long: "Tokens are durable one-shot values that agent code waits on. HELMR_API_KEY may also be a Token's\n" +
			"public access credential, which completes that one Token and nothing else.",
	})
	cmd.AddCommand(newGet(g), newComplete(g), newCancel(g))
	return cmd
}

func newGet(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get TOKEN",
		Short: "Show a Token",
		Args:  clienv.Args("TOKEN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			t, err := c.Tokens.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return write(g, t)
		},
	}
}

func newComplete(g *clienv.Globals) *cobra.Command {
	var data clienv.JSONFlags
	cmd := &cobra.Command{
		Use:   "complete TOKEN (--data-json JSON | --data-file FILE)",
		Short: "Complete a pending Token with data",
		Long: "Complete a pending Token. Completing it again with the same data answers already_completed;\n" +
			"other data is refused (token_completion_conflict) and never overwrites.",
		Args: clienv.Args("TOKEN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, ok, err := data.Value(cmd, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if !ok {
				return clienv.Usagef("give the data with --data-json or --data-file")
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			r, err := c.Tokens.Complete(cmd.Context(), args[0], raw)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(r)
			}
			fmt.Fprintf(g.Streams.Out, "Token %s %s\n", r.Token.ID, r.Status)
			return nil
		},
	}
	data.Register(cmd, "data", "the Token's data")
	return cmd
}

func newCancel(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel TOKEN",
		Short: "Cancel a pending Token; its waiters see token_cancelled",
		Args:  clienv.Args("TOKEN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			t, err := c.Tokens.Cancel(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return write(g, t)
		},
	}
}

func write(g *clienv.Globals, t *helmrtype.TokenState) error {
	if g.JSON {
		return g.PrintJSON(t)
	}
	return writeToken(g.Streams.Out, t)
}

func writeToken(w io.Writer, t *helmrtype.TokenState) error {
	return clienv.WriteFields(w,
		clienv.Field{Name: "Token", Value: t.ID},
		clienv.Field{Name: "Status", Value: t.Status},
		clienv.Field{Name: "Session", Value: t.SessionID},
		clienv.Field{Name: "Turn", Value: t.TurnID},
		clienv.Field{Name: "Created", Value: clienv.Time(t.CreatedAt)},
		clienv.Field{Name: "Expires", Value: clienv.TimePtr(t.ExpiresAt)},
		clienv.Field{Name: "Data", Value: clienv.CompactJSON(t.Data)},
		clienv.Field{Name: "Callback URL", Value: t.CallbackURL},
	)
}
