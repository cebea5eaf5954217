package turn

import (
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// newAsk returns "session turn ask" and its verbs.
func newAsk(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "ask",
		Short: "List, show and answer the questions a Turn asked",
	})
	cmd.AddCommand(newAskList(g), newAskGet(g), newAskRespond(g))
	return cmd
}

func newAskList(g *clienv.Globals) *cobra.Command {
	var opts helmrclient.ListOptions
	cmd := &cobra.Command{
		Use:   "list SESSION TURN",
		Short: "List a Turn's questions, oldest first",
		Args:  clienv.Args("SESSION", "TURN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := clienv.Limit(opts.Limit, 100); err != nil {
				return err
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			page, err := c.Sessions.Ref(args[0]).Turns.Ref(args[1]).Asks().List(cmd.Context(), opts)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(page)
			}
			t := clienv.NewTable(g.Streams.Out, "ASK", "STATUS", "ANSWER", "OPTIONS", "CREATED", "PROMPT")
			for _, a := range page.Asks {
				ids := make([]string, 0, len(a.Question.Answer.Options))
				for _, o := range a.Question.Answer.Options {
					ids = append(ids, o.ID)
				}
				t.Row(a.ID, a.Status, a.Question.Answer.Type, strings.Join(ids, ","), clienv.Time(a.CreatedAt), oneLine(a.Question.Prompt.PlainText(), 60))
			}
			if err := t.Flush(); err != nil {
				return err
			}
			clienv.More(g.Streams.Err, "questions", page.NextCursor)
			return nil
		},
	}
	clienv.PageFlags(cmd.Flags(), &opts.Limit, &opts.Cursor, 0)
	return cmd
}

func newAskGet(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "get SESSION TURN ASK",
		Short: "Show a question, its options and its answer",
		Args:  clienv.Args("SESSION", "TURN", "ASK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			a, err := c.Sessions.Ref(args[0]).Turns.Ref(args[1]).Asks().Get(cmd.Context(), args[2])
			if err != nil {
				return err
			}
			return writeAsk(g, a)
		},
	}
}

func newAskRespond(g *clienv.Globals) *cobra.Command {
	var (
		answer     clienv.JSONFlags
		text       string
		responseID string
	)
	cmd := &cobra.Command{
		Use:   "respond SESSION TURN ASK (--answer-json JSON | --answer-file FILE | --text T) [--response-id ID]",
		Short: "Answer a pending question",
		Long: "Answer a pending question. A text question takes --text (or a JSON string); a choice takes\n" +
			"{\"selected\": [\"option-id\"], \"text\": \"…\"} (helmr session turn ask list shows the option IDs).\n" +
			"--response-id makes the call safe to retry: the same ID and answer give the same result; another\n" +
			"answer to an answered question is refused. Without it a new ID is generated and printed.",
		Args: clienv.Args("SESSION", "TURN", "ASK"),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, ok, err := answer.Value(cmd, cmd.InOrStdin())
			if err != nil {
				return err
			}
			switch {
			case ok && cmd.Flags().Changed("text"):
				return clienv.Usagef("give only one of --answer-json, --answer-file and --text")
			case cmd.Flags().Changed("text"):
				return respond(g, cmd, args, text, responseID)
			case !ok:
				return clienv.Usagef("give the answer with --answer-json, --answer-file or --text")
			}
			return respond(g, cmd, args, raw, responseID)
		},
	}
	answer.Register(cmd, "answer", "the answer")
	cmd.Flags().StringVar(&text, "text", "", "the answer to a text question")
	cmd.Flags().StringVar(&responseID, "response-id", "", "a unique ID for this answer; reuse it to retry (default: a new UUIDv7, printed)")
	return cmd
}

func respond(g *clienv.Globals, cmd *cobra.Command, args []string, answer any, responseID string) error {
	c, err := g.Client()
	if err != nil {
		return err
	}
	return Respond(g, cmd, c, args[0], args[1], args[2], answer, responseID)
}

// Respond answers the question askID of a Session's Turn and prints it.
// Without responseID it generates a UUIDv7 and prints it, so that a
// failed call can be retried with --response-id; helmr ask answer uses it
// too.
func Respond(g *clienv.Globals, cmd *cobra.Command, c *helmrclient.Client, sessionID, turnID, askID string, answer any, responseID string) error {
	generated := responseID == ""
	if generated {
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		responseID = id.String()
	}
	a, err := c.Sessions.Ref(sessionID).Turns.Ref(turnID).Asks().Respond(cmd.Context(), askID, answer, responseID)
	if err != nil {
		if generated {
			fmt.Fprintf(g.Streams.Err, "Response ID: %s (pass --response-id %s to retry)\n", responseID, responseID)
		}
		return err
	}
	if !g.JSON {
		fmt.Fprintf(g.Streams.Out, "Response ID: %s\n", responseID)
	}
	return writeAsk(g, a)
}

// WriteAsk prints a question: as JSON with --json, as fields otherwise.
func WriteAsk(g *clienv.Globals, a *helmrtype.AskState) error {
	return writeAsk(g, a)
}

// OneLine shortens s to one line of at most n runes.
func OneLine(s string, n int) string { return oneLine(s, n) }

func writeAsk(g *clienv.Globals, a *helmrtype.AskState) error {
	if g.JSON {
		return g.PrintJSON(a)
	}
	return writeAskText(g.Streams.Out, a)
}

func writeAskText(w io.Writer, a *helmrtype.AskState) error {
	by := ""
	if a.RespondedBy != nil {
		by = strings.TrimSpace(a.RespondedBy.Kind + " " + a.RespondedBy.ID)
	}
	if err := clienv.WriteFields(w,
		clienv.Field{Name: "Ask", Value: a.ID},
		clienv.Field{Name: "Status", Value: a.Status},
		clienv.Field{Name: "Prompt", Value: a.Question.Prompt.PlainText()},
		clienv.Field{Name: "Answer type", Value: a.Question.Answer.Type},
		clienv.Field{Name: "Answer", Value: clienv.CompactJSON(a.Answer)},
		clienv.Field{Name: "Responded by", Value: by},
		clienv.Field{Name: "Created", Value: clienv.Time(a.CreatedAt)},
	); err != nil {
		return err
	}
	for _, o := range a.Question.Answer.Options {
		fmt.Fprintf(w, "  option %s: %s = %s\n", o.ID, o.Label, clienv.CompactJSON(o.Value))
	}
	return nil
}

// oneLine shortens s to one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
