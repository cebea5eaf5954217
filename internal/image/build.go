package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// Step operations of an ImageManifest.
const (
	OpRun     = "run"
	OpCopy    = "copy"
	OpWorkdir = "workdir"
	OpEnv     = "env"
	OpUser    = "user"
)

// Resolve returns the root filesystem of m, pulling and building what is not
// cached yet. Registry tags are re-resolved on every call.
func (s *Store) Resolve(ctx context.Context, m helmrtype.ImageManifest, b BuildOptions) (*Image, error) {
	start := time.Now()
	if !m.Host {
		b.report(helmrtype.DeployProgress{Kind: helmrtype.ProgressImage, State: helmrtype.ProgressStarted, Image: m.Name, Ref: m.From, Steps: len(m.Steps)})
	}
	img, err := s.resolve(ctx, m, b)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", m.Name, err)
	}
	if !m.Host {
		b.report(helmrtype.DeployProgress{Kind: helmrtype.ProgressImage, State: helmrtype.ProgressDone, Image: m.Name, Ref: m.From,
			Steps: len(m.Steps), Cached: img.Cached, Digest: img.Digest, DurationMS: since(start)})
	}
	return img, nil
}

// since is the time since start in milliseconds, for progress events.
func since(start time.Time) int64 { return time.Since(start).Milliseconds() }

func (s *Store) resolve(ctx context.Context, m helmrtype.ImageManifest, b BuildOptions) (*Image, error) {
	if m.Host {
		if m.From != "" {
			return nil, fmt.Errorf("both FromHost() and From(%q)", m.From)
		}
		if len(m.Steps) > 0 {
			return nil, errors.New("build steps need From(ref) or scratch, not FromHost()")
		}
		return &Image{Host: true, Digest: "host", Cached: true}, nil
	}
	var (
		bs  base
		err error
	)
	switch m.From {
	case "":
		return nil, errors.New(`needs From(ref), From("scratch") or FromHost()`)
	case "scratch":
		bs, err = s.scratch(ctx)
	default:
		start := time.Now()
		b.report(helmrtype.DeployProgress{Kind: helmrtype.ProgressPull, State: helmrtype.ProgressStarted, Image: m.Name, Ref: m.From})
		if bs, err = s.pull(ctx, m.From); err == nil {
			b.report(helmrtype.DeployProgress{Kind: helmrtype.ProgressPull, State: helmrtype.ProgressDone, Image: m.Name, Ref: m.From,
				Cached: bs.cached, Digest: "sha256:" + bs.key, DurationMS: since(start)})
		}
	}
	if err != nil {
		return nil, err
	}
	st := &buildState{
		key:     bs.key,
		digest:  "sha256:" + bs.key,
		env:     append([]string(nil), bs.meta.Env...),
		workdir: bs.meta.Workdir,
		user:    bs.meta.User,
		cached:  bs.cached,
	}
	for i, step := range m.Steps {
		ev := helmrtype.DeployProgress{Kind: helmrtype.ProgressStep, State: helmrtype.ProgressStarted, Image: m.Name,
			Step: i + 1, Steps: len(m.Steps), Op: step.Op, Args: step.Args}
		b.report(ev)
		start := time.Now()
		st.built = false
		if err := s.step(ctx, st, step, b); err != nil {
			return nil, fmt.Errorf("step %d of %d (%s %q): %w", i+1, len(m.Steps), step.Op, step.Args, err)
		}
		ev.State, ev.Cached, ev.DurationMS = helmrtype.ProgressDone, !st.built && (step.Op == OpCopy || step.Op == OpRun), since(start)
		b.report(ev)
	}
	return &Image{
		Root:    s.rootDir(st.key),
		Digest:  st.digest,
		Env:     st.env,
		Workdir: st.workdir,
		User:    st.user,
		Cached:  st.cached,
	}, nil
}

// buildState is the image as the steps so far made it.
type buildState struct {
	key     string // root key (hex)
	digest  string // image digest: the root and the metadata
	env     []string
	workdir string
	user    string
	cached  bool
	built   bool // the last copy or run step built its root (not cached)
}

// cwd is the directory relative paths are resolved against.
func (st *buildState) cwd() string {
	if st.workdir == "" {
		return "/"
	}
	return st.workdir
}

func (st *buildState) setEnv(name, value string) {
	kv := name + "=" + value
	for i, e := range st.env {
		if k, _, _ := strings.Cut(e, "="); k == name {
			st.env[i] = kv
			return
		}
	}
	st.env = append(st.env, kv)
}

func nArgs(step helmrtype.ImageStep, n int) error {
	if len(step.Args) != n {
		return fmt.Errorf("%s takes %d argument(s), got %d", step.Op, n, len(step.Args))
	}
	return nil
}

