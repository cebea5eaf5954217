package supervisor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/store"
)

// Commands: processes run on a Computer outside any Turn. The supervisor
// is the engine's CommandRunner: it starts them with the launcher's
// provider, stores their output in order (batched), kills them at their
// timeout or on cancel, and records how they ended — after all their
// output is stored.

// ComputerRunner is what a Launcher offers beyond session processes:
// Commands on Computers, and removal of a Computer's files.
type ComputerRunner interface {
	StartProcess(ctx context.Context, computerID string, t helmrtype.TemplateManifest, sourceDir string, p computer.ProcessSpec) (computer.Process, error)
	RemoveComputer(ctx context.Context, id string) error
}

// StartProcess runs a process on a Computer made from Template t, whose
// Copy steps read sourceDir (the Deployment's unpacked sources; "" for none).
func (l *ComputerLauncher) StartProcess(ctx context.Context, computerID string, t helmrtype.TemplateManifest, sourceDir string, p computer.ProcessSpec) (computer.Process, error) {
	cs, err := l.computerSpec(ctx, computerID, t, sourceDir)
	if err != nil {
		return nil, err
	}
	return l.Provider.Start(ctx, cs, p)
}

// RemoveComputer deletes a Computer's files and its process logs.
func (l *ComputerLauncher) RemoveComputer(ctx context.Context, id string) error {
	return l.Provider.Delete(ctx, id)
}

type runningCommand struct {
	computerID string
	cancel     chan struct{}
	once       sync.Once
}

// StartCommand runs an admitted Command.
func (s *Supervisor) StartCommand(c store.Command) {
	rc := &runningCommand{computerID: c.ComputerID, cancel: make(chan struct{})}
	s.mu.Lock()
	if s.cmds == nil {
		s.cmds = map[string]*runningCommand{}
	}
	s.cmds[c.ID] = rc
	s.mu.Unlock()
	// The Computer's parked session processes are restored: a Command
	// finds its Computer as its Sessions left it, their processes running
	// (they park again once idle).
	for _, p := range s.snapshot() {
		p.mu.Lock()
		on := p.isParked() && p.launch != nil && p.launch.Session.ComputerID == c.ComputerID
		p.mu.Unlock()
		if on {
			s.activity(p)
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.cmds, c.ID)
			s.mu.Unlock()
		}()
		s.runCommand(c, rc)
	}()
}

// CancelCommand stops a running Command.
func (s *Supervisor) CancelCommand(id string) {
	s.mu.Lock()
	rc := s.cmds[id]
	s.mu.Unlock()
	if rc != nil {
		rc.once.Do(func() { close(rc.cancel) })
	}
}

// RemoveComputer deletes a Computer's files.
func (s *Supervisor) RemoveComputer(ctx context.Context, id string) error {
	s.mu.Lock()
	delete(s.unavailable, id)
	s.mu.Unlock()
	cr, ok := s.launcher.(ComputerRunner)
	if !ok {
		return nil
	}
	return cr.RemoveComputer(ctx, id)
}

// Residency tells where a Computer's processes are (the busiest of its
// processes' states), or that it is unavailable since its last launch
// failed.
// residencyRank orders a Computer's residencies: the busiest of its
// processes' wins.
var residencyRank = map[string]int{helmrtype.ResidencyCold: 0, helmrtype.ResidencyParked: 1, helmrtype.ResidencyParking: 2,
	helmrtype.ResidencyStarting: 3, helmrtype.ResidencyRestoring: 4, helmrtype.ResidencyRunning: 5}

func (s *Supervisor) Residency(computerID string) (string, *helmrtype.Error) {
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	running := false
	for _, rc := range s.cmds {
		running = running || rc.computerID == computerID
	}
	failed := s.unavailable[computerID]
	s.mu.Unlock()
	res := helmrtype.ResidencyCold
	if running {
		res = helmrtype.ResidencyRunning
	}
	for _, p := range procs {
		p.mu.Lock()
		on := p.launch != nil && p.launch.Session.ComputerID == computerID && p.life.phase != phaseDead
		r := p.life.apiResidency()
		p.mu.Unlock()
		if on && residencyRank[r] > residencyRank[res] {
			res = r
		}
	}
	if res == helmrtype.ResidencyCold && failed != nil {
		return helmrtype.ResidencyUnavailable, failed
	}
	return res, nil
}

