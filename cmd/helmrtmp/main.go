package main

import (
	"os"

	"github.com/helmr-go/helmr/internal/cli/dev"
	"github.com/helmr-go/helmr/internal/cli/serve"
	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{Use: "helmr"}
	root.AddCommand(serve.ServerCommand(), dev.Command())
	if err := root.Execute(); err != nil {
		os.Exit(1)
	}
}
