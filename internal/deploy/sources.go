package deploy

// Deployment sources: the files and directories that a manifest's
// Templates' Copy steps name, relative to the agent package directory.
// helmr deploy packs them into a deterministic tar (sorted entries, fixed
// times and owners, permission bits kept) and uploads it with the binary;
// the server refuses an archive that is not a plain tar of files and
// directories inside its root, keeps it content-addressed and unpacks it
// into DIR/<hex>.src/, the image builder's source directory.
//
// Decisions:
//   - Symlinks in the package are followed while packing when they stay
//     inside the package directory (the archive holds what they point to);
//     a symlink that leads outside it is refused, and so is a symlink loop.
//     Archives never hold links, so an unpacked tree has none.
//   - Only permission bits are kept (no setuid, setgid or sticky bits);
//     sockets, devices and fifos are refused.

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Limits of a sources archive.
const (
	// MaxSources bounds a sources archive's size in bytes.
	MaxSources = 256 << 20
	// maxSourceEntries bounds the number of entries of an archive.
	maxSourceEntries = 100_000
	// maxSourceName bounds an entry's name.
	maxSourceName = 4096
)

// epoch is the modification time of every archive entry.
var epoch = time.Unix(0, 0).UTC()

func sourcesError(format string, args ...any) error {
	return helmrtype.Errorf(helmrtype.CodeSourcesInvalid, format, args...)
}

// CheckSourcePath refuses a Copy source that is empty, absolute or leaves
// the package directory.
func CheckSourcePath(src string) error {
	if src == "" || path.IsAbs(src) || !filepath.IsLocal(filepath.FromSlash(src)) {
		return sourcesError("copy source %q must be a relative path inside the agent package", src)
	}
	return nil
}

// packEntry is one archive entry before it is written.
type packEntry struct {
	name string // slash-separated, relative
	dir  bool
	mode fs.FileMode
	file string // for a file: its path inside the package (symlinks followed)
	size int64
}

// PackSources writes a deterministic tar of the sources (paths relative to
// dir, as Manifest.CopySources returns them) to w: the sources and the
// directories that lead to them, sorted by name, with fixed times and
// owners and their permission bits. A path outside dir, or that reaches
// outside it through a symlink, is refused with CodeSourcesInvalid.
func PackSources(dir string, sources []string, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("agent package directory: %w", err)
	}
	defer root.Close()
	entries := map[string]*packEntry{}
	for _, src := range sources {
		if err := CheckSourcePath(src); err != nil {
			return err
		}
		src = path.Clean(src)
		// The directories that lead to the source.
		for d := path.Dir(src); d != "."; d = path.Dir(d) {
			if entries[d] != nil {
				continue
			}
			fi, err := root.Stat(filepath.FromSlash(d))
			if err != nil {
				return sourceStatError(src, err)
			}
			entries[d] = &packEntry{name: d, dir: true, mode: fi.Mode().Perm()}
		}
		if err := addSource(root, src, nil, entries); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := entries[n]
		h := &tar.Header{Name: e.name, Mode: int64(e.mode), ModTime: epoch, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			continue
		}
		h.Typeflag, h.Size = tar.TypeReg, e.size
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if err := copyFile(tw, root, e); err != nil {
			return err
		}
	}
	return tw.Close()
}

func sourceStatError(src string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return sourcesError("copy source %q does not exist in the agent package", src)
	}
	// os.Root refuses a path that leaves it, through ".." or a symlink.
	return sourcesError("copy source %q: %v (sources must stay inside the agent package)", src, err)
}

// addSource adds name (following symlinks inside root) and, for a
// directory, everything under it. ancestors are the directories being
// walked, to notice a symlink loop.
func addSource(root *os.Root, name string, ancestors []fs.FileInfo, entries map[string]*packEntry) error {
	fi, err := root.Stat(filepath.FromSlash(name))
	if err != nil {
		return sourceStatError(name, err)
	}
	switch {
	case fi.Mode().IsRegular():
		entries[name] = &packEntry{name: name, mode: fi.Mode().Perm(), file: name, size: fi.Size()}
		return nil
	case fi.IsDir():
	default:
		return sourcesError("copy source %q is neither a file nor a directory (%s)", name, fi.Mode().Type())
	}
	for _, a := range ancestors {
		if os.SameFile(a, fi) {
			return sourcesError("copy source %q: a symlink loop", name)
		}
	}
	if len(entries) > maxSourceEntries {
		return sourcesError("the copy sources hold more than %d entries", maxSourceEntries)
	}
	entries[name] = &packEntry{name: name, dir: true, mode: fi.Mode().Perm()}
	d, err := root.Open(filepath.FromSlash(name))
	if err != nil {
		return sourceStatError(name, err)
	}
	kids, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("copy source %q: %w", name, err)
	}
	ancestors = append(ancestors, fi)
	for _, k := range kids {
		if err := addSource(root, path.Join(name, k.Name()), ancestors, entries); err != nil {
			return err
		}
	}
	return nil
}

