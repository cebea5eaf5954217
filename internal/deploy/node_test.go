package deploy

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A directory with a package.json and no Go files is a Node package.
func TestIsNodePackage(t *testing.T) {
	node, gopkg, both, none := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	write(t, filepath.Join(node, "package.json"), "{}")
	write(t, filepath.Join(gopkg, "main.go"), "package main")
	write(t, filepath.Join(both, "package.json"), "{}")
	write(t, filepath.Join(both, "go.mod"), "module x")
	for dir, want := range map[string]bool{node: true, gopkg: false, both: false, none: false} {
		if got := IsNodePackage(dir); got != want {
			t.Errorf("IsNodePackage(%s) = %v, want %v", dir, got, want)
		}
	}
}

// A Node package's fingerprint covers its TypeScript, JavaScript and JSON
// files, not node_modules.
func TestFingerprintOfANodePackage(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "package.json"), `{"name": "x"}`)
	write(t, filepath.Join(dir, "agents", "a.ts"), "export {}")
	write(t, filepath.Join(dir, "node_modules", "dep", "index.js"), "//")
	fp := func() string {
		s, err := Fingerprint(dir)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := fp()
	write(t, filepath.Join(dir, "node_modules", "dep", "other.js"), "// more")
	write(t, filepath.Join(dir, "README.md"), "not a source")
	if fp() != first {
		t.Fatal("a change in node_modules or to a non-source file changed the fingerprint")
	}
	write(t, filepath.Join(dir, "agents", "b.ts"), "export const b = 1")
	if fp() == first {
		t.Fatal("a new .ts file did not change the fingerprint")
	}
}

// ReadManifestAs runs a bundle with node, from a path without .mjs too, and
// checks that the manifest names the runtime it was run as.
func TestReadManifestOfANodeBundle(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not on PATH")
	}
	dir := t.TempDir()
	manifest := `{"version": "helmr.manifest.v1", "sdk": "test", "runtime": "%s", "agents": [], "templates": []}`
	bundle := filepath.Join(dir, "0123abcd") // as stored: named by its digest
	write(t, bundle, `if (process.argv[2] !== "--helmr-manifest" || process.env.HOME !== undefined) process.exit(9)
import("node:process").then((p) => p.stdout.write(`+"`"+strings.ReplaceAll(manifest, "%s", "node")+"`"+`))`)
	m, err := ReadManifestAs(context.Background(), bundle, helmrtype.RuntimeNode)
	if err != nil || m.Runtime != helmrtype.RuntimeNode || m.SDK != "test" {
		t.Fatalf("ReadManifestAs = %+v, %v", m, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries next to the bundle after reading its manifest, want 1", len(entries))
	}
	// A bundle whose manifest says another runtime is refused.
	other := filepath.Join(dir, "native.mjs")
	write(t, other, `process.stdout.write(`+"`"+strings.ReplaceAll(manifest, "%s", "")+"`"+`)`)
	if _, err := ReadManifestAs(context.Background(), other, helmrtype.RuntimeNode); !errors.Is(err, helmrtype.CodeInvalidRequest) || !strings.Contains(err.Error(), `says runtime ""`) {
		t.Fatalf("a manifest of another runtime: %v", err)
	}
	if _, err := ReadManifestAs(context.Background(), other, "python"); !errors.Is(err, helmrtype.CodeInvalidRequest) {
		t.Fatalf("an unknown runtime: %v", err)
	}
}
