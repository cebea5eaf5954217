// Package version is `helmr version`: the version, commit and Go version
// the helmr binary was built with, read from its build info.
package version

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/internal/cli/clienv"
)

// Info is what helmr version prints; --json prints it as an object.
type Info struct {
	// Version is the module version of the helmr build ("(devel)" for a
	// build from a checkout without a version tag).
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from; empty when the
	// build recorded none (go build -buildvcs=false, or no checkout).
	Commit string `json:"commit,omitempty"`
	// CommitTime is the time of that revision (RFC 3339), when recorded.
	CommitTime string `json:"commit_time,omitempty"`
	// Modified says the checkout had uncommitted changes at build time.
	Modified bool `json:"modified"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Module is the main module's path.
	Module string `json:"module,omitempty"`
}

// FromBuildInfo reads an Info from bi; nil gives an Info of unknown version.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	if bi == nil {
		return Info{Version: "unknown"}
	}
	in := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion, Module: bi.Main.Path}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.CommitTime = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// Current is the Info of the running binary.
func Current() Info {
	bi, _ := debug.ReadBuildInfo()
	return FromBuildInfo(bi)
}

// String is the one line helmr version prints for a person.
func (in Info) String() string {
	commit := in.Commit
	switch {
	case commit == "":
		commit = "unknown"
	case in.Modified:
		commit += " (modified)"
	}
	return fmt.Sprintf("helmr %s, commit %s, built with %s", in.Version, commit, in.GoVersion)
}

// New returns `helmr version`.
func New(g *clienv.Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version helmr was built with",
		Long: "helmr version prints the module version, the VCS commit (marked modified when the checkout\n" +
			"had uncommitted changes) and the Go version, from the binary's build info. The commit is\n" +
			"unknown when the build recorded none (go build -buildvcs=false). --json prints an object.",
		Args: clienv.Args(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := Current()
			if g.JSON {
				return g.PrintJSON(in)
			}
			_, err := fmt.Fprintln(g.Streams.Out, in.String())
			return err
		},
	}
}
