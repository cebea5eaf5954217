// Package local is the default Computer provider: each Computer is a
// directory on this machine (its durable /workspace and /tmp), and its
// processes run in bubblewrap sandboxes — new user, PID, mount, IPC, UTS and
// network namespaces — over a read-only root filesystem, with CPU, memory,
// process and disk limits. A Template that asks for the network gets a
// namespace of its own connected by pasta behind a firewall (network.go),
// never the host's. With Unsafe, processes run as plain host processes
// instead; it is for hosts that cannot sandbox, and only when the user asked
// for it.
package local

import (
	"errors"
	"log/slog"
	"os/exec"
	"strings"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
)

// Kinds of isolation.
const (
	KindBubblewrap = "bubblewrap"
	KindUnsafe     = "unsafe"
)

// ErrNoSandbox is returned by New when bubblewrap cannot run here and
// Unsafe was not asked for.
var ErrNoSandbox = errors.New("local: this host cannot run bubblewrap sandboxes")

// Options configure the provider.
type Options struct {
	// Dir holds one directory per Computer.
	Dir    string
	Logger *slog.Logger
	// Unsafe runs processes on the host without a sandbox when bubblewrap
	// is not usable (never when it is).
	Unsafe bool
	// Bwrap is the bubblewrap binary; default "bwrap" on PATH.
	Bwrap string
	// CgroupName names this provider's cgroup under each hierarchy's root
	// (default "helmr"); one provider per name.
	CgroupName string
	// CRIU turns on parking (computer.Parker, decision 0024): "auto"
	// finds criu on PATH or in the sbin directories, a path names the
	// binary; "" or "off" leaves parking off. New runs `criu check` with
	// it; CheckpointOff says why parking is off.
	CRIU string
}

// defaultPath is PATH inside a Computer when the image sets none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// environment builds a process's environment: defaults, then the image's,
// then the process's own (later entries win).
func environment(img computer.Image, extra []string) []string {
	env := []string{"PATH=" + defaultPath, "HOME=" + computer.Workspace, "TMPDIR=" + computer.Tmp, "LANG=C.UTF-8"}
	set := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		for i, e := range env {
			if strings.HasPrefix(e, k+"=") {
				env[i] = kv
				return
			}
		}
		env = append(env, kv)
	}
	for _, kv := range img.Env {
		set(kv)
	}
	for _, kv := range extra {
		set(kv)
	}
	return env
}

// unsafeCommand runs the process on the host: binds become environment
// variables naming the host paths (HELMR_BIND_<dst> is not needed by the
// runtime, which passes host paths itself in this mode).
func (p *Provider) unsafeCommand(ws, tmp, dir string, env []string, ps computer.ProcessSpec) (*exec.Cmd, error) {
	hostPath := func(in string) string {
		switch {
		case in == computer.Workspace || strings.HasPrefix(in, computer.Workspace+"/"):
			return ws + strings.TrimPrefix(in, computer.Workspace)
		case in == computer.Tmp || strings.HasPrefix(in, computer.Tmp+"/"):
			return tmp + strings.TrimPrefix(in, computer.Tmp)
		}
		for _, b := range ps.Binds {
			if in == b.Dst || strings.HasPrefix(in, b.Dst+"/") {
				return b.Src + strings.TrimPrefix(in, b.Dst)
			}
		}
		return in
	}
	argv := append([]string(nil), ps.Argv...)
	for i := range argv {
		argv[i] = hostPath(argv[i])
	}
	for i, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(v, "/") {
			env[i] = k + "=" + hostPath(v)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env, cmd.ExtraFiles = hostPath(dir), env, ps.Files
	return cmd, nil
}

// tail is the last n bytes of b, for error messages.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}

// unenforced lists which of r's limits a host without cgroup limits
// (limits false) or without disk limits (disk false) cannot enforce.
func unenforced(r helmrtype.ResourcesManifest, limits, disk bool) []string {
	var out []string
	if !limits {
		if r.CPU > 0 {
			out = append(out, "cpu")
		}
		if r.Memory != "" {
			out = append(out, "memory")
		}
		if r.Processes > 0 {
			out = append(out, "processes")
		}
	}
	if !disk && r.Disk != "" {
		out = append(out, "disk")
	}
	return out
}
