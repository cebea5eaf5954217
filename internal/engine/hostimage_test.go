package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
)

// TestHostImageBuildStepsAreRefused: a Deployment whose FromHost() image
// has build steps is refused at publish with invalid_request naming the
// Template and the step, and nothing is published.
func TestHostImageBuildStepsAreRefused(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "helmr.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, engine.Options{})
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go",
		Templates: []helmrtype.TemplateManifest{
			{ID: "plain", Image: helmrtype.ImageManifest{Name: "plain", Host: true}},
			{ID: "tools", Image: helmrtype.ImageManifest{Name: "toolbox", Host: true,
				Steps: []helmrtype.ImageStep{{Op: "run", Args: []string{"apt-get", "install", "-y", "ripgrep"}}}}}},
		Agents: []helmrtype.AgentManifest{{ID: "echo", Template: "tools", InputKind: "text", CloseAfterIdle: "7d", HibernateAfterIdle: "never"}}}
	_, err = e.PublishDeployment(ctx, "sha256:host-steps", m, "", "")
	var he *helmrtype.Error
	if !errors.As(err, &he) || he.Code != helmrtype.CodeInvalidRequest {
		t.Fatalf("publish = %v, want invalid_request", err)
	}
	if !strings.Contains(he.Message, `template "tools"`) || !strings.Contains(he.Message, "apt-get") || he.Details["template"] != "tools" || he.Details["op"] != "run" {
		t.Fatalf("the refusal does not name the Template and the step: %q %v", he.Message, he.Details)
	}
	if page, err := e.ListDeployments(ctx, "", 10); err != nil || len(page.Deployments) != 0 {
		t.Fatalf("deployments after the refusal: %+v %v", page, err)
	}
	// Without the step the same manifest is published.
	m.Templates[1].Image.Steps = nil
	if _, err := e.PublishDeployment(ctx, "sha256:host-steps", m, "", ""); err != nil {
		t.Fatalf("publish without steps: %v", err)
	}
}
