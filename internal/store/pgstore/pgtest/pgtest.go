// Package pgtest runs a throwaway PostgreSQL server for tests, from the
// machine's own binaries (initdb, pg_ctl): one server per test binary, on a
// temporary directory and a free loopback port, and a fresh database per
// test so that tests may run in parallel.
//
// A test binary wires it up in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and each test asks for a database with URL(t). When PostgreSQL cannot be
// started here (no binaries; running as root without a postgres user),
// URL skips the test with the reason.
//
// When run as root, the server runs as the postgres user (initdb refuses
// root), through runuser.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL server owned by the test binary.
type Server struct {
	dir     string // temporary root: data directory and log inside
	dataDir string
	port    int
	runAs   string // user to run the binaries as; "" for the current one
	runuser string // path of runuser, when runAs is set
	admin   string // URL of the postgres database
	// watchdog stops the server and removes dir should the test binary
	// die without calling Stop (a panic, a timeout, a kill).
	watchdog *exec.Cmd
	// Started is how long initdb and pg_ctl start took.
	Started time.Duration
}

// ErrUnavailable marks a Start error that says PostgreSQL cannot run on
// this machine at all (no server binaries; root without a postgres user),
// as opposed to a server that failed to start. URL skips tests on the
// first and fails them on the second.
var ErrUnavailable = errors.New("PostgreSQL is not available here")

var (
	current  *Server
	startErr error // why there is no server
	dbSeq    atomic.Int64
	mu       sync.Mutex
)

// Main starts the server, runs the tests, stops the server and removes its
// directory, and returns the exit code for os.Exit. When the server cannot
// start, the tests still run and URL skips them with the reason.
func Main(m *testing.M) int {
	if !flag.Parsed() {
		flag.Parse() // for testing.Verbose; m.Run parses only once
	}
	s, err := Start()
	if errors.Is(err, ErrUnavailable) {
		startErr = err
		fmt.Fprintf(os.Stderr, "pgtest: PostgreSQL tests will be skipped: %v\n", err)
	} else if err != nil {
		startErr = err
		fmt.Fprintf(os.Stderr, "pgtest: PostgreSQL did not start; its tests will fail: %v\n", err)
	} else {
		current = s
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "pgtest: PostgreSQL started on port %d in %v\n", s.port, s.Started.Round(time.Millisecond))
		}
	}
	code := m.Run()
	if current != nil {
		if err := current.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop: %v\n", err)
		}
	}
	return code
}

// URL creates a fresh, empty database for t on the server that Main
// started and returns its connection URL. t is skipped when PostgreSQL is
// unavailable here (ErrUnavailable) and fails when the server did not
// start for another reason. The database is dropped when t ends.
func URL(t testing.TB) string {
	t.Helper()
	if current == nil {
		switch {
		case startErr == nil:
			t.Fatal("pgtest: no PostgreSQL server: TestMain must call pgtest.Main")
		case errors.Is(startErr, ErrUnavailable):
			t.Skip("pgtest: skipped: " + startErr.Error())
		default:
			t.Fatalf("pgtest: PostgreSQL did not start: %v", startErr)
		}
	}
	name, err := current.CreateDatabase(t.Context())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := current.exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			t.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	return current.DatabaseURL(name)
}

// Start initializes a data directory in a new temporary directory and
// starts PostgreSQL on a free loopback port, without fsync.
func Start() (*Server, error) {
	begin := time.Now()
	initdb, err := lookPath("initdb")
	if err != nil {
		return nil, err
	}
	pgctl, err := lookPath("pg_ctl")
	if err != nil {
		return nil, err
	}
	s := &Server{}
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("%w: running as root and there is no postgres user to run PostgreSQL as (initdb refuses root): %v", ErrUnavailable, err)
		}
		s.runuser, err = exec.LookPath("runuser")
		for _, p := range []string{"/usr/sbin/runuser", "/sbin/runuser"} {
			if err == nil {
				break
			}
			if _, serr := os.Stat(p); serr == nil {
				s.runuser, err = p, nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: running as root and runuser is missing: %v", ErrUnavailable, err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		s.runAs = "postgres"
	}
	s.dir, err = os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if uid >= 0 {
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return fail(err)
		}
	}
	s.dataDir = filepath.Join(s.dir, "data")
	if out, err := s.run(initdb, "-D", s.dataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	// A free port can be taken between choosing it and the server binding
	// it; try a few.
	var lastErr error
	for range 5 {
		s.port, err = freePort()
		if err != nil {
			return fail(err)
		}
		conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\n"+
			"fsync = off\nsynchronous_commit = off\nfull_page_writes = off\nmax_connections = 300\n", s.port, s.dir)
		if err := appendFile(filepath.Join(s.dataDir, "postgresql.auto.conf"), conf); err != nil {
			return fail(err)
		}
		out, err := s.run(pgctl, "-D", s.dataDir, "-l", filepath.Join(s.dir, "postgres.log"), "-w", "-t", "60", "start")
		if err == nil {
			lastErr = nil
			break
		}
		log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
		lastErr = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	if lastErr != nil {
		return fail(lastErr)
	}
	s.startWatchdog(pgctl)
	s.admin = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	s.Started = time.Since(begin)
	return s, nil
}

