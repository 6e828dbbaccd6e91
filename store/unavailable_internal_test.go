package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// realConnectError is what pgx answers when PostgreSQL is down.
func realConnectError(t *testing.T, url string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		conn.Close(ctx)
		t.Fatal("connected to a closed port")
	}
	return err
}

// TestUnavailableClassifiesOutages: connection failures and PostgreSQL
// going away are ErrUnavailable, with a message naming the server and
// never the password; a request's own errors are not.
func TestUnavailableClassifiesOutages(t *testing.T) {
	port := closedPort(t)
	url := fmt.Sprintf("postgres://gw:s3cret-password@127.0.0.1:%d/gateway?sslmode=disable&connect_timeout=5", port)
	db := &DB{dialect: postgres, where: postgresWhere(url)}
	refused := realConnectError(t, url)
	sqlDB, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pingErr := sqlDB.PingContext(ctx)
	if pingErr == nil {
		t.Fatal("ping of a closed port succeeded")
	}

	where := fmt.Sprintf("127.0.0.1:%d", port)
	cases := []struct {
		name string
		err  error
		want string // "" = not an outage
	}{
		{"connection refused (pgx)", refused, "cannot reach PostgreSQL at " + where + ": connection refused"},
		{"connection refused (database/sql), wrapped", fmt.Errorf("store: list clusters: %w", pingErr), "connection refused"},
		{"terminated by an administrator", &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}, "terminating connection due to administrator command"},
		{"starting up", fmt.Errorf("store: begin: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"}), "the database system is starting up"},
		{"connection exception class 08", &pgconn.PgError{Code: "08006", Message: "connection failure"}, "connection failure"},
		{"connection lost mid-query", fmt.Errorf("store: get cluster: %w", io.ErrUnexpectedEOF), "the connection was lost"},
		{"bad connection", driver.ErrBadConn, "the connection was lost"},
		{"unique violation", &pgconn.PgError{Code: "23505", Message: "duplicate key"}, ""},
		{"not found", fmt.Errorf("store: cluster x: %w", ErrNotFound), ""},
		{"caller went away", fmt.Errorf("store: %w", context.Canceled), ""},
		{"nil", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := db.Unavailable(c.err)
			if c.want == "" {
				if got != nil {
					t.Fatalf("Unavailable(%v) = %v, want nil", c.err, got)
				}
				return
			}
			if got == nil || !errors.Is(got, ErrUnavailable) || errors.Is(got, ErrDiskFull) {
				t.Fatalf("Unavailable(%v) = %v, want ErrUnavailable (not disk full)", c.err, got)
			}
			msg := got.Error()
			if !strings.Contains(msg, where) || !strings.Contains(msg, c.want) {
				t.Errorf("message %q does not name %s and %q", msg, where, c.want)
			}
			if strings.Contains(msg, "s3cret") {
				t.Errorf("message %q carries the password", msg)
			}
			if !errors.Is(got, c.err) && !errors.Is(fmt.Errorf("x: %w", got), ErrUnavailable) {
				t.Errorf("the driver's error is not kept")
			}
		})
	}

	t.Run("ping", func(t *testing.T) {
		down := &DB{db: sqlDB, dialect: postgres, where: postgresWhere(url)}
		err := down.Ping(context.Background())
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("Ping = %v, want ErrUnavailable", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "cannot reach PostgreSQL at "+where) || strings.Contains(msg, "s3cret") {
			t.Errorf("Ping's message %q", msg)
		}
	})
}

