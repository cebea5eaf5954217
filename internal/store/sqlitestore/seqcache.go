package sqlitestore

// maxCachedSessions bounds the committed sequence cache; past it the cache
// starts over (it is only a shortcut for a MAX query).
const maxCachedSessions = 100_000

// seqCache remembers Sessions' last event sequences so that appending an
// event needs no MAX query. It follows the transaction structure: an
// Update's entries join its batch when the Update succeeds, and the batch's
// join the committed map when the batch commits; anything rolled back is
// dropped. Only the writer goroutine touches it.
type seqCache struct {
	committed map[string]int64
	batch     map[string]int64
	update    map[string]int64
}

func newSeqCache() *seqCache {
	return &seqCache{committed: map[string]int64{}, batch: map[string]int64{}, update: map[string]int64{}}
}

func (c *seqCache) get(session string) (int64, bool) {
	if c == nil {
		return 0, false
	}
	if n, ok := c.update[session]; ok {
		return n, true
	}
	if n, ok := c.batch[session]; ok {
		return n, true
	}
	n, ok := c.committed[session]
	return n, ok
}

func (c *seqCache) set(session string, n int64) {
	if c != nil {
		c.update[session] = n
	}
}

// endUpdate keeps (ok) or drops the current Update's entries.
func (c *seqCache) endUpdate(ok bool) {
	if ok {
		for k, v := range c.update {
			c.batch[k] = v
		}
	}
	clear(c.update)
}

// endBatch keeps (committed) or drops the batch's entries.
func (c *seqCache) endBatch(committed bool) {
	if committed {
		if len(c.committed)+len(c.batch) > maxCachedSessions {
			clear(c.committed)
		}
		for k, v := range c.batch {
			c.committed[k] = v
		}
	}
	clear(c.batch)
	clear(c.update)
}
