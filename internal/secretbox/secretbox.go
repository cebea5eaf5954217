// Package secretbox seals secrets at rest with AES-256-GCM under a key the
// operator supplies (a key file) or that helmr dev generates in its data
// directory.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeySize is the length of a key in bytes.
const KeySize = 32

// ErrOpen is returned when sealed data does not open with the key (another
// key, or damaged data).
var ErrOpen = errors.New("secretbox: sealed data does not open with this key")

// Box seals and opens data with one key.
type Box struct{ aead cipher.AEAD }

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secretbox: key is %d bytes; want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// Seal encrypts plain; additional data ad (for example the row's ID) must
// be given again to Open.
func (b *Box) Seal(plain, ad []byte) []byte {
	nonce := make([]byte, b.aead.NonceSize())
	rand.Read(nonce)
	return b.aead.Seal(nonce, nonce, plain, ad)
}

// Open decrypts what Seal returned with the same ad.
func (b *Box) Open(sealed, ad []byte) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrOpen
	}
	out, err := b.aead.Open(nil, sealed[:n], sealed[n:], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}

// LoadKeyFile reads a key file: 64 hexadecimal digits (whitespace around
// them ignored) or 32 raw bytes. A file others may read is refused.
func LoadKeyFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("secretbox: key file %s has mode %v; others must not read it (chmod 600)", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == KeySize {
		return b, nil
	}
	k, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(k) != KeySize {
		return nil, fmt.Errorf("secretbox: key file %s: want 64 hexadecimal digits (openssl rand -hex 32)", path)
	}
	return k, nil
}

// EnsureKeyFile loads the key at path, first writing a new random one with
// mode 0600 when the file does not exist.
func EnsureKeyFile(path string) ([]byte, error) {
	k := make([]byte, KeySize)
	rand.Read(k)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		_, err = f.WriteString(hex.EncodeToString(k) + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return nil, err
		}
	} else if !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	return LoadKeyFile(path)
}
