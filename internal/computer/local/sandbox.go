//go:build linux

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"golang.org/x/sys/unix"
)

// How a sandbox starts. bubblewrap runs with an empty environment (the
// sandbox's PID 1 is a copy of it, and its /proc/1/environ would show the
// control plane's), reads its arguments from a pipe (nothing of the
// Computer's environment or binds is on a command line another host user
// can read with ps), and waits on a block descriptor before it runs the
// command: the runtime first moves the sandbox into its cgroups and, with
// network, sets up its firewall and interface. The process's own files
// (ProcessSpec.Files) are descriptors 3, 4, … inside as outside; the
// sandbox's control descriptors follow them, and bubblewrap closes those
// before the command runs.

// sandbox holds the control descriptors of a sandbox being started.
type sandbox struct {
	cmd *exec.Cmd
	// block is the write end of the block descriptor: the command runs
	// once it is written to.
	block *os.File
	// info is the read end of bubblewrap's info descriptor (when asked
	// for, and with network): it names the sandbox's init process.
	info *os.File
	// network says the sandbox gets a network namespace of its own.
	network bool
	// child is the sandbox's init process once known (initPID).
	child int
	// pasta is the pasta process serving its network, if any.
	pasta netServer
	// closeAfterStart are the ends the child keeps and this process
	// closes once it started.
	closeAfterStart []*os.File
	args            []string
	argsW           *os.File
}

// sandboxed returns the bubblewrap command that runs argv with options
// args (they travel by a pipe; the command alone stays on the command line:
// it is the process's own), with files as descriptors 3, 4, … of the
// process, and its sandbox. The two are kept apart by the caller: an
// option's value may itself be "--" (an environment value), which must not
// end the options. With info (or network), initPID returns the sandbox's
// init process.
func (p *Provider) sandboxed(args, argv []string, files []*os.File, network, info bool) (*exec.Cmd, *sandbox, error) {
	argv = append([]string{"--"}, argv...)
	// The options travel NUL-separated: a NUL inside one (a working
	// directory, an environment value from an image, a Template or a
	// Command) would start an option of its own, such as a bind of the
	// host's root.
	for _, a := range args {
		if strings.IndexByte(a, 0) >= 0 {
			return nil, nil, fmt.Errorf("local: a sandbox option holds a NUL byte: %q", a)
		}
	}
	sb := &sandbox{args: args, network: network}
	argsR, argsW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		argsR.Close()
		argsW.Close()
		return nil, nil, err
	}
	sb.argsW, sb.block = argsW, blockW
	sb.closeAfterStart = []*os.File{argsR, blockR}
	extra := append(append([]*os.File(nil), files...), argsR, blockR)
	fd := func(i int) string { return strconv.Itoa(3 + i) }
	control := []string{"--block-fd", fd(len(files) + 1)}
	if network || info {
		infoR, infoW, err := os.Pipe()
		if err != nil {
			sb.abandon()
			return nil, nil, err
		}
		sb.info = infoR
		sb.closeAfterStart = append(sb.closeAfterStart, infoW)
		extra = append(extra, infoW)
		control = append(control, "--info-fd", fd(len(files)+2))
	}
	sb.args = append(control, args...)
	cmd := exec.Command(p.bwrap, append([]string{"--args", fd(len(files))}, argv...)...)
	cmd.Env = []string{}
	cmd.ExtraFiles = extra
	sb.cmd = cmd
	return cmd, sb, nil
}

// started is called once the command started: it sends the arguments
// and, with network, attaches the sandbox's network namespace.
func (sb *sandbox) started(ctx context.Context, n *netStack, allow []helmrtype.NetworkDest) error {
	if sb == nil {
		return nil
	}
	for _, f := range sb.closeAfterStart {
		f.Close()
	}
	sb.closeAfterStart = nil
	// bubblewrap reads its arguments before anything else; a pipe holds
	// 64 KiB, so they are written aside.
	argsW := sb.argsW
	sb.argsW = nil
	go func() {
		argsW.WriteString(strings.Join(sb.args, "\x00") + "\x00")
		argsW.Close()
	}()
	if !sb.network {
		return nil
	}
	pid, err := sb.initPID()
	if err != nil {
		return err
	}
	pasta, err := n.attach(ctx, pid, allow)
	if err == nil {
		sb.pasta.set(pasta)
	}
	return err
}

// stopNetwork stops the pasta process of a sandbox that has ended.
func (sb *sandbox) stopNetwork() {
	if sb != nil {
		sb.pasta.close()
	}
}

// initPID returns the host PID of the sandbox's init process, which
// bubblewrap reports on its info descriptor once it made it (sandboxed
// with info or network).
func (sb *sandbox) initPID() (int, error) {
	if sb.child > 0 {
		return sb.child, nil
	}
	if sb.info == nil {
		return 0, errors.New("local: the sandbox has no info descriptor")
	}
	defer func() { sb.info.Close(); sb.info = nil }()
	sb.info.SetReadDeadline(time.Now().Add(10 * time.Second))
	var info struct {
		ChildPID int `json:"child-pid"`
	}
	if err := json.NewDecoder(sb.info).Decode(&info); err != nil || info.ChildPID <= 0 {
		return 0, fmt.Errorf("local: the sandbox did not report its process: %v", err)
	}
	sb.child = info.ChildPID
	return sb.child, nil
}

// release lets the sandbox run its command.
func (sb *sandbox) release() error {
	if sb == nil {
		return nil
	}
	_, err := sb.block.Write([]byte{1})
	sb.block.Close()
	sb.block = nil
	if err != nil {
		return fmt.Errorf("local: start the sandbox: %w", err)
	}
	return nil
}

// abandon closes whatever descriptors are still open (a failed start).
func (sb *sandbox) abandon() {
	if sb == nil {
		return
	}
	for _, f := range append(sb.closeAfterStart, sb.block, sb.info, sb.argsW) {
		if f != nil {
			f.Close()
		}
	}
	sb.closeAfterStart, sb.block, sb.info, sb.argsW = nil, nil, nil, nil
	sb.stopNetwork()
}

// closeInherited marks every descriptor above 2 of this process
// close-on-exec, so that none it inherited reaches a child (the runtime
// opens its own with close-on-exec already).
func closeInherited() {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
