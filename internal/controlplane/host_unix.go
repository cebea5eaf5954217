//go:build unix

package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// statfsFree is the free space of dir's disk for an unprivileged user.
func statfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// lockDir takes an exclusive lock on DataDir/lock: one control plane per
// data directory, since the embedded store has a single writer.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("controlplane: %s is in use by another helmr (lock: %v)", dir, err)
	}
	return f, nil
}
