// Package testdb gives tests the databases the store supports: always a fresh
// SQLite file, and a fresh PostgreSQL schema when GATEWAY_TEST_POSTGRES_URL
// names a server.
//
// Each PostgreSQL schema is created for one test and dropped (CASCADE) when
// that test ends, so tests, test packages and concurrent runs sharing one
// database never see each other's tables.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Environment variables read by URLs.
const (
	// EnvPostgresURL is a postgres:// URL of a database in which its role may
	// CREATE SCHEMA. Unset: PostgreSQL is skipped.
	EnvPostgresURL = "GATEWAY_TEST_POSTGRES_URL"
	// EnvRequirePostgres set to 1 turns a missing EnvPostgresURL into a
	// test failure instead of a skip (CI sets it, so that PostgreSQL is never
	// skipped silently).
	EnvRequirePostgres = "GATEWAY_TEST_REQUIRE_POSTGRES"
)

// Store is one database a test can use.
type Store struct{ Name, URL string } // Name "sqlite" or "postgres"

var (
	skipLogged sync.Once

	adminMu sync.Mutex
	admin   = map[string]*sql.DB{} // by base URL; one pool per process
)

// URLs returns, for a test, a fresh SQLite URL in t.TempDir() and, when
// GATEWAY_TEST_POSTGRES_URL is set, a fresh PostgreSQL schema: the returned
// URL carries search_path=t_<random hex> as a query parameter (pgx sends it as
// a run-time parameter, so every connection of a pool opened with it uses
// that schema; URLs checks that it does). The schema is dropped, CASCADE, in
// t.Cleanup, which runs after cleanups registered later (a store's Close).
//
// When GATEWAY_TEST_POSTGRES_URL is unset, URLs fails the test if
// GATEWAY_TEST_REQUIRE_POSTGRES=1, and otherwise logs once per process that
// PostgreSQL is skipped and returns SQLite only.
func URLs(t testing.TB) []Store {
	t.Helper()
	stores := []Store{{Name: "sqlite", URL: "sqlite://" + filepath.Join(t.TempDir(), "gateway.db")}}

	base := os.Getenv(EnvPostgresURL)
	if base == "" {
		if os.Getenv(EnvRequirePostgres) == "1" {
			t.Fatalf("testdb: %s=1 but %s is not set: set it to a PostgreSQL URL whose role may CREATE SCHEMA, "+
				"e.g. %s=\"postgres://gateway:gateway@127.0.0.1:5432/gateway_test?sslmode=disable\" "+
				"(scripts/test.sh sets one up when run as root), or unset %s to test SQLite only",
				EnvRequirePostgres, EnvPostgresURL, EnvPostgresURL, EnvRequirePostgres)
		}
		skipLogged.Do(func() {
			t.Logf("testdb: %s is not set: PostgreSQL is skipped, only SQLite is tested "+
				"(set it to postgres://user:password@host:5432/db?sslmode=disable to test PostgreSQL too)", EnvPostgresURL)
		})
		return stores
	}
	return append(stores, Store{Name: "postgres", URL: postgresSchema(t, base)})
}

// Each runs fn as a subtest per store (t.Run(store.Name, ...)). The stores'
// resources belong to t, so they outlive subtests that call t.Parallel.
func Each(t *testing.T, fn func(t *testing.T, url string)) {
	t.Helper()
	for _, s := range URLs(t) {
		t.Run(s.Name, func(t *testing.T) { fn(t, s.URL) })
	}
}

// postgresSchema creates a schema for t and returns base with search_path
// set to it.
func postgresSchema(t testing.TB, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		// Never echo base: it may hold a password.
		t.Fatalf("testdb: %s must be a postgres:// or postgresql:// URL", EnvPostgresURL)
	}
	shown := u.Redacted()

	db, err := adminDB(base)
	if err != nil {
		t.Fatalf("testdb: %s (%s): %v", EnvPostgresURL, shown, err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("testdb: random schema name: %v", err)
	}
	schema := "t_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("testdb: CREATE SCHEMA %s in %s (the role needs the CREATE privilege on the database): %v", schema, shown, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("testdb: DROP SCHEMA %s CASCADE: %v", schema, err)
		}
	})

	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	withSchema := u.String()

	// pgx turns query parameters it does not know into run-time parameters;
	// make sure this one arrived, or tests would share the default schema.
	conn, err := sql.Open("pgx", withSchema)
	if err != nil {
		t.Fatalf("testdb: open %s: %v", u.Redacted(), err)
	}
	defer conn.Close()
	var current sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT current_schema()").Scan(&current); err != nil {
		t.Fatalf("testdb: current_schema() via %s: %v", u.Redacted(), err)
	}
	if current.String != schema {
		t.Fatalf("testdb: a connection to %s uses schema %q, want %q: search_path was not applied", u.Redacted(), current.String, schema)
	}
	return withSchema
}

// adminDB returns the process's pool for base, which creates and drops the
// schemas. It is never closed: it lives as long as the test binary.
func adminDB(base string) (*sql.DB, error) {
	adminMu.Lock()
	defer adminMu.Unlock()
	if db := admin[base]; db != nil {
		return db, nil
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(2)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot connect: %w", err)
	}
	admin[base] = db
	return db, nil
}
