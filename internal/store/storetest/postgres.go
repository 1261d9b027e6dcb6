// Package storetest gives tests real databases: a fresh SQLite file or a
// fresh database on a real PostgreSQL server, and Exercise, the conformance
// suite that every store driver must pass.
package storetest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// EnvPostgres names an admin URL of a running PostgreSQL server for tests,
// e.g. postgres://tf@127.0.0.1:55432/postgres?sslmode=disable. When it is
// unset, Main starts a private server with the PostgreSQL binaries on PATH.
const EnvPostgres = "TERRACE_TEST_POSTGRES"

var (
	pgMu    sync.Mutex
	pgAdmin string
	pgStop  func()
	pgErr   error
	// inMain is set by Main: only then is there someone to stop a private
	// server when the package's tests end.
	inMain bool
)

// Main wraps a package's TestMain: it runs the tests and stops the private
// PostgreSQL server if one was started for them. A package whose tests
// use PostgreSQL must have
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
//
// (or call it from its own TestMain): without it the server would outlive
// the test binary, so PostgresDSN refuses to start one.
func Main(m *testing.M) {
	pgMu.Lock()
	inMain = true
	pgMu.Unlock()
	code := m.Run()
	pgMu.Lock()
	if pgStop != nil {
		pgStop()
	}
	pgMu.Unlock()
	os.Exit(code)
}

// PostgresDSN returns the URL of a new, empty database on a real PostgreSQL
// server; the database is dropped when the test ends. The test fails with an
// explanation when no server can be had.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	admin, err := adminDSN()
	if err == errNoMain {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("PostgreSQL is needed for this test and none could be started: %v\n"+
			"Set %s to an admin URL of a running server, or put initdb, pg_ctl and postgres (15+) on PATH.", err, EnvPostgres)
	}
	name := "t_" + strings.ToLower(core.RandomString(12))
	db, err := sql.Open("pgx", admin)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		db, err := sql.Open("pgx", admin)
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
	})
	return replaceDBName(admin, name)
}

var errNoMain = fmt.Errorf("this package's tests would start a private PostgreSQL server that nothing stops when they end: " +
	"give the package func TestMain(m *testing.M) { storetest.Main(m) } (or call storetest.Main from its TestMain)")

func replaceDBName(dsn, name string) string {
	q := ""
	if i := strings.Index(dsn, "?"); i >= 0 {
		dsn, q = dsn[:i], dsn[i:]
	}
	// postgres://user@host:port/dbname
	if i := strings.LastIndex(dsn, "/"); i > len("postgres://") {
		dsn = dsn[:i]
	}
	return dsn + "/" + name + q
}

func adminDSN() (string, error) {
	pgMu.Lock()
	defer pgMu.Unlock()
	if pgAdmin != "" || pgErr != nil {
		return pgAdmin, pgErr
	}
	if v := os.Getenv(EnvPostgres); v != "" {
		pgAdmin = v
		return pgAdmin, nil
	}
	if !inMain {
		// Not remembered as pgErr: the message is the fix, and every
		// test that asks should show it.
		return "", errNoMain
	}
	pgAdmin, pgStop, pgErr = StartPostgres()
	return pgAdmin, pgErr
}

// StartPostgres starts a throwaway PostgreSQL server (fsync off, trust auth,
// loopback only) in a temporary folder and returns its admin URL and a stop
// function. As root it runs the server as the "postgres" user, since initdb
// refuses root.
func StartPostgres() (dsn string, stop func(), err error) {
	for _, bin := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := exec.LookPath(bin); err != nil {
			return "", nil, fmt.Errorf("%s not found on PATH", bin)
		}
	}
	dir, err := os.MkdirTemp("", "terrace-pg-")
	if err != nil {
		return "", nil, err
	}
	var wrap func(args ...string) *exec.Cmd
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return "", nil, fmt.Errorf("running as root needs a 'postgres' user to run the server: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return "", nil, err
		}
		wrap = func(args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
		}
	} else {
		wrap = func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }
	}
	data := filepath.Join(dir, "data")
	if out, err := wrap("initdb", "-D", data, "-A", "trust", "-U", "terrace", "--no-sync").CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	opts := fmt.Sprintf("-k %s -p %d -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300", dir, port)
	if out, err := wrap("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "pg.log"), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "pg.log"))
		return "", nil, fmt.Errorf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
	stop = func() {
		_ = wrap("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").Run()
		_ = os.RemoveAll(dir)
	}
	dsn = fmt.Sprintf("postgres://terrace@127.0.0.1:%d/postgres?sslmode=disable", port)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, _ := sql.Open("pgx", dsn)
	defer db.Close()
	for {
		if err := db.PingContext(ctx); err == nil {
			return dsn, stop, nil
		} else if ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("server did not answer: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
