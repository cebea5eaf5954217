//go:build linux

package local

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"golang.org/x/sys/unix"
)

// Disk limits. A Computer whose Template sets Resources.Disk has the size
// of its /workspace and /tmp measured while it has processes; once past
// the limit, its processes are killed and each ends with a limit_exceeded
// error, and a new process is refused until files are removed. On its own
// filesystem (diskimage.go) a measurement is one statfs, every 100 ms, and
// the image's size bounds what can be written between two. In a plain
// directory (no images on this host) the tree is walked every 2 s (less
// often when a walk takes long) and nothing bounds the writes in between
// but the limit as RLIMIT_FSIZE, which every process of the sandbox gets
// before it runs: no single file passes the limit, many files can.

// Times between two measurements.
const (
	diskInterval  = 2 * time.Second
	imageInterval = 100 * time.Millisecond
)

// diskMeter measures the bytes a Computer's files use.
type diskMeter interface {
	used() int64
	interval() time.Duration
	close()
}

// treeMeter walks plain directories.
type treeMeter []string

func (m treeMeter) used() int64             { return diskUsage(m) }
func (m treeMeter) interval() time.Duration { return diskInterval }
func (m treeMeter) close()                  {}

// fsMeter asks the filesystem of an image; its descriptor keeps that
// filesystem mounted. own is what the filesystem uses of itself.
type fsMeter struct {
	f   *os.File
	own int64
}

func (m fsMeter) used() int64 {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(m.f.Fd()), &st); err != nil {
		return 0
	}
	return max(0, int64(st.Blocks-st.Bfree)*st.Bsize-m.own)
}
func (m fsMeter) interval() time.Duration { return imageInterval }
func (m fsMeter) close()                  { m.f.Close() }

type diskWatch struct {
	log *slog.Logger
	mu  sync.Mutex
	// computers are the watched Computers by ID.
	computers map[string]*diskComputer
}

type diskComputer struct {
	limit int64
	meter diskMeter
	procs map[*process]bool
	// over is set once the Computer passed its limit: its processes end
	// with it.
	over *helmrtype.Error
	stop chan struct{}
}

func newDiskWatch(log *slog.Logger) *diskWatch {
	return &diskWatch{log: log, computers: map[string]*diskComputer{}}
}

// diskUsage returns the bytes allocated to the files under dirs.
func diskUsage(dirs []string) int64 {
	var n int64
	seen := map[uint64]bool{}
	for _, d := range dirs {
		filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			fi, err := e.Info()
			if err != nil {
				return nil
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				if st.Nlink > 1 {
					if seen[st.Ino] {
						return nil
					}
					seen[st.Ino] = true
				}
				n += st.Blocks * 512
			}
			return nil
		})
	}
	return n
}

// overLimit returns the error of a Computer whose files use more than
// limit bytes, nil otherwise.
func overLimit(m diskMeter, limit int64, stated string) *helmrtype.Error {
	if used := m.used(); used > limit {
		return helmrtype.Errorf(helmrtype.CodeLimitExceeded,
			"the Computer's files use %d bytes, past its disk limit of %s; its processes were stopped", used, stated)
	}
	return nil
}

// check refuses a new process on a Computer already past its limit.
func (w *diskWatch) check(m diskMeter, limit string) error {
	n, err := helmrtype.ParseMemory(limit)
	if err != nil {
		return err
	}
	if e := overLimit(m, n, limit); e != nil {
		return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the Computer's files are past its disk limit of %s: remove some before starting a process", limit)
	}
	return nil
}

// watch adds pr to the watch of Computer id, measured by m (which it
// closes), and returns the function that removes it, which returns the
// limit's error if that stopped pr.
func (w *diskWatch) watch(id, limit string, m diskMeter, pr *process) func() error {
	n, _ := helmrtype.ParseMemory(limit)
	w.mu.Lock()
	c := w.computers[id]
	if c == nil {
		c = &diskComputer{limit: n, meter: m, procs: map[*process]bool{}, stop: make(chan struct{})}
		w.computers[id] = c
		go w.loop(id, limit, c)
	} else {
		m.close()
	}
	c.procs[pr] = true
	w.mu.Unlock()
	return func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		over := c.over
		delete(c.procs, pr)
		if len(c.procs) == 0 && w.computers[id] == c {
			delete(w.computers, id)
			close(c.stop)
		}
		if over != nil {
			return over
		}
		return nil
	}
}

func (w *diskWatch) loop(id, limit string, c *diskComputer) {
	defer c.meter.close()
	wait := c.meter.interval()
	for {
		select {
		case <-c.stop:
			return
		case <-time.After(wait):
		}
		start := time.Now()
		over := overLimit(c.meter, c.limit, limit)
		// A walk of a large tree is not repeated back to back.
		wait = max(c.meter.interval(), 10*time.Since(start))
		if over == nil {
			continue
		}
		w.mu.Lock()
		if w.computers[id] != c {
			w.mu.Unlock()
			return
		}
		c.over = over
		for pr := range c.procs {
			pr.Signal(syscall.SIGKILL)
		}
		w.mu.Unlock()
		w.log.Warn("a Computer passed its disk limit; its processes were stopped", "computer", id, "limit", limit)
	}
}

// limitFileSize sets RLIMIT_FSIZE of process pid to limit bytes. Start
// calls it while bubblewrap still waits for its arguments and has started
// nothing, so every process of the sandbox inherits it.
func limitFileSize(pid int, limit string) error {
	n, err := helmrtype.ParseMemory(limit)
	if err != nil {
		return err
	}
	rl := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &rl, nil); err != nil {
		return fmt.Errorf("local: file size limit of %d: %w", pid, err)
	}
	return nil
}
