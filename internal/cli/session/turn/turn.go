// Package turn holds the helmr session turn commands: list, get, wait, send,
// interrupt, and ask (list, get, respond).
package turn

import (
	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// New returns the "session turn" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "turn",
		Short: "Inspect, wait for, message and interrupt a Session's Turns",
	})
	cmd.AddCommand(newList(g), newGet(g), newWait(g), newSend(g), newInterrupt(g), newAsk(g))
	return cmd
}
