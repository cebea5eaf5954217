package clienv

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/helmrtype"
)

// Exit codes of the helmr CLI, documented in docs/cli.md. Scripts rely on
// them; never renumber.
const (
	ExitOK           = 0   // success
	ExitFailure      = 1   // API or other error
	ExitUsage        = 2   // bad flags, arguments or input
	ExitNotFound     = 3   // the API said not_found (or no_deployment)
	ExitConflict     = 4   // the API said 409: idempotency or state conflict
	ExitWaitTimeout  = 5   // a wait ran out of time; the Turn goes on
	ExitNotCompleted = 6   // the Turn settled failed, interrupted or cancelled
	ExitInterrupted  = 130 // the command was stopped by SIGINT or SIGTERM
)

// ExitError is an error that ends the command with Code. Its message is
// printed on stderr unless it is empty.
type ExitError struct {
	Code int
	Err  error
}

// Error returns the message of the underlying error.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *ExitError) Unwrap() error { return e.Err }

// Exitf returns an *ExitError with code and a formatted message.
func Exitf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// Usagef returns a usage error (exit 2) with a formatted message.
func Usagef(format string, args ...any) error { return Exitf(ExitUsage, format, args...) }

// runError marks an error returned by a command's RunE, as opposed to one
// cobra returned while parsing flags and arguments (a usage error).
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// MarkRunErrors wraps the RunE of cmd and all its descendants so that
// ExitCode can tell their errors from cobra's parsing errors. Call it once,
// on the finished tree.
func MarkRunErrors(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if err := run(c, args); err != nil {
				return &runError{err: err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		MarkRunErrors(sub)
	}
}

// ExitCode maps an error returned by executing the command tree to the exit
// code: an *ExitError's own code; 2 for cobra's flag and argument errors;
// for errors of a command's run, 3 for not found, 4 for a conflict, 130 when
// a signal ended it, and 1 otherwise.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	var re *runError
	if !errors.As(err, &re) {
		return ExitUsage
	}
	if errors.Is(err, context.Canceled) {
		return ExitInterrupted
	}
	var he *helmrtype.Error
	if errors.As(err, &he) {
		switch {
		case he.Code == helmrtype.CodeNotFound || he.Code == helmrtype.CodeNoDeployment || he.Status == http.StatusNotFound:
			return ExitNotFound
		case he.Status == http.StatusConflict || he.Status == 0 && helmrtype.HTTPStatus(he.Code) == http.StatusConflict:
			return ExitConflict
		}
	}
	return ExitFailure
}

// ErrorMessage is the line printed on stderr for err: the API error's code
// and message, or the error's text.
func ErrorMessage(err error) string {
	var he *helmrtype.Error
	if errors.As(err, &he) {
		if he.Message == "" {
			return fmt.Sprintf("Error: %s (HTTP %d)", he.Code, he.Status)
		}
		return fmt.Sprintf("Error: %s: %s", he.Code, he.Message)
	}
	if errors.Is(err, context.Canceled) {
		return "Error: interrupted"
	}
	return "Error: " + err.Error()
}
