// Package image resolves a Template's image into a root filesystem on local
// disk: it pulls OCI images from registries, unpacks their layers safely,
// applies the Template's build steps and keeps every result in a
// content-addressed cache shared by all Computers.
//
// Layout of a Store's directory:
//
//	roots/<hex>/      an immutable root filesystem (mounted read-only)
//	roots/<hex>.json  its metadata (env, workdir, user, where it came from)
//	refs/<hex>        for an index digest: the root it resolved to on this platform
//	tmp/              staging directories, renamed into roots/ when complete
//
// A pulled root's key is the image manifest's digest; scratch has a fixed key;
// a copy or run step's key is a hash of its parent's key and the step's inputs.
//
// Decisions:
//   - Layer entry names that are absolute are re-rooted (a leading "/" is
//     dropped, as Docker and containerd do); names whose cleaned form escapes
//     the root ("../x", "a/../../x") are refused, and so are hardlinks whose
//     target escapes. All writes go through an [os.Root], so a symlink planted
//     by an earlier entry can never be followed out of the root: an entry
//     beneath a symlink that points outside (or is absolute) is refused, and an
//     entry that replaces a symlink removes the link first.
//   - Ownership is not kept: every file belongs to the user running Helmr (the
//     sandbox maps users). Permission bits and the sticky bit are kept;
//     setuid and setgid bits are dropped, since they would otherwise apply to
//     the Helmr user's files. Device nodes and fifos are skipped (the sandbox
//     provides /dev); extended attributes and modification times are not kept.
//   - Concurrency: a per-key lock inside a Store serialises work on one root,
//     and roots are published by renaming a complete staging directory into
//     place, so Stores in other processes sharing the directory at worst do
//     the work twice and keep one result.
package image

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/helmr-go/helmr/helmrtype"
)

// Options configure a Store.
type Options struct {
	Logger    *slog.Logger      // nil: discard
	Transport http.RoundTripper // for registry access; nil: default
	Insecure  bool              // allow plain-HTTP registries (tests, local registries)
	Runner    Runner            // executes "run" steps; nil: run steps fail with a clear error
	Keychain  authn.Keychain    // registry credentials; nil: anonymous access
}

// Runner runs one build step's command in root (a writable directory that is
// the step's root filesystem). The production Runner is the sandbox.
type Runner interface {
	RunStep(ctx context.Context, root string, argv, env []string, workdir, user string) error
}

// BuildOptions are what Resolve needs beyond the manifest.
type BuildOptions struct {
	SourceDir string // the agent package directory, for "copy" sources; "" refuses copy steps
	// Progress, when set, is called as the image is prepared: an image
	// started, a pull started and done, each build step started and done,
	// the image done (with Cached, Digest and DurationMS on done events).
	// Template is left empty for the caller to fill. It is called on the
	// goroutine that called Resolve; a failure ends the events with no done.
	Progress func(helmrtype.DeployProgress)
}

// report calls b.Progress, when set, with p.
func (b BuildOptions) report(p helmrtype.DeployProgress) {
	if b.Progress != nil {
		b.Progress(p)
	}
}

// Image is a resolved image: a root filesystem and how processes start in it.
type Image struct {
	Host    bool     // FromHost: no Root; the sandbox binds the host's /usr, /bin, /lib*, /etc read-only
	Root    string   // the root filesystem directory, to be mounted read-only; "" for Host
	Digest  string   // content address of the final root ("sha256:…"), stable across runs
	Env     []string // KEY=VALUE from the image config and env steps, in order
	Workdir string
	User    string
	Cached  bool // true when nothing had to be pulled or built
}

// Store is a content-addressed cache of image root filesystems under Dir.
type Store struct {
	dir   string
	roots string
	refs  string
	tmp   string
	log   *slog.Logger
	opts  Options
	locks keyLocks
}

// staleStaging is how old a staging directory must be before NewStore
// removes it as left over from a crashed process.
const staleStaging = 24 * time.Hour

