package session

import (
	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newList returns "session list".
func newList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.SessionListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List Sessions, or look one up by --agent and --key",
		Long: "List Sessions in creation order, filtered by Agent, status, parent or requester. " +
			"With --key (and --agent), look up the one Session with that key; no other filter or paging applies.",
		Args: clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Key != "" {
				if opts.Agent == "" {
					return clienv.Usagef("--key needs --agent")
				}
				fl := cmd.Flags()
				for _, n := range []string{"status", "parent", "requester", "limit", "cursor"} {
					if fl.Changed(n) {
						return clienv.Usagef("--key looks up one Session: --%s does not apply", n)
					}
				}
			}
			for _, st := range opts.Status {
				switch st {
				case helmrtype.SessionOpen, helmrtype.SessionClosing, helmrtype.SessionClosed:
				default:
					return clienv.Usagef("--status %q: want open, closing or closed", st)
				}
			}
			if err := clienv.Limit(opts.Limit, 100); err != nil {
				return err
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			page, err := c.Sessions.List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(page)
			}
			t := clienv.NewTable(g.Streams.Out, "SESSION", "AGENT", "KEY", "STATUS", "CREATED")
			for _, s := range page.Sessions {
				t.Row(s.ID, s.Agent, s.Key, s.Status, clienv.Time(s.CreatedAt))
			}
			if err := t.Flush(); err != nil {
				return err
			}
			clienv.More(g.Streams.Err, "Sessions", page.NextCursor)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Agent, "agent", "", "only Sessions of this Agent")
	f.StringVar(&opts.Key, "key", "", "the Session with this key (needs --agent)")
	f.StringSliceVar(&opts.Status, "status", nil, "only Sessions with this status: open, closing, closed (repeat or comma-separate)")
	f.StringVar(&opts.ParentSessionID, "parent", "", "only children owned by this Session")
	f.StringVar(&opts.RequesterSessionID, "requester", "", "only Sessions requested by this Session")
	clienv.PageFlags(f, &opts.Limit, &opts.Cursor, 0)
	return cmd
}
