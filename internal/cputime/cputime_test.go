package cputime

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/stat is Linux's")
	}
	// Spin for a while so that there is CPU time to see.
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	st, ok := Read(os.Getpid())
	if !ok || st.PID != os.Getpid() || st.PPID != os.Getppid() {
		t.Fatalf("Read(self) = %+v, %v; want PID %d, PPID %d", st, ok, os.Getpid(), os.Getppid())
	}
	if st.CPU < 10*time.Millisecond || st.CPU > Process()+time.Second {
		t.Fatalf("CPU %v from /proc, %v from getrusage", st.CPU, Process())
	}
	if _, ok := Read(1 << 30); ok {
		t.Fatal("Read of a process that does not exist succeeded")
	}
}
