package turn

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newList returns "session turn list".
func newList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.ListOptions
	cmd := &cobra.Command{
		Use:   "list SESSION",
		Short: "List a Session's Turns in admission order",
		Args:  clienv.Args("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clienv.Limit(opts.Limit, 100); err != nil {
				return err
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			page, err := c.Sessions.Ref(args[0]).Turns.List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(page)
			}
			t := clienv.NewTable(g.Streams.Out, "SEQ", "TURN", "STATUS", "SOURCE", "CREATED", "SETTLED", "ERROR")
			for _, tr := range page.Turns {
				t.Row(fmt.Sprint(tr.Sequence), tr.ID, tr.Status, tr.Source.Kind, clienv.Time(tr.CreatedAt), clienv.TimePtr(tr.TerminalAt), clienv.TurnError(tr.Error))
			}
			if err := t.Flush(); err != nil {
				return err
			}
			clienv.More(g.Streams.Err, "Turns", page.NextCursor)
			return nil
		},
	}
	clienv.PageFlags(cmd.Flags(), &opts.Limit, &opts.Cursor, 0)
	return cmd
}
