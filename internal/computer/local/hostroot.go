//go:build linux

package local

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A host image shows a fixed read-only allowlist of the host's files:
// the system directories programs run from, and from /etc only what
// programs need to load libraries, resolve names, check certificates and
// find their alternatives. The rest of the host (the rest of /etc, /root,
// /home, /var, /srv, /opt, /mnt, /run, …) is not there at all.
//
// The /etc of a host image is one directory the provider makes when it
// starts: a copy of the allowlisted entries (symlinks kept as links) with
// the sandbox user's passwd and group. One bind costs a sandbox's start
// far less than one per entry (each mount is a quarter of a millisecond).
// resolv.conf and hosts, which the host may change at any time, are bound
// live on top. The copy is made anew at every start of the control plane.

// hostDirs are the host's system directories a host image shows.
var hostDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hostEtc are the entries of the host's /etc a host image shows, copied.
var hostEtc = []string{
	"nsswitch.conf", "host.conf", "gai.conf",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "alternatives",
	"ssl/certs", "ssl/openssl.cnf",
	"services", "protocols",
}

// hostEtcLive are the entries of the host's /etc bound live.
var hostEtcLive = []string{"resolv.conf", "hosts"}

// maxHostEtc bounds the size of the copy (a host with something unusual
// in an allowlisted place does not fill the data directory).
const maxHostEtc = 64 << 20

// Accounts of the sandbox user: a sandbox runs as root of its own user
// namespace, and a host image shows these instead of the host's accounts.
const (
	sandboxPasswd = "root:x:0:0:root:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	sandboxGroup  = "root:x:0:\nnogroup:x:65534:\n"
)

// writeHostEtc makes the /etc of host images under dir from the host's
// /etc (etc) and returns its path. A copy made from the same entries (as
// their sizes, modes and modification times say, directories' included)
// is kept: a restart costs a few stats, not a copy.
func writeHostEtc(dir, etc string) (string, error) {
	d := filepath.Join(dir, ".etc")
	sig := etcSignature(etc)
	if b, err := os.ReadFile(filepath.Join(d, signatureFile)); err == nil && string(b) == sig {
		return d, nil
	}
	tmp, err := os.MkdirTemp(dir, ".etc-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	budget := int64(maxHostEtc)
	for _, e := range hostEtc {
		if err := copyTree(filepath.Join(etc, e), filepath.Join(tmp, e), &budget); err != nil && !os.IsNotExist(err) {
			return "", fmt.Errorf("local: copy /etc/%s for host images: %w", e, err)
		}
	}
	files := map[string]string{"passwd": sandboxPasswd, "group": sandboxGroup, signatureFile: sig}
	// Mount points of the live binds.
	for _, e := range hostEtcLive {
		files[e] = ""
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(tmp, name), []byte(body), 0o644); err != nil {
			return "", fmt.Errorf("local: %w", err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	os.RemoveAll(d)
	if err := os.Rename(tmp, d); err != nil {
		return "", fmt.Errorf("local: %w", err)
	}
	return d, nil
}

// signatureFile holds the etcSignature a copy was made from.
const signatureFile = ".helmr-signature"

// etcSignature describes the allowlisted entries of etc: the size, mode
// and modification time of each, and of each directory's entries (a
// directory's own time changes when an entry is added or removed, not
// when one is rewritten).
func etcSignature(etc string) string {
	var b strings.Builder
	b.WriteString(sandboxPasswd + sandboxGroup)
	for _, e := range hostEtc {
		filepath.WalkDir(filepath.Join(etc, e), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				fmt.Fprintf(&b, "%s !\n", path)
				return nil
			}
			if fi, err := d.Info(); err == nil {
				fmt.Fprintf(&b, "%s %d %v %d\n", path, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
			}
			return nil
		})
	}
	return b.String()
}

// copyTree copies src to dst: directories and regular files with their
// modes, symlinks as links; nothing else. budget is the bytes left.
func copyTree(src, dst string, budget *int64) error {
	return filepath.WalkDir(src, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			t, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(t, to)
		case e.IsDir():
			return os.MkdirAll(to, 0o755)
		case e.Type().IsRegular():
			if *budget -= fi.Size(); *budget < 0 {
				return fmt.Errorf("more than %d bytes", maxHostEtc)
			}
			return copyFile(path, to, fi.Mode().Perm())
		}
		return nil
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// hostRoot returns the bubblewrap arguments that show the allowlist
// read-only (symlinks such as /bin -> usr/bin kept as links), with etcDir
// (writeHostEtc) as /etc, or no /etc when etcDir is "".
func hostRoot(etcDir string) []string {
	var args []string
	for _, d := range hostDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", t, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	if etcDir == "" {
		return args
	}
	args = append(args, "--ro-bind", etcDir, "/etc")
	for _, e := range hostEtcLive {
		// The host's file (a symlink such as resolv.conf -> /run/… is
		// followed) over its empty mount point.
		args = append(args, "--ro-bind-try", "/etc/"+e, "/etc/"+e)
	}
	return args
}
