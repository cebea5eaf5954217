package engine

import (
	"sync"

	"github.com/helmr-go/helmr/helmrtype"
)

// turnMemorySize is how many Turns the engine remembers for waiters.
const turnMemorySize = 4096

// turnMemory remembers the Turns this engine admitted or saw settle
// recently: that an admitted one exists and has not settled here, and
// the state of a settled one. A wait on a remembered Turn needs no read
// of the store: a settled one answers at once, an unsettled one waits for
// its settlement's wake. It is filled after the transaction that made the
// change commits, before its waiters are woken. A Turn settled by another
// node is forgotten when its notice arrives (and everything when notices
// may have been missed), so memory never answers for the store; a
// forgotten Turn is read as before. Such a notice can arrive between the
// commit of the Turn's admission and its report here: an admission is
// therefore remembered only if nothing was forgotten since its
// transaction began (gen). At most turnMemorySize Turns, the oldest
// forgotten first.
type turnMemory struct {
	mu   sync.Mutex
	m    map[string]*helmrtype.TurnState // nil: admitted, not settled
	ring []string
	next int
	// gen counts the forgets and resets.
	gen uint64
}

func newTurnMemory() *turnMemory {
	return &turnMemory{m: make(map[string]*helmrtype.TurnState, turnMemorySize), ring: make([]string, turnMemorySize)}
}

// generation is the count of forgets and resets, read before a
// transaction begins and passed to admitted after it committed.
func (tm *turnMemory) generation() uint64 {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.gen
}

// admitted remembers that the Turn of key exists, unsettled, unless a Turn
// was forgotten since generation gen: the Turn may have settled elsewhere
// and its notice been handled already, and it is read from the store then.
func (tm *turnMemory) admitted(key string, gen uint64) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if _, ok := tm.m[key]; !ok && tm.gen == gen {
		tm.add(key, nil)
	}
}

// settled remembers the settled state of the Turn of key.
func (tm *turnMemory) settled(key string, t *helmrtype.TurnState) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	if _, ok := tm.m[key]; ok {
		tm.m[key] = t
		return
	}
	tm.add(key, t)
}

// add puts key in the next slot of the ring, forgetting its old Turn.
// tm.mu is held.
func (tm *turnMemory) add(key string, t *helmrtype.TurnState) {
	if old := tm.ring[tm.next]; old != "" {
		delete(tm.m, old)
	}
	tm.ring[tm.next] = key
	tm.next = (tm.next + 1) % len(tm.ring)
	tm.m[key] = t
}

// get returns the settled state of the Turn of key (nil while it is
// unsettled) and whether it is remembered at all.
func (tm *turnMemory) get(key string) (*helmrtype.TurnState, bool) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	t, ok := tm.m[key]
	return t, ok
}

// forget drops the Turn of key.
func (tm *turnMemory) forget(key string) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	delete(tm.m, key)
	tm.gen++
}

// reset forgets every Turn.
func (tm *turnMemory) reset() {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	clear(tm.m)
	clear(tm.ring)
	tm.next = 0
	tm.gen++
}
