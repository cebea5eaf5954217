package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/helmr-go/helmr/helmrtype"
)

// busybox is Debian's busybox-static, used as a real static binary in test
// images when it is installed (.ci/setup installs it).
const busybox = "/bin/busybox"

// entry is one tar entry of a test layer.
type entry struct {
	name string
	typ  byte
	mode int64
	body string
	link string
}

func dir(name string, mode int64) entry { return entry{name: name, typ: tar.TypeDir, mode: mode} }
func file(name string, mode int64, body string) entry {
	return entry{name: name, typ: tar.TypeReg, mode: mode, body: body}
}
func symlink(name, target string) entry { return entry{name: name, typ: tar.TypeSymlink, link: target} }
func hardlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, link: target}
}

func tarBytes(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Linkname: e.link, Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layer(t *testing.T, entries ...entry) v1.Layer {
	t.Helper()
	b := tarBytes(t, entries)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func testImage(t *testing.T, cfg v1.Config, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// counter counts the requests a Store makes, per URL path.
type counter struct {
	rt    http.RoundTripper
	mu    sync.Mutex
	paths map[string]int
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.paths[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return c.rt.RoundTrip(r)
}

func (c *counter) reset() {
	c.mu.Lock()
	c.paths = map[string]int{}
	c.mu.Unlock()
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.paths {
		n += v
	}
	return n
}

func (c *counter) blobs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for p, v := range c.paths {
		if strings.Contains(p, "/blobs/") {
			n += v
		}
	}
	return n
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.paths)
}

// testRegistry is an OCI registry served in-process.
type testRegistry struct {
	t    *testing.T
	host string
	rt   http.RoundTripper // uncounted, for pushes
	c    *counter
}

func newRegistry(t *testing.T) *testRegistry {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	rt := srv.Client().Transport
	return &testRegistry{t: t, host: strings.TrimPrefix(srv.URL, "http://"), rt: rt,
		c: &counter{rt: rt, paths: map[string]int{}}}
}

// push writes img to repo:tag and returns the image reference.
func (r *testRegistry) push(repoTag string, img v1.Image) string {
	r.t.Helper()
	ref, err := name.ParseReference(r.host+"/"+repoTag, name.Insecure)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithTransport(r.rt)); err != nil {
		r.t.Fatal(err)
	}
	return ref.String()
}

// storeDir is a temporary directory for a Store: images hold read-only
// directories, which only root could remove as they are, so it is
// removed as the Store removes them (forceRemoveAll).
func storeDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { forceRemoveAll(dir) })
	return dir
}

