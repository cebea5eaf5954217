package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/store"
)

const metaCurrentDeployment = "current_deployment"

// deployment is a parsed, immutable Deployment.
type deployment struct {
	row      store.Deployment
	manifest helmrtype.Manifest
	agents   map[string]*helmrtype.AgentManifest
	// mcp is each Agent's resolved runtime MCP maximum, normalized.
	mcp map[string]*helmrtype.RuntimeMCPPolicy
}

func parseDeployment(row *store.Deployment) (*deployment, error) {
	d := &deployment{row: *row, agents: map[string]*helmrtype.AgentManifest{}, mcp: map[string]*helmrtype.RuntimeMCPPolicy{}}
	if err := json.Unmarshal(row.Manifest, &d.manifest); err != nil {
		return nil, fmt.Errorf("deployment %s: manifest: %w", row.ID, err)
	}
	for i := range d.manifest.Agents {
		a := &d.manifest.Agents[i]
		d.agents[a.ID] = a
		p, err := d.manifest.RuntimeMCPOf(a)
		if err != nil {
			return nil, fmt.Errorf("deployment %s: %w", row.ID, err)
		}
		d.mcp[a.ID] = p
	}
	return d, nil
}

// checkHostImage refuses build steps on a host image: the host's
// directories are bound read-only, so a step would never run (they are
// not dropped silently either).
func checkHostImage(t helmrtype.TemplateManifest) error {
	if !t.Image.Host || len(t.Image.Steps) == 0 {
		return nil
	}
	st := t.Image.Steps[0]
	return &helmrtype.Error{Code: helmrtype.CodeInvalidRequest,
		Message: fmt.Sprintf("template %q: image %q is FromHost(), which takes no build steps, but step 1 is %s %q; "+
			"build on From(\"registry/name:tag\") or From(\"scratch\") instead", t.ID, t.Image.Name, st.Op, st.Args),
		Details: map[string]any{"template": t.ID, "image": t.Image.Name, "step": 1, "op": st.Op, "args": st.Args}}
}

// ValidateManifest checks a manifest before it is published.
func ValidateManifest(m *helmrtype.Manifest) error {
	if m.Version != helmrtype.ManifestVersion {
		return invalid("manifest version %q is not %q", m.Version, helmrtype.ManifestVersion)
	}
	if m.Runtime != helmrtype.RuntimeNative && m.Runtime != helmrtype.RuntimeNode {
		return invalid("manifest runtime %q is not \"\" (a native binary) or %q", m.Runtime, helmrtype.RuntimeNode)
	}
	if len(m.Agents) == 0 {
		return invalid("the manifest declares no agents")
	}
	templates := map[string]bool{}
	for _, t := range m.Templates {
		templates[t.ID] = true
		if err := t.Resources.Check(); err != nil {
			return invalid("template %q: %v", t.ID, err)
		}
		if len(t.NetworkAllow) > 0 && !t.Network {
			return invalid("template %q: network_allow needs network", t.ID)
		}
		if _, err := helmrtype.ParseNetworkAllow(t.NetworkAllow); err != nil {
			return invalid("template %q: %v", t.ID, err)
		}
		if err := checkHostImage(t); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for i, a := range m.Agents {
		if !helmrtype.ValidName(a.ID) {
			return invalid("agent id %q does not match %s", a.ID, helmrtype.NamePattern)
		}
		if seen[a.ID] {
			return invalid("agent id %q is declared twice", a.ID)
		}
		seen[a.ID] = true
		if !templates[a.Template] {
			return invalid("agent %q uses template %q, which the manifest does not declare", a.ID, a.Template)
		}
		if a.InputKind != helmrtype.InputKindText && a.InputKind != helmrtype.InputKindJSON {
			return invalid("agent %q: input_kind must be text or json", a.ID)
		}
		for _, r := range []string{a.CloseAfterIdle, a.HibernateAfterIdle} {
			if _, _, err := helmrtype.ParseRetention(r); err != nil {
				return invalid("agent %q: %v", a.ID, err)
			}
		}
		if a.MaxTurnDuration != "" {
			if _, err := helmrtype.ParseDuration(a.MaxTurnDuration); err != nil {
				return invalid("agent %q: max_turn_duration: %v", a.ID, err)
			}
		}
		if _, err := helmrtype.ParseIdleTimeout(a.IdleTimeout); err != nil {
			return invalid("agent %q: %v", a.ID, err)
		}
		names := map[string]bool{}
		for j := range a.Triggers {
			tr := &m.Agents[i].Triggers[j]
			if names[tr.Name] {
				return invalid("agent %q: trigger %q is declared twice", a.ID, tr.Name)
			}
			names[tr.Name] = true
			if err := checkTrigger(&m.Agents[i], tr); err != nil {
				return invalid("agent %q: %v", a.ID, err)
			}
		}
	}
	return m.CheckRuntimeMCP()
}

// PublishDeployment stores a Deployment for a binary with the given digest
// and the sources archive with sourcesDigest ("" for none), reusing an
// existing one with the same digests, and makes it current.
func (e *Engine) PublishDeployment(ctx context.Context, digest string, manifest helmrtype.Manifest, binaryPath, sourcesDigest string) (*helmrtype.Deployment, error) {
	if err := ValidateManifest(&manifest); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	var row *store.Deployment
	err = e.store.Update(ctx, func(tx store.Tx) error {
		existing, err := tx.GetDeploymentByDigest(ctx, digest, sourcesDigest)
		switch {
		case err == nil:
			row = existing
		case errors.Is(err, store.ErrNotFound):
			row = &store.Deployment{ID: NewID(), Digest: digest, Manifest: raw, BinaryPath: binaryPath,
				SourcesDigest: sourcesDigest, CreatedAt: e.Now()}
			if err := tx.InsertDeployment(ctx, row); err != nil {
				return err
			}
		default:
			return err
		}
		if err := tx.PutMeta(ctx, metaCurrentDeployment, row.ID); err != nil {
			return err
		}
		d, err := parseDeployment(row)
		if err != nil {
			return err
		}
		return e.reconcileSchedulesTx(ctx, tx, d, e.Now())
	})
	if err != nil {
		return nil, err
	}
	d, err := e.cacheDeployment(row)
	if err != nil {
		return nil, err
	}
	if err := e.ArmSchedules(ctx); err != nil {
		e.log.Error("arm the schedules", "err", err)
	}
	return d.info(true), nil
}

// PromoteDeployment makes the earlier Deployment id current again, in one
// transaction that also reconciles the cron Schedules with its triggers
// exactly as publishing does. New Sessions pin it; existing Sessions keep
// the Deployment they pinned. Promoting the current Deployment changes
// nothing and returns it.
func (e *Engine) PromoteDeployment(ctx context.Context, id string) (*helmrtype.Deployment, error) {
	var d *deployment
	err := e.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if d, err = e.deploymentTx(ctx, tx, id); err != nil {
			return err
		}
		if cur, err := tx.GetMeta(ctx, metaCurrentDeployment); err == nil && cur == d.row.ID {
			return nil
		}
		if err := tx.PutMeta(ctx, metaCurrentDeployment, d.row.ID); err != nil {
			return err
		}
		return e.reconcileSchedulesTx(ctx, tx, d, e.Now())
	})
	if err != nil {
		return nil, err
	}
	if err := e.ArmSchedules(ctx); err != nil {
		e.log.Error("arm the schedules", "err", err)
	}
	return d.info(true), nil
}