// lookPath finds a PostgreSQL server binary on PATH or, failing that, in
// Debian's versioned directories (/usr/lib/postgresql/N/bin), newest first.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s is neither on PATH nor in /usr/lib/postgresql/*/bin (install PostgreSQL's server, e.g. Debian's postgresql package)", ErrUnavailable, name)
}

// pgVersion is N of /usr/lib/postgresql/N/bin.
func pgVersion(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// startWatchdog starts a shell that waits for this process to end and then
// stops the server and removes its directory. Stop ends it first.
func (s *Server) startWatchdog(pgctl string) {
	stop := []string{pgctl, "-D", s.dataDir, "-m", "immediate", "-w", "stop"}
	if s.runAs != "" {
		stop = append([]string{s.runuser, "-u", s.runAs, "--"}, stop...)
	}
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done; shift; dir=$1; shift; "$@" >/dev/null 2>&1; rm -rf "$dir"`
	cmd := exec.Command("sh", append([]string{"-c", script, "pgtest-watchdog", strconv.Itoa(os.Getpid()), s.dir}, stop...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: no watchdog, a crashed test binary will leave PostgreSQL running in %s: %v\n", s.dir, err)
		return
	}
	s.watchdog = cmd
}

// run runs a PostgreSQL binary, as the postgres user when root.
func (s *Server) run(bin string, args ...string) ([]byte, error) {
	var cmd *exec.Cmd
	if s.runAs != "" {
		cmd = exec.Command(s.runuser, append([]string{"-u", s.runAs, "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Dir = s.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl's server outlives the command: keep it out of the test
	// binary's process group, so that a ^C reaches it only through Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Run()
	return out.Bytes(), err
}

func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// CreateDatabase creates a new, empty database and returns its name (see
// DatabaseURL).
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t_%d_%d", os.Getpid(), dbSeq.Add(1))
	// CREATE DATABASE copies template1 and fails when another copy of it
	// runs at the same time; one at a time.
	mu.Lock()
	defer mu.Unlock()
	if err := s.exec(ctx, `CREATE DATABASE `+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

// CreateDurableDatabase is CreateDatabase for a test that halts the
// server: its commits are synchronous (the test server commits
// asynchronously, and an immediate stop loses the last commits).
func (s *Server) CreateDurableDatabase(ctx context.Context) (string, error) {
	name, err := s.CreateDatabase(ctx)
	if err == nil {
		err = s.exec(ctx, `ALTER DATABASE `+name+` SET synchronous_commit = on`)
	}
	return name, err
}

// DatabaseURL is the URL of database name on the server.
func (s *Server) DatabaseURL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, name)
}

// SocketURL is the URL of database name through the server's Unix socket,
// which costs less CPU per round trip than loopback TCP.
func (s *Server) SocketURL(name string) string {
	return fmt.Sprintf("postgres://postgres@/%s?host=%s&port=%d&sslmode=disable", name, s.dir, s.port)
}

// PID is the process ID of the server's postmaster (0 when it cannot be
// read); its backends are its children.
func (s *Server) PID() int {
	b, err := os.ReadFile(filepath.Join(s.dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, _ := strconv.Atoi(string(bytes.TrimSpace(line)))
	return pid
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Stop stops the server at once and removes its directory.
func (s *Server) Stop() error {
	if s.watchdog != nil {
		s.watchdog.Process.Kill()
		s.watchdog.Wait()
		s.watchdog = nil
	}
	pgctl, err := lookPath("pg_ctl")
	if err == nil {
		var out []byte
		out, err = s.run(pgctl, "-D", s.dataDir, "-m", "immediate", "-w", "stop")
		if err != nil {
			err = fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
		}
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Halt stops the server at once (pg_ctl stop -m immediate), as a crash or
// the loss of the database's host would, and keeps its data directory:
// clients' connections break and new ones are refused until Resume. As in
// a crash, the last commits of a database with synchronous_commit off (the
// server's default here) may be lost: a test that halts sets it on for its
// database (ALTER DATABASE … SET synchronous_commit = on). Only a test's
// own server (Start) should be halted: the one Main started serves the
// other tests of the binary.
func (s *Server) Halt() error {
	pgctl, err := lookPath("pg_ctl")
	if err != nil {
		return err
	}
	if out, err := s.run(pgctl, "-D", s.dataDir, "-m", "immediate", "-w", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Resume starts a halted server again on its port and waits until it
// accepts connections (after its crash recovery).
func (s *Server) Resume() error {
	pgctl, err := lookPath("pg_ctl")
	if err != nil {
		return err
	}
	if out, err := s.run(pgctl, "-D", s.dataDir, "-l", filepath.Join(s.dir, "postgres.log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// Current is the server Main started, nil when there is none.
func Current() *Server { return current }
