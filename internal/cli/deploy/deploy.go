// Package deploy is `helmr deploy`: build an agent package and publish it
// to a running control plane.
package deploy

import (
	"fmt"
	"os"
	"strings"

	"github.com/helmr-go/helmr/internal/cli/clienv"
	builder "github.com/helmr-go/helmr/internal/deploy"
	"github.com/spf13/cobra"
)

// New returns `helmr deploy DIR`.
func New(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "deploy DIR",
		Short: "Build the agent package in DIR and make it the current Deployment",
		Long: "helmr deploy builds the Go agent package in DIR, reads its manifest and uploads the binary to\n" +
			"the control plane (HELMR_API_URL), which stores it as an immutable, content-addressed Deployment\n" +
			"and makes it current. New Sessions pin it; existing Sessions keep their Deployment.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			tmp, err := os.MkdirTemp("", "helmr-deploy-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			b, err := builder.BuildDir(cmd.Context(), args[0], tmp)
			if err != nil {
				return err
			}
			f, err := os.Open(b.Binary)
			if err != nil {
				return err
			}
			defer f.Close()
			d, err := c.Deployments.Create(cmd.Context(), b.Manifest, f)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(d)
			}
			fmt.Fprintf(g.Streams.Out, "deployed %s (%s): agents %s\n", d.ID, d.Digest, strings.Join(d.Agents, ", "))
			return nil
		},
	}
}
