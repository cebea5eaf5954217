package supervisor

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

type connKey struct{}

// ConnContext keeps the protocol connection in the request context, so that
// the endpoint can check which process is at the other end.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// descends reports whether pid is ancestor or one of its descendants (a
// sandboxed process connects from inside its sandbox leader's tree).
func descends(pid, ancestor int) bool {
	for range 16 {
		if pid == ancestor {
			return true
		}
		if pid <= 1 {
			return false
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if i < 0 || len(f) < 2 {
			return false
		}
		if pid, err = strconv.Atoi(f[1]); err != nil {
			return false
		}
	}
	return false
}

// peerPID is the PID of the process at the other end of a Unix socket, 0
// when unknown.
func peerPID(ctx context.Context) int {
	uc, ok := ctx.Value(connKey{}).(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	var pid int
	raw.Control(func(fd uintptr) {
		if cred, err := syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}
