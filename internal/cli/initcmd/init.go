// Package initcmd is `helmr init DIR`: write a new agent module (go.mod,
// main.go with one Agent, main_test.go with helmrtest, a README) that
// builds against the Helmr SDK, outside this repository.
package initcmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"text/template"

	"github.com/spf13/cobra"

	"github.com/helmr-go/helmr/internal/cli/clienv"
	"github.com/helmr-go/helmr/internal/cli/version"
)

// SDKModule is the module path of the Helmr SDK.
const SDKModule = "github.com/helmr-go/helmr"

// unpublishedVersion is the version a go.mod requires when the SDK's own
// is not a published one; the replace directive provides the code.
const unpublishedVersion = "v0.0.0-00010101000000-000000000000"

// project is what fills the templates in files.go.
type project struct {
	Name, Module, GoVersion, SDKVersion, SDKPath string
}

// New returns `helmr init`.
func New(g *clienv.Globals) *cobra.Command {
	var (
		module, sdkPath string
		noTidy          bool
	)
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Write a new agent module in DIR: one Agent, its test, and a go.mod that finds the SDK",
		Long: "helmr init writes a Go module in DIR (which must not exist or be empty): main.go with one Agent,\n" +
			"main_test.go that runs it with helmrtest, a README and a go.mod requiring " + SDKModule + ".\n" +
			"The SDK is not published, so go.mod also has a replace directive pointing at a Helmr checkout:\n" +
			"--sdk-path, else the checkout this helmr was built from (when its build recorded it).\n" +
			"go.sum starts as the checkout's, and go mod tidy runs in DIR (unless --no-tidy) with the\n" +
			"module cache the checkout already uses.",
		Args: clienv.Args("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if err := checkEmpty(dir); err != nil {
				return err
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			p := project{Name: filepath.Base(abs), Module: module}
			if p.Module == "" {
				p.Module = moduleName(p.Name)
			}
			if sdkPath == "" {
				sdkPath = builtFrom()
			} else if sdkPath, err = filepath.Abs(sdkPath); err != nil {
				return err
			}
			if sdkPath != "" {
				if !isSDK(sdkPath) {
					return clienv.Usagef("--sdk-path %s: no go.mod of module %s there", sdkPath, SDKModule)
				}
				p.SDKPath = sdkPath
			}
			p.SDKVersion = sdkVersion(version.Current().Version)
			p.GoVersion = goVersion(sdkPath)
			if err := write(abs, p); err != nil {
				return err
			}
			out := g.Streams.Out
			fmt.Fprintf(out, "Wrote the agent module %s in %s\n", p.Module, dir)
			if p.SDKPath != "" {
				fmt.Fprintf(out, "go.mod: replace %s => %s\n", SDKModule, p.SDKPath)
			} else {
				fmt.Fprintf(g.Streams.Err, "helmr init: this helmr does not know where a Helmr checkout is: run\n"+
					"  go mod edit -replace %s=/path/to/helmr && go mod tidy\nin %s (or helmr init --sdk-path)\n", SDKModule, dir)
			}
			if !noTidy && p.SDKPath != "" {
				if err := tidy(cmd.Context(), abs, g.Streams.Err); err != nil {
					return err
				}
			}
			fmt.Fprintf(out, "Next:\n  cd %s\n  go test ./...\n  helmr dev .\n", dir)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&module, "module", "", "the new module's path (default: example.com/ and DIR's name)")
	f.StringVar(&sdkPath, "sdk-path", "", "a Helmr checkout for go.mod's replace directive (default: the one this helmr was built from)")
	f.BoolVar(&noTidy, "no-tidy", false, "do not run go mod tidy in DIR")
	return cmd
}

// checkEmpty refuses a DIR that exists and holds anything.
func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return clienv.Usagef("%s: %v", dir, err)
	case len(entries) > 0:
		return clienv.Usagef("%s is not empty; helmr init writes only into a new or empty directory", dir)
	}
	return nil
}

var notModuleChar = regexp.MustCompile(`[^a-z0-9._-]+`)

// moduleName is example.com/NAME with NAME made a valid path element.
func moduleName(name string) string {
	n := strings.Trim(notModuleChar.ReplaceAllString(strings.ToLower(name), "-"), "-.")
	if n == "" {
		n = "agent"
	}
	return "example.com/" + n
}

// builtFrom is the root of the Helmr checkout this binary was compiled
// from, found through the source path the compiler recorded for this
// file; "" when it was built with -trimpath or the checkout is gone.
func builtFrom() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(file)))) // internal/cli/initcmd/init.go
	if !isSDK(root) {
		return ""
	}
	return root
}

// isSDK reports whether dir holds the go.mod of the Helmr module.
func isSDK(dir string) bool {
	return modLine(filepath.Join(dir, "go.mod"), "module") == SDKModule
}

// modLine is the argument of the first line of go.mod file path that
// starts with directive ("" when none).
func modLine(path, directive string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), directive+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// sdkVersion is the version go.mod requires: this helmr's own module
// version when it is a module version, else a placeholder that the
// replace directive stands in for.
func sdkVersion(v string) string {
	if releaseVersion.MatchString(v) {
		return v
	}
	return unpublishedVersion
}

// goVersion is the go directive: the SDK checkout's, else the toolchain's.
func goVersion(sdkPath string) string {
	if sdkPath != "" {
		if v := modLine(filepath.Join(sdkPath, "go.mod"), "go"); v != "" {
			return v
		}
	}
	return strings.TrimPrefix(runtime.Version(), "go")
}

// write writes the project's files into dir.
func write(dir string, p project) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := map[string]string{"go.mod": goModFile, "main.go": mainFile, "main_test.go": mainTestFile,
		"README.md": readmeFile, ".gitignore": gitignoreFile}
	for name, src := range files {
		var b bytes.Buffer
		if err := template.Must(template.New(name).Parse(src)).Execute(&b, p); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if p.SDKPath != "" {
		// The SDK's checksums: go mod tidy then needs neither the proxy
		// nor the checksum database for the modules the checkout uses.
		if b, err := os.ReadFile(filepath.Join(p.SDKPath, "go.sum")); err == nil {
			if err := os.WriteFile(filepath.Join(dir, "go.sum"), b, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// tidy runs go mod tidy in dir, its output to errw.
func tidy(ctx context.Context, dir string, errw io.Writer) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(errw, "helmr init: no go command on PATH; run go mod tidy in the new module yourself")
		return nil
	}
	cmd := exec.CommandContext(ctx, goBin, "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	cmd.Stdout, cmd.Stderr = errw, errw
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go mod tidy in %s: %w", dir, err)
	}
	return nil
}
