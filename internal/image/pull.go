package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// scratchKey is the key of the empty root.
var scratchKey = hashParts("helmr.image.scratch.v1")

// base is the root an image starts from.
type base struct {
	key    string // hex; the root is roots/<key>
	meta   rootMeta
	cached bool
}

// scratch returns the empty root, creating it once.
func (s *Store) scratch(ctx context.Context) (base, error) {
	unlock, err := s.locks.lock(ctx, scratchKey)
	if err != nil {
		return base{}, err
	}
	defer unlock()
	if meta, ok := s.cachedRoot(scratchKey); ok {
		return base{key: scratchKey, meta: meta, cached: true}, nil
	}
	stage, err := s.stage(scratchKey)
	if err != nil {
		return base{}, err
	}
	meta := rootMeta{Source: "scratch"}
	if err := os.Chmod(stage, 0o755); err != nil {
		s.discard(stage)
		return base{}, err
	}
	if err := s.publish(scratchKey, stage, meta); err != nil {
		s.discard(stage)
		return base{}, err
	}
	return base{key: scratchKey, meta: meta}, nil
}

// platform is the platform an index is resolved for: the host's, since the
// root's binaries run on it.
func platform() v1.Platform { return v1.Platform{OS: "linux", Architecture: runtime.GOARCH} }

func (s *Store) remoteOptions(ctx context.Context) []remote.Option {
	o := []remote.Option{remote.WithContext(ctx), remote.WithPlatform(platform())}
	if s.opts.Transport != nil {
		o = append(o, remote.WithTransport(s.opts.Transport))
	}
	if s.opts.Keychain != nil {
		o = append(o, remote.WithAuthFromKeychain(s.opts.Keychain))
	}
	return o
}

// pull returns the root of registry image ref, pulling and unpacking it when
// it is not cached. A tag is resolved with the registry every time; a
// digest whose root is cached needs no network.
func (s *Store) pull(ctx context.Context, refStr string) (base, error) {
	var nameOpts []name.Option
	if s.opts.Insecure {
		nameOpts = append(nameOpts, name.Insecure)
	}
	ref, err := name.ParseReference(refStr, nameOpts...)
	if err != nil {
		return base{}, fmt.Errorf("parse reference: %w", err)
	}
	var refHex string // the digest the reference names, sha256 only
	if d, ok := ref.(name.Digest); ok {
		if h, ok := strings.CutPrefix(d.DigestStr(), "sha256:"); ok {
			refHex = h
			if b, ok := s.cachedDigest(refHex); ok {
				return b, nil
			}
		}
	}

	desc, err := remote.Get(ref, s.remoteOptions(ctx)...)
	if err != nil {
		return base{}, fmt.Errorf("fetch manifest of %s: %w", ref, err)
	}
	if refHex == "" && desc.Digest.Algorithm == "sha256" {
		refHex = desc.Digest.Hex // an index's digest, remembered below
		if b, ok := s.cachedDigest(refHex); ok {
			return b, nil // an index resolved before: no need to fetch its child
		}
	}
	img, err := desc.Image()
	if err != nil {
		return base{}, fmt.Errorf("image for %s/%s in %s: %w", platform().OS, platform().Architecture, ref, err)
	}
	dg, err := img.Digest()
	if err != nil {
		return base{}, fmt.Errorf("digest of %s: %w", ref, err)
	}
	if dg.Algorithm != "sha256" || len(dg.Hex) != 64 {
		return base{}, fmt.Errorf("image %s has unsupported digest %s", ref, dg)
	}
	key := dg.Hex
	unlock, err := s.locks.lock(ctx, key)
	if err != nil {
		return base{}, err
	}
	defer unlock()
	defer s.recordDigest(refHex, key)
	if meta, ok := s.cachedRoot(key); ok {
		return base{key: key, meta: meta, cached: true}, nil
	}

	start := time.Now()
	cfg, err := img.ConfigFile()
	if err != nil {
		return base{}, fmt.Errorf("image config of %s: %w", ref, err)
	}
	meta := rootMeta{Source: ref.Context().Name() + "@" + dg.String()}
	meta.Env = append([]string(nil), cfg.Config.Env...)
	meta.Workdir = cfg.Config.WorkingDir
	meta.User = cfg.Config.User
	layers, err := img.Layers()
	if err != nil {
		return base{}, fmt.Errorf("layers of %s: %w", ref, err)
	}
	stage, err := s.stage(key)
	if err != nil {
		return base{}, err
	}
	published := false
	defer func() {
		if !published {
			s.discard(stage)
		}
	}()
	if err := s.unpack(ctx, stage, layers); err != nil {
		return base{}, fmt.Errorf("unpack %s: %w", ref, err)
	}
	if err := s.publish(key, stage, meta); err != nil {
		return base{}, err
	}
	published = true
	s.log.Info("image pulled", "ref", ref.String(), "digest", dg.String(), "layers", len(layers), "took", time.Since(start).Round(time.Millisecond))
	return base{key: key, meta: meta}, nil
}

// unpack applies layers in order to the staging directory.
func (s *Store) unpack(ctx context.Context, stage string, layers []v1.Layer) error {
	t, err := newTree(stage, s.log)
	if err != nil {
		return err
	}
	defer t.close()
	for i, l := range layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		err = t.unpackLayer(rc)
		if cerr := rc.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
	}
	if err := t.finish(); err != nil {
		return err
	}
	return os.Chmod(stage, 0o755)
}

// digestKey returns the root key recorded for a digest reference's hex
// digest: the digest itself for an image manifest, the resolved image's for
// an index. "" when unknown.
func (s *Store) digestKey(refHex string) string {
	if len(refHex) != 64 || strings.ContainsAny(refHex, "/.") {
		return ""
	}
	if fi, err := os.Stat(s.rootDir(refHex)); err == nil && fi.IsDir() {
		return refHex
	}
	b, err := os.ReadFile(filepath.Join(s.refs, refHex))
	if err != nil {
		return ""
	}
	key := strings.TrimSpace(string(b))
	if len(key) != 64 || strings.ContainsAny(key, "/.") {
		return ""
	}
	return key
}

// cachedDigest returns the cached root that a manifest or index digest
// resolves to.
func (s *Store) cachedDigest(hex string) (base, bool) {
	key := s.digestKey(hex)
	if key == "" {
		return base{}, false
	}
	meta, ok := s.cachedRoot(key)
	return base{key: key, meta: meta, cached: true}, ok
}

// recordDigest remembers that index digest refHex resolved to root key, so
// that a later Resolve of that digest needs no network and one of a tag
// naming it needs only the index. The record is for this host's platform,
// like everything in the Store.
func (s *Store) recordDigest(refHex, key string) {
	if refHex == "" || refHex == key || len(refHex) != 64 || strings.ContainsAny(refHex, "/.") {
		return
	}
	if _, ok := s.cachedRoot(key); !ok {
		return
	}
	p := filepath.Join(s.refs, refHex)
	f, err := os.CreateTemp(s.tmp, "ref-*")
	if err == nil {
		_, err = f.WriteString(key + "\n")
		err = errors.Join(err, f.Close())
		if err == nil {
			err = os.Rename(f.Name(), p)
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}
	if err != nil {
		s.log.Warn("image store: cannot record digest reference", "digest", refHex, "err", err)
	}
}
