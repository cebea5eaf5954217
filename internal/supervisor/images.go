package supervisor

import (
	"context"
	"errors"
	"fmt"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer"
	"github.com/helmr-go/helmr/internal/image"
)

// StoreImages resolves Templates' images with an image store.
type StoreImages struct{ Store *image.Store }

// Resolve pulls or builds the image (cached after the first time); Copy
// steps read b.SourceDir and b.Progress hears how it goes.
func (s StoreImages) Resolve(ctx context.Context, m helmrtype.ImageManifest, b image.BuildOptions) (computer.Image, error) {
	img, err := s.Store.Resolve(ctx, m, b)
	if err != nil {
		return computer.Image{}, err
	}
	return computer.Image{Host: img.Host, Root: img.Root, Env: img.Env, Workdir: img.Workdir, User: img.User}, nil
}

// templateImage resolves Template t's image: the one piece of code that
// does it, for a launch and for a publication (PrepareImages). progress,
// when set, hears the image's events with the Template named.
func templateImage(ctx context.Context, images ImageResolver, t helmrtype.TemplateManifest, sourceDir string, progress func(helmrtype.DeployProgress)) (computer.Image, error) {
	m := t.Image
	if m.Host {
		return computer.Image{Host: true}, nil
	}
	if images == nil {
		return computer.Image{}, fmt.Errorf("template %s: image %q needs an image store", t.ID, m.From)
	}
	b := image.BuildOptions{SourceDir: sourceDir}
	if progress != nil {
		b.Progress = func(p helmrtype.DeployProgress) {
			p.Template = t.ID
			progress(p)
		}
	}
	img, err := images.Resolve(ctx, m, b)
	if err != nil {
		return computer.Image{}, fmt.Errorf("template %s: %w", t.ID, err)
	}
	return img, nil
}

// ImagePreparer prepares a Deployment's images before it is published.
type ImagePreparer interface {
	PrepareImages(ctx context.Context, m helmrtype.Manifest, sourceDir string, progress func(helmrtype.DeployProgress)) error
}

// PrepareImages resolves the image of every Template of m, in manifest
// order, so that the Computers launched later find them cached; Copy steps
// read sourceDir. A Template whose image cannot be pulled or built fails
// it with image_build_failed, naming the Template, the image and, when a
// build step failed, the step (details "template", "image", "step", "op").
// An ended ctx is returned as it is.
func (l *ComputerLauncher) PrepareImages(ctx context.Context, m helmrtype.Manifest, sourceDir string, progress func(helmrtype.DeployProgress)) error {
	for _, t := range m.Templates {
		if t.Image.Host {
			continue
		}
		var last helmrtype.DeployProgress // the last step started
		_, err := templateImage(ctx, l.Images, t, sourceDir, func(p helmrtype.DeployProgress) {
			if p.Kind == helmrtype.ProgressStep {
				last = p
			}
			if progress != nil {
				progress(p)
			}
		})
		if err == nil {
			continue
		}
		if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			return err
		}
		e := helmrtype.Errorf(helmrtype.CodeImageBuildFailed, "%v", err)
		e.Details = map[string]any{"template": t.ID, "image": t.Image.Name}
		if last.Step > 0 && last.State == helmrtype.ProgressStarted {
			e.Details["step"], e.Details["op"] = last.Step, last.Op
		}
		return e
	}
	return nil
}
