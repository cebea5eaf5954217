package supervisor

import (
	"context"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/image"
)

// StoreImages resolves Templates' images with an image store.
type StoreImages struct{ Store *image.Store }

// Resolve pulls or builds the image (cached after the first time); Copy
// steps read sourceDir.
func (s StoreImages) Resolve(ctx context.Context, m helmrtype.ImageManifest, sourceDir string) (computer.Image, error) {
	img, err := s.Store.Resolve(ctx, m, image.BuildOptions{SourceDir: sourceDir})
	if err != nil {
		return computer.Image{}, err
	}
	return computer.Image{Host: img.Host, Root: img.Root, Env: img.Env, Workdir: img.Workdir, User: img.User}, nil
}
