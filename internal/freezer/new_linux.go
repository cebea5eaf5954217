package freezer

import (
	"log/slog"
	"strings"
)

// New picks the best mechanism the host allows: the cgroup v2 freezer if a
// writable cgroup2 hierarchy is found (the caller's own cgroup2 group,
// delegated to it), else the cgroup v1 freezer if its hierarchy is mounted
// and writable, else the signal fallback. root is the name of the parent
// cgroup to create the per-session cgroups under (for example "helmr-<id>");
// log receives which mechanism was chosen and why (nil discards it).
func New(log *slog.Logger, root string) Freezer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var reasons []string

	parent, err := cgroupV2Parent()
	if err == nil {
		var f Freezer
		f, err = NewCgroupV2(parent, root)
		if err == nil {
			log.Info("freezer: using the cgroup v2 freezer",
				"kind", KindCgroupV2, "dir", f.(*cgroupFreezer).base,
				"reason", "writable cgroup2 group with cgroup.freeze")
			return f
		}
	}
	reasons = append(reasons, "cgroup v2: "+err.Error())
	log.Info("freezer: cgroup v2 freezer unavailable", "err", err)

	mount, err := cgroupV1FreezerMount()
	if err == nil {
		var f Freezer
		f, err = NewCgroupV1(mount, root)
		if err == nil {
			log.Info("freezer: using the cgroup v1 freezer",
				"kind", KindCgroupV1, "dir", f.(*cgroupFreezer).base,
				"reason", "no usable cgroup v2 freezer; writable cgroup v1 freezer hierarchy at "+mount)
			return f
		}
	}
	reasons = append(reasons, "cgroup v1: "+err.Error())
	log.Info("freezer: cgroup v1 freezer unavailable", "err", err)

	log.Warn("freezer: no cgroup freezer usable; using SIGSTOP/SIGCONT on the process group",
		"kind", KindSignal, "reason", strings.Join(reasons, "; "))
	return NewSignal()
}
