package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A host image shows a fixed read-only allowlist of the host's files:
// the system directories programs run from, and from /etc only what
// programs need to load libraries, resolve names, check certificates and
// find their alternatives. The rest of the host (the rest of /etc, /root,
// /home, /var, /srv, /opt, /mnt, /run, …) is not there at all.

// hostDirs are the host's system directories a host image shows.
var hostDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// hostEtc are the entries of the host's /etc a host image shows.
var hostEtc = []string{
	"resolv.conf", "hosts", "nsswitch.conf", "host.conf", "gai.conf",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d",
	"localtime", "timezone", "alternatives",
	"ssl/certs", "ssl/openssl.cnf",
	"services", "protocols",
}

// Accounts of the sandbox user: a sandbox runs as root of its own user
// namespace, and a host image shows these instead of the host's accounts.
const (
	sandboxPasswd = "root:x:0:0:root:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	sandboxGroup  = "root:x:0:\nnogroup:x:65534:\n"
)

// writeAccounts writes the sandbox user's passwd and group files under dir
// (once per provider) and returns their directory.
func writeAccounts(dir string) (string, error) {
	d := filepath.Join(dir, ".etc")
	if err := os.MkdirAll(d, 0o700); err != nil {
		return "", err
	}
	for name, body := range map[string]string{"passwd": sandboxPasswd, "group": sandboxGroup} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o600); err != nil {
			return "", fmt.Errorf("local: %w", err)
		}
	}
	return d, nil
}

// hostRoot returns the bubblewrap arguments that show the allowlist
// read-only (symlinks such as /bin -> usr/bin kept as links), with the
// sandbox user's accounts from accounts ("" for none).
func hostRoot(accounts string) []string {
	var args []string
	show := func(path string) {
		fi, err := os.Lstat(path)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(path)
			if err != nil {
				return
			}
			// A link that stays within the shown tree is kept as a link;
			// one that points elsewhere (resolv.conf -> /run/…) shows the
			// file it names.
			if abs := t; filepath.IsAbs(abs) && !shown(abs) {
				args = append(args, "--ro-bind-try", path, path)
				return
			}
			args = append(args, "--symlink", t, path)
		default:
			args = append(args, "--ro-bind", path, path)
		}
	}
	for _, d := range hostDirs {
		show(d)
	}
	for _, e := range hostEtc {
		show("/etc/" + e)
	}
	if accounts != "" {
		args = append(args, "--ro-bind", filepath.Join(accounts, "passwd"), "/etc/passwd",
			"--ro-bind", filepath.Join(accounts, "group"), "/etc/group")
	}
	return args
}

// shown reports whether an absolute path lies in the allowlist.
func shown(path string) bool {
	for _, d := range hostDirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	for _, e := range hostEtc {
		if p := "/etc/" + e; path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
