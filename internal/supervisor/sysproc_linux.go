package supervisor

import (
	"context"
	"net"
	"syscall"
)

// sysProcAttr puts the process in its own group. It does not tie the
// process to the control plane's life: a process outlives a control-plane
// restart and reattaches (docs/protocol.md, section 10).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

type connKey struct{}

// ConnContext keeps the protocol connection in the request context, so that
// the endpoint can check which process is at the other end.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
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
