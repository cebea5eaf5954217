// Package deploy is `helmr deploy`: build an agent package and publish it
// to a running control plane.
package deploy

import (
	"fmt"
	"os"
	"strings"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/clienv"
	builder "github.com/helmr-go/helmr/internal/deploy"
	"github.com/spf13/cobra"
)

// New returns `helmr deploy DIR`.
func New(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "deploy DIR",
		Short: "Build the agent package in DIR and make it the current Deployment",
		Long: "helmr deploy builds the agent package in DIR (a Go main package, or a TypeScript package with a\n" +
			"package.json depending on @helmr/sdk: npm ci when node_modules is missing, then the SDK's bundler),\n" +
			"reads its manifest and uploads the binary (or bundle) to\n" +
			"the control plane (HELMR_API_URL), which stores it as an immutable, content-addressed Deployment\n" +
			"and makes it current. New Sessions pin it; existing Sessions keep their Deployment.\n" +
			"When the Templates have Copy(dst, source) steps, the files and directories they name (relative\n" +
			"to DIR, never outside it) are packed into a deterministic tar and uploaded with the binary.",
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
			b, err := builder.BuildDirLog(cmd.Context(), args[0], tmp, g.Streams.Err)
			if err != nil {
				return err
			}
			srcFile, _, err := builder.PackSourcesFile(args[0], tmp, b.Manifest)
			if err != nil {
				return err
			}
			f, err := os.Open(b.Binary)
			if err != nil {
				return err
			}
			defer f.Close()
			up := helmrclient.DeploymentUpload{Manifest: b.Manifest, Binary: f}
			if srcFile != "" {
				sf, err := os.Open(srcFile)
				if err != nil {
					return err
				}
				defer sf.Close()
				up.Sources = sf
			}
			d, err := c.Deployments.Upload(cmd.Context(), up)
			if err != nil {
				return err
			}
			if g.JSON {
				return g.PrintJSON(d)
			}
			fmt.Fprintf(g.Streams.Out, "deployed %s (%s): agents %s\n", d.ID, d.Digest, strings.Join(d.Agents, ", "))
			if d.SourcesDigest != "" {
				fmt.Fprintf(g.Streams.Out, "sources %s: %s\n", d.SourcesDigest, strings.Join(b.Manifest.CopySources(), ", "))
			}
			return nil
		},
	}
}
