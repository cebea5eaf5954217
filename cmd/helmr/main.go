// Command helmr is the Helmr command-line tool; see docs/cli.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/helmr-go/helmr/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.StdStreams())
	stop()
	os.Exit(code)
}
