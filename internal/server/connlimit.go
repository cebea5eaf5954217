package server

import (
	"net"
	"sync"
)

// MaxConnsPerAddr bounds the API connections open at once from one client
// address (an IPv6 client's /64 counts as one, as for failed
// authentication): with the header timeout it bounds what one client can
// hold open. A connection past it is closed as soon as it is accepted.
const MaxConnsPerAddr = 1024

// LimitConnections returns ln with at most max connections open at once
// per client address.
func LimitConnections(ln net.Listener, max int) net.Listener {
	return &connLimiter{Listener: ln, max: max, open: map[string]int{}}
}

type connLimiter struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(key); err == nil {
			key = addrKey(host)
		}
		l.mu.Lock()
		if l.open[key] >= l.max {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[key]++
		l.mu.Unlock()
		return &limitedConn{Conn: c, release: func() { l.release(key) }}, nil
	}
}

func (l *connLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
