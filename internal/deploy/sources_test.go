package deploy

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
)

// writeTree makes files (name → content; a name ending in "/" is a
// directory) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func pack(t *testing.T, dir string, sources ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := PackSources(dir, sources, &b); err != nil {
		t.Fatalf("PackSources(%v): %v", sources, err)
	}
	return b.Bytes()
}

// listTree returns "name mode [content]" lines for everything under dir.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := filepath.ToSlash(rel) + " " + info.Mode().String()
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += " " + string(b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCopySources(t *testing.T) {
	step := func(args ...string) helmrtype.ImageStep { return helmrtype.ImageStep{Op: "copy", Args: args} }
	m := helmrtype.Manifest{Templates: []helmrtype.TemplateManifest{
		{ID: "a", Image: helmrtype.ImageManifest{Steps: []helmrtype.ImageStep{step("/d", "data/./x.txt"), {Op: "run", Args: []string{"true"}}}}},
		{ID: "b", Image: helmrtype.ImageManifest{Steps: []helmrtype.ImageStep{step("/e", "conf/"), step("/d", "data/x.txt"), step("/f", "../up")}}},
	}}
	got := m.CopySources()
	want := []string{"../up", "conf", "data/x.txt"}
	if !slices.Equal(got, want) {
		t.Fatalf("CopySources = %q, want %q", got, want)
	}
	if got := (helmrtype.Manifest{}).CopySources(); got != nil {
		t.Fatalf("CopySources without copy steps = %q", got)
	}
}

// Packing is deterministic (times, owners and the order of the walk do not
// matter), keeps permission bits, follows symlinks inside the package and
// unpacks to the same tree.
func TestPackUnpackRoundTrip(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"data/a.txt":       "alpha",
		"data/sub/b.txt":   "beta",
		"data/empty/":      "",
		"conf/app.conf":    "x=1",
		"conf/other.conf":  "not copied",
		"shared/real.txt":  "real",
		"main.go":          "package main",
		"data/sub/run.sh":  "#!/bin/sh\n",
		"deep/er/file.txt": "deep",
	})
	if err := os.Chmod(filepath.Join(dir, "data/sub/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../shared/real.txt", filepath.Join(dir, "data/link.txt")); err != nil {
		t.Fatal(err)
	}
	srcs := []string{"data", "conf/app.conf", "deep/er/file.txt"}
	first := pack(t, dir, srcs...)
	// Other times, and the sources in another order: the same bytes.
	later := time.Now().Add(time.Hour)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		os.Chtimes(p, later, later)
		return nil
	})
	if second := pack(t, dir, "deep/er/file.txt", "conf/app.conf", "data"); !bytes.Equal(first, second) {
		t.Fatal("packing the same sources twice gave different archives")
	}
	tr := tar.NewReader(bytes.NewReader(first))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("entry %s: mtime %v, owner %d:%d %q:%q; want fixed", h.Name, h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}

	dst := filepath.Join(t.TempDir(), "deps")
	digest, srcDir, err := StoreSources(dst, bytes.NewReader(first))
	if err != nil {
		t.Fatalf("StoreSources: %v", err)
	}
	if srcDir != SourcesDir(dst, digest) || !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("StoreSources = %s, %s", digest, srcDir)
	}
	got := listTree(t, srcDir)
	want := []string{
		"conf drwxr-xr-x",
		"conf/app.conf -rw-r--r-- x=1",
		"data drwxr-xr-x",
		"data/a.txt -rw-r--r-- alpha",
		"data/empty drwxr-xr-x",
		"data/link.txt -rw-r--r-- real",
		"data/sub drwxr-xr-x",
		"data/sub/b.txt -rw-r--r-- beta",
		"data/sub/run.sh -rwxr-xr-x #!/bin/sh\n",
		"deep drwxr-xr-x",
		"deep/er drwxr-xr-x",
		"deep/er/file.txt -rw-r--r-- deep",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("unpacked tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	m := helmrtype.Manifest{Templates: []helmrtype.TemplateManifest{{ID: "t", Image: helmrtype.ImageManifest{
		Steps: []helmrtype.ImageStep{{Op: "copy", Args: []string{"/srv/", "data"}}}}}}}
	if err := CheckSources(srcDir, m); err != nil {
		t.Fatalf("CheckSources: %v", err)
	}
	m.Templates[0].Image.Steps[0].Args[1] = "conf/other.conf"
	if err := CheckSources(srcDir, m); !errors.Is(err, helmrtype.CodeSourcesInvalid) {
		t.Fatalf("CheckSources with a source not uploaded = %v, want sources_invalid", err)
	}
	// Storing it again keeps the one copy.
	if d2, _, err := StoreSources(dst, bytes.NewReader(first)); err != nil || d2 != digest {
		t.Fatalf("StoreSources again = %s, %v", d2, err)
	}
	if _, err := os.Stat(SourcesArchive(dst, digest)); err != nil {
		t.Fatalf("archive not kept: %v", err)
	}
	entries, _ := os.ReadDir(dst)
	if len(entries) != 2 {
		t.Fatalf("deployments dir holds %d entries, want the archive and its tree", len(entries))
	}
	if _, err := StoreSourcesAs(dst, bytes.NewReader(first), "sha256:0000"); err == nil {
		t.Fatal("StoreSourcesAs accepted an archive under the wrong digest")
	}
	if entries, _ := os.ReadDir(dst); len(entries) != 2 {
		t.Fatalf("a refused StoreSourcesAs left %d entries, want the 2 kept before", len(entries))
	}
	// The archive kept here unpacks again where its tree was.
	os.RemoveAll(srcDir)
	if got, err := UnpackKept(dst, digest); err != nil || got != srcDir {
		t.Fatalf("UnpackKept = %s, %v; want %s", got, err, srcDir)
	}
	if again := listTree(t, srcDir); fmt.Sprint(again) != fmt.Sprint(got) {
		t.Fatalf("UnpackKept unpacked %v, want %v", again, got)
	}
}

