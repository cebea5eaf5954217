//go:build linux

package local_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
)

// testNetnsEnv marks the test binary re-run inside a network namespace of
// the test's own, with no interface that leaves the machine.
const testNetnsEnv = "HELMR_TEST_NETNS"

// Inside the test's namespace: veth0 (198.18.0.1/24, the default route's
// interface, whose peer is in the same namespace: nothing leaves) and a
// second address on loopback, 198.18.1.1, where the "host" serves; the
// same in IPv6 (fd01::1/64 on veth0, fd02::1 on loopback); and a local
// route, 198.18.2.0/24 on loopback: the whole prefix is the host's,
// though no interface has an address in it (a service on 0.0.0.0
// answers there).
const netnsSetup = `set -e
ip link set lo up
ip link add veth0 type veth peer name veth1
ip addr add 198.18.0.1/24 dev veth0
ip link set veth0 up; ip link set veth1 up
ip route add default via 198.18.0.254 dev veth0
ip addr add 198.18.1.1/32 dev lo
ip -6 addr add fd01::1/64 dev veth0 nodad
ip -6 route add default via fd01::fe dev veth0
ip -6 addr add fd02::1/128 dev lo
ip route add local 198.18.2.0/24 dev lo
exec "$0" "$@"`

// TestNetwork checks a networked Computer in a network namespace of the
// test's own: the host's 127.0.0.1 and its own addresses are unreachable
// by default, an allowed host address is reachable, and an allowlist
// shuts out what it does not name.
func TestNetwork(t *testing.T) {
	if os.Getenv(testNetnsEnv) == "" {
		for _, tool := range []struct{ name, pkg string }{{"unshare", "util-linux"}, {"ip", "iproute2"}, {"pasta", "passt"}, {"nft", "nftables"}} {
			if _, err := exec.LookPath(tool.name); err != nil {
				t.Skipf("%s (Debian's %s) is not installed: the network test needs it", tool.name, tool.pkg)
			}
		}
		if os.Geteuid() != 0 {
			t.Skip("the network test makes a network namespace of its own (unshare --net, veth links): that needs root")
		}
		cmd := exec.Command("unshare", "--net", "--", "/bin/sh", "-c", netnsSetup, os.Args[0], "-test.run", "^TestNetwork$", "-test.v")
		cmd.Env = append(os.Environ(), testNetnsEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a network namespace of the test's own:\n%s", out)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if !strings.Contains(string(out), "--- PASS: TestNetwork") {
			t.Fatal("the test did not run in its namespace")
		}
		return
	}
	p, _, _ := escapeProvider(t)
	serve := func(addr string) int {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Write([]byte("hello from the host\n"))
				c.Close()
			}
		}()
		return ln.Addr().(*net.TCPAddr).Port
	}
	loop, host, other := serve("127.0.0.1:0"), serve("198.18.1.1:0"), serve("198.18.1.1:0")
	anyAddr, host6 := serve("0.0.0.0:0"), serve("[fd02::1]:0")
	reach := func(s computer.Spec, addr string, port int) (bool, string) {
		code, out := try(t, p, s, fmt.Sprintf("connect to %s:%d (network %v, allow %v)", addr, port, s.Network, s.NetworkAllow),
			fmt.Sprintf(`timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%d && head -1 <&3'`, addr, port))
		return code == 0 && strings.Contains(out, "hello from the host"), out
	}

	open := newComputer(t, p, "net-open", func(s *computer.Spec) { s.Network = true })
	if ok, out := reach(open, "127.0.0.1", loop); ok {
		t.Fatalf("a networked Computer reached the host's 127.0.0.1: %s", out)
	}
	if ok, out := reach(open, "198.18.1.1", host); ok {
		t.Fatalf("a networked Computer reached a host address it was not allowed: %s", out)
	}
	if ok, out := reach(open, "198.18.2.7", anyAddr); ok {
		t.Fatalf("a networked Computer reached the host through a local route: %s", out)
	}
	if ok, out := reach(open, "fd02::1", host6); ok {
		t.Fatalf("a networked Computer reached a host IPv6 address: %s", out)
	}
	if ok, out := reach(open, "::ffff:198.18.1.1", host); ok {
		t.Fatalf("a networked Computer reached a host address as IPv4-mapped IPv6: %s", out)
	}
	if _, out := try(t, p, open, "look at the interfaces", "ip -br addr; ip route"); !strings.Contains(out, "default") {
		t.Fatalf("a networked Computer has no route out: %s", out)
	}

	allow, err := helmrtype.ParseNetworkAllow([]string{fmt.Sprintf("198.18.1.1:%d", host)})
	if err != nil {
		t.Fatal(err)
	}
	allowed := newComputer(t, p, "net-allowed", func(s *computer.Spec) { s.Network, s.NetworkAllow = true, allow })
	if ok, out := reach(allowed, "198.18.1.1", host); !ok {
		t.Fatalf("an allowed destination was not reached: %s", out)
	}
	if ok, out := reach(allowed, "198.18.1.1", other); ok {
		t.Fatalf("a port the allowlist does not name was reached: %s", out)
	}
	if ok, out := reach(allowed, "127.0.0.1", loop); ok {
		t.Fatalf("an allowlisted Computer reached the host's 127.0.0.1: %s", out)
	}
	// Its own loopback still works (the runtime MCP server is there): the
	// test binary listens on 127.0.0.1 inside and connects to itself.
	self, _ := os.Executable()
	var out bytes.Buffer
	pr, err := p.Start(context.Background(), allowed, computer.ProcessSpec{Argv: []string{"/.helmr-test/escape"},
		Env: []string{escapeHelperEnv + "=loopback"}, Binds: []computer.Bind{{Src: self, Dst: "/.helmr-test/escape"}}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := pr.Wait(); code != 0 || !strings.Contains(out.String(), "own loopback ok") {
		t.Fatalf("own loopback: exit %d %q", code, out.String())
	}
}