// step applies one build step to st.
func (s *Store) step(ctx context.Context, st *buildState, step helmrtype.ImageStep, b BuildOptions) error {
	extra := "" // inputs beyond op and args that the digest covers
	switch step.Op {
	case OpEnv:
		if err := nArgs(step, 2); err != nil {
			return err
		}
		name := step.Args[0]
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return fmt.Errorf("invalid variable name %q", name)
		}
		st.setEnv(name, step.Args[1])
	case OpWorkdir:
		if err := nArgs(step, 1); err != nil {
			return err
		}
		if step.Args[0] == "" {
			return errors.New("workdir is empty")
		}
		st.workdir = path.Join(st.cwd(), step.Args[0])
		if path.IsAbs(step.Args[0]) {
			st.workdir = path.Clean(step.Args[0])
		}
	case OpUser:
		if err := nArgs(step, 1); err != nil {
			return err
		}
		if step.Args[0] == "" {
			return errors.New("user is empty")
		}
		st.user = step.Args[0]
	case OpCopy:
		if err := nArgs(step, 2); err != nil {
			return err
		}
		c, err := newCopyStep(st, step.Args[0], step.Args[1], b)
		if err != nil {
			return err
		}
		defer c.src.Close()
		extra = c.content
		key := hashParts(st.key, OpCopy, c.dst, strconv.FormatBool(c.intoDir), path.Base(c.srcPath), c.content)
		if err := s.build(ctx, st, key, OpCopy, c.apply); err != nil {
			return err
		}
	case OpRun:
		if len(step.Args) == 0 || step.Args[0] == "" {
			return errors.New("run needs a command")
		}
		argv := step.Args
		env := append([]string(nil), st.env...)
		workdir, user := st.cwd(), st.user
		parts := append([]string{st.key, OpRun, strconv.Itoa(len(argv))}, argv...)
		parts = append(parts, strconv.Itoa(len(env)))
		parts = append(parts, env...)
		key := hashParts(append(parts, workdir, user)...)
		err := s.build(ctx, st, key, OpRun, func(stage string, t *tree) error {
			if rel := strings.TrimPrefix(workdir, "/"); rel != "" {
				if err := t.root.MkdirAll(rel, 0o755); err != nil {
					return fmt.Errorf("workdir %s: %w", workdir, err)
				}
			}
			return s.opts.Runner.RunStep(ctx, stage, argv, env, workdir, user)
		})
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown step %q", step.Op)
	}
	parts := append([]string{st.digest, step.Op}, step.Args...)
	st.digest = "sha256:" + hashParts(append(parts, extra)...)
	return nil
}

// build makes root key from st's root with apply, unless it is cached, and
// moves st to it.
func (s *Store) build(ctx context.Context, st *buildState, key, op string, apply func(stage string, t *tree) error) error {
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	if _, ok := s.cachedRoot(key); ok {
		st.key = key
		return nil
	}
	if op == OpRun && s.opts.Runner == nil {
		return errors.New("no Runner is configured to execute run steps")
	}
	start := time.Now()
	stage, err := s.stage(key)
	if err != nil {
		return err
	}
	published := false
	defer func() {
		if !published {
			s.discard(stage)
		}
	}()
	t, err := newTree(stage, s.log)
	if err != nil {
		return err
	}
	defer t.close()
	if err := copyTree(s.rootDir(st.key), t); err != nil {
		return fmt.Errorf("copy parent root: %w", err)
	}
	if err := apply(stage, t); err != nil {
		return err
	}
	if err := t.finish(); err != nil {
		return err
	}
	meta := rootMeta{Source: op + " on " + st.key, Env: st.env, Workdir: st.workdir, User: st.user}
	if err := s.publish(key, stage, meta); err != nil {
		return err
	}
	published = true
	s.log.Info("image step built", "op", op, "root", key, "took", time.Since(start).Round(time.Millisecond))
	st.key, st.cached, st.built = key, false, true
	return nil
}

