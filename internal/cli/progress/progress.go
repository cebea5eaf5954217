// Package progress prints the steps of a deploy (the local build, the
// upload and the server's image preparation) for helmr deploy and helmr
// dev: on a terminal one status line rewritten in place with \r, with a
// line kept for each finished step; elsewhere one plain line per step.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Printer prints steps to one writer; it is safe for concurrent use.
type Printer struct {
	mu     sync.Mutex
	w      io.Writer
	tty    bool
	status bool      // a status line is shown (tty only)
	last   time.Time // when the status line was last written
}

// New returns a Printer on w; it rewrites a status line only when w is a
// terminal.
func New(w io.Writer) *Printer { return &Printer{w: w, tty: IsTerminal(w)} }

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}

// Status shows s as the work in progress: on a terminal it replaces the
// status line, elsewhere it prints nothing (the step's Step line follows).
func (p *Printer) Status(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K%s", s)
	p.status, p.last = true, time.Now()
}

// statusEvery bounds how often Throttled rewrites the status line.
const statusEvery = 100 * time.Millisecond

// Throttled is Status for frequent updates (bytes sent): it skips an
// update that comes within 100 ms of the previous one.
func (p *Printer) Throttled(s string) {
	p.mu.Lock()
	skip := !p.tty || time.Since(p.last) < statusEvery
	p.mu.Unlock()
	if !skip {
		p.Status(s)
	}
}

// Step prints s as a finished (or begun, for long local work) step, on a
// line of its own.
func (p *Printer) Step(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.status = false
	}
	fmt.Fprintln(p.w, s)
}

// Clear removes the status line, before other output follows.
func (p *Printer) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.status = false
	}
}

// Progress prints one event of the server's image preparation: started
// events as the status, done events as a step.
func (p *Printer) Progress(ev helmrtype.DeployProgress) {
	if line, done := Describe(ev); done {
		p.Step(line)
	} else {
		p.Status(line)
	}
}

// Describe is the line of an event and whether it ends a step.
func Describe(ev helmrtype.DeployProgress) (string, bool) {
	who := fmt.Sprintf("template %s: image %s", ev.Template, ev.Image)
	took := ""
	if ev.DurationMS > 0 {
		took = " in " + (time.Duration(ev.DurationMS) * time.Millisecond).String()
	}
	done := ev.State == helmrtype.ProgressDone
	switch ev.Kind {
	case helmrtype.ProgressImage:
		if !done {
			return fmt.Sprintf("%s: preparing (%s, %d steps)", who, ev.Ref, ev.Steps), false
		}
		if ev.Cached {
			return fmt.Sprintf("%s: ready, cached (%s)", who, short(ev.Digest)), true
		}
		return fmt.Sprintf("%s: ready (%s)%s", who, short(ev.Digest), took), true
	case helmrtype.ProgressPull:
		if !done {
			return fmt.Sprintf("%s: pulling %s", who, ev.Ref), false
		}
		if ev.Cached {
			return fmt.Sprintf("%s: pull %s: cached (%s)", who, ev.Ref, short(ev.Digest)), true
		}
		return fmt.Sprintf("%s: pulled %s (%s)%s", who, ev.Ref, short(ev.Digest), took), true
	case helmrtype.ProgressStep:
		step := fmt.Sprintf("%s: step %d/%d %s %s", who, ev.Step, ev.Steps, ev.Op, strings.Join(ev.Args, " "))
		switch {
		case !done:
			return step + " …", false
		case ev.Cached:
			return step + ": cached", true
		case ev.Op == "copy" || ev.Op == "run":
			return step + ": built" + took, true
		}
		return step + ": done", true
	}
	return fmt.Sprintf("%s: %s %s", who, ev.Kind, ev.State), done
}

// short shortens a digest for a line.
func short(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// Bytes formats n bytes for a line.
func Bytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Upload counts the bytes read through the readers it wraps, showing them
// as the status and printing a step when the first read begins and when
// all total bytes were read.
type Upload struct {
	p     *Printer
	total int64
	mu    sync.Mutex
	sent  int64
	began bool
}

// NewUpload returns an Upload of total bytes printed on p.
func NewUpload(p *Printer, total int64) *Upload { return &Upload{p: p, total: total} }

// Reader wraps r so that what is read through it is counted.
func (u *Upload) Reader(r io.Reader) io.Reader { return &countingReader{r: r, u: u} }

func (u *Upload) add(n int) {
	u.mu.Lock()
	began := !u.began
	u.began = true
	before := u.sent
	u.sent += int64(n)
	sent := u.sent
	u.mu.Unlock()
	if began {
		u.p.Step("uploading " + Bytes(u.total))
	}
	if before < u.total && sent >= u.total {
		u.p.Step("uploaded " + Bytes(sent))
		return
	}
	if u.total > 0 {
		u.p.Throttled(fmt.Sprintf("uploading: %s of %s (%d%%)", Bytes(sent), Bytes(u.total), sent*100/u.total))
	}
}

type countingReader struct {
	r io.Reader
	u *Upload
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		c.u.add(n)
	}
	return n, err
}
