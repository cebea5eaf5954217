package helmr

import (
	"fmt"

	"github.com/helmr-go/helmr/helmrtype"
)

// Resources is a Template's resource request: CPU cores and memory such as
// "512MiB" or "1GiB".
type Resources struct {
	CPU    float64
	Memory string
	// Processes caps the Computer's processes and threads (default 1,024).
	Processes int
	// Disk caps the size of /workspace and /tmp, such as "10GiB"; a
	// Computer past it has its processes stopped.
	Disk string
}

// ImageDef describes how a Template's root filesystem is made.
type ImageDef struct {
	m helmrtype.ImageManifest
}

// Image starts an image definition with a name.
func Image(name string) *ImageDef { return &ImageDef{m: helmrtype.ImageManifest{Name: name}} }

func (i *ImageDef) with(step helmrtype.ImageStep) *ImageDef {
	c := &ImageDef{m: i.m}
	c.m.Steps = append(append([]helmrtype.ImageStep(nil), i.m.Steps...), step)
	return c
}

// From bases the image on an OCI image reference, or "scratch" for an empty root.
func (i *ImageDef) From(ref string) *ImageDef {
	c := &ImageDef{m: i.m}
	c.m.From, c.m.Host = ref, false
	return c
}

// FromHost bases the image on the host's system directories, read-only.
func (i *ImageDef) FromHost() *ImageDef {
	c := &ImageDef{m: i.m}
	c.m.From, c.m.Host = "", true
	return c
}

// Run adds a build step that runs argv in the image.
func (i *ImageDef) Run(argv ...string) *ImageDef {
	return i.with(helmrtype.ImageStep{Op: "run", Args: argv})
}

// Copy adds a build step that copies source (relative to the agent
// package) to dst in the image.
func (i *ImageDef) Copy(dst, source string) *ImageDef {
	return i.with(helmrtype.ImageStep{Op: "copy", Args: []string{dst, source}})
}

// Workdir sets the working directory of later steps and processes.
func (i *ImageDef) Workdir(dir string) *ImageDef {
	return i.with(helmrtype.ImageStep{Op: "workdir", Args: []string{dir}})
}

// Env sets an environment variable for later steps and processes.
func (i *ImageDef) Env(name, value string) *ImageDef {
	return i.with(helmrtype.ImageStep{Op: "env", Args: []string{name, value}})
}

// User sets the user of later steps and processes.
func (i *ImageDef) User(user string) *ImageDef {
	return i.with(helmrtype.ImageStep{Op: "user", Args: []string{user}})
}

// TemplateSpec declares a Template.
type TemplateSpec struct {
	ID        string
	Image     *ImageDef
	Resources Resources
	// Network gives the Computers outbound network access through a
	// network namespace of their own: the host's loopback, link-local
	// addresses and the host's own addresses stay out of reach. Without it
	// (the default) processes have only their own loopback: enough for the
	// runtime MCP server, not for the internet.
	Network bool
	// NetworkAllow limits a networked Computer to these destinations: IP
	// addresses or prefixes, each with an optional port ("192.0.2.7:443",
	// "10.0.0.0/8", "[2001:db8::1]:443"). They may name host addresses.
	NetworkAllow []string
}

// TemplateDef is a declared Template, recorded in the manifest.
type TemplateDef struct {
	m helmrtype.TemplateManifest
}

// ID returns the Template's ID.
func (t *TemplateDef) ID() string { return t.m.ID }

// Template declares a Template. It panics when the ID, image or resources
// are invalid, since a definition error is a programming error.
func Template(spec TemplateSpec) *TemplateDef {
	if !helmrtype.ValidName(spec.ID) {
		panic(fmt.Sprintf("helmr.Template: id %q must match %s", spec.ID, helmrtype.NamePattern))
	}
	if spec.Image == nil {
		panic(fmt.Sprintf("helmr.Template %q: Image is required", spec.ID))
	}
	if spec.Image.m.From == "" && !spec.Image.m.Host {
		panic(fmt.Sprintf("helmr.Template %q: the image needs From(ref) or FromHost()", spec.ID))
	}
	if spec.Image.m.Host && len(spec.Image.m.Steps) > 0 {
		panic(fmt.Sprintf("helmr.Template %q: image %q is FromHost(), which takes no build steps (Run, Copy, Env, Workdir, User); build on From(ref) or From(\"scratch\")", spec.ID, spec.Image.m.Name))
	}
	r := helmrtype.ResourcesManifest{CPU: spec.Resources.CPU, Memory: spec.Resources.Memory,
		Processes: spec.Resources.Processes, Disk: spec.Resources.Disk}
	if err := r.Check(); err != nil {
		panic(fmt.Sprintf("helmr.Template %q: %v", spec.ID, err))
	}
	if len(spec.NetworkAllow) > 0 && !spec.Network {
		panic(fmt.Sprintf("helmr.Template %q: NetworkAllow needs Network", spec.ID))
	}
	if _, err := helmrtype.ParseNetworkAllow(spec.NetworkAllow); err != nil {
		panic(fmt.Sprintf("helmr.Template %q: %v", spec.ID, err))
	}
	return &TemplateDef{m: helmrtype.TemplateManifest{ID: spec.ID, Image: spec.Image.m,
		Resources: r, Network: spec.Network, NetworkAllow: spec.NetworkAllow}}
}

// ParseMemory parses a memory size such as "512MiB", "1GiB", "256M" or a
// plain byte count.
func ParseMemory(s string) (int64, error) { return helmrtype.ParseMemory(s) }
