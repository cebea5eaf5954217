package clienv

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// PageFlags registers a list command's --limit (page size, 1–100; def is
// its default, 0 for the server's) and --cursor.
func PageFlags(f *pflag.FlagSet, limit *int, cursor *string, def int) {
	usage := "page size, 1–100"
	if def == 0 {
		usage += " (default: the server's)"
	}
	f.IntVar(limit, "limit", def, usage)
	f.StringVar(cursor, "cursor", "", "continue from a previous page's cursor")
}

// More tells on w how to get the next page of a listing of what (a plural
// noun) when cursor is set.
func More(w io.Writer, what, cursor string) {
	if cursor != "" {
		fmt.Fprintf(w, "More %s: --cursor %s\n", what, cursor)
	}
}
