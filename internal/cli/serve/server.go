package serve

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/supervisor"
	"github.com/spf13/cobra"
)

// ServerCommand is `helmr server`: a control plane for others to use.
func ServerCommand() *cobra.Command {
	o := &Options{}
	var keyFile string
	var allowUnlimited bool
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a control plane",
		Long: "Run a Helmr control plane. On first start it creates an API key and prints it once; only its\n" +
			"hash is stored. With --api-key-file the key is kept in that file (mode 0600) instead, and read\n" +
			"from it on later starts. The database defaults to SQLite in DATA_DIR.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if o.Database == "" {
				o.Database = os.Getenv("HELMR_DATABASE_URL")
			}
			o.RequireLimits = !allowUnlimited
			if o.CPUProfile != "" {
				f, err := os.Create(o.CPUProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			r, err := Start(ctx, o, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			var key string
			var created bool
			if keyFile != "" {
				key, created, err = EnsureAPIKey(ctx, r.CP, keyFile)
			} else {
				key, created, err = r.CP.Engine.BootstrapAPIKey(ctx, "bootstrap")
			}
			if err != nil {
				r.CP.Close(ctx)
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "helmr server listening on %s\n", r.URL)
			switch {
			case created && keyFile != "":
				fmt.Fprintf(out, "API key created and kept in %s\n", keyFile)
			case created:
				fmt.Fprintf(out, "API key (shown once; only its hash is stored): %s\n", key)
			}
			if iso := r.CP.Isolation(); iso.Kind != "" && iso.Limits == "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "helmr server: resource limits are off (%s): Deployments whose Templates set cpu, memory or process limits are %s\n",
					iso.LimitsWhy, map[bool]string{false: "refused (start with --allow-unlimited to run them without)", true: "accepted and run WITHOUT them (--allow-unlimited)"}[allowUnlimited])
			}
			return r.Serve(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", "127.0.0.1:7070", "address to listen on")
	f.StringVar(&o.DataDir, "data-dir", "helmr-data", "directory for the database, deployments and computers")
	f.StringVar(&keyFile, "api-key-file", "", "keep the local API key in this file (mode 0600) instead of printing it once")
	f.StringVar(&o.Database, "database", "", "database URL: sqlite:PATH (default sqlite in --data-dir) or postgres://… which several nodes may share (env HELMR_DATABASE_URL)")
	f.StringVar(&o.NodeID, "node-id", "", "this node's ID among nodes sharing a PostgreSQL database (default: one made at the first start, kept in DATA_DIR/node-id)")
	f.StringVar(&o.ComputersDir, "computers-dir", "", "where Computers keep their durable files (default DATA_DIR/computers); nodes sharing it keep a Session's /workspace when it moves between them")
	f.DurationVar(&o.LeaseTTL, "lease-ttl", supervisor.DefaultLeaseTTL, "with several nodes: how long a node's Sessions wait after it stops renewing before another node takes them over")
	f.StringVar(&o.Synchronous, "sqlite-synchronous", "FULL", "SQLite durability: FULL (fsync every commit) or NORMAL")
	f.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.PublicURL, "public-url", "", "the API's base URL as clients reach it, used in Token callback URLs (default http://ADDR)")
	f.Int64Var(&o.MinFreeBytes, "min-free-bytes", 64<<20, "below this many free bytes on the data directory's disk, refuse new work and hold sessions (storage_pressure); negative: no check")
	f.BoolVar(&o.StopSessions, "stop-sessions", false, "on stop, end session processes (interrupting their Turns) instead of leaving them to reattach at the next start")
	f.DurationVar(&o.ReconnectWindow, "reconnect-window", 10*time.Minute, "how long a session process keeps trying to reconnect to a stopped control plane")
	f.DurationVar(&o.ReattachWindow, "reattach-window", 30*time.Second, "how long a start waits for surviving session processes to reconnect")
	f.BoolVar(&o.UnsafeNoSandbox, "unsafe-no-sandbox", false, "where bubblewrap cannot run, run agent processes as plain host processes with this server's rights (otherwise such a host refuses to start)")
	f.BoolVar(&allowUnlimited, "allow-unlimited", false, "where this host cannot enforce resource limits (no writable cgroups: an ordinary user without a delegated cgroup), accept Templates that set cpu, memory, processes or disk limits and run them without those limits (otherwise their Deployments are refused)")
	f.StringVar(&o.HistoryRetention, "history-retention", "never", "drop the input, result, response and output of Turns settled longer ago than this DURATION (for example 30d), keeping their status, error and timings; never: keep them")
	cmd.AddCommand(migrateCommand())
	f.StringVar(&o.CPUProfile, "cpu-profile", "", "write a CPU profile to this file until the server stops")
	f.MarkHidden("cpu-profile")
	return cmd
}

// migrateCommand is `helmr server migrate`: apply the store's migrations
// and exit, without starting a control plane (nothing else is touched, so
// it is safe while other nodes run).
func migrateCommand() *cobra.Command {
	var dataDir, database string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if database == "" {
				database = os.Getenv("HELMR_DATABASE_URL")
			}
			st, err := controlplane.OpenStore(cmd.Context(), controlplane.Config{DataDir: dataDir, Database: database})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "migrations applied")
			return st.Close()
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "helmr-data", "directory of the default SQLite database")
	cmd.Flags().StringVar(&database, "database", "", "database URL: sqlite:PATH or postgres://… (env HELMR_DATABASE_URL)")
	return cmd
}
