package supervisor

import "syscall"

// sysProcAttr puts the process in its own group and kills it when the
// control plane dies, so no session process outlives its supervisor.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
