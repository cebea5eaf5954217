// Package cli builds the helmr command tree: global flags, one folder per
// noun (agent, session, session turn) and one file per verb. Other packages
// add commands (dev, server, deploy) through NewRoot's extra builders.
package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/internal/cli/agent"
	"github.com/helmr-go/helmr/internal/cli/ask"
	"github.com/helmr-go/helmr/internal/cli/clienv"
	"github.com/helmr-go/helmr/internal/cli/computer"
	"github.com/helmr-go/helmr/internal/cli/deploy"
	"github.com/helmr-go/helmr/internal/cli/deployment"
	"github.com/helmr-go/helmr/internal/cli/dev"
	"github.com/helmr-go/helmr/internal/cli/initcmd"
	"github.com/helmr-go/helmr/internal/cli/key"
	"github.com/helmr-go/helmr/internal/cli/profile"
	"github.com/helmr-go/helmr/internal/cli/schedule"
	servecmd "github.com/helmr-go/helmr/internal/cli/serve"
	"github.com/helmr-go/helmr/internal/cli/session"
	slackcmd "github.com/helmr-go/helmr/internal/cli/slack"
	"github.com/helmr-go/helmr/internal/cli/token"
	"github.com/helmr-go/helmr/internal/cli/version"
)

// Streams are a command's standard input, output and error.
type Streams = clienv.Streams

// Globals holds the global flags (--api-url, --api-key, --json) and the
// streams; builders of extra commands read it when their command runs.
type Globals = clienv.Globals

// Builder builds one extra top-level command from the globals.
type Builder = func(*Globals) *cobra.Command

// Exit codes; see docs/cli.md.
const (
	ExitOK           = clienv.ExitOK
	ExitFailure      = clienv.ExitFailure
	ExitUsage        = clienv.ExitUsage
	ExitNotFound     = clienv.ExitNotFound
	ExitConflict     = clienv.ExitConflict
	ExitWaitTimeout  = clienv.ExitWaitTimeout
	ExitNotCompleted = clienv.ExitNotCompleted
	ExitInterrupted  = clienv.ExitInterrupted
)

// ExitError ends a command with a chosen exit code; return it from RunE.
type ExitError = clienv.ExitError

// Client builds an API client from the global flags (exit 2 without a key).
func Client(g *Globals) (*helmrclient.Client, error) { return g.Client() }

// StdStreams returns the process's standard streams.
func StdStreams() Streams { return clienv.StdStreams() }

// NewRoot builds the helmr root command with the built-in commands and one
// top-level command per extra builder. Every command's RunE errors are
// marked so that ExitCode tells them from usage errors.
func NewRoot(io Streams, extra ...Builder) *cobra.Command {
	g := &Globals{Streams: io}
	root := &cobra.Command{
		Use:   "helmr",
		Short: "Run and operate durable AI agents",
		Long: "helmr talks to a Helmr control plane: it starts Sessions of your Agents, " +
			"follows their timelines and waits for their Turns.\n\n" +
			"Exit codes: 0 success, 1 API or other error, 2 usage error, 3 not found, " +
			"4 conflict, 5 wait timed out, 6 Turn settled but not completed.",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	pf := root.PersistentFlags()
	pf.StringVar(&g.APIURL, "api-url", "", fmt.Sprintf("control plane URL (env %s; default %s)", clienv.EnvAPIURL, clienv.DefaultAPIURL))
	pf.StringVar(&g.APIKey, "api-key", "", fmt.Sprintf("API key (env %s)", clienv.EnvAPIKey))
	pf.BoolVar(&g.JSON, "json", false, "print the API object as JSON")

	root.AddCommand(agent.New(g), session.New(g), token.New(g), ask.New(g), key.New(g), slackcmd.New(g), schedule.New(g), computer.New(g), deploy.New(g), deployment.New(g), version.New(g), initcmd.New(g), profile.NewLogin(g), profile.New(g), dev.Command(), servecmd.ServerCommand())
	for _, b := range extra {
		if c := b(g); c != nil {
			root.AddCommand(c)
		}
	}
	clienv.MarkRunErrors(root)
	return root
}

// ExitCode maps an error of executing the tree to the process exit code.
func ExitCode(err error) int { return clienv.ExitCode(err) }

// Main runs helmr with args and returns the exit code; errors go to
// io.Err. ctx ends a running command (for example on SIGINT).
func Main(ctx context.Context, args []string, io Streams, extra ...Builder) int {
	root := NewRoot(io, extra...)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitCode(err)
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(io.Err, clienv.ErrorMessage(err))
	}
	if code == ExitUsage && cmd != nil {
		fmt.Fprintf(io.Err, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}