// copyTree copies the root at src into the empty tree t, keeping modes and
// symlinks; directory modes are applied before copyTree returns.
func copyTree(src string, t *tree) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if err := os.Chmod(t.root.Name(), fi.Mode().Perm()); err != nil {
		return err
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		switch {
		case mode.IsDir():
			if err := t.root.Mkdir(rel, 0o700); err != nil {
				return err
			}
			t.dirModes[rel] = mode & (fs.ModePerm | fs.ModeSticky)
		case mode.IsRegular():
			f, err := os.Open(p) // a regular file of an immutable cached root
			if err != nil {
				return err
			}
			err = t.file(rel, f, mode&(fs.ModePerm|fs.ModeSticky))
			f.Close()
			return err
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return t.root.Symlink(target, rel)
		default:
			t.log.Debug("image: not copying special file", "path", rel)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return t.finish()
}

// copyStep is a resolved copy step.
type copyStep struct {
	src     *os.Root // the agent package directory
	srcPath string   // the source, relative to src
	isDir   bool
	dst     string // absolute path in the image
	intoDir bool   // dst ended in "/": a file source goes into it
	content string // hash of the source: paths, modes, bytes
}

func newCopyStep(st *buildState, dst, source string, b BuildOptions) (*copyStep, error) {
	if b.SourceDir == "" {
		return nil, errors.New("copy steps need the agent package's sources, which this Deployment was published without (publish it with helmr deploy, which uploads them)")
	}
	if dst == "" {
		return nil, errors.New("copy destination is empty")
	}
	if source == "" || !filepath.IsLocal(source) {
		return nil, fmt.Errorf("copy source %q must be a relative path inside the agent package", source)
	}
	src, err := os.OpenRoot(b.SourceDir)
	if err != nil {
		return nil, fmt.Errorf("agent package directory: %w", err)
	}
	c := &copyStep{src: src, srcPath: filepath.ToSlash(filepath.Clean(source))}
	c.intoDir = strings.HasSuffix(dst, "/")
	if path.IsAbs(dst) {
		c.dst = path.Clean(dst)
	} else {
		c.dst = path.Join(st.cwd(), dst)
	}
	fi, err := src.Stat(c.srcPath)
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("copy source: %w", err)
	}
	h := sha256.New()
	switch {
	case fi.Mode().IsRegular():
		err = hashFile(h, src, c.srcPath, ".", fi)
	case fi.IsDir():
		c.isDir = true
		err = c.walk(func(rel string, d fs.DirEntry, info fs.FileInfo, sub *os.Root) error {
			switch {
			case info.IsDir():
				fmt.Fprintf(h, "d %q %o\n", rel, info.Mode()&(fs.ModePerm|fs.ModeSticky))
				return nil
			case info.Mode().IsRegular():
				return hashFile(h, sub, rel, rel, info)
			case info.Mode()&fs.ModeSymlink != 0:
				target, err := sub.Readlink(rel)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, "l %q %q\n", rel, target)
			}
			return nil
		})
	default:
		err = fmt.Errorf("%s is neither a file nor a directory", source)
	}
	if err != nil {
		src.Close()
		return nil, fmt.Errorf("copy source: %w", err)
	}
	c.content = hex.EncodeToString(h.Sum(nil))
	return c, nil
}

func hashFile(h hash.Hash, r *os.Root, name, rel string, info fs.FileInfo) error {
	f, err := r.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "f %q %o %d\n", rel, info.Mode()&(fs.ModePerm|fs.ModeSticky), info.Size())
	n, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	if n != info.Size() {
		return fmt.Errorf("%s changed while it was read", name)
	}
	return nil
}

// walk visits the source directory's entries (not the directory itself) in
// lexical order without following symlinks.
func (c *copyStep) walk(fn func(rel string, d fs.DirEntry, info fs.FileInfo, sub *os.Root) error) error {
	sub, err := c.src.OpenRoot(c.srcPath)
	if err != nil {
		return err
	}
	defer sub.Close()
	return fs.WalkDir(sub.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return fn(rel, d, info, sub)
	})
}

// apply copies the source into the staged root.
func (c *copyStep) apply(_ string, t *tree) error {
	dst := strings.TrimPrefix(c.dst, "/")
	if dst == "" {
		dst = "."
	}
	if !c.isDir {
		target := dst
		if fi, err := t.root.Stat(dst); c.intoDir || (err == nil && fi.IsDir()) {
			target = path.Join(dst, path.Base(c.srcPath))
		}
		if target == "." {
			return errors.New("cannot copy a file over the root directory")
		}
		if fi, err := t.root.Lstat(target); err == nil && fi.IsDir() {
			return fmt.Errorf("cannot copy a file over directory /%s", target)
		}
		info, err := c.src.Stat(c.srcPath)
		if err != nil {
			return err
		}
		f, err := c.src.Open(c.srcPath)
		if err != nil {
			return err
		}
		defer f.Close()
		return t.file(target, f, info.Mode()&(fs.ModePerm|fs.ModeSticky))
	}
	if dst != "." {
		if err := t.root.MkdirAll(dst, 0o755); err != nil {
			return err
		}
	}
	return c.walk(func(rel string, d fs.DirEntry, info fs.FileInfo, sub *os.Root) error {
		p := path.Join(dst, rel)
		mode := info.Mode() & (fs.ModePerm | fs.ModeSticky)
		switch {
		case info.IsDir():
			return t.dir(p, mode)
		case info.Mode().IsRegular():
			f, err := sub.Open(rel)
			if err != nil {
				return err
			}
			defer f.Close()
			return t.file(p, f, mode)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := sub.Readlink(rel)
			if err != nil {
				return err
			}
			return t.symlink(p, target)
		default:
			t.log.Debug("image: not copying special file", "path", rel)
			return nil
		}
	})
}
