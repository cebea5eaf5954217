// Package agent holds the helmr agent commands: list and get.
package agent

import (
	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// New returns the "agent" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "agent",
		Short: "Discover the Agents of a Deployment",
	})
	cmd.AddCommand(newList(g), newGet(g))
	return cmd
}
