// Package deploy is `helmr deploy`: build an agent package and publish it
// to a running control plane.
package deploy

import (
	"fmt"
	"os"
	"strings"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/clienv"
	"github.com/helmr-go/helmr/internal/cli/progress"
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
			"to DIR, never outside it) are packed into a deterministic tar and uploaded with the binary.\n" +
			"The server pulls and builds the Templates' images before the Deployment becomes current; a\n" +
			"failing build refuses it and the current Deployment stays. Progress (build, upload, each image\n" +
			"pull and step) goes to stderr: one status line rewritten on a terminal, else one line per step.",
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
			p := progress.New(g.Streams.Err)
			p.Step("building " + args[0])
			b, err := builder.BuildDirLog(cmd.Context(), args[0], tmp, g.Streams.Err)
			if err != nil {
				return err
			}
			p.Step(fmt.Sprintf("built %s (%s)", args[0], b.Digest[:min(len(b.Digest), 19)]))
			if srcs := b.Manifest.CopySources(); len(srcs) > 0 {
				p.Step("bundling " + strings.Join(srcs, ", "))
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
			total, err := size(f)
			if err != nil {
				return err
			}
			up := helmrclient.DeploymentUpload{Manifest: b.Manifest, Binary: f, Progress: p.Progress}
			if srcFile != "" {
				sf, err := os.Open(srcFile)
				if err != nil {
					return err
				}
				defer sf.Close()
				n, err := size(sf)
				if err != nil {
					return err
				}
				total += n
				up.Sources = sf
			}
			u := progress.NewUpload(p, total)
			up.Binary = u.Reader(up.Binary)
			if up.Sources != nil {
				up.Sources = u.Reader(up.Sources)
			}
			d, err := c.Deployments.Upload(cmd.Context(), up)
			p.Clear()
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

// size is the size of an open file.
func size(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
