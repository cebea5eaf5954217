// Package computer holds the helmr computer commands: create, get, list,
// delete and exec.
package computer

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrclient"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// New returns the "computer" command and its verbs.
func New(g *clienv.Globals) *cobra.Command {
	cmd := clienv.Group(&cobra.Command{
		Use:   "computer",
		Short: "Create, inspect and delete Computers, and run Commands on them",
		Long: "A Computer is an isolated environment made from a Template, with a durable /workspace shared by\n" +
			"the Sessions and Commands placed on it.",
	})
	cmd.AddCommand(newCreate(g), newGet(g), newList(g), newDelete(g), newExec(g))
	return cmd
}

func newCreate(g *clienv.Globals) *cobra.Command {
	var o helmrclient.ComputerCreateOptions
	cmd := &cobra.Command{
		Use:   "create TEMPLATE",
		Short: "Create a Computer from a Template of the current Deployment",
		Args:  clienv.Args("TEMPLATE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			comp, err := c.Computers.Create(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			return write(g, comp)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Key, "key", "", "a unique name to find the Computer by")
	f.StringVar(&o.IdempotencyKey, "idempotency-key", "", "makes a retry return the first Computer")
	f.StringVar(&o.DeploymentID, "deployment", "", "the Deployment whose Template to use (default the current one)")
	return cmd
}

// target finds the Computer named by an ID argument or --key.
func target(ctx context.Context, c *helmrclient.Client, args []string, key string) (*helmrtype.ComputerState, error) {
	switch {
	case key != "" && len(args) > 0:
		return nil, clienv.Usagef("give a Computer ID or --key, not both")
	case key != "":
		return c.Computers.GetByKey(ctx, key)
	case len(args) == 1:
		return c.Computers.Get(ctx, args[0])
	}
	return nil, clienv.Usagef("give a Computer ID or --key")
}

func newGet(g *clienv.Globals) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "get (COMPUTER | --key KEY)",
		Short: "Show a Computer",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			comp, err := target(cmd.Context(), c, args, key)
			if err != nil {
				return err
			}
			return write(g, comp)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "find the Computer by its key")
	return cmd
}

func newList(g *clienv.Globals) *cobra.Command {
	var o helmrclient.ListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List Computers, oldest first",
		Args:  clienv.Args(),
		RunE: func(cmd *cobra.Command, args []string) error {
			return clienv.ShowPage(g, cmd, o.Limit, func(ctx context.Context, c *helmrclient.Client) (*helmrtype.ComputerPage, error) {
				return c.Computers.List(ctx, o)
			}, clienv.List[*helmrtype.ComputerPage]{
				Header: []string{"COMPUTER", "TEMPLATE", "KEY", "STATUS", "RESIDENCY", "CREATED"},
				Rows: func(t *clienv.Table, page *helmrtype.ComputerPage) string {
					for _, comp := range page.Computers {
						t.Row(comp.ID, comp.Template, comp.Key, comp.Status, comp.Residency, clienv.Time(comp.CreatedAt))
					}
					return page.NextCursor
				},
				What: "Computers",
			})
		},
	}
	clienv.PageFlags(cmd.Flags(), &o.Limit, &o.Cursor, 0)
	return cmd
}

func newDelete(g *clienv.Globals) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "delete (COMPUTER | --key KEY)",
		Short: "Delete a Computer and its files (its Sessions must be closed)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.Client()
			if err != nil {
				return err
			}
			comp, err := target(cmd.Context(), c, args, key)
			if err != nil {
				return err
			}
			if comp, err = c.Computers.Delete(cmd.Context(), comp.ID); err != nil {
				return err
			}
			return write(g, comp)
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "find the Computer by its key")
	return cmd
}

