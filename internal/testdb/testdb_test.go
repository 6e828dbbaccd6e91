package testdb_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gatewayhq/gateway/internal/testdb"
)

// postgresURLs returns the PostgreSQL URLs of n calls to URLs, skipping the
// test when PostgreSQL is not configured (URLs itself fails it when
// GATEWAY_TEST_REQUIRE_POSTGRES=1).
func postgresURLs(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		for _, s := range testdb.URLs(t) {
			if s.Name == "postgres" {
				out = append(out, s.URL)
			}
		}
	}
	if len(out) == 0 {
		t.Skip("PostgreSQL not configured (" + testdb.EnvPostgresURL + ")")
	}
	return out
}

func openPG(t *testing.T, u string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func searchPath(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	sp := p.Query().Get("search_path")
	if !strings.HasPrefix(sp, "t_") || len(sp) != len("t_")+16 {
		t.Fatalf("search_path = %q, want t_<16 hex digits>", sp)
	}
	return sp
}

func TestURLsSQLite(t *testing.T) {
	a, b := testdb.URLs(t), testdb.URLs(t)
	if a[0].Name != "sqlite" || b[0].Name != "sqlite" {
		t.Fatalf("first store is %q/%q, want sqlite", a[0].Name, b[0].Name)
	}
	for _, s := range []testdb.Store{a[0], b[0]} {
		p, ok := strings.CutPrefix(s.URL, "sqlite://")
		if !ok || !filepath.IsAbs(p) {
			t.Errorf("SQLite URL %q is not sqlite://<absolute path>", s.URL)
		}
	}
	if a[0].URL == b[0].URL {
		t.Errorf("two calls returned the same SQLite URL %q", a[0].URL)
	}
	for _, s := range slices.Concat(a, b) {
		if s.Name != "sqlite" && s.Name != "postgres" {
			t.Errorf("store name %q", s.Name)
		}
	}
}

// TestPostgresSchemaIsolated: two URLs from two calls name two schemas, and
// every connection of a pool opened with one uses that schema.
func TestPostgresSchemaIsolated(t *testing.T) {
	urls := postgresURLs(t, 2)
	ctx := context.Background()
	a, b := openPG(t, urls[0]), openPG(t, urls[1])
	sa, sb := searchPath(t, urls[0]), searchPath(t, urls[1])
	if sa == sb {
		t.Fatalf("both URLs use schema %s", sa)
	}

	// Several simultaneous connections of each pool, not just the first.
	for _, p := range []struct {
		db     *sql.DB
		schema string
	}{{a, sa}, {b, sb}} {
		var conns []*sql.Conn
		for range 3 {
			c, err := p.db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
			var got string
			if err := c.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != p.schema {
				t.Errorf("connection %d: current_schema() = %q, want %q", len(conns), got, p.schema)
			}
		}
		for _, c := range conns {
			c.Close()
		}
	}

	// The same unqualified table name, created through each URL, is two tables.
	for i, db := range []*sql.DB{a, b} {
		if _, err := db.ExecContext(ctx, `CREATE TABLE items (n INTEGER NOT NULL)`); err != nil {
			t.Fatalf("CREATE TABLE via URL %d: %v", i, err)
		}
		for n := range i + 1 {
			if _, err := db.ExecContext(ctx, `INSERT INTO items (n) VALUES ($1)`, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, db := range []*sql.DB{a, b} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM items`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != i+1 {
			t.Errorf("URL %d sees %d rows in items, want %d", i, n, i+1)
		}
	}
	// And each lives in its own schema, per the catalog.
	for _, s := range []string{sa, sb} {
		var n int
		err := a.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'items'`, s).Scan(&n)
		if err != nil || n != 1 {
			t.Errorf("schema %s holds %d tables named items (%v), want 1", s, n, err)
		}
	}
}

// TestPostgresSchemaDropped: a test's schema, and what it holds, is gone once
// that test has finished.
func TestPostgresSchemaDropped(t *testing.T) {
	probe := postgresURLs(t, 1)[0] // a schema of the parent test, alive throughout
	var schema string
	t.Run("user", func(t *testing.T) {
		u := postgresURLs(t, 1)[0]
		schema = searchPath(t, u)
		db := openPG(t, u) // closed before the schema is dropped
		if _, err := db.Exec(`CREATE TABLE leftover (n INTEGER)`); err != nil {
			t.Fatal(err)
		}
	})
	if schema == "" {
		t.Fatal("subtest did not run")
	}
	var n int
	if err := openPG(t, probe).QueryRow(`SELECT COUNT(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("schema %s still exists after its test ended", schema)
	}
}

func TestEach(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	testdb.Each(t, func(t *testing.T, u string) {
		name := t.Name()[strings.LastIndex(t.Name(), "/")+1:]
		mu.Lock()
		seen[name] = u
		mu.Unlock()
	})
	if _, ok := seen["sqlite"]; !ok {
		t.Errorf("no sqlite subtest: %v", seen)
	}
	if u, ok := seen["postgres"]; ok && !strings.HasPrefix(u, "postgres") {
		t.Errorf("postgres subtest got URL %q", u)
	}
	if len(seen) > 2 {
		t.Errorf("unexpected subtests: %v", seen)
	}
}

// fakeTB records what URLs reports instead of failing the real test.
type fakeTB struct {
	testing.TB // the real test, for TempDir and Cleanup
	mu         sync.Mutex
	fatal      string
	logs       []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Fatal(args ...any) { f.Fatalf("%s", fmt.Sprint(args...)) }
func (f *fakeTB) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Log(args ...any) { f.Logf("%s", fmt.Sprint(args...)) }

// callURLs runs URLs with a fake TB, returning its stores, or "" and the
// Fatal message.
func callURLs(t *testing.T) ([]testdb.Store, *fakeTB) {
	f := &fakeTB{TB: t}
	var got []testdb.Store
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = testdb.URLs(f)
	}()
	<-done
	return got, f
}

func TestURLsWithoutPostgres(t *testing.T) {
	t.Setenv(testdb.EnvPostgresURL, "")

	t.Setenv(testdb.EnvRequirePostgres, "1")
	got, f := callURLs(t)
	if f.fatal == "" {
		t.Fatalf("required PostgreSQL missing, URLs returned %v without failing", got)
	}
	for _, w := range []string{testdb.EnvPostgresURL, "postgres://"} {
		if !strings.Contains(f.fatal, w) {
			t.Errorf("failure %q does not mention %q", f.fatal, w)
		}
	}

	t.Setenv(testdb.EnvRequirePostgres, "")
	got, f = callURLs(t)
	if f.fatal != "" || len(got) != 1 || got[0].Name != "sqlite" {
		t.Fatalf("URLs = %v (fatal %q), want SQLite only", got, f.fatal)
	}
}

func TestURLsBadPostgresURLHidesPassword(t *testing.T) {
	for _, u := range []string{
		"mysql://user:s3cret@localhost/db",
		"postgres://user:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5", // nothing listens on port 1
	} {
		t.Setenv(testdb.EnvPostgresURL, u)
		got, f := callURLs(t)
		if f.fatal == "" {
			t.Errorf("%s: URLs = %v, want a failure", u, got)
			continue
		}
		if strings.Contains(f.fatal, "s3cret") {
			t.Errorf("failure leaks the password: %q", f.fatal)
		}
		if !strings.Contains(f.fatal, testdb.EnvPostgresURL) {
			t.Errorf("failure %q does not name %s", f.fatal, testdb.EnvPostgresURL)
		}
	}
}
