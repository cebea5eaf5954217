// Package token holds the helmr token commands: list, get, complete and
// cancel.
package token

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// New returns the "token" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "token",
		Short: "List, read, complete and cancel Tokens",
		Long: "Tokens are durable one-shot values that agent code waits on. HELMR_API_KEY may also be a Token's\n" +
			"public access credential, which completes that one Token and nothing else.",
	})
	cmd.AddCommand(newList(g), newGet(g), newComplete(g), newCancel(g))
	return cmd
}

func newList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.TokenListOptions
	var all bool
	cmd := &cobra.Command{
		Use:   "list [--status pending|completed|cancelled|expired | --all]",
		Short: "List Tokens across Sessions, newest first (default: the pending ones)",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clienv.Limit(opts.Limit, 100); err != nil {
				return err
			}
			if all {
				if cmd.Flags().Changed("status") {
					return clienv.Usagef("give only one of --status and --all")
				}
				opts.Status = ""
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			page, err := c.Tokens.List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(page)
			}
			t := clienv.NewTable(g.Streams.Out, "TOKEN", "SESSION", "TURN", "STATUS", "CREATED", "EXPIRES", "TAGS", "SCHEMA")
			for _, tk := range page.Tokens {
				schema := "-"
				if len(tk.Schema) > 0 {
					schema = "yes"
				}
				t.Row(tk.ID, tk.SessionID, tk.TurnID, tk.Status, clienv.Time(tk.CreatedAt), clienv.TimePtr(tk.ExpiresAt),
					strings.Join(tk.Tags, ","), schema)
			}
			if err := t.Flush(); err != nil {
				return err
			}
			clienv.More(g.Streams.Err, "tokens", page.NextCursor)
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Status, "status", helmrtype.TokenPending, "pending, completed, cancelled or expired")
	cmd.Flags().BoolVar(&all, "all", false, "list Tokens of every status")
	clienv.PageFlags(cmd.Flags(), &opts.Limit, &opts.Cursor, 0)
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
		clienv.Field{Name: "Schema", Value: clienv.CompactJSON(t.Schema)},
		clienv.Field{Name: "Callback URL", Value: t.CallbackURL},
	)
}
