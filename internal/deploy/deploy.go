// Package deploy builds agent programs (Go packages into binaries,
// TypeScript packages into Node bundles), reads their manifests and keeps
// their artifacts content-addressed, for helmr dev, helmr deploy and the
// server's deployment upload.
package deploy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/protocol"
)

// Build compiles the Go main package in dir into out.
func Build(ctx context.Context, dir, out string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", dir, err, stderr.String())
	}
	return nil
}

// ReadManifest runs the native binary with the manifest flag and decodes
// what it prints; see ReadManifestAs.
func ReadManifest(ctx context.Context, binary string) (helmrtype.Manifest, error) {
	return ReadManifestAs(ctx, binary, helmrtype.RuntimeNative)
}

// ReadManifestAs runs the artifact with the manifest flag, as its runtime
// runs it (a native binary itself, a Node bundle with `node`), on this
// host with only PATH in its environment and 30 seconds, and decodes what
// it prints (DecodeManifest). It is for programs built here (helmr dev,
// helmr deploy); a server runs an uploaded one in a sandbox instead.
func ReadManifestAs(ctx context.Context, artifact, runtime string) (helmrtype.Manifest, error) {
	ctx, cancel := context.WithTimeout(ctx, ManifestTimeout)
	defer cancel()
	path := artifact
	if runtime == helmrtype.RuntimeNode {
		mjs, done, err := moduleFile(artifact)
		if err != nil {
			return helmrtype.Manifest{}, err
		}
		defer done()
		path = mjs
	}
	argv, err := ManifestArgv(runtime, path)
	if err != nil {
		return helmrtype.Manifest{}, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	return DecodeManifest(stdout.Bytes(), stderr.Bytes(), code, err, runtime)
}

// ManifestTimeout bounds one run of an agent program with the manifest
// flag.
const ManifestTimeout = 30 * time.Second

// ManifestArgv returns the command that prints the manifest of the
// artifact at path for runtime: the binary itself, or `node` on a bundle
// (whose path must end in .mjs).
func ManifestArgv(runtime, path string) ([]string, error) {
	switch runtime {
	case helmrtype.RuntimeNative:
		return []string{path, protocol.ManifestFlag}, nil
	case helmrtype.RuntimeNode:
		return []string{"node", path, protocol.ManifestFlag}, nil
	}
	return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "unknown agent program runtime %q (want %q or %q)", runtime, helmrtype.RuntimeNative, helmrtype.RuntimeNode)
}

// DecodeManifest turns what a run of ManifestArgv printed into the
// manifest: exitCode and runErr say how it ended (runErr nil for exit 0).
// The manifest must name runtime and have valid runtime MCP policies.
func DecodeManifest(stdout, stderr []byte, exitCode int, runErr error, runtime string) (helmrtype.Manifest, error) {
	var m helmrtype.Manifest
	hint := "is it built with helmr.Main?"
	if runtime == helmrtype.RuntimeNode {
		hint = "is it bundled by @helmr/sdk's helmr-bundle?"
	}
	if runErr != nil {
		msg := bytes.TrimSpace(stderr)
		if exitCode == 2 && len(msg) > 0 {
			// helmr.Main (and the TypeScript SDK) exits 2 when the
			// program's definitions are invalid.
			code := helmrtype.CodeInvalidRequest
			if bytes.Contains(msg, []byte("runtime MCP policy")) {
				code = helmrtype.CodePolicyInvalid
			}
			return m, helmrtype.Errorf(code, "the agent program's definitions are invalid: %s", msg)
		}
		return m, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the agent program did not print its manifest (%s): %v %s", hint, runErr, msg)
	}
	if err := json.Unmarshal(stdout, &m); err != nil {
		return m, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the agent program's manifest is not valid: %v", err)
	}
	if m.Runtime != runtime {
		hint := ""
		if runtime == helmrtype.RuntimeNative {
			hint = " (an upload names its runtime in the manifest part, as helmr deploy does)"
		}
		return m, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the agent program's manifest says runtime %q, but it was run as %q%s", m.Runtime, runtimeName(runtime), hint)
	}
	if err := m.CheckRuntimeMCP(); err != nil {
		return m, err
	}
	return m, nil
}

// runtimeName names a runtime in messages.
func runtimeName(runtime string) string {
	if runtime == helmrtype.RuntimeNative {
		return "native"
	}
	return runtime
}

// Store copies the binary from r into dir under its SHA-256 digest and
// returns the digest and the stored path. Storing the same bytes twice
// keeps one file.
func Store(dir string, r io.Reader) (digest, path string, err error) {
	return storeBinary(dir, r, "")
}

// BinaryPath is where the binary with digest is kept in the deployments
// directory dir.
func BinaryPath(dir, digest string) string {
	return filepath.Join(dir, strings.TrimPrefix(digest, "sha256:"))
}

