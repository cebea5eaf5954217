package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// statfsFree is the free space of dir's disk for this user.
func statfsFree(dir string) (uint64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, err
	}
	var free, total, all uint64
	if err := windows.GetDiskFreeSpaceEx(p, &free, &total, &all); err != nil {
		return 0, err
	}
	return free, nil
}

// lockDir takes an exclusive lock on DataDir/lock: one control plane per
// data directory, since the embedded store has a single writer.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	ol := new(windows.Overlapped)
	if err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol); err != nil {
		f.Close()
		return nil, fmt.Errorf("controlplane: %s is in use by another helmr (lock: %v)", dir, err)
	}
	return f, nil
}
