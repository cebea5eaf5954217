package helmrtype

// Kinds of a DeployProgress: what progressed.
const (
	// ProgressImage is a Template's whole image.
	ProgressImage = "image"
	// ProgressPull is fetching the registry image an image starts from.
	ProgressPull = "pull"
	// ProgressStep is one build step of an image.
	ProgressStep = "step"
)

// States of a DeployProgress.
const (
	// ProgressStarted: the work began.
	ProgressStarted = "started"
	// ProgressDone: the work ended well (Cached tells whether anything had
	// to be done). A failure ends the stream with an error instead.
	ProgressDone = "done"
)

// DeployProgress is one event of preparing a Deployment's images as it is
// published, streamed by POST /v1/deployments to a client that accepts
// application/x-ndjson (docs/api.md). Clients ignore kinds they do not know.
type DeployProgress struct {
	// Kind is ProgressImage, ProgressPull or ProgressStep.
	Kind string `json:"kind"`
	// State is ProgressStarted or ProgressDone.
	State string `json:"state"`
	// Template and Image name the Template and its image.
	Template string `json:"template,omitempty"`
	Image    string `json:"image,omitempty"`
	// Ref is the registry reference of a pull.
	Ref string `json:"ref,omitempty"`
	// Step is the 1-based number of a build step among Steps, and Op and
	// Args are the step as the manifest has it.
	Step  int      `json:"step,omitempty"`
	Steps int      `json:"steps,omitempty"`
	Op    string   `json:"op,omitempty"`
	Args  []string `json:"args,omitempty"`
	// Cached is true on a done event when nothing had to be pulled or built.
	Cached bool `json:"cached,omitempty"`
	// Digest is the pulled image's root ("sha256:…") on a pull's done
	// event, the image's digest on an image's done event.
	Digest string `json:"digest,omitempty"`
	// DurationMS is how long the work took, on a done event.
	DurationMS int64 `json:"duration_ms,omitempty"`
}