// storeBinary is Store; with want set, bytes of another digest are refused
// and nothing is kept.
func storeBinary(dir string, r io.Reader, want string) (digest, path string, err error) {
	tmp, digest, _, err := writeTemp(dir, ".upload-*", r)
	if err != nil {
		return "", "", err
	}
	defer os.Remove(tmp)
	if want != "" && digest != want {
		return "", "", fmt.Errorf("the binary kept as %s has digest %s", want, digest)
	}
	path = BinaryPath(dir, digest)
	if err := keep(tmp, path, 0o550); err != nil {
		return "", "", err
	}
	return digest, path, nil
}

// keep moves the file tmp to path with mode, unless path exists (stored
// under its digest, it holds the same bytes).
func keep(tmp, path string, mode os.FileMode) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// StoreAs is Store for a binary that must have the digest want (one kept
// elsewhere under that digest); it returns the stored path.
func StoreAs(dir string, r io.Reader, want string) (string, error) {
	_, path, err := storeBinary(dir, r, want)
	return path, err
}

// writeTemp copies r into a new temporary file in dir (named after
// pattern), synced, and returns its path, the SHA-256 digest of its bytes
// ("sha256:…") and their count. The caller removes or renames the file.
func writeTemp(dir, pattern string, r io.Reader) (path, digest string, n int64, err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", "", 0, err
	}
	tmp, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return "", "", 0, err
	}
	h := sha256.New()
	n, err = io.Copy(io.MultiWriter(tmp, h), r)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", "", 0, err
	}
	return tmp.Name(), "sha256:" + hex.EncodeToString(h.Sum(nil)), n, nil
}

// Built is an agent program built from source, ready to publish.
type Built struct {
	// Digest is the artifact's SHA-256 ("sha256:…").
	Digest string
	// Binary is the stored artifact: a native binary, or a Node bundle
	// when Manifest.Runtime is "node".
	Binary   string
	Manifest helmrtype.Manifest
}

// BuildDir builds the package in dir, stores its artifact
// content-addressed in binDir and reads its manifest; see BuildDirLog.
func BuildDir(ctx context.Context, dir, binDir string) (*Built, error) {
	return BuildDirLog(ctx, dir, binDir, os.Stderr)
}

// BuildDirLog builds the package in dir: a Go main package into a binary,
// or a TypeScript package (IsNodePackage) into a Node bundle, installing
// its npm dependencies first when it has no node_modules (said on log). It
// reads the manifest, stores the artifact content-addressed in binDir and
// returns it.
func BuildDirLog(ctx context.Context, dir, binDir string, log io.Writer) (*Built, error) {
	// go build runs in dir, so the output path must not be relative.
	binDir, err := filepath.Abs(binDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(binDir, 0o750); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(binDir, ".build-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var out, runtime string
	if IsNodePackage(dir) {
		runtime, out = helmrtype.RuntimeNode, filepath.Join(tmp, "agent.mjs")
		if err := InstallDeps(ctx, dir, log); err != nil {
			return nil, err
		}
		err = Bundle(ctx, dir, out)
	} else {
		out = filepath.Join(tmp, "agent")
		err = Build(ctx, dir, out)
	}
	if err != nil {
		return nil, err
	}
	m, err := ReadManifestAs(ctx, out, runtime)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	digest, path, err := Store(binDir, f)
	if err != nil {
		return nil, err
	}
	return &Built{Digest: digest, Binary: path, Manifest: m}, nil
}

// nodeSources are the file name endings a TypeScript package's fingerprint
// covers (sources, package.json, the lockfile, tsconfig.json).
var nodeSources = []string{".ts", ".tsx", ".mts", ".cts", ".js", ".jsx", ".mjs", ".cjs", ".json"}

// Fingerprint summarises the sources under dir (names, sizes, modification
// times) so that a change can be noticed without reading every file: the
// Go files, go.mod and go.sum of a Go package; the TypeScript, JavaScript
// and JSON files of a Node package (IsNodePackage). Hidden directories,
// testdata and node_modules are skipped.
func Fingerprint(dir string) (string, error) {
	node := IsNodePackage(dir)
	source := func(name string) bool {
		if !node {
			return filepath.Ext(name) == ".go" || name == "go.mod" || name == "go.sum"
		}
		for _, ext := range nodeSources {
			if strings.HasSuffix(name, ext) {
				return true
			}
		}
		return false
	}
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != dir && (name[0] == '.' || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !source(name) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %d\n", p, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// FingerprintPaths summarises the files at paths under dir (names, sizes,
// modification times; directories walked), like Fingerprint, so that a
// change to what the Templates' Copy steps read is noticed too. Paths that
// cannot be read count as missing.
func FingerprintPaths(dir string, paths []string) string {
	if len(paths) == 0 {
		return ""
	}
	h := sha256.New()
	for _, p := range paths {
		if CheckSourcePath(p) != nil {
			continue
		}
		root := filepath.Join(dir, filepath.FromSlash(p))
		err := filepath.WalkDir(root, func(q string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := os.Stat(q) // through symlinks, as packing does
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %d %o %d\n", q, info.Size(), info.Mode(), info.ModTime().UnixNano())
			return nil
		})
		if err != nil {
			fmt.Fprintf(h, "%s missing\n", p)
		}
	}
	return ":" + hex.EncodeToString(h.Sum(nil))
}
