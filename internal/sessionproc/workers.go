package sessionproc

import "sync"

// maxIdleWorkers bounds the goroutines a process keeps parked for the
// next Turn. A Turn needs two (its settlement and its handler); more are
// started when a cancelled handler overruns and keeps its own.
const maxIdleWorkers = 4

// workers runs a Turn's goroutines on goroutines kept from earlier Turns.
// A new goroutine starts with a small stack that a handler grows by
// copying it, again for every Turn; a kept one has grown already (until
// the garbage collector shrinks it), which saves most of that copying.
type workers struct {
	work chan func() // unbuffered: a send succeeds only to a parked worker
	stop chan struct{}

	mu      sync.Mutex
	idle    int
	stopped bool
}

func newWorkers() *workers {
	return &workers{work: make(chan func()), stop: make(chan struct{})}
}

// run runs fn on a parked worker, or on a new goroutine when none is
// parked. fn must recover its own panics and leave the goroutine as it
// found it (no runtime.LockOSThread left locked): the next fn runs on it.
func (w *workers) run(fn func()) {
	select {
	case w.work <- fn:
	default:
		go w.loop(fn)
	}
}

// loop runs fn, then parks for the next function unless enough workers
// are parked already or the workers are stopped.
func (w *workers) loop(fn func()) {
	for {
		fn()
		w.mu.Lock()
		if w.stopped || w.idle >= maxIdleWorkers {
			w.mu.Unlock()
			return
		}
		w.idle++
		w.mu.Unlock()
		var ok bool
		select {
		case fn = <-w.work:
			ok = true
		case <-w.stop:
		}
		w.mu.Lock()
		w.idle--
		w.mu.Unlock()
		if !ok {
			return
		}
	}
}

// close ends the parked workers; those running finish what they run.
// run may still be called afterwards: it then starts a new goroutine.
func (w *workers) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.stopped = true
		close(w.stop)
	}
}
