package server

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// Failed authentication is limited per client address: each address has
// a bucket of authFailBurst failures that refills at one every
// authFailRefill. A failure is a credential that matched nothing (it cost
// a store read); a request with no credential costs nothing and is not
// counted. An address whose bucket is empty is answered 429 rate_limited
// before its credential is looked up, so guessing keys costs the store
// nothing, and the refused attempt empties the bucket again: an address
// that keeps trying stays refused until it waits. The address is the
// connection's peer, an IPv6 one by its /64 (clientAddr): a header a
// client sets (X-Forwarded-For) is not believed.
const (
	authFailBurst  = 50
	authFailRefill = 200 * time.Millisecond
	// authFailMax bounds the addresses tracked; full buckets are dropped
	// first.
	authFailMax = 10000
)

type failLimiter struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets map[string]*failBucket
}

type failBucket struct {
	tokens float64
	at     time.Time
}

func newFailLimiter() *failLimiter {
	return &failLimiter{now: time.Now, buckets: map[string]*failBucket{}}
}

// clientAddr is the client a request's connection came from: its IPv4
// address, or the /64 of its IPv6 address (one host picks any address of
// its /64, so a bucket per address would be no limit at all).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return addrKey(host)
}

// addrKey is the key of a client address: an IPv4 address (a v4-mapped
// one too), or an IPv6 address's /64.
func addrKey(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.WithZone("").Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// level refills b to now and returns it.
func (l *failLimiter) level(b *failBucket, now time.Time) float64 {
	b.tokens = min(authFailBurst, b.tokens+now.Sub(b.at).Seconds()/authFailRefill.Seconds())
	b.at = now
	return b.tokens
}

// allowed reports whether addr may try a credential now, and when not,
// how long until it may.
func (l *failLimiter) allowed(addr string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[addr]
	if b == nil {
		return true, 0
	}
	if t := l.level(b, l.now()); t < 1 {
		// A refused attempt counts too: an address that keeps trying
		// stays refused until it waits.
		b.tokens = 0
		return false, time.Duration(float64(authFailRefill))
	}
	return true, 0
}

// failed records a failed authentication from addr.
func (l *failLimiter) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[addr]
	if b == nil {
		if len(l.buckets) >= authFailMax {
			for a, o := range l.buckets {
				if l.level(o, now) >= authFailBurst {
					delete(l.buckets, a)
				}
			}
			if len(l.buckets) >= authFailMax {
				// Every tracked address is failing: forget one at random
				// (map order) rather than grow without bound.
				for a := range l.buckets {
					delete(l.buckets, a)
					break
				}
			}
		}
		b = &failBucket{tokens: authFailBurst, at: now}
		l.buckets[addr] = b
	}
	l.level(b, now)
	b.tokens = max(0, b.tokens-1)
}