// copyFile writes e's bytes, refusing a file that changed size meanwhile.
func copyFile(w io.Writer, root *os.Root, e *packEntry) error {
	f, err := root.Open(filepath.FromSlash(e.file))
	if err != nil {
		return sourceStatError(e.file, err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, e.size))
	if err != nil {
		return fmt.Errorf("copy source %q: %w", e.file, err)
	}
	if n != e.size {
		return fmt.Errorf("copy source %q changed while it was packed", e.file)
	}
	return nil
}

// PackSourcesFile packs the sources of m from dir into a new file in tmpDir
// and returns its path and digest; "" and no error when m has no Copy steps.
func PackSourcesFile(dir, tmpDir string, m helmrtype.Manifest) (file, digest string, err error) {
	srcs := m.CopySources()
	if len(srcs) == 0 {
		return "", "", nil
	}
	f, err := os.CreateTemp(tmpDir, "sources-*.tar")
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	err = PackSources(dir, srcs, io.MultiWriter(f, h))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", "", err
	}
	return f.Name(), "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// SourcesDir is where the sources archive with digest is unpacked in the
// deployments directory dir.
func SourcesDir(dir, digest string) string {
	return filepath.Join(dir, strings.TrimPrefix(digest, "sha256:")+".src")
}

// SourcesArchive is where the sources archive with digest is kept in the
// deployments directory dir.
func SourcesArchive(dir, digest string) string {
	return filepath.Join(dir, strings.TrimPrefix(digest, "sha256:")+".tar")
}

// StoreSources reads a sources archive from r (at most MaxSources bytes,
// else CodeLimitExceeded), checks it, keeps it in dir under its digest and
// unpacks it into SourcesDir(dir, digest). A bad archive is refused with
// CodeSourcesInvalid and leaves nothing behind. Storing the same archive
// twice keeps one copy.
func StoreSources(dir string, r io.Reader) (digest, srcDir string, err error) {
	return storeSources(dir, r, "")
}

// storeSources is StoreSources; with want set, an archive of another
// digest is refused and nothing is kept.
func storeSources(dir string, r io.Reader, want string) (digest, srcDir string, err error) {
	tmp, digest, n, err := writeTemp(dir, ".sources-*", io.LimitReader(r, MaxSources+1))
	if err != nil {
		return "", "", err
	}
	defer os.Remove(tmp)
	if n > MaxSources {
		return "", "", helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the sources archive is larger than %d bytes", int64(MaxSources))
	}
	if want != "" && digest != want {
		return "", "", fmt.Errorf("the sources archive kept as %s has digest %s", want, digest)
	}
	srcDir = SourcesDir(dir, digest)
	if _, err := os.Stat(srcDir); err != nil {
		if err := unpackFile(tmp, srcDir); err != nil {
			return "", "", err
		}
	}
	if err := keep(tmp, SourcesArchive(dir, digest), 0o440); err != nil {
		return "", "", err
	}
	return digest, srcDir, nil
}

// StoreSourcesAs is StoreSources for an archive that must have the digest
// want (one kept elsewhere under that digest); it returns the unpacked
// directory.
func StoreSourcesAs(dir string, r io.Reader, want string) (string, error) {
	_, srcDir, err := storeSources(dir, r, want)
	return srcDir, err
}

// UnpackKept unpacks the sources archive kept in dir under digest (by
// StoreSources) into SourcesDir(dir, digest), and returns that directory.
func UnpackKept(dir, digest string) (string, error) {
	srcDir := SourcesDir(dir, digest)
	return srcDir, unpackFile(SourcesArchive(dir, digest), srcDir)
}

// unpackFile unpacks the archive file into dst through a staging
// directory, so that dst appears complete or not at all.
func unpackFile(archive, dst string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	stage, err := os.MkdirTemp(filepath.Dir(dst), ".unpack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	if err := UnpackSources(f, stage); err != nil {
		return err
	}
	if err := os.Chmod(stage, 0o755); err != nil {
		return err
	}
	if err := os.Rename(stage, dst); err != nil {
		if _, serr := os.Stat(dst); serr == nil {
			return nil // unpacked concurrently
		}
		return err
	}
	return nil
}