func (e *Engine) cacheDeployment(row *store.Deployment) (*deployment, error) {
	if d, ok := e.deps.Load(row.ID); ok {
		return d.(*deployment), nil
	}
	d, err := parseDeployment(row)
	if err != nil {
		return nil, err
	}
	e.deps.Store(row.ID, d)
	return d, nil
}

// deploymentTx loads a Deployment by ID inside tx, from the cache when it can.
func (e *Engine) deploymentTx(ctx context.Context, tx store.Tx, id string) (*deployment, error) {
	if d, ok := e.deps.Load(id); ok {
		return d.(*deployment), nil
	}
	row, err := tx.GetDeployment(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("deployment", id)
	}
	if err != nil {
		return nil, err
	}
	return e.cacheDeployment(row)
}

// sessionAgentTx loads a Session with the Deployment it is pinned to and
// its Agent's manifest entry there.
func (e *Engine) sessionAgentTx(ctx context.Context, tx store.Tx, sessionID string) (*store.Session, *deployment, *helmrtype.AgentManifest, error) {
	s, err := e.getSessionTx(ctx, tx, sessionID)
	if err != nil {
		return nil, nil, nil, err
	}
	dep, err := e.deploymentTx(ctx, tx, s.DeploymentID)
	if err != nil {
		return nil, nil, nil, err
	}
	a, ok := dep.agents[s.Agent]
	if !ok {
		return nil, nil, nil, notFound("agent", s.Agent)
	}
	return s, dep, a, nil
}

func (e *Engine) currentDeploymentTx(ctx context.Context, tx store.Tx) (*deployment, error) {
	id, err := tx.GetMeta(ctx, metaCurrentDeployment)
	if errors.Is(err, store.ErrNotFound) {
		return nil, helmrtype.Errorf(helmrtype.CodeNoDeployment, "nothing is deployed yet; run helmr deploy or helmr dev")
	}
	if err != nil {
		return nil, err
	}
	return e.deploymentTx(ctx, tx, id)
}

func (d *deployment) info(current bool) *helmrtype.Deployment {
	names := make([]string, 0, len(d.agents))
	for id := range d.agents {
		names = append(names, id)
	}
	sort.Strings(names)
	return &helmrtype.Deployment{ID: d.row.ID, Digest: d.row.Digest, SourcesDigest: d.row.SourcesDigest, Current: current,
		Agents: names, Manifest: d.manifest, CreatedAt: d.row.CreatedAt}
}

func (d *deployment) agentInfo(a *helmrtype.AgentManifest) helmrtype.AgentInfo {
	mcp, _ := json.Marshal(d.mcp[a.ID])
	return helmrtype.AgentInfo{Agent: a.ID, Template: a.Template, DeploymentID: d.row.ID, InputKind: a.InputKind,
		InputSchema: a.InputSchema, ResultSchema: a.ResultSchema, CloseAfterIdle: a.CloseAfterIdle,
		HibernateAfterIdle: a.HibernateAfterIdle, MaxTurnDuration: a.MaxTurnDuration, RuntimeMCP: mcp}
}

