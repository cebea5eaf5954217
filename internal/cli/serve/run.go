// Package serve holds the commands that run a control plane: helmr server
// and helmr dev.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/cli/clienv"
	"github.com/helmr-go/helmr/internal/cli/version"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/slackbridge"
	"github.com/spf13/pflag"
)

// Options are the flags shared by server and dev.
type Options struct {
	Addr        string
	DataDir     string
	Database    string
	Synchronous string
	LogLevel    string
	// LogFormat is text or json.
	LogFormat  string
	CPUProfile string
	// TurnsAtInfo logs Turn transitions at info even when LogLevel is
	// above it (helmr dev: one line per transition, other info quiet).
	TurnsAtInfo bool
	// MetricsAddr, when set, serves /metrics there without a key.
	MetricsAddr string
	// LoopbackOnly refuses addresses other than loopback (helmr dev).
	LoopbackOnly bool
	// StopSessions makes a stop end the session processes (helmr dev);
	// otherwise they keep running and reattach at the next start.
	StopSessions bool
	// PublicURL is the API's base URL as clients see it.
	PublicURL string
	// MinFreeBytes is the store disk's free-space floor (see controlplane.Config).
	MinFreeBytes int64
	// ReconnectWindow and ReattachWindow: see supervisor.Options.
	ReconnectWindow time.Duration
	ReattachWindow  time.Duration
	// UnsafeNoSandbox runs session processes unsandboxed where bubblewrap
	// cannot run (see controlplane.Config).
	UnsafeNoSandbox bool
	// CRIU: see controlplane.Config.
	CRIU string
	// RequireLimits refuses Deployments whose Templates set resource
	// limits this host cannot enforce (helmr server without
	// --allow-unlimited; see controlplane.Config).
	RequireLimits bool
	// NodeID and LeaseTTL: several nodes on one database (see
	// controlplane.Config).
	NodeID   string
	LeaseTTL time.Duration
	// ComputersDir: see controlplane.Config.
	ComputersDir string
	// HistoryRetention is a Duration or "never" (the default, also for
	// ""): see controlplane.Config.
	HistoryRetention string
	// ImplicitComputerGrace is a Duration or "never"; "" is the default
	// (see controlplane.Config).
	ImplicitComputerGrace string
	// SecretsKeyFile and GenerateSecretsKey: the key that seals Slack
	// credentials (see controlplane.Config); helmr dev generates one.
	SecretsKeyFile     string
	GenerateSecretsKey bool
	// SlackAPIURL points the Slack bridge at another Web API (a fake
	// Slack in tests); SlackEditInterval spaces a post's edits.
	SlackAPIURL       string
	SlackEditInterval time.Duration
}

// SlackFlags adds the Slack bridge's flags.
func SlackFlags(f *pflag.FlagSet, o *Options, keyHelp string) {
	f.StringVar(&o.SecretsKeyFile, "secrets-key-file", "", keyHelp)
	f.StringVar(&o.SlackAPIURL, "slack-api-url", "", "the Slack Web API base URL (default Slack's; for tests against a fake Slack)")
	f.MarkHidden("slack-api-url")
	f.DurationVar(&o.SlackEditInterval, "slack-edit-interval", 0, "least time between two edits of one Slack post while output streams (default 1s)")
	f.MarkHidden("slack-edit-interval")
}

// computerGrace parses --implicit-computer-grace: a Duration, "never"
// (kept until deleted), or empty for the default.
func (o *Options) computerGrace() (time.Duration, error) {
	if o.ImplicitComputerGrace == "" {
		return 0, nil
	}
	d, never, err := helmrtype.ParseRetention(o.ImplicitComputerGrace)
	if err != nil || (!never && d <= 0) {
		return 0, clienv.Usagef("--implicit-computer-grace %q: want a duration such as 10m or 1h, or never", o.ImplicitComputerGrace)
	}
	if never {
		return -1, nil
	}
	return d, nil
}

// historyRetention parses --history-retention: a Duration, or "never"
// (or empty) to keep history forever.
func (o *Options) historyRetention() (time.Duration, error) {
	if o.HistoryRetention == "" {
		return 0, nil
	}
	d, never, err := helmrtype.ParseRetention(o.HistoryRetention)
	if err != nil {
		return 0, clienv.Usagef("--history-retention %q: want a duration such as 30d or 12h, or never", o.HistoryRetention)
	}
	if never {
		return 0, nil
	}
	return d, nil
}

// logger returns the command's structured logger on w, and the logger of
// Turn transitions (the same unless TurnsAtInfo lowers its level to info).
func (o *Options) logger(w io.Writer) (log, turns *slog.Logger, err error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return nil, nil, clienv.Usagef("--log-level %q: want debug, info, warn or error", o.LogLevel)
	}
	if o.LogFormat != "" && o.LogFormat != "text" && o.LogFormat != "json" {
		return nil, nil, clienv.Usagef("--log-format %q: want text or json", o.LogFormat)
	}
	if log, err = obs.NewLogger(w, o.LogFormat, lvl); err != nil {
		return nil, nil, err
	}
	turns = log
	if o.TurnsAtInfo && lvl > slog.LevelInfo {
		turns, _ = obs.NewLogger(w, o.LogFormat, slog.LevelInfo)
	}
	return log, turns, nil
}