// TestUnavailableTerminatedSession: a session PostgreSQL ends (as a
// restart does) fails with an error classified as an outage.
func TestUnavailableTerminatedSession(t *testing.T) {
	var pgURL string
	for _, s := range testdb.URLs(t) {
		if s.Name == "postgres" {
			pgURL = s.URL
		}
	}
	if pgURL == "" {
		t.Skip("needs PostgreSQL: set " + testdb.EnvPostgresURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := Open(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	victim, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close(ctx)
	var pid int
	if err := victim.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := db.db.QueryRowContext(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend: %v %v", ok, err)
	}
	var one int
	qerr := victim.QueryRow(ctx, `SELECT 1`).Scan(&one)
	if qerr == nil {
		t.Fatal("a terminated session answered")
	}
	got := db.Unavailable(fmt.Errorf("store: %w", qerr))
	if !errors.Is(got, ErrUnavailable) {
		t.Fatalf("Unavailable(%v) = %v, want ErrUnavailable", qerr, got)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("Ping of a live server: %v", err)
	}
}

// TestSQLiteFullLeavesNothingHalfWritten: when SQLite cannot grow its
// file (max_page_count stands in for a full disk: the same SQLITE_FULL),
// writes fail with ErrDiskFull naming the directory, and a create that
// failed left no cluster, event or usage behind. With room again, writes
// work.
func TestSQLiteFullLeavesNothingHalfWritten(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := openSQLite(ctx, filepath.Join(dir, "gateway.db"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.db.SetMaxOpenConns(1) // the pragma is per connection
	var pages int
	if err := db.db.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.db.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+8)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 3000) // a few clusters fill 8 pages
	created := 0
	var fullErr error
	for i := 0; i < 100 && fullErr == nil; i++ {
		c := &Cluster{Name: fmt.Sprintf("c%d", i), Owner: "alice", Status: Pending, Provider: "local",
			TLSCert: []byte(big), TLSKey: []byte(big), Shape: `{"workers":{"cpus":1,"memory_gib":1}}`, DesiredWorkers: 1}
		err := db.AdmitCluster(ctx, c, time.Time{}, func(Usage, Totals) error { return nil })
		switch {
		case err == nil:
			created++
		default:
			fullErr = err
		}
	}
	if fullErr == nil {
		t.Fatal("100 clusters fitted in 8 pages")
	}
	u := db.Unavailable(fullErr)
	if !errors.Is(u, ErrDiskFull) || !errors.Is(u, ErrUnavailable) {
		t.Fatalf("Unavailable(%v) = %v, want ErrDiskFull", fullErr, u)
	}
	if msg := u.Error(); !strings.Contains(msg, "disk is full ("+dir+")") || !strings.Contains(msg, "free space there") {
		t.Errorf("message %q does not name the directory %s and what to do", msg, dir)
	}
	count := func(q string) int {
		t.Helper()
		var n int
		if err := db.db.QueryRowContext(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT COUNT(*) FROM clusters`); n != created {
		t.Errorf("%d cluster rows after %d creates succeeded", n, created)
	}
	if n := count(`SELECT COUNT(*) FROM cluster_events`); n != created {
		t.Errorf("%d events after %d creates succeeded", n, created)
	}
	// The usage summary counts the clusters that exist, no more.
	summary, err := db.OwnerUsage(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	counted, err := db.CountUsage(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if summary.Clusters != created || counted.Clusters != created || summary.VCPUs != counted.VCPUs {
		t.Errorf("usage summary %+v, counted %+v, %d clusters created", summary, counted, created)
	}

	// An update that fails leaves the cluster as it was.
	before := mustGetInternal(t, db, "c0")
	_, uerr := db.UpdateCluster(ctx, "c0", func(c *Cluster) (Event, error) {
		c.Phase = strings.Repeat("p", 40000)
		return Event{Kind: "scaled", Message: "grown"}, nil
	})
	if !errors.Is(db.Unavailable(uerr), ErrDiskFull) {
		t.Fatalf("update on a full database: %v", uerr)
	}
	if after := mustGetInternal(t, db, "c0"); after.Version != before.Version || after.Phase != before.Phase {
		t.Errorf("a failed update changed the cluster: version %d -> %d", before.Version, after.Version)
	}

	if _, err := db.db.ExecContext(ctx, `PRAGMA max_page_count = 1000000`); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateCluster(ctx, &Cluster{Name: "again", Owner: "alice", Status: Pending, Provider: "local"}); err != nil {
		t.Fatalf("create with room again: %v", err)
	}
}

func mustGetInternal(t *testing.T, db *DB, name string) *Cluster {
	t.Helper()
	c, err := db.GetCluster(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