// BinaryPath returns the path of a Deployment's binary.
func (e *Engine) BinaryPath(ctx context.Context, deploymentID string) (string, error) {
	var path string
	err := e.store.View(ctx, func(tx store.Tx) error {
		d, err := e.deploymentTx(ctx, tx, deploymentID)
		if err == nil {
			path = d.row.BinaryPath
		}
		return err
	})
	return path, err
}

// GetDeployment returns one Deployment; "current" names the current one.
func (e *Engine) GetDeployment(ctx context.Context, id string) (*helmrtype.Deployment, error) {
	var out *helmrtype.Deployment
	err := e.store.View(ctx, func(tx store.Tx) error {
		cur, err := e.currentDeploymentTx(ctx, tx)
		if id == "current" {
			if err != nil {
				return err
			}
			out = cur.info(true)
			return nil
		}
		d, err2 := e.deploymentTx(ctx, tx, id)
		if err2 != nil {
			return err2
		}
		out = d.info(err == nil && cur.row.ID == d.row.ID)
		return nil
	})
	return out, err
}

// ListDeployments lists Deployments newest first.
func (e *Engine) ListDeployments(ctx context.Context, cursor string, limit int) (*helmrtype.DeploymentPage, error) {
	limit, err := pageLimit(limit, 100)
	if err != nil {
		return nil, err
	}
	page := &helmrtype.DeploymentPage{Deployments: []helmrtype.Deployment{}}
	err = e.store.View(ctx, func(tx store.Tx) error {
		curID, _ := tx.GetMeta(ctx, metaCurrentDeployment)
		rows, err := tx.ListDeployments(ctx, cursor, limit+1)
		if err != nil {
			return err
		}
		rows, page.NextCursor = trimPage(rows, limit, func(d *store.Deployment) string { return d.ID })
		for i := range rows {
			d, err := e.cacheDeployment(&rows[i])
			if err != nil {
				return err
			}
			page.Deployments = append(page.Deployments, *d.info(d.row.ID == curID))
		}
		return nil
	})
	return page, err
}

// ListAgents lists the Agents of a Deployment (the current one when
// deploymentID is empty), sorted by ID. The cursor is the last Agent ID seen.
func (e *Engine) ListAgents(ctx context.Context, deploymentID, cursor string, limit int) (*helmrtype.AgentPage, error) {
	limit, err := pageLimit(limit, 50)
	if err != nil {
		return nil, err
	}
	if cursor != "" {
		dep, after, ok := cutCursor(cursor)
		if !ok {
			return nil, invalid("cursor is not valid")
		}
		deploymentID, cursor = dep, after
	}
	var page *helmrtype.AgentPage
	err = e.store.View(ctx, func(tx store.Tx) error {
		d, err := e.pickDeployment(ctx, tx, deploymentID)
		if err != nil {
			return err
		}
		info := d.info(false)
		page = &helmrtype.AgentPage{DeploymentID: d.row.ID, Agents: []helmrtype.AgentInfo{}}
		for _, id := range info.Agents {
			if id <= cursor {
				continue
			}
			if len(page.Agents) == limit {
				page.NextCursor = d.row.ID + "~" + page.Agents[limit-1].Agent
				break
			}
			page.Agents = append(page.Agents, d.agentInfo(d.agents[id]))
		}
		return nil
	})
	return page, err
}

func cutCursor(c string) (string, string, bool) {
	for i := 0; i < len(c); i++ {
		if c[i] == '~' {
			return c[:i], c[i+1:], true
		}
	}
	return "", "", false
}

func (e *Engine) pickDeployment(ctx context.Context, tx store.Tx, id string) (*deployment, error) {
	if id == "" || id == "current" {
		return e.currentDeploymentTx(ctx, tx)
	}
	return e.deploymentTx(ctx, tx, id)
}

// GetAgent returns one Agent of a Deployment (the current one when empty).
func (e *Engine) GetAgent(ctx context.Context, agentID, deploymentID string) (*helmrtype.AgentInfo, error) {
	var out *helmrtype.AgentInfo
	err := e.store.View(ctx, func(tx store.Tx) error {
		d, err := e.pickDeployment(ctx, tx, deploymentID)
		if err != nil {
			return err
		}
		a, ok := d.agents[agentID]
		if !ok {
			return notFound("agent", agentID)
		}
		info := d.agentInfo(a)
		out = &info
		return nil
	})
	return out, err
}

// trimPage trims rows read with limit+1 to limit and returns the cursor of
// the last row kept when more rows follow, else "".
func trimPage[T any](rows []T, limit int, cursor func(*T) string) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, cursor(&rows[limit-1])
}

func pageLimit(limit, def int) (int, error) {
	if limit == 0 {
		return def, nil
	}
	if limit < 1 || limit > 100 {
		return 0, invalid("limit must be between 1 and 100")
	}
	return limit, nil
}