// Sources outside the package, through a symlink that leaves it, missing,
// special files or in a symlink loop are refused before anything is sent.
func TestPackRefusesOutsideSources(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret.txt": "secret"})
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"data/ok.txt": "ok", "loop/": ""})
	for name, target := range map[string]string{
		"escape.txt":    filepath.Join(outside, "secret.txt"),
		"data/up.txt":   "../../" + filepath.Base(outside) + "/secret.txt",
		"escdir":        outside,
		"loop/again":    "..",
		"data/dangling": "nowhere",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"../x", "/etc/passwd", "", "escape.txt", "escdir", "escdir/secret.txt", "data", "missing",
		"fifo", "loop"} {
		var b bytes.Buffer
		err := PackSources(dir, []string{src}, &b)
		if !errors.Is(err, helmrtype.CodeSourcesInvalid) {
			t.Errorf("PackSources(%q) = %v, want sources_invalid", src, err)
		}
		if strings.Contains(b.String(), "secret") {
			t.Errorf("PackSources(%q) packed the outside file", src)
		}
	}
}

type entry struct {
	h    tar.Header
	body string
}

func archive(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := e.h
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func file(name, body string) entry {
	return entry{h: tar.Header{Name: name, Typeflag: tar.TypeReg}, body: body}
}

// A malicious archive is refused with sources_invalid and leaves nothing in
// the deployments directory nor outside it.
func TestStoreSourcesRefusesMaliciousArchives(t *testing.T) {
	ok := file("data/ok.txt", "ok")
	// Unpacking stages in DIR/.unpack-*: "../../" from there is outside,
	// where the checks below look.
	outside := t.TempDir()
	cases := map[string][]byte{
		"parent escape":      archive(t, ok, file("../evil.txt", "evil")),
		"grandparent escape": archive(t, ok, file("../../evil.txt", "evil")),
		"nested escape":      archive(t, ok, file("a/../../../evil.txt", "evil")),
		"absolute":           archive(t, ok, file(filepath.Join(outside, "abs-evil.txt"), "evil")),
		"unclean":            archive(t, file("a//b.txt", "x")),
		"dot dot dir":        archive(t, entry{h: tar.Header{Name: "../", Typeflag: tar.TypeDir}}),
		"symlink":            archive(t, entry{h: tar.Header{Name: "data", Typeflag: tar.TypeSymlink, Linkname: "/"}}, file("data/evil.txt", "evil")),
		"hardlink":           archive(t, ok, entry{h: tar.Header{Name: "hl", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"}}),
		"char device":        archive(t, entry{h: tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}}),
		"block device":       archive(t, entry{h: tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}),
		"fifo":               archive(t, entry{h: tar.Header{Name: "p", Typeflag: tar.TypeFifo}}),
		"duplicate":          archive(t, ok, file("data/ok.txt", "again")),
		"file over file dir": archive(t, file("a", "x"), file("a/b", "y")),
		"not a tar":          []byte(strings.Repeat("garbage!", 200)),
		"truncated":          archive(t, file("big.txt", strings.Repeat("x", 2000)))[:1200],
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(outside, "deps-"+strings.ReplaceAll(name, " ", "-"))
			_, _, err := StoreSources(dir, bytes.NewReader(b))
			if !errors.Is(err, helmrtype.CodeSourcesInvalid) {
				t.Fatalf("StoreSources = %v, want sources_invalid", err)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("a refused archive left %d entries behind (%s…)", len(left), left[0].Name())
			}
		})
	}
	for _, n := range []string{"evil.txt", "abs-evil.txt"} {
		if _, err := os.Stat(filepath.Join(outside, n)); err == nil {
			t.Fatalf("%s was written outside the deployments directory", n)
		}
	}
}

// Directories keep their modes even when they are read-only, and files in
// directories without an entry of their own are accepted.
func TestUnpackReadOnlyDirectory(t *testing.T) {
	b := archive(t, entry{h: tar.Header{Name: "ro/", Typeflag: tar.TypeDir, Mode: 0o555}}, file("ro/f.txt", "f"), file("x/y/z.txt", "z"))
	dst := t.TempDir()
	if err := UnpackSources(bytes.NewReader(b), dst); err != nil {
		t.Fatalf("UnpackSources: %v", err)
	}
	t.Cleanup(func() { os.Chmod(filepath.Join(dst, "ro"), 0o755) })
	got := listTree(t, dst)
	want := []string{"ro dr-xr-xr-x", "ro/f.txt -rw-r--r-- f", "x drwxr-xr-x", "x/y drwxr-xr-x", "x/y/z.txt -rw-r--r-- z"}
	if !slices.Equal(got, want) {
		t.Fatalf("unpacked tree %q, want %q", got, want)
	}
}

func FuzzUnpackSources(f *testing.F) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	tw.WriteHeader(&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "a/b", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1})
	tw.Write([]byte("x"))
	tw.Close()
	f.Add(b.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dst := filepath.Join(parent, "dst")
		if err := os.Mkdir(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		err := UnpackSources(bytes.NewReader(data), dst)
		if err != nil && !errors.Is(err, helmrtype.CodeSourcesInvalid) {
			t.Logf("UnpackSources: %v", err) // I/O errors are possible, never a panic
		}
		filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type()&fs.ModeSymlink != 0 {
				t.Fatalf("unpacking made a symlink %s", p)
			}
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
		if left, _ := os.ReadDir(parent); len(left) != 1 {
			t.Fatalf("unpacking wrote beside its directory: %d entries", len(left))
		}
	})
}
