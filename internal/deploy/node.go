package deploy

// TypeScript agent packages. A directory with a package.json (and no Go
// files) is a Node package that depends on @helmr/sdk. It is built by the
// SDK's bundler into one self-contained ES module, which is the
// Deployment's artifact: content-addressed like a binary, run by Node
// (`node agent.mjs`), its manifest printed by `node agent.mjs
// --helmr-manifest` with "runtime": "node".

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Bundler is the SDK's bundler, relative to the package directory.
const Bundler = "node_modules/@helmr/sdk/bin/helmr-bundle.mjs"

// IsNodePackage reports whether dir is a TypeScript (Node) agent package:
// it has a package.json and no Go files.
func IsNodePackage(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		return false
	}
	gofiles, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	_, gomod := os.Stat(filepath.Join(dir, "go.mod"))
	return len(gofiles) == 0 && gomod != nil
}

// InstallDeps installs the package's npm dependencies when dir has no
// node_modules: `npm ci` with a lockfile, else `npm install`. It says so
// on log; when npm fails, its output is in the error.
func InstallDeps(ctx context.Context, dir string, log io.Writer) error {
	if _, err := os.Stat(filepath.Join(dir, "node_modules")); err == nil {
		return nil
	}
	args := []string{"install"}
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err == nil {
		args = []string{"ci"}
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return fmt.Errorf("%s has no node_modules and npm is not installed: install Node 20 or newer with npm, or run npm ci there", dir)
	}
	fmt.Fprintf(log, "helmr: %s has no node_modules; running npm %s\n", dir, args[0])
	cmd := exec.CommandContext(ctx, "npm", append(args, "--no-audit", "--no-fund")...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm %s in %s: %v\n%s", args[0], dir, err, out.String())
	}
	return nil
}

// Bundle runs the SDK's bundler on the package in dir, writing one ES
// module to out (an absolute path).
func Bundle(ctx context.Context, dir, out string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("bundle %s: node is not installed (TypeScript agents need Node 20 or newer)", dir)
	}
	bundler := filepath.Join(abs, filepath.FromSlash(Bundler))
	if _, err := os.Stat(bundler); err != nil {
		return fmt.Errorf("%s has no %s: does its package.json depend on @helmr/sdk?", dir, Bundler)
	}
	cmd := exec.CommandContext(ctx, "node", bundler, "--out", out, abs)
	cmd.Dir = abs
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bundle %s: %v\n%s", dir, err, stderr.String())
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		return fmt.Errorf("bundle %s: the bundler wrote no %s", dir, filepath.Base(out))
	}
	return nil
}

// moduleFile returns a path that Node loads as an ES module for the bundle
// at path: path itself when it ends in .mjs, else a link (or copy) named
// agent.mjs in a new directory next to it, which done removes.
func moduleFile(path string) (mjs string, done func(), err error) {
	if strings.HasSuffix(path, ".mjs") {
		return path, func() {}, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".module-")
	if err != nil {
		return "", nil, err
	}
	done = func() { os.RemoveAll(tmp) }
	mjs = filepath.Join(tmp, "agent.mjs")
	if os.Link(path, mjs) == nil {
		return mjs, done, nil
	}
	src, err := os.Open(path)
	if err == nil {
		var dst *os.File
		if dst, err = os.Create(mjs); err == nil {
			_, err = io.Copy(dst, src)
			if cerr := dst.Close(); err == nil {
				err = cerr
			}
		}
		src.Close()
	}
	if err != nil {
		done()
		return "", nil, err
	}
	return mjs, done, nil
}