func (s *Supervisor) runCommand(c store.Command, rc *runningCommand) {
	ctx := s.ctx
	fail := func(code helmrtype.Code, format string, args ...any) {
		if err := s.eng.FinishCommand(context.WithoutCancel(ctx), c.ID, helmrtype.CommandFailed, nil, string(code)+": "+fmt.Sprintf(format, args...)); err != nil {
			s.log.Error("record a command's failure", "command", c.ID, "err", err)
		}
	}
	const cancelled = string(helmrtype.CodeCancelled) + ": the command was cancelled"
	if req, err := s.eng.CommandCancelRequested(ctx, c.ID); err == nil && req {
		// A cancel accepted before the Command was registered here found
		// nothing to stop: it does not start.
		if err := s.eng.FinishCommand(context.WithoutCancel(ctx), c.ID, helmrtype.CommandCancelled, nil, cancelled); err != nil {
			s.log.Error("record a command's end", "command", c.ID, "err", err)
		}
		return
	}
	cr, ok := s.launcher.(ComputerRunner)
	if !ok {
		fail(helmrtype.CodeUnavailable, "this control plane cannot run commands")
		return
	}
	t, sourcesDigest, err := s.eng.ComputerTemplate(ctx, c.ComputerID)
	if err != nil {
		fail(helmrtype.CodeUnavailable, "computer %s: %v", c.ComputerID, err)
		return
	}
	sourceDir, err := s.resolveSources(ctx, sourcesDigest)
	if err != nil {
		fail(helmrtype.CodeUnavailable, "computer %s: %v", c.ComputerID, err)
		return
	}
	sink := newLogSink(s, c.ID)
	defer sink.close()
	pr, err := cr.StartProcess(ctx, c.ComputerID, t, sourceDir, computer.ProcessSpec{Argv: c.Argv, Env: c.Env, Dir: c.Cwd,
		Stdin: bytes.NewReader(c.Stdin), Stdout: sink.stream("stdout"), Stderr: sink.stream("stderr")})
	if err != nil {
		fail(helmrtype.CodeUnavailable, "start: %v", err)
		return
	}
	timeout := time.Duration(c.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = helmrtype.DefaultCommandTimeout
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	status, why := helmrtype.CommandExited, ""
	select {
	case <-pr.Done():
	case <-timer.C:
		status, why = helmrtype.CommandTimedOut, string(helmrtype.CodeDeadlineExceeded)+": the command ran past its timeout of "+helmrtype.FormatDuration(timeout)
	case <-rc.cancel:
		status, why = helmrtype.CommandCancelled, cancelled
	case <-ctx.Done():
		// The control plane stops: the process is not adopted later.
		status, why = helmrtype.CommandFailed, string(helmrtype.CodeExecutionLost)+": the control plane stopped while the command ran"
	}
	if status != helmrtype.CommandExited {
		pr.Signal(syscall.SIGKILL)
	}
	code, werr := pr.Wait()
	// Every byte of output is stored before the outcome.
	sink.close()
	var exit *int
	switch {
	case status == helmrtype.CommandExited && werr != nil:
		// A provider's coded error (a disk limit) keeps its code.
		status, why = helmrtype.CommandFailed, string(helmrtype.CodeInternal)+": "+werr.Error()
		if he := (*helmrtype.Error)(nil); errors.As(werr, &he) {
			why = he.Error()
		}
	case status == helmrtype.CommandExited:
		exit = &code
	}
	if err := s.eng.FinishCommand(context.WithoutCancel(ctx), c.ID, status, exit, why); err != nil {
		s.log.Error("record a command's end", "command", c.ID, "err", err)
	}
}

// logSink collects a Command's output and stores it in batches: a chunk
// per stream write run, at most every 20 ms, numbered in arrival order.
type logSink struct {
	s  *Supervisor
	id string

	mu      sync.Mutex
	seq     int64
	pending []store.CommandLog
	kick    chan struct{}
	done    chan struct{}
	closed  bool
	flushed chan struct{}
	// kept is how many bytes of output were taken; past max the rest is
	// dropped (dropped set) and a note says so.
	kept    int64
	max     int64
	dropped bool
}

const maxLogChunk = 64 << 10

// DefaultMaxCommandOutput bounds the output of one Command that is stored
// (both streams together; Options.MaxCommandOutput): a Command that prints
// more cannot exhaust the control plane's memory or the store's disk.
// What comes after is dropped, and a line on stderr says so.
const DefaultMaxCommandOutput = 64 << 20

// droppedNote ends the stored output of a Command that printed more than
// max bytes.
func droppedNote(max int64) []byte {
	return fmt.Appendf(nil, "\n[helmr: the command printed more than %d bytes; the rest of its output was dropped]\n", max)
}

func newLogSink(s *Supervisor, id string) *logSink {
	l := &logSink{s: s, id: id, kick: make(chan struct{}, 1), done: make(chan struct{}), flushed: make(chan struct{}),
		max: cmp.Or(s.opts.MaxCommandOutput, DefaultMaxCommandOutput)}
	go l.loop()
	return l
}

type streamWriter struct {
	l      *logSink
	stream string
}

func (l *logSink) stream(name string) *streamWriter { return &streamWriter{l: l, stream: name} }

func (w *streamWriter) Write(p []byte) (int, error) {
	l := w.l
	l.mu.Lock()
	now := l.s.eng.Now()
	stream, rest := w.stream, p
	over := int64(len(rest)) > l.max-l.kept
	if over {
		rest = rest[:max(l.max-l.kept, 0)]
	}
	l.kept += int64(len(rest))
	for len(rest) > 0 {
		n := min(len(rest), maxLogChunk)
		// Append to the last pending chunk of the same stream when it has room.
		if k := len(l.pending); k > 0 && l.pending[k-1].Stream == stream && len(l.pending[k-1].Data)+n <= maxLogChunk {
			l.pending[k-1].Data = append(l.pending[k-1].Data, rest[:n]...)
		} else {
			l.seq++
			l.pending = append(l.pending, store.CommandLog{CommandID: l.id, Sequence: l.seq, Stream: stream,
				Data: append([]byte(nil), rest[:n]...), At: now})
		}
		rest = rest[n:]
	}
	if over && !l.dropped {
		// The note is stored whole, past the limit, once.
		l.dropped = true
		l.seq++
		l.pending = append(l.pending, store.CommandLog{CommandID: l.id, Sequence: l.seq, Stream: "stderr", Data: droppedNote(l.max), At: now})
	}
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (l *logSink) loop() {
	defer close(l.flushed)
	for {
		select {
		case <-l.kick:
		case <-l.done:
			l.flush()
			return
		}
		time.Sleep(20 * time.Millisecond) // let a burst gather
		l.flush()
	}
}

func (l *logSink) flush() {
	l.mu.Lock()
	batch := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	if err := l.s.eng.CommandOutput(context.Background(), l.id, batch); err != nil {
		l.s.log.Error("store a command's output", "command", l.id, "err", err)
	}
}

// close stores what is left and stops the sink; it is idempotent.
func (l *logSink) close() {
	l.mu.Lock()
	first := !l.closed
	l.closed = true
	l.mu.Unlock()
	if first {
		close(l.done)
	}
	<-l.flushed
}

// ProcessCounts counts this node's session processes by where they are.
type ProcessCounts struct {
	// Running counts live processes that are not frozen.
	Running int
	// Frozen counts processes frozen in memory (where checkpoints are off).
	Frozen int
	// Parked counts Sessions whose process is checkpointed to disk: no
	// process, no memory.
	Parked int
}

// ProcessStates counts this node's session processes and tells the
// residency of each Computer they (or its Commands) are on, for the
// metrics.
func (s *Supervisor) ProcessStates() (counts ProcessCounts, residency map[string]string) {
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for _, p := range s.procs {
		procs = append(procs, p)
	}
	residency = map[string]string{}
	for _, rc := range s.cmds {
		residency[rc.computerID] = helmrtype.ResidencyRunning
	}
	s.mu.Unlock()
	for _, p := range procs {
		p.mu.Lock()
		if p.life.phase == phaseDead || p.launch == nil {
			p.mu.Unlock()
			continue
		}
		r := p.life.apiResidency()
		id := p.launch.Session.ComputerID
		switch p.life.residency {
		case resFrozen:
			counts.Frozen++
		case resParked:
			counts.Parked++
		default:
			counts.Running++
		}
		p.mu.Unlock()
		if cur, ok := residency[id]; !ok || residencyRank[r] > residencyRank[cur] {
			residency[id] = r
		}
	}
	return counts, residency
}
