package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sort"
	"strings"
)

// Whiteout names of the OCI layer format.
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// cleanName turns a layer entry name (or hardlink target) into a path
// relative to the root. A leading "/" is dropped (absolute names are
// re-rooted); a name whose cleaned form escapes the root is refused.
func cleanName(name string) (string, error) {
	c := path.Clean(strings.TrimLeft(name, "/"))
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q escapes the root", name)
	}
	return c, nil
}

// imageMode returns the permission bits of a tar mode that a root keeps:
// rwx for all and the sticky bit; setuid and setgid are dropped.
func imageMode(mode int64) fs.FileMode {
	m := fs.FileMode(mode) & fs.ModePerm
	if mode&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// tree writes into a root filesystem under construction. Every operation goes
// through root, so no path or symlink can lead outside it.
type tree struct {
	root *os.Root
	log  *slog.Logger
	// dirModes are applied when the tree is complete, deepest first, so that
	// read-only directories do not get in the way of later writes.
	dirModes map[string]fs.FileMode
}

func newTree(dir string, log *slog.Logger) (*tree, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &tree{root: r, log: log, dirModes: map[string]fs.FileMode{}}, nil
}

func (t *tree) close() error { return t.root.Close() }

// clear removes whatever is at rel so that a new entry can be created there,
// except that an existing directory stays when the new entry is a directory.
// It removes a symlink itself, never what it points to.
func (t *tree) clear(rel string, newIsDir bool) error {
	fi, err := t.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() && newIsDir {
		return nil
	}
	return t.root.RemoveAll(rel)
}

// mkdirParent makes sure rel's parent directory exists.
func (t *tree) mkdirParent(rel string) error {
	if dir := path.Dir(rel); dir != "." {
		return t.root.MkdirAll(dir, 0o755)
	}
	return nil
}

// dir creates directory rel (or keeps an existing one) with mode applied later.
func (t *tree) dir(rel string, mode fs.FileMode) error {
	if err := t.mkdirParent(rel); err != nil {
		return err
	}
	if err := t.clear(rel, true); err != nil {
		return err
	}
	if err := t.root.Mkdir(rel, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	t.dirModes[rel] = mode
	return nil
}

// file creates regular file rel with r's content and mode.
func (t *tree) file(rel string, r io.Reader, mode fs.FileMode) error {
	if err := t.mkdirParent(rel); err != nil {
		return err
	}
	if err := t.clear(rel, false); err != nil {
		return err
	}
	// O_EXCL: rel was just cleared, so this never opens an existing file or
	// follows a symlink.
	f, err := t.root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// symlink creates symlink rel pointing to target. The target is not checked:
// it is resolved inside the sandbox, where the root is "/".
func (t *tree) symlink(rel, target string) error {
	if err := t.mkdirParent(rel); err != nil {
		return err
	}
	if err := t.clear(rel, false); err != nil {
		return err
	}
	return t.root.Symlink(target, rel)
}

// link creates rel as a hardlink to target, both inside the root.
func (t *tree) link(rel, target string) error {
	if rel == target {
		return fmt.Errorf("hardlink %q to itself", rel)
	}
	if err := t.mkdirParent(rel); err != nil {
		return err
	}
	if _, err := t.root.Lstat(target); err != nil {
		return fmt.Errorf("hardlink target: %w", err)
	}
	if err := t.clear(rel, false); err != nil {
		return err
	}
	return t.root.Link(target, rel)
}

// finish applies the recorded directory modes, deepest first.
func (t *tree) finish() error {
	dirs := make([]string, 0, len(t.dirModes))
	for d := range t.dirModes {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool {
		di, dj := strings.Count(dirs[i], "/"), strings.Count(dirs[j], "/")
		if di != dj {
			return di > dj
		}
		return dirs[i] < dirs[j]
	})
	for _, d := range dirs {
		fi, err := t.root.Lstat(d)
		if err != nil || !fi.IsDir() {
			continue // removed or replaced by a later entry
		}
		if err := t.root.Chmod(d, t.dirModes[d]); err != nil {
			return fmt.Errorf("chmod %s: %w", d, err)
		}
	}
	t.dirModes = map[string]fs.FileMode{}
	return nil
}

// unpackLayer applies one layer's tar stream to the tree: it creates
// entries, honours whiteouts and refuses entries that would escape.
func (t *tree) unpackLayer(r io.Reader) error {
	tr := tar.NewReader(r)
	// added holds this layer's entries and their ancestors: an opaque
	// whiteout removes only what lower layers put in its directory.
	added := map[string]bool{}
	markAdded := func(rel string) {
		for p := rel; p != "." && !added[p]; p = path.Dir(p) {
			added[p] = true
		}
	}
	var opaque []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		rel, err := cleanName(hdr.Name)
		if err != nil {
			return err
		}
		if rel == "." {
			continue // the root directory itself
		}
		dir, base := path.Dir(rel), path.Base(rel)
		switch {
		case base == whiteoutOpaque:
			// Applied when the layer is complete, since entries of this
			// layer may come before the marker.
			opaque = append(opaque, dir)
			continue
		case strings.HasPrefix(base, whiteoutMeta):
			t.log.Debug("image: skipping whiteout metadata entry", "name", hdr.Name)
			continue
		case strings.HasPrefix(base, whiteoutPrefix):
			name := strings.TrimPrefix(base, whiteoutPrefix)
			if name == "" || name == "." || name == ".." {
				return fmt.Errorf("whiteout %q names no entry of its directory", hdr.Name)
			}
			victim := path.Join(dir, name)
			if err := t.root.RemoveAll(victim); err != nil {
				return fmt.Errorf("whiteout %q: %w", hdr.Name, err)
			}
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = t.dir(rel, imageMode(hdr.Mode))
		case tar.TypeReg, tar.TypeRegA:
			err = t.file(rel, tr, imageMode(hdr.Mode))
		case tar.TypeSymlink:
			err = t.symlink(rel, hdr.Linkname)
		case tar.TypeLink:
			var target string
			if target, err = cleanName(hdr.Linkname); err == nil {
				err = t.link(rel, target)
			}
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			t.log.Debug("image: skipping device node or fifo", "name", hdr.Name)
			continue
		default:
			t.log.Debug("image: skipping unsupported entry", "name", hdr.Name, "type", string(hdr.Typeflag))
			continue
		}
		if err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		markAdded(rel)
	}
	for _, dir := range opaque {
		if err := t.pruneLower(dir, added); err != nil {
			return fmt.Errorf("opaque whiteout in %q: %w", dir, err)
		}
	}
	return nil
}

// pruneLower removes dir's content that is not in added (i.e. came from
// lower layers), descending into directories this layer added to.
func (t *tree) pruneLower(dir string, added map[string]bool) error {
	f, err := t.root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(dir, n)
		if !added[p] {
			if err := t.root.RemoveAll(p); err != nil {
				return err
			}
			continue
		}
		if fi, err := t.root.Lstat(p); err == nil && fi.IsDir() {
			if err := t.pruneLower(p, added); err != nil {
				return err
			}
		}
	}
	return nil
}