// execResult is what "computer exec --json" prints: the settled Command
// with its whole output.
type execResult struct {
	*helmrtype.CommandState
	// Stdout and Stderr are the Command's output streams, in full.
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

func newExec(g *clienv.Globals) *cobra.Command {
	var key, stdinFile string
	var env []string
	req := helmrtype.CommandRequest{}
	cmd := &cobra.Command{
		Use:   "exec (COMPUTER | --key KEY) [flags] -- CMD [ARG...]",
		Short: "Run a Command on a Computer, print its output as it comes, and exit with its exit code",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if dash < 0 || dash >= len(args) {
				return clienv.Usagef("give the command after --")
			}
			req.Command = args[dash:]
			idArgs := args[:dash]
			req.Env = map[string]string{}
			for _, kv := range env {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return clienv.Usagef("--set-env %q: want NAME=VALUE", kv)
				}
				req.Env[k] = v
			}
			if stdinFile != "" {
				var b []byte
				var err error
				if stdinFile == "-" {
					b, err = io.ReadAll(cmd.InOrStdin())
				} else {
					b, err = os.ReadFile(stdinFile)
				}
				if err != nil {
					return err
				}
				req.Stdin = string(b)
			}
			c, err := g.Client()
			if err != nil {
				return err
			}
			comp, err := target(cmd.Context(), c, idArgs, key)
			if err != nil {
				return err
			}
			started, err := c.Computers.Exec(cmd.Context(), comp.ID, req)
			if err != nil {
				return err
			}
			var stdout, stderr strings.Builder
			err = c.Commands.Follow(cmd.Context(), started.ID, func(r helmrtype.CommandLogRecord) error {
				if g.JSON {
					if r.Stream == "stderr" {
						stderr.Write(r.Data)
					} else {
						stdout.Write(r.Data)
					}
					return nil
				}
				w := g.Streams.Out
				if r.Stream == "stderr" {
					w = g.Streams.Err
				}
				_, err := w.Write(r.Data)
				return err
			})
			if err != nil {
				return err
			}
			done, err := c.Commands.Wait(cmd.Context(), started.ID)
			if err != nil {
				return err
			}
			if g.JSON {
				if err := g.PrintJSON(execResult{CommandState: done, Stdout: stdout.String(), Stderr: stderr.String()}); err != nil {
					return err
				}
			}
			switch {
			case done.Status == helmrtype.CommandExited && done.ExitCode != nil && *done.ExitCode != 0:
				return &clienv.ExitError{Code: *done.ExitCode} // silent: the output said it all
			case done.Status != helmrtype.CommandExited:
				msg := done.Status
				if done.Error != nil {
					msg += ": " + done.Error.Message
				}
				return clienv.Exitf(1, "command %s %s", done.ID, msg)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&key, "key", "", "find the Computer by its key")
	f.StringVar(&req.Cwd, "cwd", "", "working directory inside /workspace (default /workspace)")
	f.StringArrayVar(&env, "set-env", nil, "set NAME=VALUE in the command's environment (repeatable)")
	f.StringVar(&stdinFile, "stdin", "", "a file to give the command as standard input (- for this one's)")
	f.StringVar(&req.Timeout, "timeout", "5m", "stop the command after this long (at most 15m)")
	f.StringVar(&req.IdempotencyKey, "idempotency-key", "", "makes a retry return the first Command instead of running another")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func write(g *clienv.Globals, c *helmrtype.ComputerState) error {
	if g.JSON {
		return g.PrintJSON(c)
	}
	return clienv.WriteFields(g.Streams.Out,
		clienv.Field{Name: "Computer", Value: c.ID},
		clienv.Field{Name: "Template", Value: c.Template},
		clienv.Field{Name: "Deployment", Value: c.DeploymentID},
		clienv.Field{Name: "Key", Value: dash(c.Key)},
		clienv.Field{Name: "Status", Value: c.Status},
		clienv.Field{Name: "Residency", Value: c.Residency},
		clienv.Field{Name: "Created", Value: clienv.Time(c.CreatedAt)},
	)
}
