package server

import (
	"net"
	"testing"
	"time"
)

// TestLimitConnections: past the limit a client's new connection is
// closed at once; closing one lets the next in.
func TestLimitConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitConnections(ln, 2)
	defer lim.Close()
	accepted := make(chan net.Conn, 8)
	go func() {
		for {
			c, err := lim.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	closedByServer := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		ne, ok := err.(net.Error)
		return err != nil && !(ok && ne.Timeout())
	}
	a, b := dial(), dial()
	s1, s2 := <-accepted, <-accepted
	third := dial()
	if !closedByServer(third) {
		t.Fatal("a third connection past a limit of 2 stayed open")
	}
	s1.Close()
	a.Close()
	fourth := dial()
	select {
	case s4 := <-accepted:
		s4.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a connection after one closed was not accepted")
	}
	fourth.Close()
	b.Close()
	s2.Close()
}
