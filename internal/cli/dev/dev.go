// Package dev is `helmr dev`: an embedded control plane on loopback that
// builds an agent package, deploys it and redeploys it on every change.
package dev

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/internal/cli/clienv"
	"github.com/helmr-go/helmr/internal/cli/progress"
	"github.com/helmr-go/helmr/internal/cli/serve"
	"github.com/helmr-go/helmr/internal/computer/local"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/spf13/cobra"
)

// pollInterval is how often the sources are checked for changes.
const pollInterval = time.Second

// Command returns `helmr dev`.
func Command() *cobra.Command {
	o := &serve.Options{LoopbackOnly: true, StopSessions: true, UnsafeNoSandbox: true, TurnsAtInfo: true, GenerateSecretsKey: true}
	cmd := &cobra.Command{
		Use:   "dev [flags] DIR",
		Short: "Run an agent package on an embedded control plane, redeploying on change",
		Long: "helmr dev builds the agent package in DIR (a Go main package, or a TypeScript package with a\n" +
			"package.json depending on @helmr/sdk, bundled and run by Node), deploys it to an embedded control\n" +
			"plane listening on loopback, and rebuilds and redeploys it whenever its sources change.\n" +
			"New Sessions pin the newest Deployment; existing Sessions keep theirs. Each (re)deploy prints its\n" +
			"steps on stderr (build, sources, each image pull and build step), and a Template image that\n" +
			"fails to build keeps the previous Deployment current.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return run(ctx, o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", "127.0.0.1:7070", "loopback address to listen on")
	f.StringVar(&o.DataDir, "data-dir", ".helmr", "directory for the database, deployments and computers")
	serve.DatabaseFlag(f, o, "database URL: sqlite:PATH (default sqlite in --data-dir) or postgres://… (HELMR_DATABASE_URL is not read: a development loop never picks up a shared database by accident)")
	f.StringVar(&o.Synchronous, "sqlite-synchronous", "FULL", "SQLite durability: FULL (fsync every commit) or NORMAL")
	f.StringVar(&o.ImplicitComputerGrace, "implicit-computer-grace", "10m", "delete a Computer made implicitly for a Session this DURATION after its last Session closed; never: keep it")
	serve.LogFlags(f, o, "warn")
	serve.CRIUFlag(f, o)
	serve.SlackFlags(f, o, "file with the key that seals Slack apps' credentials (default DATA_DIR/secrets.key, made with mode 0600 at the first start)")
	f.BoolVar(&o.TurnsAtInfo, "log-turns", true, "log one line per Turn transition (at info) even when --log-level is warn or error")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "", "also serve GET /metrics (Prometheus) on this loopback address, without an API key")
	// helmr dev listens on loopback only: where bubblewrap cannot run it
	// always runs agent processes as plain host processes, and says so
	// loudly (warnSandbox). The flag is kept for older scripts.
	var unsafe bool
	f.BoolVar(&unsafe, "unsafe-no-sandbox", true, "kept for compatibility: helmr dev always runs agent processes as plain host processes where bubblewrap cannot run, with a warning")
	f.MarkHidden("unsafe-no-sandbox")
	return cmd
}

func run(ctx context.Context, o *serve.Options, dir string, out, errw io.Writer) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("%s is not a directory with a Go or TypeScript agent package", dir)
	}
	r, err := serve.Start(ctx, o, errw)
	if err != nil {
		return err
	}
	key, _, err := serve.EnsureAPIKey(ctx, r.CP, filepath.Join(o.DataDir, "api-key"))
	if err != nil {
		r.CP.Close(ctx)
		return err
	}
	warnIsolation(errw, r.CP.Isolation())
	fmt.Fprintf(out, "helmr dev: control plane on %s (data in %s)\n", r.URL, o.DataDir)
	fmt.Fprintf(out, "API key: %s (kept in %s)\n", key, filepath.Join(o.DataDir, "api-key"))
	fmt.Fprintf(out, "  export HELMR_API_URL=%s HELMR_API_KEY=%s\n", r.URL, key)
	if login, err := r.CP.Server.ConsoleLoginPath(ctx, key); err == nil {
		fmt.Fprintf(out, "Console: %s/console/ (this link logs in once, within 5 minutes: %s%s)\n", r.URL, r.URL, login)
	}
	saveDevProfile(r.URL, key, out, errw)
	fp, copied, err := publish(ctx, r, dir, nil, out, errw)
	if err != nil {
		r.CP.Close(ctx)
		return err
	}
	go watch(ctx, r, dir, fp, copied, out, errw)
	return r.Serve(ctx, o, out)
}

