package helmrclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"

	"github.com/helmr-go/helmr/helmrtype"
)

// CurrentDeployment is the ID that names the current Deployment in
// Deployments.Get.
const CurrentDeployment = "current"

// Deployments reads and uploads Deployments; reach it as Client.Deployments.
type Deployments struct{ c *Client }

// Get returns Deployment id; CurrentDeployment names the current one.
func (d *Deployments) Get(ctx context.Context, id string) (*helmrtype.Deployment, error) {
	var out helmrtype.Deployment
	if err := d.c.do(ctx, http.MethodGet, "/v1/deployments/"+pathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Promote makes the earlier Deployment id current again: new Sessions pin
// it and the cron Schedules follow its triggers; existing Sessions keep
// their Deployment.
func (d *Deployments) Promote(ctx context.Context, id string) (*helmrtype.Deployment, error) {
	var out helmrtype.Deployment
	if err := d.c.do(ctx, http.MethodPost, "/v1/deployments/"+pathEscape(id)+"/promote", nil, struct{}{}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List returns one page of Deployments, newest first.
func (d *Deployments) List(ctx context.Context, opts ListOptions) (*helmrtype.DeploymentPage, error) {
	if opts.Limit < 0 || opts.Limit > 100 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "limit %d: want 1–100", opts.Limit)
	}
	q := url.Values{}
	opts.values(q)
	var out helmrtype.DeploymentPage
	if err := d.c.do(ctx, http.MethodGet, "/v1/deployments", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Create uploads an agent program, its manifest and its executable, as a new
// Deployment and makes it current. The binary is streamed, not buffered. A
// program whose Templates have Copy steps needs Upload, with its sources.
func (d *Deployments) Create(ctx context.Context, manifest helmrtype.Manifest, binary io.Reader) (*helmrtype.Deployment, error) {
	return d.Upload(ctx, DeploymentUpload{Manifest: manifest, Binary: binary})
}

// DeploymentUpload is what Deployments.Upload sends.
type DeploymentUpload struct {
	// Manifest is what the binary prints; the server checks that they
	// agree. Its Runtime tells the server how to run Binary.
	Manifest helmrtype.Manifest
	// Binary is the agent program's artifact: its executable, or its Node
	// bundle when Manifest.Runtime is "node".
	Binary io.Reader
	// Sources is a tar archive of the files the Templates' Copy steps read,
	// relative to the agent package (see docs/api.md); nil when there are
	// no Copy steps. helmr deploy packs it deterministically.
	Sources io.Reader
}

// Upload uploads an agent program as a new Deployment, with the sources
// its Templates' Copy steps read, and makes it current. The binary and the
// sources are streamed, not buffered.
func (d *Deployments) Upload(ctx context.Context, u DeploymentUpload) (*helmrtype.Deployment, error) {
	mb, err := json.Marshal(u.Manifest)
	if err != nil {
		return nil, fmt.Errorf("helmrclient: encode manifest: %w", err)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeDeploymentParts(mw, mb, u.Binary, u.Sources))
	}()
	defer func() {
		pr.Close() // unblocks the writer if the request ended early
		<-done
	}()
	req, err := d.c.newRequest(ctx, http.MethodPost, "/v1/deployments", nil, pr)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Accept", "application/json")
	var out helmrtype.Deployment
	if _, err := d.c.send(req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// writeDeploymentParts writes the manifest part, the binary part and the
// sources part (when there are sources), and closes the multipart body.
func writeDeploymentParts(mw *multipart.Writer, manifest []byte, binary, sources io.Reader) error {
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="manifest"`)
	h.Set("Content-Type", "application/json")
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := w.Write(manifest); err != nil {
		return err
	}
	fw, err := mw.CreateFormFile("binary", "agent")
	if err != nil {
		return err
	}
	if _, err := io.Copy(fw, binary); err != nil {
		return fmt.Errorf("helmrclient: read agent binary: %w", err)
	}
	if sources != nil {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="sources"; filename="sources.tar"`)
		h.Set("Content-Type", "application/x-tar")
		sw, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		if _, err := io.Copy(sw, sources); err != nil {
			return fmt.Errorf("helmrclient: read sources: %w", err)
		}
	}
	return mw.Close()
}