// CRIUFlag registers --criu: which CRIU parks waiting session processes.
func CRIUFlag(f *pflag.FlagSet, o *Options) {
	f.StringVar(&o.CRIU, "criu", "auto", "the CRIU binary that parks waiting and idle session processes (checkpointed to disk, memory released, restored on demand): auto finds one that passes `criu check`; off freezes them in memory instead")
}

// LogFlags registers --log-level (default level) and --log-format, for
// helmr server and helmr dev.
func LogFlags(f *pflag.FlagSet, o *Options, level string) {
	f.StringVar(&o.LogLevel, "log-level", level, "log level: debug, info, warn, error")
	f.StringVar(&o.LogFormat, "log-format", "text", "log format: text (key=value) or json (one object a line)")
}

// checkLoopback refuses an address that is not on the loopback interface.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %q: helmr dev listens on loopback only (127.0.0.1 or [::1]); use helmr server to serve others", addr)
	}
	return nil
}

// Running is a started control plane with its listener.
type Running struct {
	CP  *controlplane.ControlPlane
	Ln  net.Listener
	URL string
	Log *slog.Logger
	// MetricsLn serves /metrics without a key (--metrics-addr); nil when
	// not asked for.
	MetricsLn net.Listener
}

// Start opens the control plane and its listener.
func Start(ctx context.Context, o *Options, logw io.Writer) (*Running, error) {
	log, turnLog, err := o.logger(logw)
	if err != nil {
		return nil, err
	}
	if o.LoopbackOnly {
		if err := checkLoopback(o.Addr); err != nil {
			return nil, err
		}
		if o.MetricsAddr != "" {
			if err := checkLoopback(o.MetricsAddr); err != nil {
				return nil, fmt.Errorf("--metrics-addr: %w", err)
			}
		}
	}
	retention, err := o.historyRetention()
	if err != nil {
		return nil, err
	}
	grace, err := o.computerGrace()
	if err != nil {
		return nil, err
	}
	// Tracing is configured by the standard OTEL_* variables, off unless
	// they ask for it (docs/observability.md).
	tracer, err := obs.NewTracer(ctx, os.Getenv, version.Current().Version)
	if err != nil {
		return nil, err
	}
	cp, err := controlplane.Open(ctx, controlplane.Config{DataDir: o.DataDir, Database: o.Database, Synchronous: o.Synchronous, Logger: log, TurnLogger: turnLog, Tracer: tracer,
		ReconnectWindow: o.ReconnectWindow, ReattachWindow: o.ReattachWindow, PublicURL: o.PublicURL,
		MinFreeBytes: o.MinFreeBytes, UnsafeNoSandbox: o.UnsafeNoSandbox, CRIU: o.CRIU, RequireLimits: o.RequireLimits, NodeID: o.NodeID, LeaseTTL: o.LeaseTTL,
		ComputersDir: o.ComputersDir, HistoryRetention: retention, ImplicitComputerGrace: grace,
		SecretsKeyFile: o.SecretsKeyFile, GenerateSecretsKey: o.GenerateSecretsKey,
		Slack: slackbridge.Options{APIURL: o.SlackAPIURL, EditInterval: o.SlackEditInterval}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		cp.Close(ctx)
		return nil, err
	}
	r := &Running{CP: cp, Ln: ln, URL: "http://" + ln.Addr().String(), Log: log}
	if o.MetricsAddr != "" {
		if r.MetricsLn, err = net.Listen("tcp", o.MetricsAddr); err != nil {
			ln.Close()
			cp.Close(ctx)
			return nil, fmt.Errorf("--metrics-addr: %w", err)
		}
	}
	return r, nil
}

// Serve serves until ctx ends, then stops: it parks the session processes
// that wait or are idle and prints those to out, then ends the others with
// StopSessions, and otherwise leaves them to reattach at the next start.
func (r *Running) Serve(ctx context.Context, o *Options, out io.Writer) error {
	if r.MetricsLn != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", r.CP.MetricsHandler())
		ms := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute,
			ErrorLog: slog.NewLogLogger(r.Log.Handler(), slog.LevelDebug)}
		go ms.Serve(r.MetricsLn)
		defer ms.Close()
	}
	err := r.CP.Serve(ctx, r.Ln)
	if o.StopSessions {
		r.CP.Close(context.Background())
	} else {
		r.CP.Detach(context.Background())
	}
	if parked := r.CP.Supervisor.ParkedAtStop(); len(parked) > 0 {
		fmt.Fprintf(out, "parked %d waiting or idle sessions (checkpointed to disk; restored on demand after the next start): %s\n",
			len(parked), strings.Join(parked, " "))
	}
	return err
}

// EnsureAPIKey returns the API key kept in the file at path, creating one
// (and the file, mode 0600) when the file is missing or its key unknown.
// created tells whether a new key was made.
func EnsureAPIKey(ctx context.Context, cp *controlplane.ControlPlane, path string) (key string, created bool, err error) {
	if b, err := os.ReadFile(path); err == nil {
		k := strings.TrimSpace(string(b))
		if _, err := cp.Engine.Authenticate(ctx, k); err == nil {
			return k, false, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, err
	}
	k, err := cp.Engine.CreateAPIKey(ctx, "local")
	if err != nil {
		return "", false, err
	}
	if err := os.WriteFile(path, []byte(k+"\n"), 0o600); err != nil {
		return "", false, err
	}
	return k, true, nil
}
