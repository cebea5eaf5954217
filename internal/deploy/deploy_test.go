package deploy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
)

// A program whose runtime MCP policy names an Agent it does not define
// fails at build time with a clear error, before anything is uploaded.
func TestBuildRefusesInvalidRuntimeMCP(t *testing.T) {
	_, err := BuildDir(context.Background(), "testdata/badmcp", t.TempDir())
	if !errors.Is(err, helmrtype.CodePolicyInvalid) || !strings.Contains(err.Error(), `Agent "ghost" is not in this manifest`) {
		t.Fatalf("build of testdata/badmcp: %v", err)
	}
}
