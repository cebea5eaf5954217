package deploy

import (
	"context"
	"errors"
	"os"
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

// StoreAs refuses bytes of another digest and keeps nothing of them; a
// binary stored before under the digest it got stays.
func TestStoreAsRefusesAnotherDigest(t *testing.T) {
	dir := t.TempDir()
	digest, path, err := Store(dir, strings.NewReader("binary"))
	if err != nil || path != BinaryPath(dir, digest) {
		t.Fatalf("Store = %s, %s, %v", digest, path, err)
	}
	if _, err := StoreAs(dir, strings.NewReader("binary"), "sha256:0000"); err == nil {
		t.Fatal("StoreAs accepted bytes under the wrong digest")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "binary" {
		t.Fatalf("the binary stored before is %q, %v after a refused StoreAs", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries after a refused StoreAs, want the one binary", len(entries))
	}
	if got, err := StoreAs(dir, strings.NewReader("binary"), digest); err != nil || got != path {
		t.Fatalf("StoreAs of the right digest = %s, %v", got, err)
	}
}
