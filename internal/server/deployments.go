package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/deploy"
)

// maxBinary bounds an uploaded agent binary.
const maxBinary = 512 << 20

func (s *Server) listDeployments(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := s.eng.ListDeployments(r.Context(), r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) getDeployment(w http.ResponseWriter, r *http.Request) error {
	d, err := s.eng.GetDeployment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// promoteDeployment makes an earlier Deployment current again.
func (s *Server) promoteDeployment(w http.ResponseWriter, r *http.Request) error {
	d, err := s.eng.PromoteDeployment(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// uploadError reports a failed upload read: too large is 413.
func uploadError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the upload is larger than %d bytes", int64(maxBinary+deploy.MaxSources))
	}
	return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "reading the upload: %v", err)
}

// createDeployment takes a multipart upload with the agent program's
// artifact in the part "binary". The manifest is read from the artifact
// itself; a "manifest" part, when sent, must agree with it, and its
// "runtime" says how to run the artifact: absent for a native binary,
// "node" for a Node bundle (run as `node bundle --helmr-manifest`). When
// the manifest's Templates have Copy steps, the part "sources" carries the
// tar archive of what they copy (see internal/deploy/sources.go); it is
// checked, kept content-addressed and unpacked before the Deployment is
// published.
func (s *Server) createDeployment(w http.ResponseWriter, r *http.Request) error {
	if s.opts.DeploymentsDir == "" {
		return helmrtype.Errorf(helmrtype.CodeUnavailable, "this server takes no deployment uploads")
	}
	// An agent binary may take longer to send than the server's read
	// timeout allows an ordinary request.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(UploadTimeout))
	rc.SetWriteDeadline(time.Now().Add(UploadTimeout + time.Minute))
	r.Body = http.MaxBytesReader(w, r.Body, maxBinary+deploy.MaxSources)
	mr, err := r.MultipartReader()
	if err != nil {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "send multipart/form-data with a part named binary: %v", err)
	}
	var digest, path, sourcesDigest, sourceDir string
	var sent *helmrtype.Manifest
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return uploadError(err)
		}
		switch part.FormName() {
		case "binary":
			if digest, path, err = deploy.Store(s.opts.DeploymentsDir, io.LimitReader(part, maxBinary+1)); err != nil {
				return uploadError(err)
			}
			if fi, err := os.Stat(path); err == nil && fi.Size() > maxBinary {
				os.Remove(path)
				return helmrtype.Errorf(helmrtype.CodeLimitExceeded, "the agent binary is larger than %d bytes", int64(maxBinary))
			}
		case "sources":
			if sourcesDigest != "" {
				return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the upload has more than one part named sources")
			}
			if sourcesDigest, sourceDir, err = deploy.StoreSources(s.opts.DeploymentsDir, part); err != nil {
				if c := helmrtype.CodeOf(err); c == helmrtype.CodeSourcesInvalid || c == helmrtype.CodeLimitExceeded {
					return err
				}
				return uploadError(err)
			}
		case "manifest":
			var m helmrtype.Manifest
			if err := json.NewDecoder(io.LimitReader(part, maxJSONBody)).Decode(&m); err != nil {
				return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "manifest: %v", err)
			}
			sent = &m
		}
	}
	if path == "" {
		return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the upload has no part named binary")
	}
	runtime := helmrtype.RuntimeNative
	if sent != nil {
		runtime = sent.Runtime
	}
	readManifest := s.opts.ReadManifest
	if readManifest == nil {
		readManifest = deploy.ReadManifestAs
	}
	m, err := readManifest(r.Context(), path, runtime)
	if err != nil {
		return err
	}
	if sent != nil {
		a, _ := json.Marshal(sent)
		b, _ := json.Marshal(m)
		if string(a) != string(b) {
			return helmrtype.Errorf(helmrtype.CodeInvalidRequest, "the manifest sent does not match the one the binary prints")
		}
	}
	if srcs := m.CopySources(); len(srcs) > 0 && sourcesDigest == "" {
		return helmrtype.Errorf(helmrtype.CodeSourcesInvalid,
			"the manifest's Templates copy %q from the agent package; send those files in a part named sources (helmr deploy does)", srcs)
	}
	if sourcesDigest != "" {
		if err := deploy.CheckSources(sourceDir, m); err != nil {
			return err
		}
	}
	publish := func(ctx context.Context, digest string, m helmrtype.Manifest, path, sourcesDigest string, _ func(helmrtype.DeployProgress)) (*helmrtype.Deployment, error) {
		return s.eng.PublishDeployment(ctx, digest, m, path, sourcesDigest)
	}
	if s.opts.Publish != nil {
		publish = s.opts.Publish
	}
	if !acceptsNDJSON(r) {
		d, err := publish(r.Context(), digest, m, path, sourcesDigest, nil)
		// Preparing the images may take longer than the upload's deadline.
		rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, d)
		return nil
	}
	st := &progressStream{w: w, rc: rc}
	st.start()
	d, err := publish(r.Context(), digest, m, path, sourcesDigest, func(p helmrtype.DeployProgress) {
		st.line(progressLine{Progress: &p})
	})
	if err != nil {
		if he := s.apiError(r, err); he != nil {
			st.line(progressLine{Error: he})
		}
		return nil
	}
	st.line(progressLine{Deployment: d})
	return nil
}

// ndjson is the media type of the Deployment upload's progress stream.
const ndjson = "application/x-ndjson"

// acceptsNDJSON reports whether the request's Accept header names ndjson.
func acceptsNDJSON(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if t, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && t == ndjson {
				return true
			}
		}
	}
	return false
}

// progressLine is one line of the progress stream: exactly one field is set.
type progressLine struct {
	Progress   *helmrtype.DeployProgress `json:"progress,omitempty"`
	Deployment *helmrtype.Deployment     `json:"deployment,omitempty"`
	Error      *helmrtype.Error          `json:"error,omitempty"`
}

// progressStream writes a Deployment upload's answer as NDJSON, one line
// at a time, each flushed, with the write deadline extended before each:
// images may take longer to build than any fixed deadline.
type progressStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error // a write failed: the client is gone, the rest is dropped
}

// start sends the stream's header: 200, since the outcome is not known yet.
func (p *progressStream) start() {
	p.w.Header().Set("Content-Type", ndjson)
	p.w.Header().Set("Cache-Control", "no-store")
	p.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	p.w.WriteHeader(http.StatusOK)
	p.err = p.rc.Flush()
}

// line writes v as one line and flushes it.
func (p *progressStream) line(v progressLine) {
	if p.err != nil {
		return
	}
	p.rc.SetWriteDeadline(time.Now().Add(WriteTimeout))
	if p.err = json.NewEncoder(p.w).Encode(v); p.err == nil {
		p.err = p.rc.Flush()
	}
}
