package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/deploy"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/supervisor"
)

// Several nodes on one PostgreSQL database (docs/scale-out.md): each has
// its own data directory and node ID, hears the others' changes through
// the store, and keeps deployment binaries in the database so that it can
// launch Deployments another node received.

// isPostgres reports whether a database URL names PostgreSQL.
func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// nodeID returns the node ID kept in dataDir/node-id, making one (a UUID)
// at the first start: a node that restarts on its data directory is the
// same node, and takes back the processes it left running.
func nodeID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "node-id")
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	id := uuid.Must(uuid.NewV7()).String()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	return id, nil
}

// NodeID is this node's ID among those sharing the database; "" on SQLite.
func (cp *ControlPlane) NodeID() string { return cp.cfg.NodeID }

// listen starts hearing the other nodes' changes, when the database is
// shared, and returns once it listens (so nothing committed after Open
// returns is missed).
func (cp *ControlPlane) listen(ctx context.Context) error {
	l, ok := cp.Store.(store.Listener)
	if !cp.shared || !ok {
		return nil
	}
	lctx, stop := context.WithCancel(context.Background())
	cp.stopListen, cp.listenDone = stop, make(chan struct{})
	listening := make(chan struct{}, 1)
	go func() {
		defer close(cp.listenDone)
		l.Listen(lctx, func(n store.Notice) {
			cp.Engine.Remote(lctx, n)
			cp.Supervisor.Notice(n)
		}, func() {
			select {
			case listening <- struct{}{}:
			default:
			}
			cp.Engine.Resync(lctx)
			go cp.Supervisor.Resync()
		})
	}()
	select {
	case <-listening:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("controlplane: could not listen for other nodes' changes within 30s")
	}
}

// stopListening stops hearing other nodes.
func (cp *ControlPlane) stopListening() {
	if cp.stopListen != nil {
		cp.stopListen()
		<-cp.listenDone
		cp.stopListen = nil
	}
}

// PublishDeployment publishes a Deployment whose binary is at path and
// whose sources archive (sourcesDigest, "" for none) is kept in the
// deployments directory; with a shared database both are kept there too,
// for the other nodes.
//
// Before the Deployment becomes current, every Template's image is pulled
// and built on this node with the launcher's image store (Copy steps read
// the Deployment's sources), so that its first Sessions find them cached;
// progress, when set, hears each step. An image that cannot be made
// refuses the Deployment (image_build_failed) and the current Deployment
// stays what it was. Other nodes build an image at their first launch of
// it.
func (cp *ControlPlane) PublishDeployment(ctx context.Context, digest string, m helmrtype.Manifest, path, sourcesDigest string, progress func(helmrtype.DeployProgress)) (*helmrtype.Deployment, error) {
	if err := cp.checkLimits(m); err != nil {
		return nil, err
	}
	if err := cp.prepareImages(ctx, m, sourcesDigest, progress); err != nil {
		return nil, err
	}
	if cp.shared {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := cp.Engine.PutBinary(ctx, digest, b); err != nil {
			return nil, err
		}
		if sourcesDigest != "" {
			src, err := os.ReadFile(deploy.SourcesArchive(cp.DeploymentsDir(), sourcesDigest))
			if err != nil {
				return nil, fmt.Errorf("the sources archive %s: %w", sourcesDigest, err)
			}
			if err := cp.Engine.PutBinary(ctx, sourcesDigest, src); err != nil {
				return nil, err
			}
		}
	}
	return cp.Engine.PublishDeployment(ctx, digest, m, path, sourcesDigest)
}

// prepareImages resolves the images of m's Templates, when the launcher
// has images to prepare (the default one does).
func (cp *ControlPlane) prepareImages(ctx context.Context, m helmrtype.Manifest, sourcesDigest string, progress func(helmrtype.DeployProgress)) error {
	p, ok := cp.launcher.(supervisor.ImagePreparer)
	if !ok {
		return nil
	}
	// The engine validates the manifest again as it publishes; an invalid
	// one is refused before anything is built for it.
	if err := engine.ValidateManifest(&m); err != nil {
		return err
	}
	sourceDir := ""
	if sourcesDigest != "" {
		dir, err := cp.resolveSources(ctx, sourcesDigest)
		if err != nil {
			return err
		}
		sourceDir = dir
	}
	return p.PrepareImages(ctx, m, sourceDir, progress)
}

// StoreSources keeps a sources archive read from r in the deployments
// directory, unpacked, and returns its digest; see deploy.StoreSources.
func (cp *ControlPlane) StoreSources(r io.Reader) (string, error) {
	digest, _, err := deploy.StoreSources(cp.DeploymentsDir(), r)
	return digest, err
}

// resolveSources returns the local directory of a Deployment's unpacked
// sources: this node's copy, unpacked from the archive kept here or
// fetched from the database the first time.
func (cp *ControlPlane) resolveSources(ctx context.Context, digest string) (string, error) {
	dir := deploy.SourcesDir(cp.DeploymentsDir(), digest)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if _, err := os.Stat(deploy.SourcesArchive(cp.DeploymentsDir(), digest)); err == nil {
		return deploy.UnpackKept(cp.DeploymentsDir(), digest)
	}
	if !cp.shared {
		return "", fmt.Errorf("the sources archive %s is not on this node", digest)
	}
	b, err := cp.Engine.GetBinary(ctx, digest)
	if err != nil {
		return "", fmt.Errorf("the sources archive %s is not on this node nor in the database: %w", digest, err)
	}
	return deploy.StoreSourcesAs(cp.DeploymentsDir(), bytes.NewReader(b), digest)
}

// resolveBinary returns the local path of a Deployment's binary: the path
// recorded at publication when it is on this node, else this node's copy,
// fetched from the database the first time.
func (cp *ControlPlane) resolveBinary(ctx context.Context, digest, path string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	local := deploy.BinaryPath(cp.DeploymentsDir(), digest)
	if _, err := os.Stat(local); err == nil || !cp.shared {
		return local, nil
	}
	b, err := cp.Engine.GetBinary(ctx, digest)
	if err != nil {
		return "", fmt.Errorf("the binary of deployment %s is not on this node nor in the database: %w", digest, err)
	}
	return deploy.StoreAs(cp.DeploymentsDir(), bytes.NewReader(b), digest)
}

// checkLimits refuses, with RequireLimits, Templates of m whose limits the
// host does not enforce (code limits_unenforced).
func (cp *ControlPlane) checkLimits(m helmrtype.Manifest) error {
	if !cp.cfg.RequireLimits || cp.unenforced == nil {
		return nil
	}
	for _, t := range m.Templates {
		if off := cp.unenforced(t.Resources); len(off) > 0 {
			return helmrtype.Errorf(helmrtype.CodeLimitsUnenforced, "Template %q sets %s limits, which this host cannot enforce (%s); start helmr server with --allow-unlimited to run it without them",
				t.ID, strings.Join(off, ", "), cp.isolation.LimitsWhy)
		}
	}
	return nil
}
