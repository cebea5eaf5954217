package helmrclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
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
	// Progress, when set, asks the server to stream how it prepares the
	// Templates' images (Accept: application/x-ndjson, see docs/api.md)
	// and is called once per event, in order, before Upload returns.
	Progress func(helmrtype.DeployProgress)
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
	if u.Progress == nil {
		req.Header.Set("Accept", "application/json")
		var out helmrtype.Deployment
		if _, err := d.c.send(req, &out); err != nil {
			return nil, err
		}
		return &out, nil
	}
	req.Header.Set("Accept", ndjson+", application/json")
	resp, err := d.c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, decodeError(resp)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != ndjson {
		// A server that does not stream answers as without Progress.
		var out helmrtype.Deployment
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return nil, fmt.Errorf("helmrclient: decode answer of POST /v1/deployments: %w", err)
		}
		return &out, nil
	}
	return readDeployStream(resp, u.Progress)
}

// ndjson is the media type of the upload's progress stream.
const ndjson = "application/x-ndjson"

// deployLine is one line of the upload's progress stream.
type deployLine struct {
	Progress   *helmrtype.DeployProgress `json:"progress"`
	Deployment *helmrtype.Deployment     `json:"deployment"`
	Error      *helmrtype.Error          `json:"error"`
}

// readDeployStream reads the progress stream of resp, calling progress
// per progress line, until its last line: the Deployment or the error.
func readDeployStream(resp *http.Response, progress func(helmrtype.DeployProgress)) (*helmrtype.Deployment, error) {
	dec := json.NewDecoder(resp.Body)
	for {
		var l deployLine
		if err := dec.Decode(&l); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("helmrclient: the deployment's progress stream ended without its outcome: %w", err)
		}
		switch {
		case l.Error != nil:
			e := l.Error
			if e.Code == "" {
				e.Code = helmrtype.CodeInternal
			}
			e.Status, e.RequestID = helmrtype.HTTPStatus(e.Code), resp.Header.Get("X-Request-Id")
			return nil, e
		case l.Deployment != nil:
			return l.Deployment, nil
		case l.Progress != nil:
			progress(*l.Progress)
		}
	}
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
