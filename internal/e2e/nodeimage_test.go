package e2e

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// lddPaths are the shared libraries ldd names for a binary.
var lddPath = regexp.MustCompile(`(?m)(?:=>\s*|^\s*)(/\S+)\s+\(0x`)

// hostNodeImage is an OCI image of the host's node: the binary and the
// shared libraries it loads, at their paths, with PATH set. It stands in
// for a registry's node image where no registry can be reached.
func hostNodeImage(t *testing.T) v1.Image {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not on PATH")
	}
	out, err := exec.Command("ldd", node).Output()
	if err != nil {
		t.Skipf("ldd %s: %v (a static node is not handled)", node, err)
	}
	files := []string{node}
	for _, m := range lddPath.FindAllStringSubmatch(string(out), -1) {
		files = append(files, m[1])
	}
	dirs := map[string]bool{"tmp": true, "workspace": true}
	for _, f := range files {
		for d := path.Dir(strings.TrimPrefix(f, "/")); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(dirs))
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	for _, d := range names {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f) // through symlinks: the image holds the files
		if err != nil {
			t.Fatal(err)
		}
		h := &tar.Header{Name: strings.TrimPrefix(f, "/"), Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(b)), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	img, err = mutate.Config(img, v1.Config{Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// serveImages starts an OCI registry on loopback holding img under each of
// refs (repository:tag) and returns its host:port. Loopback registries are
// spoken to over plain HTTP.
func serveImages(t *testing.T, img v1.Image, refs ...string) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, r := range refs {
		ref, err := name.ParseReference(host+"/"+r, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img, remote.WithTransport(srv.Client().Transport)); err != nil {
			t.Fatal(err)
		}
	}
	return host
}
