//go:build linux

package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Disk images. A Computer whose Template sets Resources.Disk keeps its
// /workspace and /tmp on an ext4 filesystem of its own, in a sparse file
// DATA/computers/<id>/disk.img somewhat larger than the limit (imageSize):
// past the limit its processes are stopped (disk.go), and no write, however
// fast (fallocate, many files at once), takes more of the host's disk than
// the image's size.
//
// The image is mounted on the host only while a sandbox starts, at
// DATA/computers/<id>/fs (private, in a 0700 directory): the sandbox keeps
// a mount of its own, and the filesystem and its loop device (which clears
// itself) go when the last of its processes ends. So nothing stays mounted
// on the host when the control plane stops, is killed or restarts. A
// control plane that starts a process on a Computer whose sandbox still
// runs mounts the loop device that sandbox uses, never a second one over
// the same file (two would corrupt it).
//
// Images need root (loop devices, mounts) and mkfs.ext4 (Debian's
// e2fsprogs); elsewhere, and for Computers made before images, a disk limit
// is measured only.

// Names in a Computer's directory.
const (
	imageName = "disk.img"
	fsName    = "fs"
)

type diskImages struct {
	log  *slog.Logger
	mkfs string
	// why says why this host cannot use images ("" when it can).
	why string
	// making serializes the making of Computers' files.
	making sync.Mutex
	mu     sync.Mutex
	// held counts, per Computer directory, the starts holding its host
	// mount.
	held map[string]int
	// linger keeps, per Computer directory, its filesystem open for
	// lingerTime after its last start (see attach).
	linger map[string]*lingering
}

// lingering is a filesystem kept open, and the timer that closes it.
type lingering struct {
	f     *os.File
	timer *time.Timer
}

// lingerTime is how long a Computer's filesystem stays open after its
// last start.
const lingerTime = 2 * time.Second

func newDiskImages(log *slog.Logger) *diskImages {
	im := &diskImages{log: log, held: map[string]int{}, linger: map[string]*lingering{}}
	if os.Geteuid() != 0 {
		im.why = "the control plane does not run as root (loop devices and mounts need it)"
		return im
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		im.why = "no loop devices: " + err.Error()
		return im
	}
	im.mkfs = lookPathIn("mkfs.ext4", "/usr/sbin", "/sbin")
	if im.mkfs == "" {
		im.why = "mkfs.ext4 (e2fsprogs) is not installed"
	}
	return im
}

// lookPathIn finds a program on PATH or in dirs (sbin directories are not
// always on a service's PATH); "" if none.
func lookPathIn(name string, dirs ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// usable says whether Computers made now get images.
func (im *diskImages) usable() bool { return im.why == "" }

// hasImage says whether the Computer in dir keeps its files on an image.
func hasImage(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, imageName))
	return err == nil
}

// imageSize is the size of the image for a disk limit: room past the limit
// for the writes made between two measurements (disk.go stops the
// processes), and for ext4's own metadata (journal, inode tables).
func imageSize(limit int64) int64 {
	return limit + max(limit/8, 8<<20) + limit/16 + 2<<20
}

