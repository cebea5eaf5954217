// Package cputime reads the CPU time of this process and of others, for
// benchmarks that report CPU per operation next to wall time (a warm
// Turn's wall time is mostly waits: fsync, other processes).
package cputime

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stat is what /proc/PID/stat tells of a process's CPU time.
type Stat struct {
	PID, PPID int
	// CPU is the process's own user and system time (all its threads).
	CPU time.Duration
	// Children is that of its children it has waited for.
	Children time.Duration
}

// clockTick is the unit of CPU times in /proc (USER_HZ, 100 per second
// on Linux).
const clockTick = 10 * time.Millisecond

// Read reads process pid's /proc/PID/stat; false when the process is gone
// (or /proc is not Linux's).
func Read(pid int) (Stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, false
	}
	// The fields after the command, which is in parentheses and may
	// hold spaces.
	end := bytes.LastIndexByte(b, ')')
	if end < 0 || end+2 > len(b) {
		return Stat{}, false
	}
	f := strings.Fields(string(b[end+2:]))
	if len(f) < 15 {
		return Stat{}, false
	}
	ticks := func(i, j int) time.Duration {
		a, _ := strconv.ParseInt(f[i], 10, 64)
		b, _ := strconv.ParseInt(f[j], 10, 64)
		return time.Duration(a+b) * clockTick
	}
	ppid, _ := strconv.Atoi(f[1])
	return Stat{PID: pid, PPID: ppid, CPU: ticks(11, 12), Children: ticks(13, 14)}, true
}