// UnpackSources unpacks a sources archive into the existing empty
// directory dst. It accepts only regular files and directories whose names
// are clean relative paths inside dst, each once; anything else (links,
// devices, fifos, names with "..", absolute names) is refused with
// CodeSourcesInvalid. Permission bits are kept; directories get theirs
// once everything is written.
func UnpackSources(r io.Reader, dst string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	seen := map[string]bool{}
	dirModes := map[string]fs.FileMode{}
	budget := int64(MaxSources) // bytes left to write; a plain archive never runs out
	for n := 0; ; n++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sourcesError("the sources archive is not a valid tar: %v", err)
		}
		if n >= maxSourceEntries {
			return sourcesError("the sources archive has more than %d entries", maxSourceEntries)
		}
		name, err := entryName(h)
		if err != nil {
			return err
		}
		if seen[name] {
			return sourcesError("the sources archive has %q twice", name)
		}
		seen[name] = true
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(filepath.FromSlash(name), 0o700); err != nil {
				return sourcesError("the sources archive's directory %q: %v", name, err)
			}
			for d := path.Dir(name); d != "."; d = path.Dir(d) {
				if _, ok := dirModes[d]; !ok {
					dirModes[d] = 0o755
				}
			}
			dirModes[name] = mode
		case tar.TypeReg:
			if d := path.Dir(name); d != "." {
				if err := root.MkdirAll(filepath.FromSlash(d), 0o700); err != nil {
					return sourcesError("the sources archive's entry %q: %v", name, err)
				}
				for ; d != "."; d = path.Dir(d) {
					if _, ok := dirModes[d]; !ok {
						dirModes[d] = 0o755 // a directory without an entry of its own
					}
				}
			}
			if h.Size > budget {
				return sourcesError("the sources archive unpacks to more than %d bytes", int64(MaxSources))
			}
			budget -= h.Size
			if err := writeEntry(root, name, mode, tr, h.Size); err != nil {
				return err
			}
		default:
			return sourcesError("the sources archive's entry %q is a %s; only files and directories are allowed", name, typeName(h.Typeflag))
		}
	}
	// Deepest first, so that a read-only directory is not closed before its
	// children got their modes.
	dirs := make([]string, 0, len(dirModes))
	for d := range dirModes {
		dirs = append(dirs, d)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if err := root.Chmod(filepath.FromSlash(d), dirModes[d]); err != nil {
			return err
		}
	}
	return nil
}

// entryName checks and returns an entry's name without a trailing slash.
func entryName(h *tar.Header) (string, error) {
	name := strings.TrimSuffix(h.Name, "/")
	if len(name) > maxSourceName {
		return "", sourcesError("the sources archive has an entry name longer than %d bytes", maxSourceName)
	}
	if name == "" || path.IsAbs(name) || path.Clean(name) != name || !filepath.IsLocal(filepath.FromSlash(name)) ||
		strings.ContainsRune(name, 0) {
		return "", sourcesError("the sources archive's entry %q is not a clean relative path inside its root", h.Name)
	}
	return name, nil
}

func writeEntry(root *os.Root, name string, mode fs.FileMode, r io.Reader, size int64) error {
	f, err := root.OpenFile(filepath.FromSlash(name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return sourcesError("the sources archive's file %q: %v", name, err)
	}
	n, err := io.Copy(f, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sourcesError("the sources archive's file %q: %v", name, err)
	}
	if n != size {
		return sourcesError("the sources archive's file %q is truncated", name)
	}
	return root.Chmod(filepath.FromSlash(name), mode)
}

func typeName(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "fifo"
	}
	return fmt.Sprintf("entry of type %q", t)
}

// CheckSources checks that every Copy source of m is in srcDir (an
// unpacked sources archive), with CodeSourcesInvalid when one is missing.
func CheckSources(srcDir string, m helmrtype.Manifest) error {
	srcs := m.CopySources()
	if len(srcs) == 0 {
		return nil
	}
	root, err := os.OpenRoot(srcDir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, s := range srcs {
		if err := CheckSourcePath(s); err != nil {
			return err
		}
		if _, err := root.Lstat(filepath.FromSlash(s)); err != nil {
			return sourcesError("copy source %q is not in the uploaded sources", s)
		}
	}
	return nil
}
