//go:build linux

package local

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHostEtc: the copy holds the allowlisted entries (links as links)
// and the sandbox's accounts, nothing else; it is kept while the host's
// entries are unchanged and made anew when one changes.
func TestHostEtc(t *testing.T) {
	etc, dir := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(etc, "services"), []byte("http 80/tcp\n"), 0o644)
	os.WriteFile(filepath.Join(etc, "shadow"), []byte("root:secret\n"), 0o600)
	os.MkdirAll(filepath.Join(etc, "ssl", "certs"), 0o755)
	os.Symlink("/usr/share/ca-certificates/x.crt", filepath.Join(etc, "ssl", "certs", "x.pem"))
	d, err := writeHostEtc(dir, etc)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "services")); string(b) != "http 80/tcp\n" {
		t.Fatalf("services: %q", b)
	}
	if l, err := os.Readlink(filepath.Join(d, "ssl", "certs", "x.pem")); err != nil || l != "/usr/share/ca-certificates/x.crt" {
		t.Fatalf("a link was not kept: %q %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(d, "shadow")); err == nil {
		t.Fatal("an entry outside the allowlist was copied")
	}
	if b, _ := os.ReadFile(filepath.Join(d, "passwd")); string(b) != sandboxPasswd {
		t.Fatalf("passwd: %q", b)
	}
	before, _ := os.Stat(d)
	if d2, err := writeHostEtc(dir, etc); err != nil || d2 != d {
		t.Fatal(d2, err)
	}
	if after, _ := os.Stat(d); !os.SameFile(before, after) {
		t.Fatal("an unchanged /etc was copied again")
	}
	os.WriteFile(filepath.Join(etc, "services"), []byte("https 443/tcp\n"), 0o644)
	os.Chtimes(filepath.Join(etc, "services"), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
	if _, err := writeHostEtc(dir, etc); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(d, "services")); string(b) != "https 443/tcp\n" {
		t.Fatalf("a changed entry was not copied again: %q", b)
	}
}
