package serve

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/helmr-go/helmr/internal/cli/clienv"
	"github.com/helmr-go/helmr/internal/controlplane"
	"github.com/helmr-go/helmr/internal/supervisor"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
			fmt.Fprintf(out, "helmr server listening on %s (console at %s/console/)\n", r.URL, r.URL)
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
			return r.Serve(ctx, o, out)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Addr, "addr", "127.0.0.1:7070", "address to listen on")
	f.StringVar(&o.DataDir, "data-dir", "helmr-data", "directory for the database, deployments and computers")
	f.StringVar(&keyFile, "api-key-file", "", "keep the local API key in this file (mode 0600) instead of printing it once")
	DatabaseFlag(f, o, "database URL: sqlite:PATH (default sqlite in --data-dir) or postgres://… which several nodes may share (env HELMR_DATABASE_URL)")
	f.StringVar(&o.NodeID, "node-id", "", "this node's ID among nodes sharing a PostgreSQL database (default: one made at the first start, kept in DATA_DIR/node-id)")
	f.StringVar(&o.ComputersDir, "computers-dir", "", "where Computers keep their durable files (default DATA_DIR/computers); nodes sharing it keep a Session's /workspace when it moves between them")
	f.DurationVar(&o.LeaseTTL, "lease-ttl", supervisor.DefaultLeaseTTL, "with several nodes: how long a node's Sessions wait after it stops renewing before another node takes them over")
	f.StringVar(&o.Synchronous, "sqlite-synchronous", "FULL", "SQLite durability: FULL (fsync every commit) or NORMAL")
	LogFlags(f, o, "info")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "", "also serve GET /metrics (Prometheus) on this address, without an API key (on --addr it needs one)")
	f.StringVar(&o.PublicURL, "public-url", "", "the API's base URL as clients reach it, used in Token callback URLs (default http://ADDR)")
	f.Int64Var(&o.MinFreeBytes, "min-free-bytes", 64<<20, "below this many free bytes on the data directory's disk, refuse new work and hold sessions (storage_pressure); negative: no check")
	f.BoolVar(&o.StopSessions, "stop-sessions", false, "on stop, end session processes (interrupting their Turns) instead of leaving them to reattach at the next start")
	f.DurationVar(&o.ReconnectWindow, "reconnect-window", 10*time.Minute, "how long a session process keeps trying to reconnect to a stopped control plane")
	f.DurationVar(&o.ReattachWindow, "reattach-window", 30*time.Second, "how long a start waits for surviving session processes to reconnect")
	CRIUFlag(f, o)
	f.BoolVar(&o.UnsafeNoSandbox, "unsafe-no-sandbox", false, "where bubblewrap cannot run, run agent processes as plain host processes with this server's rights (otherwise such a host refuses to start)")
	f.BoolVar(&allowUnlimited, "allow-unlimited", false, "where this host cannot enforce resource limits (no writable cgroups: an ordinary user without a delegated cgroup), accept Templates that set cpu, memory, processes or disk limits and run them without those limits (otherwise their Deployments are refused)")
	f.StringVar(&o.HistoryRetention, "history-retention", "never", "drop the input, result, response and output of Turns settled longer ago than this DURATION (for example 30d), keeping their status, error and timings; never: keep them")
	f.StringVar(&o.ImplicitComputerGrace, "implicit-computer-grace", "10m", "delete a Computer made implicitly for a Session once every Session on it is closed and no Command runs for this DURATION; never: keep it until deleted")
	SlackFlags(f, o, "file with the key (64 hex digits, mode 0600: openssl rand -hex 32) that seals Slack apps' credentials at rest; without it Slack apps cannot be connected")
	cmd.AddCommand(migrateCommand(), backupCommand(), restoreCommand())
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

// backupCommand is `helmr server backup`: a consistent copy of the SQLite
// store, taken while the server runs.
func backupCommand() *cobra.Command {
	var dataDir, database, to string
	cmd := &cobra.Command{
		Use:   "backup --to FILE",
		Short: "Copy the SQLite database consistently, while the server runs",
		Long: "Write a consistent copy of the SQLite database to FILE (a new file), while a server may go on\n" +
			"running on it: the copy holds every record acknowledged before the backup began and passes an\n" +
			"integrity check. Copy DATA_DIR/deployments too (agent binaries, immutable). A PostgreSQL\n" +
			"database is refused: use pg_dump.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return clienv.Usagef("--to FILE is required")
			}
			if database == "" {
				database = os.Getenv("HELMR_DATABASE_URL")
			}
			if err := controlplane.Backup(cmd.Context(), controlplane.Config{DataDir: dataDir, Database: database}, to); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backed up to %s (integrity check ok)\n", to)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "helmr-data", "directory of the default SQLite database")
	cmd.Flags().StringVar(&database, "database", "", "database URL: sqlite:PATH (env HELMR_DATABASE_URL); postgres://… is refused")
	cmd.Flags().StringVar(&to, "to", "", "the new file to write the copy to")
	return cmd
}

// restoreCommand is `helmr server restore`: put a backup in place of the
// SQLite store of a stopped server.
func restoreCommand() *cobra.Command {
	var dataDir, database, from string
	cmd := &cobra.Command{
		Use:   "restore --from FILE",
		Short: "Replace the SQLite database of a stopped server with a backup",
		Long: "Check the backup in FILE and put it in place of the SQLite database (its write-ahead log\n" +
			"removed with it). The server on DATA_DIR must be stopped. A PostgreSQL database is refused:\n" +
			"use pg_restore or psql.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return clienv.Usagef("--from FILE is required")
			}
			if database == "" {
				database = os.Getenv("HELMR_DATABASE_URL")
			}
			if err := controlplane.Restore(cmd.Context(), controlplane.Config{DataDir: dataDir, Database: database}, from); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restored %s; start the server on it\n", from)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "helmr-data", "directory of the default SQLite database")
	cmd.Flags().StringVar(&database, "database", "", "database URL: sqlite:PATH (env HELMR_DATABASE_URL); postgres://… is refused")
	cmd.Flags().StringVar(&from, "from", "", "the backup file to restore")
	return cmd
}

// DatabaseFlag registers --database, the store Start opens (see
// controlplane.Config.Database), for helmr server and helmr dev.
func DatabaseFlag(f *pflag.FlagSet, o *Options, usage string) {
	f.StringVar(&o.Database, "database", "", usage)
}
