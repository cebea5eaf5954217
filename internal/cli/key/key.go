// Package key holds the helmr key commands: create, list and revoke API
// keys (with an admin key).
package key

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// New returns the "key" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "key",
		Short: "Create, list and revoke API keys",
		Long: "API keys have a role: admin (everything), operator (Sessions, Turns, controls, Computers and\n" +
			"Commands; no deploys, no keys), responder (read, answer questions, complete Tokens) or viewer\n" +
			"(read only). Managing keys needs an admin key.",
	})
	cmd.AddCommand(newCreate(g), newList(g), newRevoke(g))
	return cmd
}

func newCreate(g *clienv.Globals) *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "create NAME --role admin|operator|responder|viewer",
		Short: "Create an API key; its secret is printed this once",
		Args:  clienv.Args("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !helmrtype.Role(role).Valid() {
				return clienv.Usagef("--role must be admin, operator, responder or viewer")
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			k, err := c.Keys.Create(cmd.Context(), args[0], helmrtype.Role(role))
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(k)
			}
			if err := clienv.WriteFields(g.Streams.Out,
				clienv.Field{Name: "Key", Value: k.ID},
				clienv.Field{Name: "Name", Value: k.Name},
				clienv.Field{Name: "Role", Value: string(k.Role)},
				clienv.Field{Name: "Secret", Value: k.Secret},
			); err != nil {
				return err
			}
			fmt.Fprintln(g.Streams.Err, "Keep the secret now: the server keeps only its hash and shows it never again.")
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "the key's role: admin, operator, responder or viewer (required)")
	cmd.MarkFlagRequired("role")
	return cmd
}

func newList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.ListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the API keys, oldest first, revoked ones included (never their secrets)",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return clienv.ShowPage(g, cmd, opts.Limit, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.APIKeyPage, error) {
				return c.Keys.List(ctx, opts)
			}, clienv.List[*helmrtype.APIKeyPage]{
				Header: []string{"KEY", "NAME", "ROLE", "PREFIX", "CREATED", "REVOKED"},
				Rows: func(t *clienv.Table, page *helmrtype.APIKeyPage) string {
					for _, k := range page.Keys {
						t.Row(k.ID, k.Name, string(k.Role), k.Prefix, clienv.Time(k.CreatedAt), clienv.TimePtr(k.RevokedAt))
					}
					return page.NextCursor
				},
				What: "keys",
			})
		},
	}
	clienv.PageFlags(cmd.Flags(), &opts.Limit, &opts.Cursor, 0)
	return cmd
}

func newRevoke(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke KEY",
		Short: "Revoke an API key; its next request fails, on every node",
		Long: "Revoke an API key by its ID (helmr key list shows them). The last admin key that is not revoked\n" +
			"cannot be revoked (exit 4): create another admin key first.",
		Args: clienv.Args("KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			k, err := c.Keys.Revoke(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(k)
			}
			fmt.Fprintf(g.Streams.Out, "Key %s (%s) revoked at %s\n", k.ID, k.Name, clienv.TimePtr(k.RevokedAt))
			return nil
		},
	}
}
