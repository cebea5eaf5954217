//go:build !linux

package supervisor

import (
	"context"
	"errors"
	"net"
)

func descends(pid, ancestor int) bool { return pid == ancestor }

// ConnContext returns ctx unchanged: peer checks need Linux.
func ConnContext(ctx context.Context, c net.Conn) context.Context { return ctx }

func peerPID(ctx context.Context) int { return 0 }

func startID(pid int) (string, error) { return "", errors.New("process adoption needs Linux") }

// adoptedProcess never exists off Linux (adopt always fails); it has the
// Linux type's PID so that the shared code compiles.
type adoptedProcess struct{ Process }

// PID is 0: no process is ever adopted here.
func (p *adoptedProcess) PID() int { return 0 }

func onThisHost(id string) bool { return false }

func adopt(pid int, want string) (*adoptedProcess, error) {
	return nil, errors.New("process adoption needs Linux")
}
