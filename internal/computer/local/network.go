//go:build linux

package local

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/helmr-go/helmr/helmrtype"
)

// Networking. A Computer without Network has a network namespace with
// only its own loopback. One with Network gets a network namespace of its
// own too, connected to the outside by pasta (a user-mode network stack:
// the Computer's connections become the host's sockets), with a firewall
// in the namespace set before the interface exists:
//   - pasta maps nothing to the host's loopback (--no-map-gw, no port
//     forwarding either way), so 127.0.0.0/8 and ::1 are the Computer's
//     own;
//   - the firewall rejects link-local destinations and every address of
//     the host's interfaces (which includes the control plane's), so a
//     service bound to 0.0.0.0 on the host is out of reach too;
//   - a Template's NetworkAllow turns this into an allowlist: only those
//     destinations, which may be host addresses.

// netStack sets up the network of a Computer that asks for one.
type netStack struct {
	pasta, nft, nsenter string
	// why is set when the host lacks a tool, and Network is refused.
	why string
}

func newNetStack() *netStack {
	n := &netStack{}
	for _, t := range []struct {
		name string
		dst  *string
	}{{"pasta", &n.pasta}, {"nft", &n.nft}, {"nsenter", &n.nsenter}} {
		p, err := exec.LookPath(t.name)
		if err != nil {
			n.why += t.name + " not found; "
			continue
		}
		*t.dst = p
	}
	n.why = strings.TrimSuffix(n.why, "; ")
	return n
}

// attach gives the network namespace of process pid (the sandbox's init)
// its firewall, then its interface. A firewall already there is replaced
// (a restored namespace's names the host's addresses at its dump).
//
// It returns the PID of the pasta process that serves the namespace: the
// caller stops it when the sandbox ends (pasta does not notice a namespace
// named by /proc/PID/ns going away, and would stay forever).
func (n *netStack) attach(ctx context.Context, pid int, allow []helmrtype.NetworkDest) (int, error) {
	if n.why != "" {
		return 0, fmt.Errorf("local: a Computer with network needs pasta (Debian package passt) and nft (nftables): %s", n.why)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rules := "flush ruleset\n" + firewall(hostPrefixes(), allow)
	ns := "/proc/" + strconv.Itoa(pid) + "/ns/"
	fw := exec.CommandContext(ctx, n.nsenter, "--net="+ns+"net", "--", n.nft, "-f", "-")
	fw.Env, fw.Stdin = []string{}, strings.NewReader(rules)
	if out, err := fw.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("local: network firewall: %v: %s", err, tail(out, 1024))
	}
	// bubblewrap gives the namespace its loopback (adds 127.0.0.1, then
	// brings lo up) while this runs; pasta brings lo up too, and lo coming
	// up adds 127.0.0.1 by itself, which makes bubblewrap's add fail and
	// the sandbox end ("loopback: Failed RTM_NEWADDR"). pasta waits.
	if err := waitLoopback(ctx, pid); err != nil {
		return 0, err
	}
	pidFile, err := os.CreateTemp("", "helmr-pasta-*.pid")
	if err != nil {
		return 0, err
	}
	pidFile.Close()
	defer os.Remove(pidFile.Name())
	args := []string{"--config-net", "--quiet", "--no-map-gw", "--pid", pidFile.Name(),
		"--tcp-ports", "none", "--udp-ports", "none", "--tcp-ns", "none", "--udp-ns", "none",
		"--netns", ns + "net", "--userns", ns + "user"}
	if os.Geteuid() == 0 {
		// pasta drops root for nobody by default, who cannot enter the
		// sandbox's namespaces; it isolates itself once set up.
		args = append([]string{"--runas", "0:0"}, args...)
	}
	cmd := exec.CommandContext(ctx, n.pasta, args...)
	cmd.Env = []string{}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pasta returns once the interface is up and then serves in the
	// background, until the sandbox's end kills it (sandbox.stopNetwork).
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("local: network (pasta): %v: %s", err, tail(out.Bytes(), 1024))
	}
	b, err := os.ReadFile(pidFile.Name())
	pastaPID, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil || pastaPID <= 0 {
		return 0, fmt.Errorf("local: network (pasta) wrote no PID: %v %v", err, perr)
	}
	return pastaPID, nil
}

