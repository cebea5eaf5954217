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
	bin := filepath.Join(t.TempDir(), "goagent")
	if out, err := exec.Command("go", "build", "-o", bin, "./goagent").CombinedOutput(); err != nil {
		t.Fatalf("go build ./goagent: %v\n%s", err, out)
	}
	protocoltest.Run(t, []string{bin})
}

// TestTypeScriptSDK runs the vectors against the TypeScript SDK's
// conformance agent (protocoltest/ts), bundled by the SDK's own bundler.
// It needs node and a built SDK in sdk/typescript (npm ci && npm run build).
func TestTypeScriptSDK(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH: the TypeScript SDK's conformance is not checked")
	}
	sdk, err := filepath.Abs("../sdk/typescript")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		t.Skip("sdk/typescript does not exist yet: the TypeScript SDK's conformance is not checked")
	}
	if _, err := os.Stat(filepath.Join(sdk, "node_modules")); err != nil {
		t.Skip("sdk/typescript is not installed (run npm ci in sdk/typescript): the TypeScript SDK's conformance is not checked")
	}
	ctx := context.Background()
	if err := deploy.InstallDeps(ctx, "ts", os.Stderr); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "agent.mjs")
	if err := deploy.Bundle(ctx, "ts", out); err != nil {
		t.Fatal(err)
	}
	protocoltest.Run(t, []string{"node", out})
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
