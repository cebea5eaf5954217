package supervisor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/helmrtype"

	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/helmr-go/helmr/internal/image"
	"github.com/helmr-go/helmr/internal/protocol"
)

// LaunchSpec is what a Launcher needs to start a session process.
type LaunchSpec struct {
	SessionID  string
	ComputerID string
	Agent      string
	Binary     string
	// Runtime is how Binary runs: "" a native executable, "node" an ES
	// module bundle run by Node (helmrtype.Manifest.Runtime).
	Runtime string
	// Socket and Token are how the process reaches the protocol endpoint.
	Socket string
	Token  string
	// ReconnectWindow is how long the process tries to reconnect after it
	// lost the control plane.
	ReconnectWindow time.Duration
	// Template is the Computer's Template: image, resources, network.
	Template helmrtype.TemplateManifest
	// SourceDir is the Deployment's unpacked sources, which the Template's
	// Copy steps read; "" when it has none.
	SourceDir string
	// Restorable asks for a sandbox a checkpoint can take (Parker).
	Restorable bool
}

// Env returns the protocol variables a session process reads, but not its
// credential: that travels by a descriptor (TokenFile).
func (s LaunchSpec) Env() []string {
	env := []string{protocol.EnvSocket + "=" + s.Socket, protocol.EnvAgent + "=" + s.Agent,
		protocol.EnvTokenFD + "=" + strconv.Itoa(protocol.TokenFD)}
	if s.ReconnectWindow > 0 {
		env = append(env, protocol.EnvReconnectWindow+"="+helmrtype.FormatDuration(s.ReconnectWindow))
	}
	return env
}

// TokenFile returns the read end of a pipe that holds the credential and
// nothing more, to give the process as descriptor protocol.TokenFD: no
// other host user can read it, and it is on no command line. The caller
// closes it once the process started.
func (s LaunchSpec) TokenFile() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// A pipe holds 64 KiB: the credential fits, and the write end closes
	// so the process reads it to the end.
	_, err = w.WriteString(s.Token)
	w.Close()
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Process is a running session process.
type Process interface {
	// Done is closed when the process has exited; Err then tells how.
	Done() <-chan struct{}
	// Err is nil for a clean exit, else why the process ended.
	Err() error
	// Kill ends the process (and its process group) at once.
	Kill()
}

// Launcher starts session processes on Computers.
type Launcher interface {
	Launch(ctx context.Context, spec LaunchSpec) (Process, error)
}

// ImageResolver turns a Template's image into a root filesystem; Copy steps
// read their sources from b.SourceDir ("" refuses them), and b.Progress,
// when set, hears the pull and each step.
type ImageResolver interface {
	Resolve(ctx context.Context, m helmrtype.ImageManifest, b image.BuildOptions) (computer.Image, error)
}

// Paths inside a Computer where a session process finds the runtime.
const (
	agentPath  = "/.helmr/agent"     // the Deployment's binary, read-only
	bundlePath = "/.helmr/agent.mjs" // the Deployment's Node bundle, read-only
	runDir     = "/.helmr/run"       // the directory of the protocol socket
)

// ComputerLauncher runs session processes in Computers of a provider: the
// Deployment's binary (or Node bundle, run as `node /.helmr/agent.mjs`)
// and the protocol socket's directory are bound in
// read-only, the working directory and HOME are /workspace, and the
// process's output goes to Dir/<computer>/process.log (outside the
// Computer).
type ComputerLauncher struct {
	Provider computer.Provider
	// Images resolves non-host images; nil supports FromHost images only.
	Images ImageResolver
	// Dir is where process logs are kept, one directory per Computer.
	Dir string
}

// Launch creates the Session's Computer if needed and starts the process.
func (l *ComputerLauncher) Launch(ctx context.Context, spec LaunchSpec) (Process, error) {
	cs, err := l.computerSpec(ctx, spec.ComputerID, spec.Template, spec.SourceDir)
	if err != nil {
		return nil, err
	}
	logf, err := l.openLog(spec.ComputerID, spec.Template.Resources)
	if err != nil {
		return nil, err
	}
	inside := spec
	inside.Socket = runDir + "/" + filepath.Base(spec.Socket)
	env := append(inside.Env(), "HELMR_WORKSPACE="+computer.Workspace, "HELMR_COMPUTER_ID="+spec.ComputerID)
	if spec.Restorable && !slices.ContainsFunc(cs.Image.Env, func(kv string) bool { return strings.HasPrefix(kv, "GODEBUG=") }) {
		// Go programs listen with Multipath TCP by default, and CRIU
		// cannot checkpoint an MPTCP socket: plain TCP, unless the image
		// says otherwise.
		env = append(env, "GODEBUG=multipathtcp=0")
	}
	token, err := spec.TokenFile()
	if err != nil {
		logf.Close()
		return nil, err
	}
	argv, dst := []string{agentPath}, agentPath
	if spec.Runtime == helmrtype.RuntimeNode {
		// node from the image's PATH; the .mjs name makes it an ES module.
		argv, dst = []string{"node", bundlePath}, bundlePath
	}
	pr, err := l.Provider.Start(ctx, cs, computer.ProcessSpec{Argv: argv, Env: env, Dir: computer.Workspace,
		Binds:  []computer.Bind{{Src: spec.Binary, Dst: dst}, {Src: filepath.Dir(spec.Socket), Dst: runDir}},
		Files:  []*os.File{token},
		Stdout: logf, Stderr: logf, Restorable: spec.Restorable})
	token.Close()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("start session process: %w", err)
	}
	return newComputerProcess(pr, logf), nil
}

