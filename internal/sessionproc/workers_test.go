package sessionproc

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// parked waits until w has n parked workers.
func parked(t *testing.T, w *workers, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		w.mu.Lock()
		idle := w.idle
		w.mu.Unlock()
		if idle == n {
			return
		}
	}
	t.Fatalf("want %d parked workers", n)
}

func TestWorkers(t *testing.T) {
	base := runtime.NumGoroutine()
	w := newWorkers()
	// More functions at once than are kept: all run.
	var started, release sync.WaitGroup
	release.Add(1)
	n := maxIdleWorkers + 3
	started.Add(n)
	var ran sync.WaitGroup
	ran.Add(n)
	for range n {
		w.run(func() { started.Done(); release.Wait(); ran.Done() })
	}
	started.Wait()
	release.Done()
	ran.Wait()
	// Only maxIdleWorkers stay, parked; the next functions run on them.
	parked(t, w, maxIdleWorkers)
	before := runtime.NumGoroutine()
	for range 100 {
		done := make(chan struct{})
		w.run(func() { close(done) })
		<-done
	}
	parked(t, w, maxIdleWorkers)
	if got := runtime.NumGoroutine(); got > before {
		t.Fatalf("%d goroutines after 100 runs on parked workers, %d before", got, before)
	}
	// close ends the parked ones; run still runs what it is given.
	w.close()
	parked(t, w, 0)
	done := make(chan struct{})
	w.run(func() { close(done) })
	<-done
	for end := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > base; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d goroutines left after close, %d at the start", runtime.NumGoroutine(), base)
		}
	}
}
