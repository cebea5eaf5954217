// Package controlplane assembles a control plane from its parts: the store,
// the engine, the supervisor, the HTTP server and the session-protocol
// socket. helmr dev, helmr server and helmrtest start one.
package controlplane

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/helmr-go/helmr/helmrtype"
	"github.com/helmr-go/helmr/internal/computer/local"
	"github.com/helmr-go/helmr/internal/engine"
	"github.com/helmr-go/helmr/internal/freezer"
	"github.com/helmr-go/helmr/internal/image"
	"github.com/helmr-go/helmr/internal/obs"
	"github.com/helmr-go/helmr/internal/protocol"
	"github.com/helmr-go/helmr/internal/secretbox"
	"github.com/helmr-go/helmr/internal/server"
	"github.com/helmr-go/helmr/internal/slackbridge"
	"github.com/helmr-go/helmr/internal/store"
	"github.com/helmr-go/helmr/internal/store/pgstore"
	"github.com/helmr-go/helmr/internal/store/sqlitestore"
	"github.com/helmr-go/helmr/internal/supervisor"
)

// Config configures Open.
type Config struct {
	// DataDir holds the database, deployments, computers and the socket.
	DataDir string
	// Database is "sqlite:PATH" (default DataDir/helmr.db) or a PostgreSQL
	// URL ("postgres://…"), which several nodes may share (docs/scale-out.md).
	Database string
	// NodeID names this node among those sharing a PostgreSQL database;
	// default an ID kept in DataDir/node-id, made at the first start.
	NodeID string
	// LeaseTTL: see supervisor.Options.
	LeaseTTL time.Duration
	// ComputersDir keeps the Computers' durable files (/workspace, /tmp);
	// default DataDir/computers. Nodes that share it (one machine, or a
	// shared filesystem) keep a Computer's files when a Session moves
	// between them.
	ComputersDir string
	// Synchronous is the SQLite synchronous mode: FULL (default) or NORMAL.
	Synchronous string
	// Launcher starts session processes; default runs them in sandboxed
	// Computers (internal/computer/local) under DataDir/computers.
	Launcher supervisor.Launcher
	// UnsafeNoSandbox lets the default launcher run session processes as
	// plain host processes when this host cannot sandbox them. Without
	// it, such a host refuses to start.
	UnsafeNoSandbox bool
	// CRIU is the CRIU binary that parks waiting session processes
	// (decision 0024): "" or "auto" finds one that passes `criu check`,
	// "off" turns parking off (waiting processes are frozen instead).
	CRIU string
	// RequireLimits makes PublishDeployment refuse a Deployment whose
	// Templates set resource limits (cpu, memory, processes, disk) that
	// the default launcher's host cannot enforce (helmr server without
	// --allow-unlimited); otherwise such limits are off, as Isolation and
	// each Computer's limits_off say.
	RequireLimits bool
	Clock         engine.Clock
	Logger        *slog.Logger
	// TurnLogger logs one line per Turn transition; nil uses Logger.
	TurnLogger *slog.Logger
	// Tracer traces Turns (obs.NewTracer reads the OTEL_* environment);
	// nil is off. The control plane owns it: Close and Detach shut it
	// down, exporting the spans not yet exported.
	Tracer *obs.Tracer
	// PublicURL is the base URL clients reach the API at (Token callback
	// URLs); default the address Serve listens on.
	PublicURL string
	// MinFreeBytes is the free-space floor of DataDir's disk: below it new
	// work is refused and Sessions with work are held (storage_pressure).
	// Default 64 MiB; negative turns the check off.
	MinFreeBytes int64
	// FreeSpace reports the free bytes of the disk holding dir; default
	// statfs. Tests inject their own.
	FreeSpace func(dir string) (uint64, error)
	// ReconnectWindow and ReattachWindow: see supervisor.Options.
	ReconnectWindow time.Duration
	ReattachWindow  time.Duration
	// MaxCommandOutput bounds the stored output of one Command (default
	// supervisor.DefaultMaxCommandOutput, 64 MiB).
	MaxCommandOutput int64
	// IdleTimeout closes an API connection kept alive with no request for
	// this long (default server.IdleTimeout).
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one non-streaming API response (default
	// server.WriteTimeout); tests shorten it.
	WriteTimeout time.Duration
	// HistoryRetention drops the payloads of Turns that settled longer ago
	// than this (see engine.ExpirePayloads), in the background; 0 keeps
	// them forever. Negative is refused.
	HistoryRetention time.Duration
	// ImplicitComputerGrace is how long a Computer made implicitly for a
	// Session is kept once every Session on it is closed and no Command
	// runs; then it is deleted, files and cgroups too. Default
	// engine.DefaultImplicitComputerGrace (10 minutes); negative keeps
	// such Computers until deleted through the API.
	ImplicitComputerGrace time.Duration
	// SecretsKeyFile holds the key that seals Slack apps' credentials at
	// rest (64 hex digits, mode 0600); with GenerateSecretsKey and no
	// file, DataDir/secrets.key is made (helmr dev). Without a key Slack
	// apps cannot be connected.
	SecretsKeyFile     string
	GenerateSecretsKey bool
	// Slack configures the Slack bridge (APIURL for a fake Slack in tests,
	// EditInterval, …); its Logger and Box are set by Open.
	Slack slackbridge.Options
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Engine     *engine.Engine
	Store      store.Store
	Supervisor *supervisor.Supervisor
	Server     *server.Server
	// Slack is the Slack bridge (docs/slack.md).
	Slack *slackbridge.Bridge
	// SocketPath is where session processes connect.
	SocketPath string

	cfg      Config
	lock     *os.File
	log      *slog.Logger
	sockDir  string
	protoLn  net.Listener
	protoSrv *http.Server
	apiSrv   *http.Server

	stopSweep context.CancelFunc
	sweepDone chan struct{}
	// expiryDone is closed when the payload expiry ends (at once without
	// a HistoryRetention), reapDone when the deletion of idle implicit
	// Computers ends.
	expiryDone chan struct{}
	reapDone   chan struct{}

	// isolation: see Isolation.
	isolation Isolation
	// unenforced lists the limits of a Template the host cannot enforce;
	// nil with a Launcher of the caller's.
	unenforced func(helmrtype.ResourcesManifest) []string
	// launcher starts the session processes; when it is a
	// supervisor.ImagePreparer, publishing a Deployment prepares its images.
	launcher supervisor.Launcher

	// cleanups run when the control plane stops: they remove the cgroups
	// it made that nothing uses.
	cleanups []func()

	// shared: the database is shared with other nodes (PostgreSQL).
	shared     bool
	stopListen context.CancelFunc
	listenDone chan struct{}

	pressureMu sync.Mutex
	pressure   bool
}

// Housekeeping intervals: the disk's free space is checked every
// checkInterval, idle Sessions against their closeAfterIdle every
// sweepInterval (a backstop: each idle Session's own timer closes it on
// time, and the sweep finds those whose timer ran on a node that stopped).
const (
	checkInterval = 5 * time.Second
	sweepInterval = 30 * time.Second
)

// DefaultMinFreeBytes is the default free-space floor.
const DefaultMinFreeBytes = 64 << 20

// sweepIdle runs the housekeeping until ctx ends: the storage-pressure
// check and the idle sweep, both at once at start.
func (cp *ControlPlane) sweepIdle(ctx context.Context) {
	defer close(cp.sweepDone)
	t := time.NewTicker(checkInterval)
	defer t.Stop()
	for tick := 0; ; tick++ {
		cp.pressureMu.Lock()
		cp.pressure = cp.checkDisk(ctx, cp.pressure, tick == 0)
		cp.pressureMu.Unlock()
		if tick%int(sweepInterval/checkInterval) == 0 {
			if n, err := cp.Engine.SweepIdle(ctx); err != nil && ctx.Err() == nil {
				cp.log.Error("close idle sessions", "err", err)
			} else if n > 0 {
				cp.log.Info("closed idle sessions", "count", n)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// CheckDisk checks the free space now (the housekeeping does it every 5 s).
func (cp *ControlPlane) CheckDisk(ctx context.Context) {
	cp.pressureMu.Lock()
	defer cp.pressureMu.Unlock()
	cp.pressure = cp.checkDisk(ctx, cp.pressure, false)
}

// checkDisk compares the free space with the floor and tells the engine
// when that changes (and at start, to release holds of an earlier run).
func (cp *ControlPlane) checkDisk(ctx context.Context, was, first bool) bool {
	floor := cp.cfg.MinFreeBytes
	if floor < 0 {
		return false
	}
	free, err := cp.cfg.FreeSpace(cp.cfg.DataDir)
	if err != nil {
		cp.log.Warn("free disk space unknown", "err", err)
		return was
	}
	low := free < uint64(floor)
	if low == was && !first {
		return was
	}
	why := fmt.Sprintf("%d bytes free on the store's disk, below the floor of %d", free, floor)
	if low {
		cp.log.Error("storage pressure: new work refused, sessions held", "free", free, "floor", floor)
	} else if was {
		cp.log.Info("storage pressure over", "free", free)
	}
	if err := cp.Engine.SetStoragePressure(ctx, low, why); err != nil && ctx.Err() == nil {
		cp.log.Error("storage pressure", "err", err)
		return was
	}
	return low
}

// stopSweeping ends the idle sweep and the payload expiry.
func (cp *ControlPlane) stopSweeping() {
	if cp.stopSweep != nil {
		cp.stopSweep()
		<-cp.sweepDone
		<-cp.expiryDone
		<-cp.reapDone
		cp.stopSweep = nil
	}
}

// expiryInterval is how often the payload expiry runs for a retention:
// half of it, from 100 ms to a minute, so that a payload outlives its
// retention by at most half of it (or a minute).
func expiryInterval(retention time.Duration) time.Duration {
	return min(max(retention/2, 100*time.Millisecond), time.Minute)
}

// expirePayloads runs the payload expiry until ctx ends: at once, then
// every expiryInterval. An error is logged and the next run tries again.
func (cp *ControlPlane) expirePayloads(ctx context.Context) {
	defer close(cp.expiryDone)
	retention := cp.cfg.HistoryRetention
	if retention <= 0 {
		return
	}
	t := time.NewTicker(expiryInterval(retention))
	defer t.Stop()
	for {
		if n, err := cp.Engine.ExpirePayloads(ctx, retention); err != nil && ctx.Err() == nil {
			cp.log.Error("expire turn payloads", "err", err)
		} else if n > 0 {
			cp.log.Info("expired turn payloads", "count", n, "retention", retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// reapComputers deletes the implicit Computers nothing has used for
// ImplicitComputerGrace until ctx ends: at once, then every
// expiryInterval of the grace (half of it, from 100 ms to a minute).
func (cp *ControlPlane) reapComputers(ctx context.Context) {
	defer close(cp.reapDone)
	grace := cp.cfg.ImplicitComputerGrace
	if grace < 0 {
		return
	}
	t := time.NewTicker(expiryInterval(grace))
	defer t.Stop()
	for {
		if n, err := cp.Engine.ReapIdleComputers(ctx, grace); err != nil && ctx.Err() == nil {
			cp.log.Error("delete idle implicit computers", "err", err)
		} else if n > 0 {
			cp.log.Info("deleted idle implicit computers", "count", n, "grace", grace)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Open opens the store, recovers from a previous run and starts the
// session-protocol socket. Serve then serves the REST API.
func Open(ctx context.Context, cfg Config) (*ControlPlane, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DataDir == "" {
		return nil, errors.New("controlplane: DataDir is required")
	}
	if cfg.HistoryRetention < 0 {
		return nil, helmrtype.Errorf(helmrtype.CodeInvalidRequest, "controlplane: HistoryRetention %v is negative; 0 keeps history forever", cfg.HistoryRetention)
	}
	if cfg.MinFreeBytes == 0 {
		cfg.MinFreeBytes = DefaultMinFreeBytes
	}
	if cfg.ImplicitComputerGrace == 0 {
		cfg.ImplicitComputerGrace = engine.DefaultImplicitComputerGrace
	}
	if cfg.FreeSpace == nil {
		cfg.FreeSpace = statfsFree
	}
	// Paths derived from DataDir are stored (deployment binaries) and used
	// by processes with other working directories: keep them absolute.
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = abs
	// The data directory holds the database, credentials' files and the
	// Computers: nobody else on the host reads it.
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	lock, err := lockDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	shared := isPostgres(cfg.Database)
	if shared && cfg.NodeID == "" {
		if cfg.NodeID, err = nodeID(cfg.DataDir); err != nil {
			lock.Close()
			return nil, err
		}
	}
	if !shared {
		cfg.NodeID = ""
	}
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		lock.Close()
		return nil, err
	}
	// The socket's path stays the same across restarts, so that session
	// processes that outlive this control plane reconnect to the next.
	sockDir, err := socketDir(cfg.DataDir)
	if err != nil {
		st.Close()
		lock.Close()
		return nil, err
	}
	cp := &ControlPlane{Store: st, lock: lock, cfg: cfg, log: cfg.Logger, sockDir: sockDir, SocketPath: filepath.Join(sockDir, "session.sock"),
		shared: shared}
	// The lock is ours: a socket file left by a previous run is stale.
	os.Remove(cp.SocketPath)
	cp.Engine = engine.New(st, engine.Options{Clock: cfg.Clock, Logger: cfg.Logger, TurnLogger: cfg.TurnLogger,
		PublicURL: cfg.PublicURL, NodeID: cfg.NodeID, Tracer: cfg.Tracer})
	fz := freezer.New(cfg.Logger, "helmr-"+dataDirID(cfg.DataDir))
	var cleanups []func()
	l := cfg.Launcher
	if l == nil {
		dir := cfg.ComputersDir
		if dir == "" {
			dir = filepath.Join(cfg.DataDir, "computers")
		}
		prov, err := local.New(local.Options{Dir: dir, Logger: cfg.Logger, Unsafe: cfg.UnsafeNoSandbox,
			CgroupName: "helmr-" + dataDirID(cfg.DataDir), CRIU: cmp.Or(cfg.CRIU, "auto")})
		if err != nil {
			st.Close()
			lock.Close()
			return nil, err
		}
		images, err := image.NewStore(filepath.Join(cfg.DataDir, "images"), image.Options{Logger: cfg.Logger, Runner: prov})
		if err != nil {
			st.Close()
			lock.Close()
			return nil, err
		}
		cp.isolation = Isolation{Kind: prov.Kind(), Unsandboxed: prov.Unsandboxed(), Limits: prov.Limits(), LimitsWhy: prov.LimitsWhy()}
		cp.unenforced = prov.Unenforced
		if prov.Limits() == "" {
			cp.Engine.SetLimitsOff(prov.LimitsWhy())
		}
		l = &supervisor.ComputerLauncher{Provider: prov, Dir: dir, Images: supervisor.StoreImages{Store: images}}
		// On cgroup v2 a process is in one group: a limited one is frozen
		// in a child of its Computer's group, not moved out of it.
		if d := prov.LimitsDir(); d != "" {
			freezer.NestUnder(fz, d)
		}
		cleanups = append(cleanups, prov.Cleanup)
	}
	cleanups = append(cleanups, func() { freezer.Cleanup(fz) })
	cp.Supervisor = supervisor.New(cp.Engine, l, supervisor.Options{SocketPath: cp.SocketPath, Logger: cfg.Logger,
		ReconnectWindow: cfg.ReconnectWindow, ReattachWindow: cfg.ReattachWindow, Freezer: fz, MaxCommandOutput: cfg.MaxCommandOutput,
		LeaseTTL: cfg.LeaseTTL, ResolveBinary: cp.resolveBinary, ResolveSources: cp.resolveSources})
	cp.cleanups, cp.launcher = cleanups, l
	if off := cp.Supervisor.CheckpointOff(); off != "" {
		cp.Engine.SetCheckpointOff(off)
		cfg.Logger.Warn("waiting sessions are frozen in memory, not parked", "reason", off)
	} else {
		cfg.Logger.Info("waiting sessions are parked: checkpointed to disk, their memory released, restored on demand")
	}
	cp.Engine.Metrics().Register(obs.NewStateCollector(cp.metricsState))
	sopts := cfg.Slack
	sopts.Logger = cfg.Logger
	if sopts.Box, err = secretsBox(cfg); err != nil {
		cp.closeStore()
		return nil, err
	}
	cp.Slack = slackbridge.New(cp.Engine, sopts)
	opts := server.Options{Logger: cfg.Logger, DeploymentsDir: cp.DeploymentsDir(), Ready: cp.ready, Publish: cp.PublishDeployment, Slack: cp.Slack}
	// An uploaded program prints its manifest in a sandbox, like every
	// other process of its code.
	if cl, ok := l.(*supervisor.ComputerLauncher); ok {
		opts.ReadManifest = cl.ReadManifest
	}
	cp.Server = server.New(cp.Engine, opts)
	cp.protoLn, err = net.Listen("unix", cp.SocketPath)
	if err != nil {
		cp.closeStore()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(protocol.Path, cp.Supervisor)
	cp.protoSrv = &http.Server{Handler: mux, ConnContext: supervisor.ConnContext, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug)}
	go cp.protoSrv.Serve(cp.protoLn)
	// Recovery reads the work left due (running and queued Turns, open
	// waits, idle closes within the horizon), never every Session; ctx
	// ends it at the next statement (a signal during start-up).
	cp.log.Info("recovering the work of the previous run")
	if err := cp.Supervisor.Recover(ctx); err != nil {
		cp.Close(ctx)
		return nil, err
	}
	if err := cp.Engine.ArmSchedules(ctx); err != nil {
		cp.Close(ctx)
		return nil, err
	}
	if err := cp.listen(ctx); err != nil {
		cp.Close(ctx)
		return nil, err
	}
	cp.sweepDone, cp.expiryDone, cp.reapDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
	sctx, stop := context.WithCancel(context.Background())
	cp.stopSweep = stop
	go cp.sweepIdle(sctx)
	go cp.expirePayloads(sctx)
	go cp.reapComputers(sctx)
	cp.Slack.Start()
	return cp, nil
}

// secretsBox loads the secrets key: the configured file, or one made in
// the data directory with GenerateSecretsKey; nil without either.
func secretsBox(cfg Config) (*secretbox.Box, error) {
	var key []byte
	var err error
	switch {
	case cfg.SecretsKeyFile != "":
		key, err = secretbox.LoadKeyFile(cfg.SecretsKeyFile)
	case cfg.GenerateSecretsKey:
		key, err = secretbox.EnsureKeyFile(filepath.Join(cfg.DataDir, "secrets.key"))
	default:
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("controlplane: secrets key: %w", err)
	}
	return secretbox.New(key)
}

// OpenStore opens the configured store and applies its migrations: SQLite
// in DataDir by default, "sqlite:PATH", or PostgreSQL ("postgres://…" or
// "postgresql://…"). A schema newer than this binary knows is refused.
func OpenStore(ctx context.Context, cfg Config) (store.Store, error) {
	switch db := cfg.Database; {
	case db == "":
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, err
		}
		return sqlitestore.Open(ctx, filepath.Join(cfg.DataDir, "helmr.db"), sqlitestore.Options{Synchronous: cfg.Synchronous, Logger: cfg.Logger})
	case strings.HasPrefix(db, "sqlite:"):
		return sqlitestore.Open(ctx, strings.TrimPrefix(db, "sqlite:"), sqlitestore.Options{Synchronous: cfg.Synchronous, Logger: cfg.Logger})
	case isPostgres(db):
		return pgstore.Open(ctx, db, pgstore.Options{Logger: cfg.Logger, NodeID: cfg.NodeID})
	}
	return nil, fmt.Errorf("controlplane: database %q: want sqlite:PATH or postgres://…", cfg.Database)
}

// ready reports whether the store answers reads.
func (cp *ControlPlane) ready() error {
	if cp.Engine.StoragePressure() {
		return helmrtype.Errorf(helmrtype.CodeStoragePressure, "the store's disk is below its free-space floor: new work is refused")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return cp.Store.View(ctx, func(tx store.Tx) error {
		_, err := tx.GetMeta(ctx, "current_deployment")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	})
}

// DeploymentsDir is where agent binaries are kept.
func (cp *ControlPlane) DeploymentsDir() string { return filepath.Join(cp.cfg.DataDir, "deployments") }

// Handler is the REST API handler.
func (cp *ControlPlane) Handler() http.Handler { return cp.Server }

// Serve serves the REST API on ln until ctx ends, then shuts down gracefully.
func (cp *ControlPlane) Serve(ctx context.Context, ln net.Listener) error {
	if cp.cfg.PublicURL == "" {
		cp.Engine.SetPublicURL("http://" + ln.Addr().String())
	}
	cp.apiSrv = server.HTTPServer(cp.Server, slog.NewLogLogger(cp.log.Handler(), slog.LevelDebug))
	if cp.cfg.IdleTimeout > 0 {
		cp.apiSrv.IdleTimeout = cp.cfg.IdleTimeout
	}
	if cp.cfg.WriteTimeout > 0 {
		cp.apiSrv.WriteTimeout = cp.cfg.WriteTimeout
	}
	errc := make(chan error, 1)
	go func() { errc <- cp.apiSrv.Serve(server.LimitConnections(ln, server.MaxConnsPerAddr)) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cp.Server.Stop()
	cp.apiSrv.Shutdown(shut)
	return nil
}

// Detach stops the control plane but leaves session processes running: they
// reconnect to the next control plane started on the same data directory,
// and their Turns go on. It is how helmr server stops.
func (cp *ControlPlane) Detach(ctx context.Context) error {
	if cp.apiSrv != nil {
		cp.apiSrv.Close()
	}
	cp.stopSweeping()
	cp.Slack.Close()
	cp.Supervisor.Detach()
	cp.stopListening()
	cp.protoSrv.Close()
	cp.Engine.Close()
	return cp.closeStore()
}

// Close stops session processes (asking them to shut down first), the
// protocol socket and the store.
func (cp *ControlPlane) Close(ctx context.Context) error {
	shut, cancel := context.WithTimeout(ctx, 12*time.Second)
	defer cancel()
	if cp.apiSrv != nil {
		cp.apiSrv.Close()
	}
	cp.stopSweeping()
	cp.Slack.Close()
	cp.Supervisor.Close(shut)
	cp.stopListening()
	cp.protoSrv.Close()
	cp.Engine.Close()
	return cp.closeStore()
}

func (cp *ControlPlane) closeStore() error {
	for _, f := range cp.cleanups {
		f()
	}
	err := cp.Store.Close()
	os.Remove(cp.SocketPath)
	cp.lock.Close()
	shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if terr := cp.cfg.Tracer.Shutdown(shut); terr != nil {
		cp.log.Warn("tracing: shutdown", "err", terr)
	}
	return err
}

// socketDir is where the protocol socket lives, alone, since sandboxes bind
// the directory: DataDir/run when the path is short enough for a Unix
// socket (108 bytes), else a private directory under the system's
// temporary directory named after DataDir. Its path and the directory
// itself stay the same across restarts (processes reconnect through it).
func socketDir(dataDir string) (string, error) {
	dir := filepath.Join(dataDir, "run")
	if len(filepath.Join(dir, "session.sock")) >= 100 {
		dir = filepath.Join(os.TempDir(), "helmr-"+dataDirID(dataDir))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// Isolation says how the default launcher's Computers run.
type Isolation struct {
	// Kind is "bubblewrap", "unsafe" (plain host processes), or "" with a
	// Launcher of the caller's.
	Kind string
	// Unsandboxed is why they are not sandboxed and how to fix it ("" when
	// they are).
	Unsandboxed string
	// Limits names the cgroup mechanism of their resource limits, "" when
	// limits are off; LimitsWhy then says why.
	Limits, LimitsWhy string
}

// Isolation says how this control plane's Computers run.
func (cp *ControlPlane) Isolation() Isolation { return cp.isolation }

// dataDirID names a data directory in host-wide places (cgroups, /tmp).
func dataDirID(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return hex.EncodeToString(sum[:8])
}

// metricsState reads the gauges of a metrics scrape: counts from the store
// and this node's session processes from the supervisor. A live Computer
// with no process here counts as cold.
func (cp *ControlPlane) metricsState(ctx context.Context) (obs.State, error) {
	c, err := cp.Engine.Counts(ctx)
	if err != nil {
		return obs.State{}, err
	}
	counts, res := cp.Supervisor.ProcessStates()
	byRes := map[string]int64{}
	var live int64
	for _, n := range c.ComputersByStatus {
		live += n
	}
	for _, r := range res {
		byRes[r]++
		live--
	}
	byRes[helmrtype.ResidencyCold] += max(live, 0)
	return obs.State{SessionsByStatus: c.SessionsByStatus, HoldsByKind: c.HoldsByKind, ComputersByRes: byRes,
		CommandsByStatus: c.CommandsByStatus, PendingQuestions: c.PendingAsks, PendingTokens: c.PendingTokens,
		LeasesByNode: c.LeasesByNode, ProcessesRunning: int64(counts.Running), ProcessesFrozen: int64(counts.Frozen),
		SessionsParked: int64(counts.Parked)}, nil
}

// MetricsHandler serves the control plane's metrics in the Prometheus
// text format, without authentication (for a separate listener).
func (cp *ControlPlane) MetricsHandler() http.Handler { return cp.Engine.Metrics().Handler() }