// make creates the image of the Computer in dir for a disk limit and its
// /workspace and /tmp on it.
func (im *diskImages) make(ctx context.Context, dir string, limit int64) error {
	path := filepath.Join(dir, imageName)
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(imageSize(limit))
	f.Close()
	if err == nil {
		err = im.format(ctx, tmp)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// Mounted once now: a host that cannot (a container without loop
	// devices or the right to mount) makes plain directories from now on.
	release, err := im.mount(dir)
	if err != nil {
		os.Remove(path)
		im.why = err.Error()
		im.log.Warn("disk limits are measured, not bounded by a filesystem of their own: a Computer can write past its limit between two measurements", "reason", err)
		return errNoImage
	}
	release()
	return nil
}

// errNoImage says a Computer gets plain directories: this host cannot
// mount images.
var errNoImage = errors.New("local: this host cannot mount disk images")

// ownBytes is what a fresh filesystem mounted at fsdir uses of itself
// (its root and lost+found directories), not counted against a limit.
func ownBytes(fsdir string) int64 {
	var n int64
	for _, p := range []string{fsdir, filepath.Join(fsdir, "lost+found")} {
		var st unix.Stat_t
		if unix.Lstat(p, &st) == nil {
			n += st.Blocks * 512
		}
	}
	return n
}

// format makes an ext4 filesystem in the file path: no blocks reserved for
// root, and nothing zeroed (the file is sparse: it reads as zeros), so a
// large image costs the host almost nothing until written.
func (im *diskImages) format(ctx context.Context, path string) error {
	run := func(ext string) error {
		cmd := exec.CommandContext(ctx, im.mkfs, "-q", "-F", "-m", "0", "-L", "helmr-computer", "-E", ext, path)
		cmd.Env = []string{}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("local: make the Computer's disk image: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	// assume_storage_prezeroed needs e2fsprogs 1.47; before it the lazy
	// options skip the zeroing, and mount's noinit_itable keeps the
	// kernel from doing it later.
	if err := run("root_owner=0:0,assume_storage_prezeroed=1"); err != nil {
		return run("root_owner=0:0,lazy_itable_init=1,lazy_journal_init=1")
	}
	return nil
}

// mount makes the image of the Computer in dir visible at dir/fs, with
// /workspace and /tmp under it, until the returned function is called
// (once per call: the host mount goes with the last).
func (im *diskImages) mount(dir string) (func(), error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.held[dir] == 0 {
		if err := im.attach(dir); err != nil {
			return nil, err
		}
	}
	im.held[dir]++
	var once sync.Once
	return func() {
		once.Do(func() {
			im.mu.Lock()
			defer im.mu.Unlock()
			if im.held[dir]--; im.held[dir] <= 0 {
				delete(im.held, dir)
				detachAll(filepath.Join(dir, fsName))
			}
		})
	}, nil
}

// forget lets the host mount of the Computer in dir go unless a start
// holds it (the Computer is being deleted).
func (im *diskImages) forget(dir string) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if l := im.linger[dir]; l != nil {
		l.timer.Stop()
		l.f.Close()
		delete(im.linger, dir)
	}
	if im.held[dir] == 0 {
		detachAll(filepath.Join(dir, fsName))
	}
}

// keepOpen keeps the filesystem mounted at fsdir open for lingerTime, or
// that long again: processes started one after the other then share one
// mount of it, and none pays for its unmount (journal and superblock
// written) when it ends. Called with im.mu held.
func (im *diskImages) keepOpen(dir, fsdir string) {
	if l := im.linger[dir]; l != nil {
		l.timer.Reset(lingerTime)
		return
	}
	f, err := os.Open(fsdir)
	if err != nil {
		return
	}
	l := &lingering{f: f}
	l.timer = time.AfterFunc(lingerTime, func() {
		im.mu.Lock()
		defer im.mu.Unlock()
		if im.linger[dir] == l {
			delete(im.linger, dir)
		}
		l.f.Close()
	})
	im.linger[dir] = l
}

// detachAll lazily unmounts whatever is mounted at path (a crash may have
// left a mount there, or several).
func detachAll(path string) {
	for i := 0; i < 16 && unix.Unmount(path, unix.MNT_DETACH) == nil; i++ {
	}
}

// attach mounts the image of the Computer in dir at dir/fs.
func (im *diskImages) attach(dir string) error {
	fsdir := filepath.Join(dir, fsName)
	if err := os.MkdirAll(fsdir, 0o700); err != nil {
		return err
	}
	detachAll(fsdir)
	path := filepath.Join(dir, imageName)
	lock, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("local: the Computer's disk image: %w", err)
	}
	defer lock.Close()
	// Another control plane on the same directory waits here: between
	// finding no loop device and attaching one, the image is its alone.
	// (The lock is on a descriptor of its own: a loop device keeps the
	// descriptor it was bound with, and its lock with it.)
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	dev, err := findLoop(lock)
	if err == nil && dev == nil {
		var img *os.File
		if img, err = os.OpenFile(path, os.O_RDWR, 0); err == nil {
			dev, err = attachLoop(img)
			img.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("local: a loop device for the Computer's disk image: %w", err)
	}
	// The open device keeps the loop device from clearing itself until
	// it is mounted.
	defer dev.Close()
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	err = unix.Mount(dev.Name(), fsdir, "ext4", flags, "noinit_itable")
	if err != nil {
		return fmt.Errorf("local: mount the Computer's disk image: %w", err)
	}
	// Private: no other mount namespace gets it from here, and its lazy
	// unmount does not reach the sandbox's own mount.
	if err := unix.Mount("", fsdir, "", unix.MS_PRIVATE, ""); err != nil {
		detachAll(fsdir)
		return fmt.Errorf("local: mount the Computer's disk image: %w", err)
	}
	for _, sub := range []string{"workspace", "tmp"} {
		if err := os.MkdirAll(filepath.Join(fsdir, sub), 0o755); err != nil {
			detachAll(fsdir)
			return err
		}
	}
	im.keepOpen(dir, fsdir)
	return nil
}

// findLoop returns the open loop device whose backing file is img, nil if
// none is.
func findLoop(img *os.File) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(img.Fd()), &st); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir("/sys/block")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "loop") {
			continue
		}
		// Only bound devices have a backing file.
		if _, err := os.Stat(filepath.Join("/sys/block", name, "loop", "backing_file")); err != nil {
			continue
		}
		// Read-only: another program's loop device is only looked at.
		dev, err := openLoop(name, os.O_RDONLY)
		if err != nil {
			continue
		}
		// Checked on the open device: it cannot be cleared and bound to
		// another file while it is open.
		info, err := unix.IoctlLoopGetStatus64(int(dev.Fd()))
		if err == nil && info.Device == st.Dev && info.Inode == st.Ino {
			return dev, nil
		}
		dev.Close()
	}
	return nil, nil
}

