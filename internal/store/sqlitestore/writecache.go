package sqlitestore

import (
	"cmp"
	"slices"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

// Bounds of the write cache's maps. Past one, the map starts over at the
// end of a batch: an entry is only a shortcut for a read.
const (
	maxCachedSequences = 100_000 // last event and Turn sequences, hold-free Sessions
	maxCachedSessions  = 10_000  // Session rows
	maxCachedTurns     = 10_000  // queued and running Turn rows, and Sessions' active sets
	maxActiveKnown     = 64      // a Session's active set is kept up to this many Turns
)

// writeCache remembers rows the writer read or wrote, so that a Turn's
// transitions need not read back what the writer already knows: Sessions'
// last event and Turn sequences, Session rows, queued and running Turn rows,
// each Session's set of queued and running Turns, and the Sessions known to
// have no active hold.
//
// The writer is the only connection that writes the database, and every
// statement of this package that writes those tables keeps the cache in
// step (or forgets the entry), so an entry always equals what a read in the
// same transaction would return. It follows the transaction structure: each
// change records how to undo it; a failed Update undoes its own changes, a
// batch that does not commit undoes all of its. Only the leading Update
// touches it (one at a time, see Store.Update); a nil *writeCache (a read
// transaction) caches nothing.
type writeCache struct {
	eventSeq cacheMap[int64]
	turnSeq  cacheMap[int64]
	sessions cacheMap[store.Session]
	turns    cacheMap[store.Turn]   // queued and running Turns by ID
	active   cacheMap[[]activeTurn] // a Session's complete set of queued and running Turns, by sequence
	holdFree cacheMap[struct{}]     // Sessions with no active hold of their own
	undo     []func()               // in the order the changes were made
	mark     int                    // len(undo) when the current Update began
}

// activeTurn is one queued or running Turn of a Session's active set.
type activeTurn struct {
	id     string
	seq    int64
	status string
}

// cacheMap is one map of the write cache whose changes can be undone.
type cacheMap[V any] struct {
	c *writeCache
	m map[string]V
}

func newWriteCache() *writeCache {
	c := &writeCache{}
	c.eventSeq = cacheMap[int64]{c: c, m: map[string]int64{}}
	c.turnSeq = cacheMap[int64]{c: c, m: map[string]int64{}}
	c.sessions = cacheMap[store.Session]{c: c, m: map[string]store.Session{}}
	c.turns = cacheMap[store.Turn]{c: c, m: map[string]store.Turn{}}
	c.active = cacheMap[[]activeTurn]{c: c, m: map[string][]activeTurn{}}
	c.holdFree = cacheMap[struct{}]{c: c, m: map[string]struct{}{}}
	return c
}

func (m *cacheMap[V]) get(k string) (V, bool) {
	v, ok := m.m[k]
	return v, ok
}

// copyOf returns a copy of the entry of k: callers may change it freely.
func (m *cacheMap[V]) copyOf(k string) (*V, bool) {
	v, ok := m.m[k]
	if !ok {
		return nil, false
	}
	return &v, true
}

func (m *cacheMap[V]) set(k string, v V) {
	prev, had := m.m[k]
	m.c.undo = append(m.c.undo, func() {
		if had {
			m.m[k] = prev
		} else {
			delete(m.m, k)
		}
	})
	m.m[k] = v
}

func (m *cacheMap[V]) del(k string) {
	if prev, had := m.m[k]; had {
		m.c.undo = append(m.c.undo, func() { m.m[k] = prev })
		delete(m.m, k)
	}
}

// reset forgets every entry.
func (m *cacheMap[V]) reset() {
	if len(m.m) == 0 {
		return
	}
	prev := m.m
	m.c.undo = append(m.c.undo, func() { m.m = prev })
	m.m = map[string]V{}
}

// beginUpdate marks where the current Update's changes start.
func (c *writeCache) beginUpdate() {
	if c != nil {
		c.mark = len(c.undo)
	}
}

// endUpdate keeps (ok) or undoes the current Update's changes.
func (c *writeCache) endUpdate(ok bool) {
	if c == nil || ok {
		return
	}
	c.rollback(c.mark)
}

// endBatch keeps (committed) or undoes the batch's changes.
func (c *writeCache) endBatch(committed bool) {
	if c == nil {
		return
	}
	if !committed {
		c.rollback(0)
		return
	}
	clear(c.undo)
	c.undo, c.mark = c.undo[:0], 0
	if max(len(c.eventSeq.m), len(c.turnSeq.m), len(c.holdFree.m)) > maxCachedSequences ||
		len(c.sessions.m) > maxCachedSessions || max(len(c.turns.m), len(c.active.m)) > maxCachedTurns {
		c.clearAll()
	}
}

func (c *writeCache) rollback(to int) {
	for i := len(c.undo) - 1; i >= to; i-- {
		c.undo[i]()
		c.undo[i] = nil
	}
	c.undo, c.mark = c.undo[:to], to
}

// clearAll forgets everything; only between batches (nothing to undo).
func (c *writeCache) clearAll() {
	clear(c.eventSeq.m)
	clear(c.turnSeq.m)
	clear(c.sessions.m)
	clear(c.turns.m)
	clear(c.active.m)
	clear(c.holdFree.m)
}

// The cache of Turns: rows of queued and running Turns by ID, and each
// Session's complete active set where it is known.

// turn returns a copy of the cached row of Turn id.
func (c *writeCache) turn(id string) (*store.Turn, bool) {
	if c == nil {
		return nil, false
	}
	return c.turns.copyOf(id)
}

// readTurn remembers a Turn row read from the database.
func (c *writeCache) readTurn(t *store.Turn) {
	if c == nil {
		return
	}
	if activeStatus(t.Status) {
		c.turns.set(t.ID, *t)
	} else {
		c.turns.del(t.ID)
	}
}

// insertedTurn follows a Turn inserted into a Session.
func (c *writeCache) insertedTurn(t *store.Turn) {
	if c == nil {
		return
	}
	if n, ok := c.turnSeq.get(t.SessionID); ok && t.Sequence > n {
		c.turnSeq.set(t.SessionID, t.Sequence)
	}
	stored := storedTurn(*t)
	c.readTurn(&stored)
	set, ok := c.active.get(t.SessionID)
	if !ok || !activeStatus(t.Status) {
		return
	}
	if len(set) >= maxActiveKnown {
		c.active.del(t.SessionID)
		return
	}
	i, _ := slices.BinarySearchFunc(set, t.Sequence, func(a activeTurn, seq int64) int { return cmp.Compare(a.seq, seq) })
	c.active.set(t.SessionID, slices.Insert(slices.Clone(set), i, activeTurn{id: t.ID, seq: t.Sequence, status: t.Status}))
}

// storedTime is t as the database gives it back: UTC, in microseconds.
func storedTime(t time.Time) time.Time { return fromMicros(micros(t)) }

func storedTimeP(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := storedTime(*t)
	return &v
}

// storedTurn is t as a read gives it back.
func storedTurn(t store.Turn) store.Turn {
	t.CreatedAt = storedTime(t.CreatedAt)
	t.StartedAt, t.TerminalAt, t.PayloadExpiredAt = storedTimeP(t.StartedAt), storedTimeP(t.TerminalAt), storedTimeP(t.PayloadExpiredAt)
	return t
}

// storedSession is s as a read gives it back.
func storedSession(s store.Session) store.Session {
	s.CreatedAt = storedTime(s.CreatedAt)
	s.IdleSince, s.IdleCloseAt = storedTimeP(s.IdleSince), storedTimeP(s.IdleCloseAt)
	return s
}

// updatedTurn follows UpdateTurn, which writes the Turn's changing fields
// and keeps the rest as stored.
func (c *writeCache) updatedTurn(t *store.Turn) {
	if c == nil {
		return
	}
	if cur, ok := c.turns.get(t.ID); ok {
		if cur.SessionID != t.SessionID || cur.Sequence != t.Sequence {
			c.turns.del(t.ID)
		} else {
			cur.Status, cur.StartedAt, cur.TerminalAt = t.Status, t.StartedAt, t.TerminalAt
			cur.Result, cur.Response, cur.ResponseStaged = t.Result, t.Response, t.ResponseStaged
			cur.ErrorCode, cur.ErrorMessage, cur.OutputBytes, cur.LastOp = t.ErrorCode, t.ErrorMessage, t.OutputBytes, t.LastOp
			cur.Waited, cur.Messaged, cur.InterruptRequested = t.Waited, t.Messaged, t.InterruptRequested
			cur = storedTurn(cur)
			c.readTurn(&cur)
		}
	}
	set, ok := c.active.get(t.SessionID)
	if !ok {
		return
	}
	i := slices.IndexFunc(set, func(a activeTurn) bool { return a.seq == t.Sequence })
	switch {
	case i < 0 && activeStatus(t.Status):
		// A Turn the set does not hold became active: the set is not
		// what it seemed.
		c.active.del(t.SessionID)
	case i < 0:
		// A Turn outside the set stays outside it.
	case set[i].id != t.ID:
		c.active.del(t.SessionID)
	case activeStatus(t.Status):
		next := slices.Clone(set)
		next[i].status = t.Status
		c.active.set(t.SessionID, next)
	default:
		c.active.set(t.SessionID, slices.Delete(slices.Clone(set), i, i+1))
	}
}

// forgetTurn drops the row of Turn id (a statement changed it in place).
func (c *writeCache) forgetTurn(id string) {
	if c != nil {
		c.turns.del(id)
	}
}

// activeOf returns the Turn ActiveTurn would return from a Session's known
// active set: the running one, else the queued one of lowest sequence.
// known is false when the set is not known.
func (c *writeCache) activeOf(sessionID string) (id string, any, known bool) {
	set, ok := c.active.get(sessionID)
	if !ok {
		return "", false, false
	}
	for _, a := range set {
		if a.status == helmrtype.TurnRunning {
			return a.id, true, true
		}
	}
	if len(set) > 0 {
		return set[0].id, true, true
	}
	return "", false, true
}

// knowActive remembers a Session's complete active set.
func (c *writeCache) knowActive(sessionID string, set []activeTurn) {
	if c == nil {
		return
	}
	slices.SortFunc(set, func(a, b activeTurn) int { return cmp.Compare(a.seq, b.seq) })
	c.active.set(sessionID, set)
}

// The cache of Sessions.

// session returns a copy of the cached row of Session id.
func (c *writeCache) session(id string) (*store.Session, bool) {
	if c == nil {
		return nil, false
	}
	return c.sessions.copyOf(id)
}

func (c *writeCache) readSession(s *store.Session) {
	if c != nil {
		c.sessions.set(s.ID, *s)
	}
}

// insertedSession follows a new Session. Nothing is assumed of its Turns,
// events or holds: the store does not require them to come after it.
func (c *writeCache) insertedSession(s *store.Session) {
	if c == nil {
		return
	}
	stored := storedSession(*s)
	c.readSession(&stored)
}

// updatedSession applies change to the cached row of Session id, if any.
func (c *writeCache) updatedSession(id string, change func(*store.Session)) {
	if c == nil {
		return
	}
	if s, ok := c.sessions.get(id); ok {
		change(&s)
		c.sessions.set(id, storedSession(s))
	}
}

// Sequences and holds.

// seq returns a Session's last event (events) or Turn sequence.
func (c *writeCache) seq(events bool, sessionID string) (int64, bool) {
	if c == nil {
		return 0, false
	}
	if events {
		return c.eventSeq.get(sessionID)
	}
	return c.turnSeq.get(sessionID)
}

func (c *writeCache) setSeq(events bool, sessionID string, n int64) {
	switch {
	case c == nil:
	case events:
		c.eventSeq.set(sessionID, n)
	default:
		c.turnSeq.set(sessionID, n)
	}
}

// holdsFree reports whether every one of the Sessions is known to have no
// active hold.
func (c *writeCache) holdsFree(sessionIDs []string) bool {
	if c == nil {
		return false
	}
	for _, id := range sessionIDs {
		if _, ok := c.holdFree.get(id); !ok {
			return false
		}
	}
	return true
}

// readHolds remembers which of the Sessions have no active hold, from
// their active holds as read.
func (c *writeCache) readHolds(sessionIDs []string, active []store.Hold) {
	if c == nil {
		return
	}
	for _, id := range sessionIDs {
		if !slices.ContainsFunc(active, func(h store.Hold) bool { return h.SessionID == id }) {
			c.holdFree.set(id, struct{}{})
		}
	}
}

// heldSession forgets that a Session had no hold; "" forgets it of all.
func (c *writeCache) heldSession(sessionID string) {
	switch {
	case c == nil:
	case sessionID == "":
		c.holdFree.reset()
	default:
		c.holdFree.del(sessionID)
	}
}