// openLog opens the process log of a Computer to append, rotated past its
// size.
func (l *ComputerLauncher) openLog(computerID string, r helmrtype.ResourcesManifest) (*os.File, error) {
	logDir := filepath.Join(l.Dir, computerID)
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, "process.log")
	rotateLog(logPath, r)
	return os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// newComputerProcess watches pr, whose output goes to logf (closed once
// it exited).
func newComputerProcess(pr computer.Process, logf *os.File) *computerProcess {
	p := &computerProcess{pr: pr, done: make(chan struct{})}
	go func() {
		code, err := pr.Wait()
		logf.Close()
		switch {
		case err != nil:
		case code > 128:
			err = fmt.Errorf("the session process was killed by signal %s", syscall.Signal(code-128))
		case code != 0:
			err = fmt.Errorf("the session process exited with status %d", code)
		}
		p.err = err
		close(p.done)
	}()
	return p
}

// CheckpointOff says why session processes cannot be parked: the
// provider cannot checkpoint ("" when it can).
func (l *ComputerLauncher) CheckpointOff() string {
	pk, ok := l.Provider.(computer.Parker)
	if !ok {
		return "the computer provider cannot checkpoint processes"
	}
	return pk.CheckpointOff()
}

// Park checkpoints the session process p (launched Restorable) into its
// Computer's directory and ends it.
func (l *ComputerLauncher) Park(ctx context.Context, spec LaunchSpec, p Process) (computer.ParkStats, error) {
	pk, ok := l.Provider.(computer.Parker)
	cp, isComputer := p.(*computerProcess)
	if !ok || !isComputer {
		return computer.ParkStats{}, errors.New("this process cannot be checkpointed")
	}
	cs, err := l.computerSpec(ctx, spec.ComputerID, spec.Template, spec.SourceDir)
	if err != nil {
		return computer.ParkStats{}, err
	}
	return pk.Park(ctx, cs, spec.SessionID, cp.pr)
}

// Restore restores the Session's parked process, its output to its
// Computer's process log again.
func (l *ComputerLauncher) Restore(ctx context.Context, spec LaunchSpec) (Process, error) {
	pk, ok := l.Provider.(computer.Parker)
	if !ok {
		return nil, errors.New("the computer provider cannot checkpoint processes")
	}
	cs, err := l.computerSpec(ctx, spec.ComputerID, spec.Template, spec.SourceDir)
	if err != nil {
		return nil, err
	}
	logf, err := l.openLog(spec.ComputerID, spec.Template.Resources)
	if err != nil {
		return nil, err
	}
	dst := agentPath
	if spec.Runtime == helmrtype.RuntimeNode {
		dst = bundlePath
	}
	pr, err := pk.Unpark(ctx, cs, spec.SessionID, computer.ProcessSpec{Stdout: logf, Stderr: logf,
		Binds: []computer.Bind{{Src: spec.Binary, Dst: dst}, {Src: filepath.Dir(spec.Socket), Dst: runDir}}})
	if err != nil {
		logf.Close()
		return nil, err
	}
	return newComputerProcess(pr, logf), nil
}

// Parked reports whether the Session has a parked process on the
// Computer.
func (l *ComputerLauncher) Parked(computerID, sessionID string) bool {
	pk, ok := l.Provider.(computer.Parker)
	return ok && pk.Parked(computerID, sessionID)
}

// DropParked deletes the images of the Session's parked process.
func (l *ComputerLauncher) DropParked(computerID, sessionID string) error {
	if pk, ok := l.Provider.(computer.Parker); ok {
		return pk.DropParked(computerID, sessionID)
	}
	return nil
}

