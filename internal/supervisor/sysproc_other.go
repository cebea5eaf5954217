//go:build !linux

package supervisor

import (
	"context"
	"net"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// ConnContext returns ctx unchanged: peer checks need Linux.
func ConnContext(ctx context.Context, c net.Conn) context.Context { return ctx }

func peerPID(ctx context.Context) int { return 0 }