// waitLoopback waits until the network namespace of process pid has its
// loopback up with 127.0.0.1 (its local route is in the namespace's
// routing tables, /proc/PID/net/fib_trie), or ctx is done.
func waitLoopback(ctx context.Context, pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/net/fib_trie"
	wait := 100 * time.Microsecond
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("local: the sandbox ended before its network was set up: %w", err)
		}
		if bytes.Contains(b, []byte("127.0.0.1")) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("local: the sandbox's loopback did not come up: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Millisecond)
	}
}

// hostPrefixes returns what this host answers as its own: the addresses
// of its interfaces and every local, broadcast and anycast route of its
// routing tables (a "local" route such as `ip route add local
// 198.18.2.0/24 dev lo` makes a whole prefix the host's without any
// interface address in it). They are read once per process started.
func hostPrefixes() []netip.Prefix {
	var out []netip.Prefix
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
				ip = ip.Unmap()
				out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return append(out, localRoutes()...)
}

// localRoutes returns the destinations of the host's local, broadcast and
// anycast routes, from a netlink dump of every routing table.
func localRoutes() []netip.Prefix {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETROUTE, syscall.AF_UNSPEC)
	if err != nil {
		return nil
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Type != syscall.RTM_NEWROUTE || len(m.Data) < syscall.SizeofRtMsg {
			continue
		}
		rt := (*syscall.RtMsg)(unsafe.Pointer(&m.Data[0]))
		switch rt.Type {
		case syscall.RTN_LOCAL, syscall.RTN_BROADCAST, syscall.RTN_ANYCAST:
		default:
			continue
		}
		attrs, err := syscall.ParseNetlinkRouteAttr(m)
		if err != nil {
			continue
		}
		for _, a := range attrs {
			if a.Attr.Type != syscall.RTA_DST {
				continue
			}
			if ip, ok := netip.AddrFromSlice(a.Value); ok {
				if p, err := ip.Unmap().Prefix(int(rt.Dst_len)); err == nil {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// Destinations a networked Computer never reaches unless allowed.
var (
	blocked4 = []string{"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "255.255.255.255/32"}
	blocked6 = []string{"::/128", "::1/128", "fe80::/10", "ff00::/8", "::ffff:0:0/96"}
)

// disjoint returns the prefixes of in that no other one contains (nft
// refuses overlapping elements of a set), shortest first.
func disjoint(in []netip.Prefix) []netip.Prefix {
	ps := append([]netip.Prefix(nil), in...)
	for i := range ps {
		ps[i] = ps[i].Masked()
	}
	slices.SortStableFunc(ps, func(a, b netip.Prefix) int { return a.Bits() - b.Bits() })
	var out []netip.Prefix
	for _, p := range ps {
		if !slices.ContainsFunc(out, p.Overlaps) {
			out = append(out, p)
		}
	}
	return out
}

// firewall returns the nftables ruleset of a networked Computer's
// namespace: its own loopback always; then the allowlist, if any, and
// nothing else; without one, everything but the blocked destinations and
// the host's own prefixes.
func firewall(host []netip.Prefix, allow []helmrtype.NetworkDest) string {
	var b strings.Builder
	b.WriteString("table inet helmr {\n\tchain output {\n\t\ttype filter hook output priority filter; policy accept;\n")
	b.WriteString("\t\toifname \"lo\" accept\n")
	for _, d := range allow {
		fam := "ip"
		if d.Prefix.Addr().Is6() {
			fam = "ip6"
		}
		rule := fmt.Sprintf("\t\t%s daddr %s", fam, d.Prefix)
		if d.Port != 0 {
			rule += fmt.Sprintf(" meta l4proto { tcp, udp } th dport %d", d.Port)
		}
		b.WriteString(rule + " accept\n")
	}
	if len(allow) > 0 {
		b.WriteString("\t\treject\n\t}\n}\n")
		return b.String()
	}
	all := append([]netip.Prefix(nil), host...)
	for _, s := range append(append([]string(nil), blocked4...), blocked6...) {
		all = append(all, netip.MustParsePrefix(s))
	}
	var v4, v6 []string
	for _, p := range disjoint(all) {
		if p.Addr().Is4() {
			v4 = append(v4, p.String())
		} else {
			v6 = append(v6, p.String())
		}
	}
	fmt.Fprintf(&b, "\t\tip daddr { %s } reject\n", strings.Join(v4, ", "))
	fmt.Fprintf(&b, "\t\tip6 daddr { %s } reject\n", strings.Join(v6, ", "))
	b.WriteString("\t}\n}\n")
	return b.String()
}