func (r *testRegistry) store(t *testing.T, dir string, runner Runner) *Store {
	t.Helper()
	s, err := NewStore(dir, Options{
		Logger:    slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Transport: r.c,
		Insecure:  true,
		Runner:    runner,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range es {
		n = append(n, e.Name())
	}
	return n
}

// baseImage builds the test image: two layers with directories, an
// executable, a symlink, a hardlink, whiteouts and an opaque directory, and
// Debian's static busybox when it is installed.
func baseImage(t *testing.T) (v1.Image, bool) {
	t.Helper()
	l1 := []entry{
		dir("bin/", 0o755),
		file("bin/tool", 0o755, "#!/bin/sh\necho tool\n"),
		file("bin/suid", 0o4755, "setuid"),
		dir("etc/", 0o755),
		file("etc/hello.txt", 0o644, "hello\n"),
		hardlink("etc/hello-link", "etc/hello.txt"),
		file("/etc/absolute.txt", 0o600, "re-rooted"),
		symlink("etc/hello-sym", "hello.txt"),
		file("gone.txt", 0o644, "whited out"),
		dir("opq/", 0o755),
		file("opq/old.txt", 0o644, "old"),
		dir("opq/sub/", 0o755),
		file("opq/sub/deep.txt", 0o644, "deep"),
		dir("usr/", 0o755),
		dir("usr/lib/", 0o755),
		symlink("lib", "usr/lib"),
		dir("ro/", 0o555),
		file("ro/f", 0o444, "read only"),
		dir("tmp/", 0o1777),
		{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
		{name: "fifo", typ: tar.TypeFifo, mode: 0o644},
	}
	bb, err := os.ReadFile(busybox)
	haveBusybox := err == nil
	if haveBusybox {
		l1 = append(l1, file("bin/busybox", 0o755, string(bb)), symlink("bin/sh", "busybox"))
	}
	l2 := []entry{
		file("opq/new.txt", 0o644, "new"), // before the marker: still kept
		file("opq/.wh..wh..opq", 0o644, ""),
		file(".wh.gone.txt", 0o644, ""),
		file("lib/libx.so", 0o755, "through an in-root symlink"),
	}
	return testImage(t, v1.Config{Env: []string{"PATH=/bin", "A=1"}, WorkingDir: "/work", User: "1000:1000"},
		layer(t, l1...), layer(t, l2...)), haveBusybox
}

func TestPull(t *testing.T) {
	reg := newRegistry(t)
	img, haveBusybox := baseImage(t)
	ref := reg.push("test/base:v1", img)
	s := reg.store(t, storeDir(t), nil)
	ctx := context.Background()

	got, err := s.Resolve(ctx, helmrtype.ImageManifest{Name: "base", From: ref}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := digestOf(t, img).String(); got.Digest != want || got.Cached {
		t.Fatalf("digest %s cached %v, want %s not cached", got.Digest, got.Cached, want)
	}
	if got.Root != filepath.Join(s.Dir(), "roots", digestOf(t, img).Hex) {
		t.Fatalf("root %s", got.Root)
	}
	if !slices.Equal(got.Env, []string{"PATH=/bin", "A=1"}) || got.Workdir != "/work" || got.User != "1000:1000" {
		t.Fatalf("config: env %q workdir %q user %q", got.Env, got.Workdir, got.User)
	}
	r := got.Root
	if readFile(t, filepath.Join(r, "etc/hello.txt")) != "hello\n" || mode(t, filepath.Join(r, "etc/hello.txt")) != 0o644 {
		t.Fatal("etc/hello.txt")
	}
	if m := mode(t, filepath.Join(r, "bin/tool")); m != 0o755 {
		t.Fatalf("bin/tool mode %v", m)
	}
	if m := mode(t, filepath.Join(r, "bin/suid")); m != 0o755 {
		t.Fatalf("setuid bit kept: %v", m)
	}
	if m := mode(t, filepath.Join(r, "etc/absolute.txt")); m != 0o600 {
		t.Fatalf("absolute entry not re-rooted: %v", m)
	}
	if m := mode(t, filepath.Join(r, "ro")); m != fs.ModeDir|0o555 {
		t.Fatalf("ro mode %v", m)
	}
	if m := mode(t, filepath.Join(r, "tmp")); m != fs.ModeDir|fs.ModeSticky|0o777 {
		t.Fatalf("tmp mode %v", m)
	}
	if target, err := os.Readlink(filepath.Join(r, "etc/hello-sym")); err != nil || target != "hello.txt" {
		t.Fatalf("symlink: %q %v", target, err)
	}
	a, _ := os.Stat(filepath.Join(r, "etc/hello.txt"))
	b, err := os.Lstat(filepath.Join(r, "etc/hello-link"))
	if err != nil || !os.SameFile(a, b) {
		t.Fatalf("hardlink is not the same file: %v", err)
	}
	if exists(filepath.Join(r, "gone.txt")) {
		t.Fatal("whiteout not applied")
	}
	if got := names(t, filepath.Join(r, "opq")); !slices.Equal(got, []string{"new.txt"}) {
		t.Fatalf("opaque dir holds %q", got)
	}
	if readFile(t, filepath.Join(r, "usr/lib/libx.so")) != "through an in-root symlink" {
		t.Fatal("write through in-root symlink")
	}
	if exists(filepath.Join(r, "dev/null")) || exists(filepath.Join(r, "fifo")) {
		t.Fatal("device node or fifo created")
	}
	if got := names(t, filepath.Join(s.Dir(), "tmp")); len(got) != 0 {
		t.Fatalf("staging left behind: %q", got)
	}

	if !haveBusybox {
		t.Skip("busybox-static is not installed (" + busybox + " missing): the static-binary part of this test is skipped")
	}
	out, err := exec.Command(filepath.Join(r, "bin/busybox"), "echo", "from the image").Output()
	if err != nil || string(out) != "from the image\n" {
		t.Fatalf("busybox from the image: %q %v", out, err)
	}
	if m := mode(t, filepath.Join(r, "bin/busybox")); m != 0o755 {
		t.Fatalf("busybox mode %v", m)
	}
}

func TestCacheHit(t *testing.T) {
	reg := newRegistry(t)
	img, _ := baseImage(t)
	ref := reg.push("test/base:v1", img)
	dir := storeDir(t)
	ctx := context.Background()
	m := helmrtype.ImageManifest{Name: "base", From: ref}

	first, err := reg.store(t, dir, nil).Resolve(ctx, m, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached || reg.c.blobs() == 0 {
		t.Fatalf("first pull: cached %v, requests %v", first.Cached, reg.c)
	}

	// The next deploy: a new Store on the same directory.
	reg.c.reset()
	second, err := reg.store(t, dir, nil).Resolve(ctx, m, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cached || second.Root != first.Root || second.Digest != first.Digest {
		t.Fatalf("second: %+v, first: %+v", second, first)
	}
	if reg.c.blobs() != 0 {
		t.Fatalf("cache hit fetched blobs: %v", reg.c)
	}
	manifests := 0
	for p, n := range reg.c.paths {
		if strings.Contains(p, "/manifests/") {
			manifests += n
		}
	}
	if manifests != 1 {
		t.Fatalf("tag re-resolution made %d manifest requests: %v", manifests, reg.c)
	}

	// A digest reference needs no network at all once cached.
	reg.c.reset()
	byDigest := helmrtype.ImageManifest{Name: "base", From: reg.host + "/test/base@" + first.Digest}
	third, err := reg.store(t, dir, nil).Resolve(ctx, byDigest, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !third.Cached || third.Root != first.Root || reg.c.total() != 0 {
		t.Fatalf("digest reference: cached %v root %s requests %v", third.Cached, third.Root, reg.c)
	}
}

func TestPullIndex(t *testing.T) {
	reg := newRegistry(t)
	amd := testImage(t, v1.Config{}, layer(t, file("arch", 0o644, "amd64")))
	arm := testImage(t, v1.Config{}, layer(t, file("arch", 0o644, "arm64")))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	ref, err := name.ParseReference(reg.host+"/test/multi:latest", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithTransport(reg.rt)); err != nil {
		t.Fatal(err)
	}
	dir := storeDir(t)
	ctx := context.Background()
	got, err := reg.store(t, dir, nil).Resolve(ctx, helmrtype.ImageManifest{Name: "multi", From: ref.String()}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, other := amd, arm
	if platform().Architecture == "arm64" {
		want, other = arm, amd
	}
	if got.Digest != digestOf(t, want).String() {
		t.Fatalf("digest %s, want the %s image %s (other %s)", got.Digest, platform().Architecture, digestOf(t, want), digestOf(t, other))
	}
	if a := readFile(t, filepath.Join(got.Root, "arch")); a != platform().Architecture {
		t.Fatalf("arch file %q", a)
	}

	// The tag again: only the index is fetched.
	reg.c.reset()
	byTag, err := reg.store(t, dir, nil).Resolve(ctx, helmrtype.ImageManifest{Name: "multi", From: ref.String()}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !byTag.Cached || byTag.Root != got.Root || reg.c.blobs() != 0 || reg.c.paths["GET /v2/test/multi/manifests/latest"] != 1 || reg.c.total()-reg.c.paths["GET /v2/"] != 1 {
		t.Fatalf("index tag again: cached %v root %s requests %v", byTag.Cached, byTag.Root, reg.c)
	}

	// The index's digest, once resolved, needs no network either.
	idxDigest, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	reg.c.reset()
	again, err := reg.store(t, dir, nil).Resolve(ctx,
		helmrtype.ImageManifest{Name: "multi", From: reg.host + "/test/multi@" + idxDigest.String()}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Cached || again.Root != got.Root || reg.c.total() != 0 {
		t.Fatalf("index digest: cached %v root %s requests %v", again.Cached, again.Root, reg.c)
	}
}

// hostRunner runs a step's argv[0] as a host binary in root/workdir. It is
// for this test only: the production Runner is the sandbox, which runs the
// command inside the root.
type hostRunner struct {
	mu    sync.Mutex
	calls int
}

func (h *hostRunner) RunStep(ctx context.Context, root string, argv, env []string, workdir, user string) error {
	h.mu.Lock()
	h.calls++
	h.mu.Unlock()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(root, workdir)
	cmd.Env = append(env, "HELMR_TEST_USER="+user)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

func (h *hostRunner) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func TestBuildSteps(t *testing.T) {
	reg := newRegistry(t)
	img, _ := baseImage(t)
	ref := reg.push("test/base:v1", img)
	runner := &hostRunner{}
	s := reg.store(t, storeDir(t), runner)
	ctx := context.Background()

	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "agent"), []byte("agent v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(src, "conf/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "conf/sub/c.txt"), []byte("config"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/c.txt", filepath.Join(src, "conf/link")); err != nil {
		t.Fatal(err)
	}
	b := BuildOptions{SourceDir: src}
	steps := []helmrtype.ImageStep{
		{Op: "env", Args: []string{"GREETING", "hi"}},
		{Op: "env", Args: []string{"A", "2"}},
		{Op: "workdir", Args: []string{"/app"}},
		{Op: "copy", Args: []string{"bin/", "agent"}},
		{Op: "copy", Args: []string{"/etc/conf", "conf"}},
		{Op: "user", Args: []string{"agent"}},
		{Op: "run", Args: []string{"/bin/sh", "-c", `cat bin/agent > built.txt; echo "$GREETING $HELMR_TEST_USER" >> built.txt`}},
	}
	m := helmrtype.ImageManifest{Name: "built", From: ref, Steps: steps}

	first, err := s.Resolve(ctx, m, b)
	if err != nil {
		t.Fatal(err)
	}
	if first.Cached || runner.count() != 1 {
		t.Fatalf("first build: cached %v, runs %d", first.Cached, runner.count())
	}
	if !slices.Equal(first.Env, []string{"PATH=/bin", "A=2", "GREETING=hi"}) || first.Workdir != "/app" || first.User != "agent" {
		t.Fatalf("metadata: env %q workdir %q user %q", first.Env, first.Workdir, first.User)
	}
	r := first.Root
	if readFile(t, filepath.Join(r, "app/bin/agent")) != "agent v1" || mode(t, filepath.Join(r, "app/bin/agent")) != 0o755 {
		t.Fatal("copied file")
	}
	if readFile(t, filepath.Join(r, "etc/conf/sub/c.txt")) != "config" || mode(t, filepath.Join(r, "etc/conf/sub/c.txt")) != 0o640 {
		t.Fatal("copied tree")
	}
	if target, _ := os.Readlink(filepath.Join(r, "etc/conf/link")); target != "sub/c.txt" {
		t.Fatalf("copied symlink -> %q", target)
	}
	if got := readFile(t, filepath.Join(r, "app/built.txt")); got != "agent v1hi agent\n" {
		t.Fatalf("run step output %q", got)
	}
	// The parent roots are untouched and the base's content was carried over.
	base, err := s.Resolve(ctx, helmrtype.ImageManifest{Name: "base", From: ref}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(base.Root, "app")) {
		t.Fatal("a step changed the base root")
	}
	if readFile(t, filepath.Join(r, "etc/hello.txt")) != "hello\n" || mode(t, filepath.Join(r, "ro")) != fs.ModeDir|0o555 {
		t.Fatal("base content not carried into the step root")
	}

	// Unchanged: cached, nothing runs.
	reg.c.reset()
	second, err := s.Resolve(ctx, m, b)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Cached || second.Digest != first.Digest || second.Root != first.Root || runner.count() != 1 || reg.c.blobs() != 0 {
		t.Fatalf("second build: %+v runs %d requests %v", second, runner.count(), reg.c)
	}

	// An env step after the last root changes the digest, not the root.
	late := m
	late.Steps = append(slices.Clone(steps), helmrtype.ImageStep{Op: "env", Args: []string{"LATE", "x"}})
	third, err := s.Resolve(ctx, late, b)
	if err != nil {
		t.Fatal(err)
	}
	if !third.Cached || third.Root != first.Root || third.Digest == first.Digest || runner.count() != 1 {
		t.Fatalf("env-only change: %+v", third)
	}

	// A changed source file: a new digest and root, rebuilt.
	if err := os.WriteFile(filepath.Join(src, "agent"), []byte("agent v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	fourth, err := s.Resolve(ctx, m, b)
	if err != nil {
		t.Fatal(err)
	}
	if fourth.Cached || fourth.Digest == first.Digest || fourth.Root == first.Root || runner.count() != 2 {
		t.Fatalf("changed source: %+v runs %d", fourth, runner.count())
	}
	if got := readFile(t, filepath.Join(fourth.Root, "app/built.txt")); got != "agent v2hi agent\n" {
		t.Fatalf("rebuilt run step output %q", got)
	}
	if readFile(t, filepath.Join(first.Root, "app/bin/agent")) != "agent v1" {
		t.Fatal("the earlier root changed")
	}
	// A changed mode is a change too.
	if err := os.Chmod(filepath.Join(src, "agent"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifth, err := s.Resolve(ctx, m, b)
	if err != nil {
		t.Fatal(err)
	}
	if fifth.Digest == fourth.Digest || mode(t, filepath.Join(fifth.Root, "app/bin/agent")) != 0o644 {
		t.Fatalf("changed mode: %+v", fifth)
	}
}

func TestRunStepFailure(t *testing.T) {
	reg := newRegistry(t)
	img, _ := baseImage(t)
	ref := reg.push("test/base:v1", img)
	runner := &hostRunner{}
	s := reg.store(t, storeDir(t), runner)
	ctx := context.Background()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := helmrtype.ImageManifest{Name: "failing", From: ref, Steps: []helmrtype.ImageStep{
		{Op: "copy", Args: []string{"/f", "f"}},
		{Op: "run", Args: []string{"/bin/sh", "-c", "touch partial; exit 3"}},
	}}
	_, err := s.Resolve(ctx, m, BuildOptions{SourceDir: src})
	if err == nil || !strings.Contains(err.Error(), "step 2 of 2") || !strings.Contains(err.Error(), "exit 3") {
		t.Fatalf("error %v, want one naming step 2 of 2 and its argv", err)
	}
	roots := names(t, filepath.Join(s.Dir(), "roots"))
	if len(roots) != 4 { // the base and the copy step, each a directory and its metadata
		t.Fatalf("roots after a failing step: %q", roots)
	}
	if got := names(t, filepath.Join(s.Dir(), "tmp")); len(got) != 0 {
		t.Fatalf("staging left behind: %q", got)
	}
	// Failing again runs again: nothing was cached.
	if _, err := s.Resolve(ctx, m, BuildOptions{SourceDir: src}); err == nil || runner.count() != 2 {
		t.Fatalf("second failing build: %v, runs %d", err, runner.count())
	}

	// Without a Runner, a run step fails clearly.
	noRunner := reg.store(t, storeDir(t), nil)
	_, err = noRunner.Resolve(ctx, helmrtype.ImageManifest{Name: "x", From: "scratch",
		Steps: []helmrtype.ImageStep{{Op: "run", Args: []string{"true"}}}}, BuildOptions{})
	if err == nil || !strings.Contains(err.Error(), "no Runner") {
		t.Fatalf("run without a Runner: %v", err)
	}
}

func TestScratchAndHost(t *testing.T) {
	s, err := NewStore(storeDir(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	src := t.TempDir()
	payload := "static agent"
	if bb, err := os.ReadFile(busybox); err == nil {
		payload = string(bb)
	} else {
		t.Log("busybox-static is not installed; copying a plain file instead of a static binary")
	}
	if err := os.WriteFile(filepath.Join(src, "busybox"), []byte(payload), 0o755); err != nil {
		t.Fatal(err)
	}
	empty, err := s.Resolve(ctx, helmrtype.ImageManifest{Name: "s", From: "scratch"}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if empty.Cached || len(names(t, empty.Root)) != 0 || !strings.HasPrefix(empty.Digest, "sha256:") {
		t.Fatalf("scratch: %+v", empty)
	}
	again, err := s.Resolve(ctx, helmrtype.ImageManifest{Name: "s", From: "scratch"}, BuildOptions{})
	if err != nil || !again.Cached || again.Digest != empty.Digest {
		t.Fatalf("scratch again: %+v %v", again, err)
	}
	m := helmrtype.ImageManifest{Name: "s", From: "scratch", Steps: []helmrtype.ImageStep{{Op: "copy", Args: []string{"/bin/", "busybox"}}}}
	withAgent, err := s.Resolve(ctx, m, BuildOptions{SourceDir: src})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, withAgent.Root); !slices.Equal(got, []string{"bin"}) || mode(t, filepath.Join(withAgent.Root, "bin/busybox")) != 0o755 {
		t.Fatalf("scratch + binary: %q", got)
	}
	if payload != "static agent" {
		out, err := exec.Command(filepath.Join(withAgent.Root, "bin/busybox"), "echo", "ok").Output()
		if err != nil || string(out) != "ok\n" {
			t.Fatalf("static binary in scratch: %q %v", out, err)
		}
	}

	host, err := s.Resolve(ctx, helmrtype.ImageManifest{Name: "h", Host: true}, BuildOptions{})
	if err != nil || !host.Host || host.Root != "" || host.Digest != "host" {
		t.Fatalf("host: %+v %v", host, err)
	}
	_, err = s.Resolve(ctx, helmrtype.ImageManifest{Name: "h", Host: true, Steps: m.Steps}, BuildOptions{SourceDir: src})
	if err == nil || !strings.Contains(err.Error(), "build steps need From(ref) or scratch") {
		t.Fatalf("host with steps: %v", err)
	}
}

func TestCopyRefusals(t *testing.T) {
	s, err := NewStore(storeDir(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := t.TempDir()
	src := filepath.Join(base, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source string
		b      BuildOptions
		want   string
	}{
		{"f", BuildOptions{}, "published without"},
		{"../secret", BuildOptions{SourceDir: src}, "inside the agent package"},
		{filepath.Join(base, "secret"), BuildOptions{SourceDir: src}, "inside the agent package"},
		{"link", BuildOptions{SourceDir: src}, "escapes"},
		{"missing", BuildOptions{SourceDir: src}, "no such file"},
	} {
		m := helmrtype.ImageManifest{Name: "c", From: "scratch", Steps: []helmrtype.ImageStep{{Op: "copy", Args: []string{"/x", c.source}}}}
		_, err := s.Resolve(ctx, m, c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("copy %q: %v, want an error with %q", c.source, err, c.want)
		}
	}
	for _, st := range []helmrtype.ImageStep{
		{Op: "frobnicate"},
		{Op: "env", Args: []string{"A=B", "x"}},
		{Op: "env", Args: []string{"A"}},
		{Op: "workdir", Args: []string{""}},
		{Op: "run"},
	} {
		m := helmrtype.ImageManifest{Name: "c", From: "scratch", Steps: []helmrtype.ImageStep{st}}
		if _, err := s.Resolve(ctx, m, BuildOptions{}); err == nil {
			t.Errorf("step %+v accepted", st)
		}
	}
}

// TestMaliciousLayers pushes layers that try to write outside the root; each
// is refused, nothing is cached and nothing appears outside.
func TestMaliciousLayers(t *testing.T) {
	reg := newRegistry(t)
	top := t.TempDir()
	outside := filepath.Join(top, "outside") // top/outside, next to the store
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(top, "store")
	// A staging root is top/store/tmp/<stage>/, so "../../../outside" from
	// its top level is the outside directory.
	rel := "../../../outside"
	cases := map[string][][]entry{
		"dotdot":            {{file("../escape", 0o644, "x")}},
		"nested dotdot":     {{dir("a/", 0o755), file("a/../../escape", 0o644, "x")}},
		"deep dotdot":       {{file("a/b/../../../../../escape", 0o644, "x")}},
		"absolute link":     {{symlink("link", outside), file("link/evil", 0o644, "x")}},
		"root link":         {{symlink("link", "/"), file("link"+outside+"/evil", 0o644, "x")}},
		"relative link":     {{symlink("link", rel), file("link/evil", 0o644, "x")}},
		"link dir":          {{symlink("link", rel), dir("link/evildir/", 0o755)}},
		"link symlink":      {{symlink("link", rel), symlink("link/evil", "x")}},
		"link hardlink":     {{file("f", 0o644, "x"), symlink("link", rel), hardlink("link/evil", "f")}},
		"link in lower":     {{symlink("link", rel)}, {file("link/evil", 0o644, "x")}},
		"hardlink escape":   {{hardlink("passwd", "../../etc/passwd")}},
		"hardlink via link": {{symlink("link", rel), hardlink("stolen", "link/secret")}},
		"whiteout via link": {{symlink("link", rel)}, {file("link/.wh.secret", 0o644, "")}},
		"whiteout parent":   {{dir("a/", 0o755)}, {file("a/.wh...", 0o644, "")}},
		"whiteout dotdot":   {{file("../.wh.outside", 0o644, "")}},
		"opaque via link":   {{symlink("link", rel)}, {file("link/.wh..wh..opq", 0o644, "")}},
	}
	ctx := context.Background()
	s := reg.store(t, storeDir, nil)
	for name, layers := range cases {
		t.Run(name, func(t *testing.T) {
			var ls []v1.Layer
			for _, es := range layers {
				ls = append(ls, layer(t, es...))
			}
			ref := reg.push("evil/"+strings.ReplaceAll(name, " ", "-")+":v1", testImage(t, v1.Config{}, ls...))
			_, err := s.Resolve(ctx, helmrtype.ImageManifest{Name: "evil", From: ref}, BuildOptions{})
			if err == nil {
				t.Fatal("malicious layer accepted")
			}
			t.Log(err)
			if got := names(t, filepath.Join(storeDir, "roots")); len(got) != 0 {
				t.Fatalf("roots after a refused image: %q", got)
			}
			if got := names(t, filepath.Join(storeDir, "tmp")); len(got) != 0 {
				t.Fatalf("staging left behind: %q", got)
			}
			if got := names(t, outside); !slices.Equal(got, []string{"secret"}) {
				t.Fatalf("outside directory now holds %q", got)
			}
			if readFile(t, filepath.Join(outside, "secret")) != "secret" {
				t.Fatal("outside file changed")
			}
			for _, p := range []string{filepath.Join(top, "escape"), filepath.Join(storeDir, "escape"), filepath.Join(storeDir, "tmp", "escape")} {
				if exists(p) {
					t.Fatalf("%s was created", p)
				}
			}
			if got := names(t, top); !slices.Equal(got, []string{"outside", "store"}) {
				t.Fatalf("top directory now holds %q", got)
			}
		})
	}
}

// TestReplacingSymlinkDoesNotFollow: an entry over an earlier symlink
// replaces the link; it never writes where the link points.
func TestReplacingSymlinkDoesNotFollow(t *testing.T) {
	reg := newRegistry(t)
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := testImage(t, v1.Config{},
		layer(t, symlink("target", secret), symlink("same", secret), file("same", 0o644, "same layer")),
		layer(t, file("target", 0o644, "pwned"), hardlink("hl", "target")))
	ref := reg.push("test/replace:v1", img)
	got, err := reg.store(t, filepath.Join(top, "store"), nil).Resolve(context.Background(),
		helmrtype.ImageManifest{Name: "r", From: ref}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if readFile(t, secret) != "secret" {
		t.Fatal("wrote through a symlink")
	}
	for _, n := range []string{"target", "same", "hl"} {
		if m := mode(t, filepath.Join(got.Root, n)); !m.IsRegular() {
			t.Fatalf("%s is %v, want a regular file", n, m)
		}
	}
	if readFile(t, filepath.Join(got.Root, "target")) != "pwned" || readFile(t, filepath.Join(got.Root, "same")) != "same layer" {
		t.Fatal("content")
	}
}

func TestConcurrentResolve(t *testing.T) {
	reg := newRegistry(t)
	img, _ := baseImage(t)
	ref := reg.push("test/base:v1", img)
	dir := storeDir(t)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "agent"), []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	shared := reg.store(t, dir, nil)
	// Two Stores in one process stand for two processes sharing the directory.
	stores := []*Store{shared, shared, reg.store(t, dir, nil), reg.store(t, dir, nil)}
	m := helmrtype.ImageManifest{Name: "c", From: ref, Steps: []helmrtype.ImageStep{{Op: "copy", Args: []string{"/agent", "agent"}}}}
	results := make([]*Image, len(stores))
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { results[i], errs[i] = s.Resolve(context.Background(), m, BuildOptions{SourceDir: src}) })
	}
	wg.Wait()
	for i := range stores {
		if errs[i] != nil {
			t.Fatalf("resolve %d: %v", i, errs[i])
		}
		if results[i].Root != results[0].Root || results[i].Digest != results[0].Digest {
			t.Fatalf("resolve %d: %+v, resolve 0: %+v", i, results[i], results[0])
		}
	}
	if readFile(t, filepath.Join(results[0].Root, "agent")) != "agent" {
		t.Fatal("content")
	}
	if got := names(t, filepath.Join(dir, "roots")); len(got) != 4 {
		t.Fatalf("roots: %q", got)
	}
	if got := names(t, filepath.Join(dir, "tmp")); len(got) != 0 {
		t.Fatalf("staging left behind: %q", got)
	}
}

func TestResolveErrors(t *testing.T) {
	reg := newRegistry(t)
	s := reg.store(t, storeDir(t), nil)
	ctx := context.Background()
	for _, m := range []helmrtype.ImageManifest{
		{Name: "none"},
		{Name: "both", From: "x", Host: true},
		{Name: "bad ref", From: "UPPER/Case:tag"},
		{Name: "missing", From: reg.host + "/no/such:image"},
	} {
		_, err := s.Resolve(ctx, m, BuildOptions{})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("image %q", m.Name)) {
			t.Errorf("%+v: %v", m, err)
		}
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Resolve(canceled, helmrtype.ImageManifest{Name: "c", From: reg.host + "/no/such:image"}, BuildOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

// progressLine is a progress event without its timing, for comparison.
func progressLine(p helmrtype.DeployProgress) string {
	return fmt.Sprintf("%s %s %s step %d/%d %s cached=%v digest=%v", p.Kind, p.State, p.Ref, p.Step, p.Steps, p.Op, p.Cached, p.Digest != "")
}

// Progress reports the pull, each step and the image, started and done,
// and says cached on a second Resolve that builds nothing.
func TestProgress(t *testing.T) {
	reg := newRegistry(t)
	img, _ := baseImage(t)
	ref := reg.push("test/base:v1", img)
	s := reg.store(t, storeDir(t), nil)
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := helmrtype.ImageManifest{Name: "p", From: ref, Steps: []helmrtype.ImageStep{
		{Op: "env", Args: []string{"A", "1"}},
		{Op: "copy", Args: []string{"/f", "f"}},
	}}
	resolve := func() []string {
		var got []string
		_, err := s.Resolve(context.Background(), m, BuildOptions{SourceDir: src, Progress: func(p helmrtype.DeployProgress) {
			if p.Image != "p" {
				t.Errorf("event of image %q", p.Image)
			}
			got = append(got, progressLine(p))
		}})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := func(cached bool) []string {
		return []string{
			fmt.Sprintf("image started %s step 0/2  cached=false digest=false", ref),
			fmt.Sprintf("pull started %s step 0/0  cached=false digest=false", ref),
			fmt.Sprintf("pull done %s step 0/0  cached=%v digest=true", ref, cached),
			"step started  step 1/2 env cached=false digest=false",
			"step done  step 1/2 env cached=false digest=false",
			"step started  step 2/2 copy cached=false digest=false",
			fmt.Sprintf("step done  step 2/2 copy cached=%v digest=false", cached),
			fmt.Sprintf("image done %s step 0/2  cached=%v digest=true", ref, cached),
		}
	}
	if got := resolve(); !slices.Equal(got, want(false)) {
		t.Fatalf("first resolve's progress:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want(false), "\n"))
	}
	if got := resolve(); !slices.Equal(got, want(true)) {
		t.Fatalf("cached resolve's progress:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want(true), "\n"))
	}
}
