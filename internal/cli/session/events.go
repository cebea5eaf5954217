package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newEvents returns "session events".
func newEvents(g *clienv.Globals) *cobra.Command {
	var (
		opts   helmrclient.EventListOptions
		follow bool
		jsonl  bool
	)
	cmd := &cobra.Command{
		Use:   "events SESSION",
		Short: "Read or follow a Session's event timeline",
		Long: "Print one page of a Session's events after --after, or with --follow stream them live " +
			"(reconnecting without losing or repeating a record) until interrupted.\n\n" +
			"--jsonl prints one event object per line; --json prints the page object, or with " +
			"--follow one event object per line. With --follow, --limit stops after that many events.",
		Args: clienv.Args("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.After < 0 {
				return clienv.Usagef("--after must not be negative")
			}
			if err := clienv.Limit(opts.Limit, 1000); err != nil {
				return err
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			events := c.Sessions.Ref(args[0]).Events
			out := g.Streams.Out
			if !follow {
				page, err := events.List(cmd.Context(), opts)
				if err != nil {
					return err
				}
				switch {
				case jsonl:
					for _, ev := range page.Records {
						if err := clienv.WriteJSON(out, ev, false); err != nil {
							return err
						}
					}
				case g.JSON:
					return g.PrintJSON(page)
				default:
					for _, ev := range page.Records {
						writeEvent(out, ev)
					}
				}
				if page.HasMore && !g.JSON {
					fmt.Fprintf(g.Streams.Err, "More events: --after %d\n", page.NextAfter)
				}
				return nil
			}
			n := 0
			for ev, err := range events.Stream(cmd.Context(), opts.After) {
				if err != nil {
					if ctxErr := cmd.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
						return nil // interrupted by the user: the normal end of --follow
					}
					return err
				}
				if jsonl || g.JSON {
					if err := clienv.WriteJSON(out, ev, false); err != nil {
						return err
					}
				} else {
					writeEvent(out, ev)
				}
				n++
				if opts.Limit > 0 && n >= opts.Limit {
					return nil
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&follow, "follow", "f", false, "stream events live until interrupted")
	f.Int64Var(&opts.After, "after", 0, "start after this event sequence")
	f.IntVar(&opts.Limit, "limit", 0, "page size, 1–1000 (default: the server's, 100); with --follow, stop after this many events")
	f.BoolVar(&jsonl, "jsonl", false, "print one event JSON object per line")
	return cmd
}

// writeEvent writes one event for a person: sequence, time, kind and a
// summary; output text continues on indented lines.
func writeEvent(w io.Writer, ev helmrtype.SessionEvent) {
	head := fmt.Sprintf("%6d  %s  %-22s", ev.Sequence, clienv.Time(ev.CreatedAt), ev.Kind)
	summary := eventSummary(ev)
	if summary == "" {
		fmt.Fprintln(w, strings.TrimRight(head, " "))
		return
	}
	lines := strings.Split(strings.TrimSuffix(summary, "\n"), "\n")
	fmt.Fprintf(w, "%s  %s\n", head, lines[0])
	pad := strings.Repeat(" ", len(head)+2)
	for _, l := range lines[1:] {
		fmt.Fprintf(w, "%s%s\n", pad, l)
	}
}

// eventSummary is the human part of an event line: the text of its content
// when its data carries Content (output, messages), otherwise its Turn and
// data on one line.
func eventSummary(ev helmrtype.SessionEvent) string {
	var data map[string]json.RawMessage
	if json.Unmarshal(ev.Data, &data) == nil {
		for _, k := range []string{"content", "output", "response"} {
			if raw, ok := data[k]; ok {
				if c, err := helmrtype.ParseContent(raw, len(raw), false); err == nil {
					return clienv.ContentText(c)
				}
			}
		}
	}
	var parts []string
	if id := clienv.Str(ev.TurnID); id != "" {
		parts = append(parts, "turn "+id)
	}
	if d := clienv.CompactJSON(ev.Data); d != "" && d != "{}" && d != "null" {
		parts = append(parts, clienv.Shorten(d, 160))
	}
	return strings.Join(parts, "  ")
}
