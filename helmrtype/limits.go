package helmrtype

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultProcesses is a Computer's process limit when its Template sets
// none.
const DefaultProcesses = 1024

// MaxProcesses is the largest process limit a Template may ask for.
const MaxProcesses = 1 << 20

// Check reports the first invalid field of a resource request.
func (r ResourcesManifest) Check() error {
	if r.CPU < 0 {
		return fmt.Errorf("resources: cpu must not be negative")
	}
	if r.Memory != "" {
		if _, err := ParseMemory(r.Memory); err != nil {
			return fmt.Errorf("resources: %w", err)
		}
	}
	if r.Processes < 0 || r.Processes > MaxProcesses {
		return fmt.Errorf("resources: processes must be between 1 and %d (0 for the default %d)", MaxProcesses, DefaultProcesses)
	}
	if r.Disk != "" {
		if _, err := ParseMemory(r.Disk); err != nil {
			return fmt.Errorf("resources: disk: %w", err)
		}
	}
	return nil
}

// ProcessLimit is the process limit of a Computer with these resources.
func (r ResourcesManifest) ProcessLimit() int {
	if r.Processes > 0 {
		return r.Processes
	}
	return DefaultProcesses
}

// NetworkDest is one destination of a Template's network allowlist: an
// address prefix and, optionally, one port (0 for every port).
type NetworkDest struct {
	Prefix netip.Prefix
	Port   uint16
}

// ParseNetworkAllow parses a network allowlist. Each entry is an IP
// address ("192.0.2.7", "2001:db8::1"), a prefix ("192.0.2.0/24"), or
// either with a port ("192.0.2.7:443", "[2001:db8::1]:443",
// "192.0.2.0/24:443"). Host names are refused: a Computer's firewall is
// set when it starts, and a name may resolve elsewhere later.
func ParseNetworkAllow(entries []string) ([]NetworkDest, error) {
	out := make([]NetworkDest, 0, len(entries))
	for _, e := range entries {
		d, err := parseNetworkDest(strings.TrimSpace(e))
		if err != nil {
			return nil, fmt.Errorf("network_allow %q: %w", e, err)
		}
		out = append(out, d)
	}
	return out, nil
}

func parseNetworkDest(s string) (NetworkDest, error) {
	if s == "" {
		return NetworkDest{}, fmt.Errorf("empty destination")
	}
	addr, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.Index(s, "]")
		if end < 0 {
			return NetworkDest{}, fmt.Errorf("missing ]")
		}
		addr, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if rest := s[end+1:]; rest != "" && !strings.HasPrefix(rest, ":") {
			return NetworkDest{}, fmt.Errorf("want [address]:port")
		}
	case strings.Count(s, ":") == 1:
		addr, port, _ = strings.Cut(s, ":")
	}
	var d NetworkDest
	if strings.Contains(addr, "/") {
		p, err := netip.ParsePrefix(addr)
		if err != nil {
			return NetworkDest{}, fmt.Errorf("want an IP address or prefix (host names are not supported)")
		}
		d.Prefix = p.Masked()
	} else {
		a, err := netip.ParseAddr(addr)
		if err != nil || a.Zone() != "" {
			return NetworkDest{}, fmt.Errorf("want an IP address or prefix (host names are not supported)")
		}
		d.Prefix = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
	}
	if port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 {
			return NetworkDest{}, fmt.Errorf("port %q: want 1–65535", port)
		}
		d.Port = uint16(n)
	}
	return d, nil
}

// String formats the destination as ParseNetworkAllow reads it.
func (d NetworkDest) String() string {
	s := d.Prefix.String()
	if d.Prefix.IsSingleIP() {
		s = d.Prefix.Addr().String()
	}
	if d.Port == 0 {
		return s
	}
	if d.Prefix.Addr().Is6() {
		return "[" + s + "]:" + strconv.Itoa(int(d.Port))
	}
	return s + ":" + strconv.Itoa(int(d.Port))
}
