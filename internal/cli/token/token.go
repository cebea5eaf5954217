// Package token holds the helmr token commands: list, get, complete and
// cancel.
package token

import (
	"context"
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
	var status func() error
	cmd := &cobra.Command{
		Use:   "list [--status pending|completed|cancelled|expired | --all]",
		Short: "List Tokens across Sessions, newest first (default: the pending ones)",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := status(); err != nil {
				return err
			}
			return clienv.ShowPage(g, cmd, opts.Limit, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.TokenPage, error) {
				return c.Tokens.List(ctx, opts)
			}, clienv.List[*helmrtype.TokenPage]{
				Header: []string{"TOKEN", "SESSION", "TURN", "STATUS", "CREATED", "EXPIRES", "TAGS", "SCHEMA"},
				Rows: func(t *clienv.Table, page *helmrtype.TokenPage) string {
					for _, tk := range page.Tokens {
						schema := "-"
						if len(tk.Schema) > 0 {
							schema = "yes"
						}
						t.Row(tk.ID, tk.SessionID, tk.TurnID, tk.Status, clienv.Time(tk.CreatedAt), clienv.TimePtr(tk.ExpiresAt),
							strings.Join(tk.Tags, ","), schema)
					}
					return page.NextCursor
				},
				What: "tokens",
			})
		},
	}
	status = clienv.StatusFlags(cmd, &opts.Status, helmrtype.TokenPending, "pending, completed, cancelled or expired", "Tokens")
	clienv.PageFlags(cmd.Flags(), &opts.Limit, &opts.Cursor, 0)
	return cmd
}

func newGet(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get TOKEN",
		Short: "Show a Token",
		Args:  clienv.Args("TOKEN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return clienv.Show(g, cmd, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.TokenState, error) {
				return c.Tokens.Get(ctx, args[0])
			}, writeToken)
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
			return clienv.Show(g, cmd, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.TokenState, error) {
				return c.Tokens.Cancel(ctx, args[0])
			}, writeToken)
		},
	}
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
