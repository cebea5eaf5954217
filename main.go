package helmr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/sessionproc"
)

// Main runs an agent program. Started by helmr as a session process it
// serves its Session; with --helmr-manifest it prints the manifest; run by
// hand it says how to run it. It does not return.
func Main(agents ...Definition) {
	m, err := BuildManifest(agents...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helmr:", err)
		os.Exit(2)
	}
	if len(os.Args) > 1 && os.Args[1] == protocol.ManifestFlag {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(m); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(protocol.EnvSocket) == "" {
		fmt.Fprintln(os.Stderr, "This is a Helmr agent program. Run it with: helmr dev <package dir>")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := sessionproc.RunFromEnv(ctx, Runtime(agents...)); err != nil {
		fmt.Fprintln(os.Stderr, "helmr:", err)
		if errors.Is(err, sessionproc.ErrUnusable) {
			os.Exit(3)
		}
		os.Exit(1)
	}
	os.Exit(0)
}

// Runtime returns the runtime form of agent definitions, for helmrtest and
// in-process launchers.
func Runtime(agents ...Definition) []sessionproc.Agent {
	out := make([]sessionproc.Agent, len(agents))
	for i, a := range agents {
		out[i] = a.runtime()
	}
	return out
}

// BuildManifest describes agents and their Templates. Two Agents with one
// ID, or two different Templates with one ID, are an error.
func BuildManifest(agents ...Definition) (helmrtype.Manifest, error) {
	m := helmrtype.Manifest{Version: helmrtype.ManifestVersion, SDK: "go"}
	if len(agents) == 0 {
		return m, fmt.Errorf("no agents given")
	}
	seen := map[string]bool{}
	templates := map[string]*TemplateDef{}
	for _, a := range agents {
		am := a.manifest()
		if seen[am.ID] {
			return m, fmt.Errorf("agent %q is declared twice", am.ID)
		}
		seen[am.ID] = true
		m.Agents = append(m.Agents, am)
		t := a.template()
		if prev, ok := templates[t.ID()]; ok && prev != t {
			pj, _ := json.Marshal(prev.m)
			tj, _ := json.Marshal(t.m)
			if string(pj) != string(tj) {
				return m, fmt.Errorf("two different templates have the id %q", t.ID())
			}
		}
		templates[t.ID()] = t
	}
	if err := m.CheckRuntimeMCP(); err != nil {
		return m, err
	}
	ids := make([]string, 0, len(templates))
	for id := range templates {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m.Templates = append(m.Templates, templates[id].m)
	}
	return m, nil
}