// computerSpec resolves a Computer's image and makes sure it exists.
func (l *ComputerLauncher) computerSpec(ctx context.Context, id string, t helmrtype.TemplateManifest, sourceDir string) (computer.Spec, error) {
	img, err := templateImage(ctx, l.Images, t, sourceDir, nil)
	if err != nil {
		return computer.Spec{}, err
	}
	allow, err := helmrtype.ParseNetworkAllow(t.NetworkAllow)
	if err != nil {
		return computer.Spec{}, fmt.Errorf("template %s: %w", t.ID, err)
	}
	cs := computer.Spec{ID: id, Image: img, Resources: t.Resources, Network: t.Network, NetworkAllow: allow}
	return cs, l.Provider.Create(ctx, cs)
}

type computerProcess struct {
	pr   computer.Process
	done chan struct{}
	err  error
}

func (p *computerProcess) Done() <-chan struct{} { return p.done }

// PID is the sandbox leader's ID; the protocol connection comes from it or
// a process it started.
func (p *computerProcess) PID() int   { return p.pr.PID() }
func (p *computerProcess) Err() error { return p.err }
func (p *computerProcess) Kill()      { p.pr.Signal(syscall.SIGKILL) }

// maxKeptLog is the size past which a session process's log is rotated at
// its next launch.
const maxKeptLog = 1 << 20

// rotateLog moves a process log past its size to path.1 (one generation
// is kept), so that logs do not grow without end across launches. With a
// disk limit it rotates at a quarter of it: the process writes its log
// under that limit as its file size limit, and would be stopped by it.
func rotateLog(path string, r helmrtype.ResourcesManifest) {
	limit := int64(maxKeptLog)
	if r.Disk != "" {
		if n, err := helmrtype.ParseMemory(r.Disk); err == nil {
			limit = min(limit, n/4)
		}
	}
	if fi, err := os.Stat(path); err == nil && fi.Size() > limit {
		os.Rename(path, path+".1")
	}
}

// Limits of a manifest run (ReadManifest).
var manifestResources = helmrtype.ResourcesManifest{CPU: 1, Memory: "1GiB", Processes: 256, Disk: "64MiB"}

// maxManifestOutput bounds what a manifest run may print on each stream.
const maxManifestOutput = 8 << 20

// ReadManifest runs an uploaded artifact with the manifest flag the way
// its runtime runs it, in a throwaway Computer of the provider: a host
// image, no network, its own limits and deadline (deploy.ManifestTimeout),
// so that code a client uploads never runs on the host as the control
// plane. It returns the manifest it printed (deploy.DecodeManifest).
func (l *ComputerLauncher) ReadManifest(ctx context.Context, artifact, runtime string) (helmrtype.Manifest, error) {
	dst := agentPath
	if runtime == helmrtype.RuntimeNode {
		dst = bundlePath
	}
	argv, err := deploy.ManifestArgv(runtime, dst)
	if err != nil {
		return helmrtype.Manifest{}, err
	}
	var id [8]byte
	rand.Read(id[:])
	spec := computer.Spec{ID: "manifest-" + hex.EncodeToString(id[:]), Image: computer.Image{Host: true}, Resources: manifestResources}
	if err := l.Provider.Create(ctx, spec); err != nil {
		return helmrtype.Manifest{}, err
	}
	defer l.Provider.Delete(context.WithoutCancel(ctx), spec.ID)
	stdout, stderr := &cappedBuffer{max: maxManifestOutput}, &cappedBuffer{max: maxManifestOutput}
	pr, err := l.Provider.Start(ctx, spec, computer.ProcessSpec{Argv: argv, Binds: []computer.Bind{{Src: artifact, Dst: dst}},
		Stdout: stdout, Stderr: stderr})
	if err != nil {
		return helmrtype.Manifest{}, fmt.Errorf("read the manifest: %w", err)
	}
	timer := time.NewTimer(deploy.ManifestTimeout)
	defer timer.Stop()
	var runErr error
	select {
	case <-pr.Done():
	case <-timer.C:
		runErr = fmt.Errorf("it did not exit within %s", deploy.ManifestTimeout)
	case <-ctx.Done():
		runErr = ctx.Err()
	}
	if runErr != nil {
		pr.Signal(syscall.SIGKILL)
	}
	code, werr := pr.Wait()
	switch {
	case runErr != nil:
	case werr != nil:
		runErr = werr
	case code != 0:
		runErr = fmt.Errorf("exit status %d", code)
	}
	return deploy.DecodeManifest(stdout.Bytes(), stderr.Bytes(), code, runErr, runtime)
}

// cappedBuffer keeps the first max bytes written to it and drops the rest.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Bytes returns what was kept.
func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Bytes()
}
