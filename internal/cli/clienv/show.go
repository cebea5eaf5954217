package clienv

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
)

// Show fetches one value with the client and prints it: as JSON with
// --json, otherwise through text.
func Show[T any](g *Globals, cmd *cobra.Command, fetch func(context.Context, *helmrclient.Client) (T, error), text func(io.Writer, T) error) error {
	c, err := g.Client()
	if err != nil {
		return err
	}
	v, err := fetch(cmd.Context(), c)
	if err != nil {
		return err
	}
	if g.JSON {
		return g.PrintJSON(v)
	}
	return text(g.Streams.Out, v)
}

// List is a list command's page: the table's header, the rows of a page
// (returning the page's next cursor) and the plural noun that tells how to
// get the next page.
type List[P any] struct {
	Header []string
	Rows   func(*Table, P) (next string)
	What   string
}

// ShowPage checks a list command's --limit, fetches a page with the client
// and prints it: as JSON with --json, otherwise as a table, and on stderr
// how to get the next page.
func ShowPage[P any](g *Globals, cmd *cobra.Command, limit int, fetch func(context.Context, *helmrclient.Client) (P, error), l List[P]) error {
	if err := Limit(limit, 100); err != nil {
		return err
	}
	return Show(g, cmd, fetch, func(w io.Writer, page P) error {
		t := NewTable(w, l.Header...)
		next := l.Rows(t, page)
		if err := t.Flush(); err != nil {
			return err
		}
		More(g.Streams.Err, l.What, next)
		return nil
	})
}

// StatusFlags registers a list command's --status (default def; usage
// names the values) and --all, which lists every status. The returned
// check, called first in RunE, refuses both together and clears status for
// --all.
func StatusFlags(cmd *cobra.Command, status *string, def, usage, noun string) func() error {
	var all bool
	cmd.Flags().StringVar(status, "status", def, usage)
	cmd.Flags().BoolVar(&all, "all", false, "list "+noun+" of every status")
	return func() error {
		if !all {
			return nil
		}
		if cmd.Flags().Changed("status") {
			return Usagef("give only one of --status and --all")
		}
		*status = ""
		return nil
	}
}
