// Package deployment holds the helmr deployment commands: list, get and
// promote (make an earlier Deployment current again). Publishing a new
// Deployment is `helmr deploy`.
package deployment

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

// New returns the "deployment" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "deployment",
		Short: "List and show Deployments, and promote an earlier one",
	})
	cmd.AddCommand(newList(g), newGet(g), newPromote(g))
	return cmd
}

func newList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.ListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the Deployments, newest first; * marks the current one",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clienv.ShowPage(g, cmd, opts.Limit, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.DeploymentPage, error) {
				return c.Deployments.List(ctx, opts)
			}, clienv.List[*helmrtype.DeploymentPage]{
				Header: []string{"ID", "CURRENT", "DIGEST", "CREATED", "AGENTS"},
				Rows: func(t *clienv.Table, page *helmrtype.DeploymentPage) string {
					for _, d := range page.Deployments {
						cur := ""
						if d.Current {
							cur = "*"
						}
						t.Row(d.ID, cur, shortDigest(d.Digest), clienv.Time(d.CreatedAt), strings.Join(d.Agents, ","))
					}
					return page.NextCursor
				},
				What: "Deployments",
			})
		},
	}
	f := cmd.Flags()
	clienv.PageFlags(f, &opts.Limit, &opts.Cursor, 50)
	return cmd
}

func newGet(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get ID",
		Short: "Show one Deployment (ID \"current\" names the current one)",
		Args:  clienv.Args("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return clienv.Show(g, cmd, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.Deployment, error) {
				return c.Deployments.Get(ctx, args[0])
			}, writeText)
		},
	}
}

func newPromote(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "promote ID",
		Short: "Make an earlier Deployment current again",
		Long: "helmr deployment promote makes Deployment ID current again, for example to roll back a bad\n" +
			"deploy. New Sessions pin it and the cron Schedules follow its triggers, as when it was\n" +
			"published; existing Sessions keep the Deployment they pinned. Promoting the current\n" +
			"Deployment changes nothing.",
		Args: clienv.Args("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			d, err := c.Deployments.Promote(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(d)
			}
			fmt.Fprintf(g.Streams.Out, "Deployment %s is current: agents %s\n", d.ID, strings.Join(d.Agents, ", "))
			return nil
		},
	}
}

// shortDigest shortens a "sha256:…" digest for a table.
func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func writeText(w io.Writer, d *helmrtype.Deployment) error {
	cur := "no"
	if d.Current {
		cur = "yes"
	}
	runtime := d.Manifest.Runtime
	if runtime == "" {
		runtime = "native"
	}
	return clienv.WriteFields(w,
		clienv.Field{Name: "Deployment", Value: d.ID},
		clienv.Field{Name: "Current", Value: cur},
		clienv.Field{Name: "Digest", Value: d.Digest},
		clienv.Field{Name: "Sources", Value: d.SourcesDigest},
		clienv.Field{Name: "Runtime", Value: runtime},
		clienv.Field{Name: "Agents", Value: strings.Join(d.Agents, ", ")},
		clienv.Field{Name: "Created", Value: clienv.Time(d.CreatedAt)},
	)
}
