// Package session holds the helmr session commands: create, get, list,
// enqueue, events, interrupt, resume, close and cancel, and the "session
// turn" commands in package turn.
package session

import (
	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/internal/cli/clienv"
	"github.com/helmr-go/helmr/internal/cli/session/turn"
)

// New returns the "session" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "session",
		Short: "Create, inspect and follow Sessions",
	})
	cmd.AddCommand(newCreate(g), newGet(g), newList(g), newEnqueue(g), newEvents(g), turn.New(g),
		newInterrupt(g), newResume(g),
		newStatusControl(g, "close", "Stop admitting Turns and let the Session drain; it is closed when nothing is left"),
		newStatusControl(g, "cancel", "Cancel the queued and running work of the Session and the Sessions it owns, and close them"))
	return cmd
}