// saveDevProfile saves the URL and key as the "dev" profile, current when
// no other profile is; a failure is reported, not fatal.
func saveDevProfile(url, key string, out, errw io.Writer) {
	current, err := clienv.SaveProfile("", clienv.DevProfile, clienv.Profile{APIURL: url, APIKey: key}, false)
	switch {
	case err != nil:
		fmt.Fprintf(errw, "helmr dev: could not save the %q profile: %v\n", clienv.DevProfile, err)
	case current:
		fmt.Fprintf(out, "Saved profile %q; it is current, so helmr commands in other shells use it.\n", clienv.DevProfile)
	default:
		fmt.Fprintf(out, "Saved profile %q; another profile is current: helmr profile use %s\n", clienv.DevProfile, clienv.DevProfile)
	}
}

// warnIsolation says loudly on w when agent processes run unsandboxed
// and when Templates' resource limits are off, with why and how to fix it.
func warnIsolation(w io.Writer, iso controlplane.Isolation) {
	if iso.Kind == local.KindUnsafe {
		fmt.Fprintf(w, "helmr dev: WARNING: agent processes are NOT sandboxed: they run as plain host processes with your user's rights (your files, network and processes)\n"+
			"helmr dev:   why: %s\n"+
			"helmr dev:   helmr server refuses to run like this unless started with --unsafe-no-sandbox\n", iso.Unsandboxed)
	}
	if iso.Kind != "" && iso.Limits == "" {
		fmt.Fprintf(w, "helmr dev: WARNING: resource limits are off: Templates' cpu, memory, processes and disk limits are not enforced (%s); see docs/computers.md\n", iso.LimitsWhy)
	}
}

// publish builds dir and makes it the current Deployment, with the sources
// its Templates' Copy steps read packed the way helmr deploy packs them
// (npm's progress goes to errw); it returns the fingerprint of the sources
// it built from (given the paths the previous build copied; those of this
// build when it succeeds).
func publish(ctx context.Context, r *serve.Running, dir string, copied []string, out, errw io.Writer) (string, []string, error) {
	if deploy.IsNodePackage(dir) {
		// Before the fingerprint: npm install may write package-lock.json.
		if err := deploy.InstallDeps(ctx, dir, errw); err != nil {
			fp, _ := deploy.Fingerprint(dir) // retried when the sources change
			return fp + deploy.FingerprintPaths(dir, copied), copied, err
		}
	}
	fp, err := deploy.Fingerprint(dir)
	if err != nil {
		return "", copied, err
	}
	p := progress.New(errw)
	p.Step("building " + dir)
	b, err := deploy.BuildDirLog(ctx, dir, r.CP.DeploymentsDir(), errw)
	if err != nil {
		return fp + deploy.FingerprintPaths(dir, copied), copied, err
	}
	p.Step(fmt.Sprintf("built %s (%s)", dir, b.Digest[:min(len(b.Digest), 19)]))
	fp, err = publishBuilt(ctx, r, dir, fp, b, p, out)
	if err != nil {
		return fp, copied, err
	}
	return fp, b.Manifest.CopySources(), nil
}

// publishBuilt publishes b, built from dir, printing the steps on p (the
// sources bundled, the images prepared), and returns fp with the
// fingerprint of the paths its Templates copy.
func publishBuilt(ctx context.Context, r *serve.Running, dir, fp string, b *deploy.Built, p *progress.Printer, out io.Writer) (string, error) {
	fp += deploy.FingerprintPaths(dir, b.Manifest.CopySources())
	if srcs := b.Manifest.CopySources(); len(srcs) > 0 {
		p.Step("bundling " + strings.Join(srcs, ", "))
	}
	var sourcesDigest string
	file, _, err := deploy.PackSourcesFile(dir, r.CP.DeploymentsDir(), b.Manifest)
	if err != nil {
		return fp, err
	}
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return fp, err
		}
		sourcesDigest, err = r.CP.StoreSources(f)
		f.Close()
		os.Remove(file)
		if err != nil {
			return fp, err
		}
	}
	d, err := r.CP.PublishDeployment(ctx, b.Digest, b.Manifest, b.Binary, sourcesDigest, p.Progress)
	p.Clear()
	if err != nil {
		return fp, err
	}
	fmt.Fprintf(out, "deployed %s (%s): agents %s\n", d.ID, d.Digest[:19], strings.Join(d.Agents, ", "))
	return fp, nil
}

// watch rebuilds and redeploys when the sources change; a failed build is
// reported and the previous Deployment stays current.
func watch(ctx context.Context, r *serve.Running, dir, last string, copied []string, out, errw io.Writer) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fp, err := deploy.Fingerprint(dir)
		if err != nil {
			continue
		}
		if fp += deploy.FingerprintPaths(dir, copied); fp == last {
			continue
		}
		fmt.Fprintln(out, "change detected; rebuilding")
		fp, copied, err = publish(ctx, r, dir, copied, out, errw)
		if err != nil {
			fmt.Fprintf(errw, "build failed; the previous deployment stays current:\n%v\n", err)
		}
		last = fp
	}
}
