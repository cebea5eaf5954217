package protocoltest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/helmr-go/helmr/protocoltest"
)

// TestGoSDK runs the vectors against the Go SDK's conformance agent.
func TestGoSDK(t *testing.T) {
	protocoltest.Run(t, []string{buildGoAgent(t, t.TempDir())})
}

// buildGoAgent builds the Go SDK's conformance agent (protocoltest/goagent)
// in dir and returns the binary's path.
func buildGoAgent(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "goagent")
	if out, err := exec.Command("go", "build", "-o", bin, "./goagent").CombinedOutput(); err != nil {
		tb.Fatalf("go build ./goagent: %v\n%s", err, out)
	}
	return bin
}

// TestTypeScriptSDK runs the vectors against the TypeScript SDK's
// conformance agent (protocoltest/ts), bundled by the SDK's own bundler.
// It needs node and a built SDK in sdk/typescript (npm ci && npm run build).
func TestTypeScriptSDK(t *testing.T) {
	out := filepath.Join(t.TempDir(), "agent.mjs")
	if reason, err := bundleTS(t.Context(), out); err != nil {
		t.Fatal(err)
	} else if reason != "" {
		t.Skip(reason)
	}
	protocoltest.Run(t, []string{"node", out})
}

// bundleTS bundles the TypeScript conformance agent (protocoltest/ts) to
// out with the SDK's own bundler, or says why it cannot: no node, or the
// SDK in sdk/typescript is missing or not installed.
func bundleTS(ctx context.Context, out string) (skip string, err error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "node is not on PATH: the TypeScript SDK is not checked", nil
	}
	sdk, err := filepath.Abs("../sdk/typescript")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		return "sdk/typescript does not exist yet: the TypeScript SDK is not checked", nil
	}
	if _, err := os.Stat(filepath.Join(sdk, "node_modules")); err != nil {
		return "sdk/typescript is not installed (run npm ci in sdk/typescript): the TypeScript SDK is not checked", nil
	}
	if err := deploy.InstallDeps(ctx, "ts", os.Stderr); err != nil {
		return "", err
	}
	return "", deploy.Bundle(ctx, "ts", out)
}

// TestCommand runs the vectors against any agent program command, given
// in HELMR_CONFORMANCE_CMD (words separated by spaces), for an SDK under
// development: HELMR_CONFORMANCE_CMD="node /path/agent.mjs" go test ./protocoltest -run TestCommand.
func TestCommand(t *testing.T) {
	cmd := strings.Fields(os.Getenv("HELMR_CONFORMANCE_CMD"))
	if len(cmd) == 0 {
		t.Skip("HELMR_CONFORMANCE_CMD is not set")
	}
	protocoltest.Run(t, cmd)
}

// BenchmarkTurn measures warm Turns of each SDK's conformance agent
// (BenchTurns): go test ./protocoltest -run XXX -bench Turn. The
// TypeScript one needs what TestTypeScriptSDK needs; HELMR_BENCH_NODE_FLAGS
// adds flags to node (for example --cpu-prof --cpu-prof-dir=/tmp/prof).
func BenchmarkTurn(b *testing.B) {
	dir := b.TempDir()
	bin := buildGoAgent(b, dir)
	b.Run("go", func(b *testing.B) { protocoltest.BenchTurns(b, []string{bin}) })
	mjs := filepath.Join(dir, "agent.mjs")
	skip, err := bundleTS(b.Context(), mjs)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ts", func(b *testing.B) {
		if skip != "" {
			b.Skip(skip)
		}
		protocoltest.BenchTurns(b, append(append([]string{"node"}, strings.Fields(os.Getenv("HELMR_BENCH_NODE_FLAGS"))...), mjs))
	})
}
