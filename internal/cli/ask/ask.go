// Package ask holds the helmr ask commands, the inbox of questions across
// Sessions: list and answer.
package ask

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
	"github.com/helmr-go/helmr/internal/cli/session/turn"
)

// New returns the "ask" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "ask",
		Short: "List and answer the questions of every Session (the inbox)",
		Long: "The inbox: the questions agents asked people, across Sessions, newest first. A responder\n" +
			"API key may list and answer them.",
	})
	cmd.AddCommand(newList(g), newAnswer(g))
	return cmd
}

func newList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.InboxOptions
	var status func() error
	cmd := &cobra.Command{
		Use:   "list [--status pending|responded|cancelled | --all]",
		Short: "List questions across Sessions, newest first (default: the pending ones)",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := status(); err != nil {
				return err
			}
			return clienv.ShowPage(g, cmd, opts.Limit, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.AskPage, error) {
				return c.Inbox.List(ctx, opts)
			}, clienv.List[*helmrtype.AskPage]{
				Header: []string{"ASK", "SESSION", "TURN", "STATUS", "ANSWER", "OPTIONS", "CREATED", "PROMPT"},
				Rows: func(t *clienv.Table, page *helmrtype.AskPage) string {
					for _, a := range page.Asks {
						t.Row(a.ID, a.SessionID, a.TurnID, a.Status, a.Question.Answer.Type, optionIDs(&a), clienv.Time(a.CreatedAt),
							turn.OneLine(a.Question.Prompt.PlainText(), 60))
					}
					return page.NextCursor
				},
				What: "questions",
			})
		},
	}
	status = clienv.StatusFlags(cmd, &opts.Status, helmrtype.AskPending, "pending, responded or cancelled", "questions")
	clienv.PageFlags(cmd.Flags(), &opts.Limit, &opts.Cursor, 0)
	return cmd
}

func newAnswer(g *clienv.Globals) *cobra.Command {
	var (
		answer     clienv.JSONFlags
		text       string
		options    []string
		responseID string
	)
	cmd := &cobra.Command{
		Use:   "answer ASK (--text T | --option ID... [--text T] | --answer-json JSON | --answer-file FILE) [--response-id ID]",
		Short: "Answer a pending question by its ID",
		Long: "Answer a pending question. A text question takes --text; a choice takes --option with an option ID\n" +
			"(repeat it when the question allows several; helmr ask list shows the IDs) and, when the question\n" +
			"allows it, --text besides. --answer-json gives the answer as helmr session turn ask respond does.\n" +
			"--response-id makes the call safe to retry: the same ID and answer give the same result. Without it\n" +
			"a new ID is generated and printed.",
		Args: clienv.Args("ASK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, haveJSON, err := answer.Value(cmd, cmd.InOrStdin())
			if err != nil {
				return err
			}
			haveText, haveOptions := cmd.Flags().Changed("text"), len(options) > 0
			if haveJSON && (haveText || haveOptions) {
				return clienv.Usagef("give --answer-json or --answer-file alone, without --text or --option")
			}
			if !haveJSON && !haveText && !haveOptions {
				return clienv.Usagef("give the answer with --text, --option, --answer-json or --answer-file")
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			a, err := c.Inbox.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var value any = raw
			switch {
			case haveJSON:
			case a.Question.Answer.Type == helmrtype.AnswerChoice:
				if !haveOptions {
					return clienv.Usagef("question %s is a choice: give --option (one of %s)", a.ID, optionIDs(a))
				}
				choice := map[string]any{"selected": options}
				if haveText {
					choice["text"] = text
				}
				value = choice
			default:
				if haveOptions {
					return clienv.Usagef("question %s takes text: give --text, not --option", a.ID)
				}
				value = text
			}
			return turn.Respond(g, cmd, c, a.SessionID, a.TurnID, a.ID, value, responseID)
		},
	}
	answer.Register(cmd, "answer", "the answer")
	cmd.Flags().StringVar(&text, "text", "", "the answer to a text question, or a choice's free text")
	cmd.Flags().StringArrayVar(&options, "option", nil, "the ID of a chosen option (repeatable)")
	cmd.Flags().StringVar(&responseID, "response-id", "", "a unique ID for this answer; reuse it to retry (default: a new UUIDv7, printed)")
	return cmd
}

func optionIDs(a *helmrtype.AskState) string {
	ids := make([]string, 0, len(a.Question.Answer.Options))
	for _, o := range a.Question.Answer.Options {
		ids = append(ids, o.ID)
	}
	return strings.Join(ids, ",")
}
