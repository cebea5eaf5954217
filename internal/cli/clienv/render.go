package clienv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
)

// PrintJSON writes v as indented JSON and a newline to standard output.
func (g *Globals) PrintJSON(v any) error {
	return WriteJSON(g.Streams.Out, v, true)
}

// WriteJSON writes v as JSON and a newline, indented or on one line.
func WriteJSON(w io.Writer, v any, indent bool) error {
	var (
		b   []byte
		err error
	)
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// Table writes rows as columns aligned with spaces.
type Table struct{ tw *tabwriter.Writer }

// NewTable starts a table on w with a header row.
func NewTable(w io.Writer, header ...string) *Table {
	t := &Table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.Row(header...)
	return t
}

// Row adds one row; an empty cell is written as "-".
func (t *Table) Row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			c = "-"
		}
		c = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

// Flush writes the aligned table.
func (t *Table) Flush() error { return t.tw.Flush() }

// Field is one "Name: value" line of a record.
type Field struct {
	Name  string
	Value string
}

// WriteFields writes fields as aligned "Name: value" lines, leaving out
// fields with an empty value.
func WriteFields(w io.Writer, fields ...Field) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, f := range fields {
		if f.Value == "" {
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", f.Name, f.Value)
	}
	return tw.Flush()
}

// Time formats t as RFC 3339 in UTC to the second.
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// TimePtr formats t like Time, "" for nil.
func TimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return Time(*t)
}

// Str returns *s, "" for nil.
func Str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// CompactJSON returns raw on one line, "" when it is empty.
func CompactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// IndentJSON returns raw indented by two spaces per level, each line after
// the first prefixed with prefix; "" when raw is empty.
func IndentJSON(raw json.RawMessage, prefix string) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, prefix, "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// ContentText renders Content for a person: text parts as they are,
// concatenated exactly; JSON parts as compact JSON.
func ContentText(c helmrtype.Content) string {
	var b strings.Builder
	for _, p := range c {
		switch p.Type {
		case helmrtype.PartText:
			b.WriteString(p.Text)
		default:
			b.WriteString(CompactJSON(p.Value))
		}
	}
	return b.String()
}

// writeBlock writes text followed by a newline when it lacks one.
func writeBlock(w io.Writer, text string) {
	fmt.Fprint(w, text)
	if !strings.HasSuffix(text, "\n") {
		fmt.Fprintln(w)
	}
}

// TurnError formats a Turn's error as "code: message".
func TurnError(e *helmrtype.TurnError) string {
	if e == nil {
		return ""
	}
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// WriteOutcome writes a settled Turn's outcome for a person: a status line,
// then the human response as it is, then the result as JSON.
func WriteOutcome(w io.Writer, turnID string, o *helmrtype.TurnOutcome) {
	line := fmt.Sprintf("Turn %s %s", turnID, o.Status)
	if e := TurnError(o.Error); e != "" {
		line += ": " + e
	}
	if o.PayloadExpiredAt != nil {
		line += " (payload expired " + TimePtr(o.PayloadExpiredAt) + ")"
	}
	fmt.Fprintln(w, line)
	if o.Response != nil {
		writeBlock(w, ContentText(o.Response))
	}
	if r := CompactJSON(o.Result); r != "" && r != "null" {
		fmt.Fprintln(w, "Result: "+IndentJSON(o.Result, ""))
	}
}

// OutcomeExit is nil for a completed outcome and an exit-6 error naming the
// status otherwise.
func OutcomeExit(turnID string, o *helmrtype.TurnOutcome) error {
	if o.Status == helmrtype.TurnCompleted {
		return nil
	}
	msg := fmt.Sprintf("Turn %s %s", turnID, o.Status)
	if e := TurnError(o.Error); e != "" {
		msg += ": " + e
	}
	return Exitf(ExitNotCompleted, "%s", msg)
}

// WriteTurn writes a Turn's state for a person: its fields, then its
// response text and result when it has them.
func WriteTurn(w io.Writer, t *helmrtype.TurnState) error {
	source := t.Source.Kind
	if t.Source.RequesterSessionID != "" {
		source += " (session " + t.Source.RequesterSessionID + ")"
	}
	err := WriteFields(w,
		Field{"Turn", t.ID},
		Field{"Session", t.SessionID},
		Field{"Sequence", fmt.Sprint(t.Sequence)},
		Field{"Status", t.Status},
		Field{"Source", source},
		Field{"Created", Time(t.CreatedAt)},
		Field{"Started", TimePtr(t.StartedAt)},
		Field{"Settled", TimePtr(t.TerminalAt)},
		Field{"Error", TurnError(t.Error)},
		Field{"Payload expired", TimePtr(t.PayloadExpiredAt)},
		Field{"Input", inputText(t.Input)},
	)
	if err != nil {
		return err
	}
	if r := CompactJSON(t.Result); r != "" && r != "null" {
		fmt.Fprintln(w, "Result: "+IndentJSON(t.Result, ""))
	}
	if t.Response != nil {
		fmt.Fprintln(w, "Response:")
		writeBlock(w, ContentText(t.Response))
	}
	return nil
}

// inputText renders a Turn's input on one line: the text of conversational
// input, compact JSON otherwise.
func inputText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	if c, err := helmrtype.ParseContent(raw, len(raw), true); err == nil {
		return Shorten(fmt.Sprintf("%q", c.PlainText()), 200)
	}
	return Shorten(CompactJSON(raw), 200)
}

// Shorten cuts s to at most n runes, marking a cut with "…".
func Shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// TurnOutput reads the output a Turn wrote (its turn.output events, in
// order) from the Session's timeline.
func TurnOutput(ctx context.Context, c *helmrclient.Client, sessionID, turnID string) (helmrtype.Content, error) {
	ev := c.Sessions.Ref(sessionID).Events
	out := helmrtype.Content{}
	for after := int64(0); ; {
		page, err := ev.List(ctx, helmrclient.EventListOptions{After: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, r := range page.Records {
			if r.Kind != "turn.output" || r.TurnID == nil || *r.TurnID != turnID {
				continue
			}
			var d struct {
				Content helmrtype.Content `json:"content"`
			}
			if json.Unmarshal(r.Data, &d) == nil {
				out = append(out, d.Content...)
			}
		}
		if !page.HasMore || page.NextAfter <= after {
			return out, nil
		}
		after = page.NextAfter
	}
}

// TurnOutputOrNote is TurnOutput for commands whose point is the outcome:
// when the timeline cannot be read it notes why on errw and returns nil.
func TurnOutputOrNote(ctx context.Context, c *helmrclient.Client, sessionID, turnID string, errw io.Writer) helmrtype.Content {
	out, err := TurnOutput(ctx, c, sessionID, turnID)
	if err != nil {
		fmt.Fprintf(errw, "(the Turn's output could not be read: %s)\n", strings.TrimPrefix(ErrorMessage(err), "Error: "))
		return nil
	}
	return out
}

// WriteTurnOutput writes a Turn's output for a person, under an "Output:"
// line; nothing when it wrote none.
func WriteTurnOutput(w io.Writer, out helmrtype.Content) {
	if len(out) == 0 {
		return
	}
	fmt.Fprintln(w, "Output:")
	writeBlock(w, ContentText(out))
}