// attachLoop binds a free loop device to img, set to clear itself once
// nothing has it open or mounted.
func attachLoop(img *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer ctl.Close()
	for try := 0; try < 32; try++ {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, err
		}
		dev, err := openLoop("loop"+strconv.Itoa(n), os.O_RDWR)
		if err != nil {
			return nil, err
		}
		info := unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}
		copy(info.File_name[:], img.Name())
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &unix.LoopConfig{Fd: uint32(img.Fd()), Info: info})
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
			// Before Linux 5.8: bind, then set the flags.
			if err = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, int(img.Fd())); err == nil {
				if err = unix.IoctlLoopSetStatus64(int(dev.Fd()), &info); err != nil {
					unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0)
				}
			}
		}
		if err == nil {
			return dev, nil
		}
		dev.Close()
		// Another program took the free device first.
		if !errors.Is(err, unix.EBUSY) {
			return nil, err
		}
	}
	return nil, errors.New("no free loop device")
}

// openLoop opens the loop device name with flag, making its node when
// /dev has none (a static /dev, as in some containers).
func openLoop(name string, flag int) (*os.File, error) {
	path := filepath.Join("/dev", name)
	f, err := os.OpenFile(path, flag|unix.O_CLOEXEC, 0)
	if !errors.Is(err, os.ErrNotExist) {
		return f, err
	}
	b, rerr := os.ReadFile(filepath.Join("/sys/block", name, "dev"))
	if rerr != nil {
		return nil, err
	}
	var major, minor uint32
	if _, rerr := fmt.Sscanf(strings.TrimSpace(string(b)), "%d:%d", &major, &minor); rerr != nil {
		return nil, err
	}
	if rerr := unix.Mknod(path, unix.S_IFBLK|0o660, int(unix.Mkdev(major, minor))); rerr != nil && !errors.Is(rerr, os.ErrExist) {
		return nil, err
	}
	return os.OpenFile(path, flag|unix.O_CLOEXEC, 0)
}

// waitMounted waits until the sandbox whose init process is pid has its
// own mount of the filesystem fsdir is on at /workspace (bubblewrap has
// then made all its mounts), the sandbox has ended (done), or ctx is done.
func waitMounted(ctx context.Context, pid int, fsdir string, done <-chan struct{}) error {
	var st unix.Stat_t
	if err := unix.Stat(fsdir, &st); err != nil {
		return err
	}
	want := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	path := fmt.Sprintf("/proc/%d/mountinfo", pid)
	wait := 100 * time.Microsecond
	deadline := time.Now().Add(10 * time.Second)
	for {
		f, err := os.Open(path)
		if err != nil {
			// The sandbox ended before it ran anything: its start
			// fails of its own.
			return nil
		}
		found := false
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// ID parent major:minor root mount-point …
			fields := strings.Fields(sc.Text())
			if len(fields) > 4 && fields[2] == want && fields[4] == "/workspace" {
				found = true
				break
			}
		}
		f.Close()
		if found {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("local: the sandbox did not mount its workspace within 10 s")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Millisecond)
	}
}
