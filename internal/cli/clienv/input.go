package clienv

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
)

// maxInputFile bounds what --input-file reads; the server's limits are far
// below it.
const maxInputFile = 16 << 20

// Input flag names.
const (
	FlagText      = "text"
	FlagInputJSON = "input-json"
	FlagInputFile = "input-file"
)

// InputFlags are the mutually exclusive --text, --input-json and
// --input-file flags that give a Turn's input.
type InputFlags struct {
	Text string
	JSON string
	File string

	required bool
}

// Register adds the flags to cmd. Input checks that at most one is given,
// and with required at least one.
func (f *InputFlags) Register(cmd *cobra.Command, required bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.Text, FlagText, "", "conversational input: one text part")
	fl.StringVar(&f.JSON, FlagInputJSON, "", "input as JSON (for a text Agent, an array of text parts)")
	fl.StringVar(&f.File, FlagInputFile, "", "read the input JSON from a file, or from standard input with -")
	f.required = required
}

// Input returns the input the flags give (helmrtype.InputContent for --text,
// json.RawMessage otherwise) and whether one was given. Invalid JSON or an
// unreadable file is a usage error.
func (f *InputFlags) Input(cmd *cobra.Command, stdin io.Reader) (any, bool, error) {
	fl := cmd.Flags()
	n := 0
	for _, name := range []string{FlagText, FlagInputJSON, FlagInputFile} {
		if fl.Changed(name) {
			n++
		}
	}
	switch {
	case n > 1:
		return nil, false, Usagef("give only one of --%s, --%s and --%s", FlagText, FlagInputJSON, FlagInputFile)
	case n == 0 && f.required:
		return nil, false, Usagef("give the input with --%s, --%s or --%s", FlagText, FlagInputJSON, FlagInputFile)
	}
	switch {
	case fl.Changed(FlagText):
		return helmrclient.Text(f.Text), true, nil
	case fl.Changed(FlagInputJSON):
		raw, err := checkJSON([]byte(f.JSON), "--"+FlagInputJSON)
		return raw, err == nil, err
	case fl.Changed(FlagInputFile):
		raw, err := readJSONFile(f.File, "--"+FlagInputFile, stdin)
		return raw, err == nil, err
	}
	return nil, false, nil
}

// readJSONFile reads JSON from path, or from stdin when path is "-"; flag
// names the flag in errors.
func readJSONFile(path, flag string, stdin io.Reader) (json.RawMessage, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		if stdin == nil {
			return nil, Usagef("%s -: no standard input", flag)
		}
		b, err = io.ReadAll(io.LimitReader(stdin, maxInputFile+1))
	} else {
		var fh *os.File
		fh, err = os.Open(path)
		if err == nil {
			b, err = io.ReadAll(io.LimitReader(fh, maxInputFile+1))
			fh.Close()
		}
	}
	if err != nil {
		return nil, Usagef("%s: %v", flag, err)
	}
	if len(b) > maxInputFile {
		return nil, Usagef("%s: more than %d bytes", flag, maxInputFile)
	}
	return checkJSON(b, flag+" "+path)
}

// JSONFlags are a pair of mutually exclusive flags --NAME-json and
// --NAME-file that give one JSON value (a Token's data, an answer).
type JSONFlags struct {
	name       string
	JSON, File string
}

// Register adds --NAME-json and --NAME-file to cmd; what describes the value.
func (f *JSONFlags) Register(cmd *cobra.Command, name, what string) {
	f.name = name
	cmd.Flags().StringVar(&f.JSON, name+"-json", "", what+" as JSON")
	cmd.Flags().StringVar(&f.File, name+"-file", "", "read "+what+" as JSON from a file, or from standard input with -")
}

// Value returns the JSON the flags give and whether one was given.
func (f *JSONFlags) Value(cmd *cobra.Command, stdin io.Reader) (json.RawMessage, bool, error) {
	fl := cmd.Flags()
	j, file := "--"+f.name+"-json", "--"+f.name+"-file"
	switch {
	case fl.Changed(f.name+"-json") && fl.Changed(f.name+"-file"):
		return nil, false, Usagef("give only one of %s and %s", j, file)
	case fl.Changed(f.name + "-json"):
		raw, err := checkJSON([]byte(f.JSON), j)
		return raw, err == nil, err
	case fl.Changed(f.name + "-file"):
		raw, err := readJSONFile(f.File, file, stdin)
		return raw, err == nil, err
	}
	return nil, false, nil
}

// checkJSON returns b as raw JSON, or a usage error naming where it came from.
func checkJSON(b []byte, from string) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, Usagef("%s is not valid JSON: %v", from, err)
	}
	return json.RawMessage(b), nil
}

// Limit checks a --limit value against max; 0 means the server's default.
func Limit(n, max int) error {
	if n < 0 || n > max {
		return Usagef("--limit %d: want 1–%d", n, max)
	}
	return nil
}

// Args requires exactly the positional arguments names (for example
// "SESSION", "TURN"), none empty; a mismatch is a usage error.
func Args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(names) == 0 && len(args) > 0 {
			return fmt.Errorf("takes no arguments; got %q", args)
		}
		if len(args) != len(names) {
			return fmt.Errorf("want %s; got %d argument(s)", strings.Join(names, " "), len(args))
		}
		for i, a := range args {
			if strings.TrimSpace(a) == "" {
				return fmt.Errorf("%s is empty", names[i])
			}
		}
		return nil
	}
}

// Group makes cmd a noun that only holds verbs: alone it prints its help,
// and an unknown verb is a usage error (cobra would print help and exit 0).
func Group(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return Usagef("unknown command %q for %q", args[0], c.CommandPath())
		}
		return c.Help()
	}
	return cmd
}
