package secretbox

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestSealOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	k, err := EnsureKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	again, err := EnsureKeyFile(path)
	if err != nil || !bytes.Equal(again, k) {
		t.Fatalf("EnsureKeyFile again: %v, same key %v", err, bytes.Equal(again, k))
	}
	b, err := New(k)
	if err != nil {
		t.Fatal(err)
	}
	sealed := b.Seal([]byte("xoxb-secret"), []byte("app-1"))
	if bytes.Contains(sealed, []byte("xoxb-secret")) {
		t.Fatal("sealed data holds the plain text")
	}
	plain, err := b.Open(sealed, []byte("app-1"))
	if err != nil || string(plain) != "xoxb-secret" {
		t.Fatalf("Open = %q, %v", plain, err)
	}
	if _, err := b.Open(sealed, []byte("app-2")); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open with other additional data: %v, want ErrOpen", err)
	}
	other, _ := New(bytes.Repeat([]byte{7}, KeySize))
	if _, err := other.Open(sealed, []byte("app-1")); !errors.Is(err, ErrOpen) {
		t.Fatalf("Open with another key: %v, want ErrOpen", err)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadKeyFile(path); err == nil {
		t.Fatal("LoadKeyFile accepted a key file others may read")
	}
}

func FuzzOpen(f *testing.F) {
	b, _ := New(bytes.Repeat([]byte{1}, KeySize))
	f.Add(b.Seal([]byte("x"), nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		b.Open(data, nil) // must not panic
	})
}
