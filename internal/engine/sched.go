package engine

import (
	"sync"
	"time"
)

// sched runs functions at wall-clock times: wait deadlines and Token
// expiries. What it runs re-checks the store, so a firing that lost a race
// with another transition does nothing.
type sched struct {
	clock Clock
	mu    sync.Mutex
	m     map[string]*time.Timer
}

// at runs fn at t under key, replacing what key had.
func (s *sched) at(t time.Time, key string, fn func()) {
	d := t.Sub(s.clock.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*time.Timer{}
	}
	if old := s.m[key]; old != nil {
		old.Stop()
	}
	var tm *time.Timer
	tm = time.AfterFunc(max(d, 0), func() {
		s.mu.Lock()
		if s.m[key] == tm {
			delete(s.m, key)
		}
		s.mu.Unlock()
		fn()
	})
	s.m[key] = tm
}

// cancel forgets key's function.
func (s *sched) cancel(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tm := s.m[key]; tm != nil {
		tm.Stop()
		delete(s.m, key)
	}
}

// stop cancels everything.
func (s *sched) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, tm := range s.m {
		tm.Stop()
		delete(s.m, k)
	}
}