// NewStore opens (creating when needed) the image cache in dir.
func NewStore(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("image store: directory is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		dir:   abs,
		roots: filepath.Join(abs, "roots"),
		refs:  filepath.Join(abs, "refs"),
		tmp:   filepath.Join(abs, "tmp"),
		log:   opts.Logger,
		opts:  opts,
		locks: keyLocks{m: map[string]*keyLock{}},
	}
	for _, d := range []string{s.dir, s.roots, s.refs, s.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	s.removeStaleStaging()
	return s, nil
}

// Dir returns the Store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) removeStaleStaging() {
	entries, err := os.ReadDir(s.tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleStaging {
			continue
		}
		p := filepath.Join(s.tmp, e.Name())
		if err := forceRemoveAll(p); err != nil {
			s.log.Warn("image store: cannot remove stale staging directory", "path", p, "err", err)
		}
	}
}

// rootMeta is what roots/<hex>.json holds.
type rootMeta struct {
	Source  string   `json:"source"`
	Env     []string `json:"env,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	User    string   `json:"user,omitempty"`
}

func (s *Store) rootDir(key string) string  { return filepath.Join(s.roots, key) }
func (s *Store) metaPath(key string) string { return filepath.Join(s.roots, key+".json") }

// cachedRoot reports whether the root with key is complete, with its metadata.
func (s *Store) cachedRoot(key string) (rootMeta, bool) {
	var m rootMeta
	if fi, err := os.Stat(s.rootDir(key)); err != nil || !fi.IsDir() {
		return m, false
	}
	b, err := os.ReadFile(s.metaPath(key))
	if err != nil {
		return m, false
	}
	if err := json.Unmarshal(b, &m); err != nil {
		s.log.Warn("image store: unreadable root metadata, rebuilding", "key", key, "err", err)
		return m, false
	}
	return m, true
}

// stage makes a fresh staging directory for key.
func (s *Store) stage(key string) (string, error) {
	d, err := os.MkdirTemp(s.tmp, key[:min(12, len(key))]+"-")
	if err != nil {
		return "", fmt.Errorf("staging directory: %w", err)
	}
	return d, nil
}

// discard removes a staging directory, logging when it cannot.
func (s *Store) discard(stage string) {
	if err := forceRemoveAll(stage); err != nil {
		s.log.Warn("image store: cannot remove staging directory", "path", stage, "err", err)
	}
}

// publish writes key's metadata and renames the complete staging directory
// into roots/<key>. When another process published the same key first, its
// root is kept and stage is discarded.
func (s *Store) publish(key, stage string, meta rootMeta) error {
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(s.tmp, key[:min(12, len(key))]+"-*.json")
	if err != nil {
		return fmt.Errorf("write root metadata: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write root metadata: %w", err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write root metadata: %w", err)
	}
	if err := os.Rename(f.Name(), s.metaPath(key)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write root metadata: %w", err)
	}
	if err := os.Rename(stage, s.rootDir(key)); err != nil {
		if fi, serr := os.Stat(s.rootDir(key)); serr == nil && fi.IsDir() {
			s.discard(stage) // published concurrently by another process
			return nil
		}
		return fmt.Errorf("publish root %s: %w", key, err)
	}
	return nil
}

// keyLocks serialises work on one key within a Store.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

// lock waits for key's lock (or ctx) and returns its release.
func (l *keyLocks) lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	k := l.m[key]
	if k == nil {
		k = &keyLock{ch: make(chan struct{}, 1)}
		l.m[key] = k
	}
	k.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if k.refs--; k.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case k.ch <- struct{}{}:
		return func() { <-k.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// hashParts hashes a sequence of strings unambiguously (each is length-prefixed).
func hashParts(parts ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// forceRemoveAll removes path, making directories writable first when a
// plain removal fails (an image may contain read-only directories).
func forceRemoveAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}
