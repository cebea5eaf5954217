package server

import (
	"net/http"
	"testing"
)

// A client's IPv6 addresses are its /64 (one host's SLAAC range, one
// customer's least allocation): moving within it must not buy a fresh
// bucket, and an IPv4 client seen as v4-mapped IPv6 is the same client.
func TestFailLimiterKeysIPv6ByPrefix(t *testing.T) {
	addr := func(remote string) string { return clientAddr(&http.Request{RemoteAddr: remote}) }
	for _, c := range []struct{ a, b string }{
		{"[2001:db8:1:2::1]:1000", "[2001:db8:1:2:ffff:ffff:ffff:fffe]:2000"},
		{"[2001:db8:1:2::1%eth0]:1000", "[2001:db8:1:2::7]:1"},
		{"[::ffff:192.0.2.7]:1000", "192.0.2.7:2000"},
	} {
		if addr(c.a) != addr(c.b) {
			t.Errorf("%s and %s are two clients: %q, %q", c.a, c.b, addr(c.a), addr(c.b))
		}
	}
	if addr("[2001:db8:1:2::1]:1") == addr("[2001:db8:1:3::1]:1") || addr("192.0.2.7:1") == addr("192.0.2.8:1") {
		t.Error("two networks are one client")
	}
	l := newFailLimiter()
	for range authFailBurst {
		l.failed(addr("[2001:db8:1:2::1]:1000"))
	}
	if ok, _ := l.allowed(addr("[2001:db8:1:2::2]:1000")); ok {
		t.Fatal("another address of the same /64 was not limited")
	}
}
