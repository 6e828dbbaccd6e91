// Package store keeps the gateway's durable state: clusters and their
// lifecycle events. It speaks SQL through database/sql so that SQLite
// (modernc.org/sqlite, pure Go) and PostgreSQL share one implementation and
// one set of migrations; dialect differences are confined to this package.
package store

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gatewayhq/gateway/internal/keylock"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
	_ "modernc.org/sqlite"             // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Errors callers match with errors.Is.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
)

// Status is a cluster's lifecycle state.
type Status string

// The lifecycle: PENDING -> STARTING -> RUNNING -> STOPPING -> STOPPED, or
// FAILED (with a reason) from any state before STOPPED.
const (
	Pending  Status = "PENDING"
	Starting Status = "STARTING"
	Running  Status = "RUNNING"
	Stopping Status = "STOPPING"
	Stopped  Status = "STOPPED"
	Failed   Status = "FAILED"
)

// AllStatuses lists every status in lifecycle order.
var AllStatuses = []Status{Pending, Starting, Running, Stopping, Stopped, Failed}

// Active reports whether a cluster in this status may hold resources.
func (s Status) Active() bool { return s == Pending || s == Starting || s == Running || s == Stopping }

// Live reports whether a cluster in this status still takes requests
// (scale, adapt, stop): it is active and has not begun to stop.
func (s Status) Live() bool { return s.Active() && s != Stopping }

// ActiveStatuses are the statuses for which Active holds.
var ActiveStatuses = []Status{Pending, Starting, Running, Stopping}

// ParseStatus accepts a status name in any case.
func ParseStatus(s string) (Status, error) {
	up := Status(strings.ToUpper(strings.TrimSpace(s)))
	for _, v := range AllStatuses {
		if v == up {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown status %q (want one of PENDING, STARTING, RUNNING, STOPPING, STOPPED, FAILED)", s)
}

// Cluster is one stored cluster.
type Cluster struct {
	Name  string
	Owner string
	// OwnerName and OwnerGroups are the owner's user name and groups when
	// the cluster was made: quotas are checked against them when the
	// cluster grows without a request from its owner (adaptive scaling).
	OwnerName   string
	OwnerGroups []string
	Status      Status
	Phase       string // human-readable progress detail
	Reason      string // why it failed or stopped
	Provider    string
	Options     string // JSON object of the validated cluster options
	// Shape is a JSON object of where the cluster runs and the size of
	// its members, as admitted (see quota.Shape).
	Shape string

	DesiredWorkers int
	NextWorkerSeq  int // the next worker's sequence number; names are never reused
	ReadyWorkers   int // workers connected to the scheduler, last observed

	// Adaptive scaling: when on, DesiredWorkers follows the scheduler's
	// demand within [AdaptMin, AdaptMax].
	Adaptive bool
	AdaptMin int
	AdaptMax int

	TLSCert []byte
	TLSKey  []byte

	SchedulerAddress string // where the proxy dials the scheduler (host:port)
	DashboardAddress string // base URL of the scheduler's HTTP server

	CreatedAt time.Time
	StartedAt time.Time // zero until RUNNING
	StoppedAt time.Time // zero until STOPPED or FAILED
	UpdatedAt time.Time
	Version   int64
}

// Event is one entry of a cluster's lifecycle log.
type Event struct {
	At      time.Time
	Kind    string
	Message string

	// Written with the change, in the same transaction (never read back
	// through Events): usage ledger entries, and whether to close every
	// member's open ledger interval (the cluster's resources are gone).
	Ledger      []LedgerEntry
	CloseLedger bool
	// Audit, when set, records an admin's change with it.
	Audit *AuditEntry
}

// Filter selects clusters. Zero fields select everything.
type Filter struct {
	Owner    string
	Statuses []Status
}

type dialect int

const (
	sqlite dialect = iota
	postgres
)

// DB is the store.
type DB struct {
	db      *sql.DB
	dialect dialect
	now     func() time.Time
	owners  keylock.Locks // admissions and growth per owner, in this process
	stmts   stmtCache     // prepared statements of the per-request lookups
	writes  *writeQueue   // SQLite: this process's writes, one at a time (nil: PostgreSQL; see sqlitequeue.go)
	where   string        // what outage messages name: SQLite's directory, PostgreSQL's host:port (see unavailable.go)
}

// begin starts a transaction. PostgreSQL's is READ COMMITTED whatever the
// database's default: the owner lock's waiters must see what the previous
// holder committed, which a REPEATABLE READ snapshot taken at the lock
// statement would hide.
func (s *DB) begin(ctx context.Context) (*sql.Tx, error) {
	if s.dialect == postgres {
		return s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	}
	return s.db.BeginTx(ctx, nil)
}

// Open opens (creating if needed) the store named by url and applies pending
// migrations. Accepted forms: "sqlite:///abs/path.db", "sqlite://rel/path.db",
// a bare file path, or "postgres://..." (see OpenPostgres).
func Open(ctx context.Context, rawURL string) (*DB, error) {
	// Only the scheme is ever quoted back: the rest may hold a password.
	scheme, rest, hasScheme := strings.Cut(rawURL, "://")
	scheme = strings.ToLower(scheme)
	switch {
	case hasScheme && (scheme == "postgres" || scheme == "postgresql"):
		return openPostgres(ctx, scheme+"://"+rest) // pgx knows the scheme in lower case only
	case hasScheme && scheme == "sqlite":
		return openSQLite(ctx, rest, true)
	case hasScheme:
		return nil, fmt.Errorf("store: unsupported database.url scheme %q (want sqlite:// or postgres://)", scheme)
	case rawURL == "":
		return nil, errors.New("store: database.url is empty")
	default:
		return openSQLite(ctx, rawURL, true)
	}
}

// openSQLite opens the SQLite store; queued puts this process's writes in
// one queue (always, but for the benchmark that compares).
func openSQLite(ctx context.Context, path string, queued bool) (*DB, error) {
	if path == "" {
		return nil, errors.New("store: sqlite URL has no file path")
	}
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("store: create directory for %s: %w", path, err)
		}
	}
	// _txlock=immediate takes the write lock at BEGIN, so two writers never
	// deadlock upgrading read locks; busy_timeout makes them queue instead.
	// The path goes into a file: URI, where %, ? and # have meanings of their own.
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	dsn := "file:" + escaped + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	probe, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	drv := probe.Driver()
	probe.Close()
	var writes *writeQueue
	if queued {
		writes = newWriteQueue()
	}
	db := sql.OpenDB(&queuedConnector{dsn: dsn, drv: drv, q: writes})
	if path == ":memory:" {
		db.SetMaxOpenConns(1) // each connection would see its own database
	} else {
		// database/sql keeps 2 idle connections by default; every other
		// query would open a connection again (pragmas included), which
		// was a fifth of the reconcile loop's and the API's CPU.
		db.SetMaxIdleConns(32)
	}
	s := &DB{db: db, dialect: sqlite, now: time.Now, writes: writes, where: sqliteWhere(path)}
	// Two processes creating the same new file at once can meet SQLITE_BUSY
	// while the first one switches it to WAL, before busy_timeout applies.
	for attempt := 1; ; attempt++ {
		err = s.migrate(ctx)
		if err == nil || attempt == 10 || !strings.Contains(err.Error(), "database is locked") {
			break
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func openPostgres(ctx context.Context, rawURL string) (*DB, error) {
	db, err := sql.Open("pgx", rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: open PostgreSQL: %w", err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(5 * time.Minute)
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		// pgx errors name the host and user, never the password.
		return nil, fmt.Errorf("store: cannot reach PostgreSQL at database.url: %w", err)
	}
	s := &DB{db: db, dialect: postgres, now: time.Now, where: postgresWhere(rawURL)}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Dialect names the database behind the store ("sqlite" or "postgres").
func (s *DB) Dialect() string {
	if s.dialect == postgres {
		return "postgres"
	}
	return "sqlite"
}

// SetMaxOpenConns bounds the connections this process opens to the
// database (several replicas share PostgreSQL's max_connections).
func (s *DB) SetMaxOpenConns(n int) {
	if s.dialect == postgres && n > 0 {
		s.db.SetMaxOpenConns(n)
		s.db.SetMaxIdleConns(min(n, 8))
	}
}

// Close lets the writes already queued finish, refuses new ones
// (ErrClosed) and releases the database.
func (s *DB) Close() error {
	s.writes.close()
	return s.db.Close()
}

// SetClock replaces the clock used for timestamps (tests).
func (s *DB) SetClock(now func() time.Time) { s.now = now }

func (s *DB) migrate(ctx context.Context) error {
	if err := s.createMigrationsTable(ctx); err != nil {
		return fmt.Errorf("store: create migrations table: %w", err)
	}
	migrations, err := migrationsFor(migrationFS, s.Dialect())
	if err != nil {
		return err
	}
	for _, m := range migrations {
		body, err := fs.ReadFile(migrationFS, m.file)
		if err != nil {
			return fmt.Errorf("store: read migration %s: %w", m.file, err)
		}
		if err := s.apply(ctx, m.version, string(body)); err != nil {
			return fmt.Errorf("store: migration %s: %w", m.version, err)
		}
	}
	// The usage summary is counted again at every start (one read of the
	// live clusters' shapes): writes of a replica of an older version,
	// which keeps no summary, during a rolling upgrade are counted once
	// it is gone and this one starts.
	return s.RecountUsage(ctx)
}

// migration is one file of migrations/ to apply, under its version.
type migration struct{ version, file string }

// migrationsFor lists, in version order, the migrations/*.sql files of fsys
// that apply to dialect ("sqlite" or "postgres"). NNNN_name.sql applies to
// both; NNNN_name.sqlite.sql and NNNN_name.postgres.sql to one each, for a
// change that each database makes its own way, and are recorded under
// NNNN_name like the others: a version is one step of the schema whichever
// file took it. Two files of one version for one dialect are refused
// rather than applied in an arbitrary order.
func migrationsFor(fsys fs.FS, dialect string) ([]migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, fmt.Errorf("store: list migrations: %w", err)
	}
	var out []migration
	seen := map[string]string{} // version → file
	for _, name := range names {
		version, only := strings.TrimSuffix(filepath.Base(name), ".sql"), ""
		for _, d := range []string{"sqlite", "postgres"} {
			if v, ok := strings.CutSuffix(version, "."+d); ok {
				version, only = v, d
				break
			}
		}
		if only != "" && only != dialect {
			continue
		}
		if prev, dup := seen[version]; dup {
			return nil, fmt.Errorf("store: migrations %s and %s are both version %s for %s", prev, name, version, dialect)
		}
		seen[version] = name
		out = append(out, migration{version: version, file: name})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

func (s *DB) createMigrationsTable(ctx context.Context) error {
	const ddl = `CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`
	if s.dialect != postgres {
		_, err := s.db.ExecContext(ctx, ddl)
		return err
	}
	// CREATE TABLE IF NOT EXISTS races between sessions in PostgreSQL.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7412650391)`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, ddl); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *DB) apply(ctx context.Context, version, body string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if s.dialect == postgres {
		// Several gateways may start at once: one migrates, the others wait
		// and then find the migration recorded. The lock ends with the
		// transaction.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7412650391)`); err != nil {
			return err
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`), version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	autoID := "INTEGER PRIMARY KEY AUTOINCREMENT"
	if s.dialect == postgres {
		autoID = "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"
	}
	body = strings.ReplaceAll(body, "{{AUTOID}}", autoID)
	for _, stmt := range splitStatements(body) {
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("%w\n%s", err, stmt)
		}
	}
	if version == usageMigration {
		// The summary starts as a count of what is stored, in the
		// migration's transaction: no write can fall in between.
		if err := s.recountUsage(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`), version, s.now().UnixMilli()); err != nil {
		return err
	}
	return tx.Commit()
}

// splitStatements splits a migration on semicolons that end a line, dropping
// comment-only lines. Migrations are ours, so this simple rule is enough.
func splitStatements(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}

// rebind turns ? placeholders into $n for PostgreSQL.
func (s *DB) rebind(q string) string {
	if s.dialect != postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

const clusterColumns = `name, owner, status, phase, reason, provider, options, desired_workers, next_worker_seq,
ready_workers, tls_cert, tls_key, scheduler_address, dashboard_address, created_at, started_at, stopped_at,
updated_at, version, adaptive, adapt_min, adapt_max, owner_name, owner_groups, shape`

type scanner interface{ Scan(dest ...any) error }

func scanCluster(r scanner) (*Cluster, error) {
	var c Cluster
	var status, cert, key string
	var created, started, stopped, updated int64
	var adaptive int
	var groups string
	err := r.Scan(&c.Name, &c.Owner, &status, &c.Phase, &c.Reason, &c.Provider, &c.Options, &c.DesiredWorkers,
		&c.NextWorkerSeq, &c.ReadyWorkers, &cert, &key, &c.SchedulerAddress, &c.DashboardAddress, &created,
		&started, &stopped, &updated, &c.Version, &adaptive, &c.AdaptMin, &c.AdaptMax, &c.OwnerName, &groups, &c.Shape)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(groups), &c.OwnerGroups); err != nil {
		return nil, fmt.Errorf("cluster %s: owner groups: %w", c.Name, err)
	}
	if len(c.OwnerGroups) == 0 {
		c.OwnerGroups = nil // as made: none is none
	}
	c.Adaptive = adaptive != 0
	c.Status = Status(status)
	c.TLSCert, c.TLSKey = []byte(cert), []byte(key)
	c.CreatedAt, c.StartedAt, c.StoppedAt, c.UpdatedAt = fromMillis(created), fromMillis(started), fromMillis(stopped), fromMillis(updated)
	return &c, nil
}

func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// CreateCluster inserts a new cluster with an event. It fails with ErrExists
// when the name is taken.
func (s *DB) CreateCluster(ctx context.Context, c *Cluster) error {
	return s.AdmitCluster(ctx, c, time.Time{}, nil)
}

// AdmitFunc decides whether an owner may have one more cluster, given
// what the owner's live clusters hold and the owner's ledger totals since
// the month start. An error refuses, and is returned as it is.
type AdmitFunc func(live Usage, month Totals) error

// AdmitCluster inserts c when admit accepts it. Admissions of one owner
// are serialised (across processes sharing the database, too), so that
// concurrent requests cannot all see room for one more cluster.
func (s *DB) AdmitCluster(ctx context.Context, c *Cluster, monthStart time.Time, admit AdmitFunc) error {
	if admit != nil {
		unlock, err := s.owners.Lock(ctx, c.Owner)
		if err != nil {
			return fmt.Errorf("store: admit cluster: %w", err)
		}
		defer unlock()
	}
	now := s.now().Truncate(time.Millisecond) // what the store keeps
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.CreatedAt = c.CreatedAt.Truncate(time.Millisecond)
	c.UpdatedAt = now
	c.Version = 1
	if c.Options == "" {
		c.Options = "{}"
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if admit != nil {
		live, month, err := s.ownerState(ctx, tx, c.Owner, monthStart)
		if err != nil {
			return fmt.Errorf("store: admit cluster: %w", err)
		}
		if err := admit(live.usage(), month); err != nil {
			return err
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, s.rebind(`SELECT COUNT(*) FROM clusters WHERE name = ?`), c.Name).Scan(&n); err != nil {
		return fmt.Errorf("store: create cluster: %w", err)
	}
	if n > 0 {
		return fmt.Errorf("store: cluster %s: %w", c.Name, ErrExists)
	}
	if err := checkPEM(c); err != nil {
		return err
	}
	groups, err := json.Marshal(nonNil(c.OwnerGroups))
	if err != nil {
		return fmt.Errorf("store: create cluster: %w", err)
	}
	c.Phase, c.Reason = text(c.Phase), text(c.Reason)
	_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO clusters (`+clusterColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`),
		c.Name, c.Owner, string(c.Status), c.Phase, c.Reason, c.Provider, c.Options, c.DesiredWorkers, c.NextWorkerSeq,
		c.ReadyWorkers, string(c.TLSCert), string(c.TLSKey), c.SchedulerAddress, c.DashboardAddress, millis(c.CreatedAt),
		millis(c.StartedAt), millis(c.StoppedAt), millis(c.UpdatedAt), c.Version, boolInt(c.Adaptive), c.AdaptMin, c.AdaptMax,
		text(c.OwnerName), string(groups), c.Shape)
	if isUniqueViolation(err) {
		return fmt.Errorf("store: cluster %s: %w", c.Name, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: create cluster: %w", err)
	}
	if err := s.bumpUsage(ctx, tx, c.Owner, shareOf(c)); err != nil {
		return err
	}
	if err := s.addEvent(ctx, tx, c.Name, "created", fmt.Sprintf("by %s, %d workers requested", c.Owner, c.DesiredWorkers)); err != nil {
		return err
	}
	if err := s.commitChange(ctx, tx); err != nil {
		return fmt.Errorf("store: create cluster: %w", err)
	}
	return nil
}

// GetCluster returns one cluster, or ErrNotFound.
func (s *DB) GetCluster(ctx context.Context, name string) (*Cluster, error) {
	row := s.db.QueryRowContext(ctx, s.rebind(`SELECT `+clusterColumns+` FROM clusters WHERE name = ?`), name)
	c, err := scanCluster(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: cluster %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get cluster: %w", err)
	}
	return c, nil
}

// ListClusters returns the clusters matching f, newest first.
func (s *DB) ListClusters(ctx context.Context, f Filter) ([]*Cluster, error) {
	out, err := s.queryClusters(ctx, s.db, f)
	if err != nil {
		return nil, fmt.Errorf("store: list clusters: %w", err)
	}
	return out, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *DB) queryClusters(ctx context.Context, q querier, f Filter) ([]*Cluster, error) {
	query := `SELECT ` + clusterColumns + ` FROM clusters`
	var where []string
	var args []any
	if f.Owner != "" {
		where = append(where, "owner = ?")
		args = append(args, f.Owner)
	}
	if len(f.Statuses) > 0 {
		ph := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			ph[i] = "?"
			args = append(args, string(st))
		}
		where = append(where, "status IN ("+strings.Join(ph, ",")+")")
	}
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY created_at DESC, name"
	rows, err := q.QueryContext(ctx, s.rebind(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Cluster
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// LiveStatuses are the statuses whose clusters count against quotas: a
// stopping cluster is on its way out.
var LiveStatuses = []Status{Pending, Starting, Running}

// ownerState locks the owner's admissions (see AdmitCluster) and reads
// what the owner's live clusters hold (from the usage summary, not the
// clusters themselves), and the owner's ledger totals since monthStart.
// It runs inside tx.
func (s *DB) ownerState(ctx context.Context, tx *sql.Tx, owner string, monthStart time.Time) (usageDelta, Totals, error) {
	if s.dialect == postgres {
		// SQLite needs nothing: its write transactions begin IMMEDIATE,
		// one at a time, in this process and in others.
		if err := s.advisoryLock(ctx, tx, "owner:"+owner); err != nil {
			return usageDelta{}, Totals{}, err
		}
	}
	use, err := s.ownerUsage(ctx, tx, owner)
	if err != nil {
		return usageDelta{}, Totals{}, err
	}
	month, err := s.sumTotals(ctx, tx, owner, monthStart, s.now())
	return deltaOf(use), month, err
}

// advisoryLock takes a PostgreSQL lock on key until tx ends.
func (s *DB) advisoryLock(ctx context.Context, tx *sql.Tx, key string) error {
	h := fnv.New64a()
	h.Write([]byte("gateway-" + key))
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(h.Sum64()))
	return err
}

// UpdateFunc changes a cluster in place and returns the event to record
// ("" kind records none). Returning an error aborts the update.
type UpdateFunc func(c *Cluster) (Event, error)

// UpdateCluster reads a cluster, applies fn and writes it back in one
// transaction, so concurrent intents (an API scale and the reconcile loop)
// never overwrite each other. It returns the updated cluster.
func (s *DB) UpdateCluster(ctx context.Context, name string, fn UpdateFunc) (*Cluster, error) {
	return s.update(ctx, name, nil, func(c *Cluster, _ Usage, _ Totals) (Event, error) { return fn(c) })
}

// OwnedUpdateFunc is an UpdateFunc that also sees what the owner's other
// live clusters hold and the owner's ledger totals since the month start.
type OwnedUpdateFunc func(c *Cluster, others Usage, month Totals) (Event, error)

// UpdateOwned is UpdateCluster for changes that quotas bound (growth):
// serialised with the owner's admissions and other such changes.
func (s *DB) UpdateOwned(ctx context.Context, name string, monthStart time.Time, fn OwnedUpdateFunc) (*Cluster, error) {
	var owner string
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT owner FROM clusters WHERE name = ?`), name).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: cluster %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: update cluster: %w", err)
	}
	unlock, err := s.owners.Lock(ctx, owner)
	if err != nil {
		return nil, fmt.Errorf("store: update cluster: %w", err)
	}
	defer unlock()
	return s.update(ctx, name, func(ctx context.Context, tx *sql.Tx) (usageDelta, Totals, error) {
		return s.ownerState(ctx, tx, owner, monthStart)
	}, fn)
}

func (s *DB) update(ctx context.Context, name string, state func(context.Context, *sql.Tx) (usageDelta, Totals, error), fn OwnedUpdateFunc) (*Cluster, error) {
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var others usageDelta
	var month Totals
	if state != nil {
		// The owner lock comes before the row lock, always, so that two
		// owned updates never wait on each other in opposite orders.
		if others, month, err = state(ctx, tx); err != nil {
			return nil, fmt.Errorf("store: update cluster: %w", err)
		}
	}
	q := `SELECT ` + clusterColumns + ` FROM clusters WHERE name = ?`
	if s.dialect == postgres {
		q += " FOR UPDATE"
	}
	c, err := scanCluster(tx.QueryRowContext(ctx, s.rebind(q), name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: cluster %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: update cluster: %w", err)
	}
	before := *c
	if state != nil {
		others.add(shareOf(&before), -1) // the others: all but this one
	}
	ev, err := fn(c, others.usage(), month)
	if err != nil {
		return nil, err
	}
	legacy := before.Shape == "" || before.Shape == "{}" // made before shapes were recorded: may be given one
	if c.Name != before.Name || c.Owner != before.Owner || c.OwnerName != before.OwnerName || (c.Shape != before.Shape && !legacy) {
		return nil, errors.New("store: a cluster's name, owner and shape cannot change")
	}
	if ev.Kind == "" && len(ev.Ledger) == 0 && !ev.CloseLedger && ev.Audit == nil && sameCluster(c, &before) {
		return c, nil // nothing changed: spare the write
	}
	if err := checkPEM(c); err != nil {
		return nil, err
	}
	c.Phase, c.Reason = text(c.Phase), text(c.Reason)
	c.UpdatedAt = s.now().Truncate(time.Millisecond)
	c.Version = before.Version + 1
	res, err := tx.ExecContext(ctx, s.rebind(`UPDATE clusters SET status=?, phase=?, reason=?, provider=?, options=?,
desired_workers=?, next_worker_seq=?, ready_workers=?, tls_cert=?, tls_key=?, scheduler_address=?,
dashboard_address=?, started_at=?, stopped_at=?, updated_at=?, version=?, adaptive=?, adapt_min=?, adapt_max=?, shape=?
WHERE name=? AND version=?`),
		string(c.Status), c.Phase, c.Reason, c.Provider, c.Options, c.DesiredWorkers, c.NextWorkerSeq, c.ReadyWorkers,
		string(c.TLSCert), string(c.TLSKey), c.SchedulerAddress, c.DashboardAddress, millis(c.StartedAt),
		millis(c.StoppedAt), millis(c.UpdatedAt), c.Version, boolInt(c.Adaptive), c.AdaptMin, c.AdaptMax, c.Shape, c.Name, before.Version)
	if err != nil {
		return nil, fmt.Errorf("store: update cluster: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		// The row lock makes this impossible; if it ever happens, refuse
		// rather than report a write that did not take place.
		return nil, fmt.Errorf("store: update cluster %s: version %d changed underneath (%d rows, %v)", c.Name, before.Version, n, err)
	}
	share := shareOf(c)
	share.add(shareOf(&before), -1)
	if err := s.bumpUsage(ctx, tx, c.Owner, share); err != nil {
		return nil, err
	}
	if ev.Kind != "" {
		if err := s.addEvent(ctx, tx, c.Name, ev.Kind, ev.Message); err != nil {
			return nil, err
		}
	}
	if err := s.writeLedger(ctx, tx, c, ev); err != nil {
		return nil, err
	}
	if ev.Audit != nil {
		if err := s.audit(ctx, tx, *ev.Audit); err != nil {
			return nil, err
		}
	}
	if err := s.commitChange(ctx, tx); err != nil {
		return nil, fmt.Errorf("store: update cluster: %w", err)
	}
	return c, nil
}

// text makes a string storable in both databases: PostgreSQL's text holds
// neither NUL nor invalid UTF-8, and reasons and events quote process logs,
// which may contain anything.
func text(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkPEM refuses TLS material that is not text: it is PEM, and both
// databases keep it as text.
func checkPEM(c *Cluster) error {
	for _, b := range [][]byte{c.TLSCert, c.TLSKey} {
		if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
			return fmt.Errorf("store: cluster %s: TLS material must be PEM text", c.Name)
		}
	}
	return nil
}

// isUniqueViolation recognises a unique-constraint failure in either
// database: a concurrent insert that lost the race.
func isUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code == "23505"
	}
	return strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func sameCluster(a, b *Cluster) bool {
	x, y := *a, *b
	if !bytes.Equal(x.TLSCert, y.TLSCert) || !bytes.Equal(x.TLSKey, y.TLSKey) {
		return false
	}
	x.TLSCert, x.TLSKey, y.TLSCert, y.TLSKey = nil, nil, nil, nil
	return reflect.DeepEqual(x, y)
}

func (s *DB) addEvent(ctx context.Context, tx *sql.Tx, cluster, kind, msg string) error {
	_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO cluster_events (cluster, at, kind, message) VALUES (?, ?, ?, ?)`),
		cluster, s.now().UnixMilli(), text(kind), text(msg))
	if err != nil {
		return fmt.Errorf("store: add event: %w", err)
	}
	return nil
}

// Events returns a cluster's lifecycle events, oldest first.
func (s *DB) Events(ctx context.Context, cluster string) ([]Event, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT at, kind, message FROM cluster_events WHERE cluster = ? ORDER BY id`), cluster)
	if err != nil {
		return nil, fmt.Errorf("store: events: %w", err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at int64
		if err := rows.Scan(&at, &e.Kind, &e.Message); err != nil {
			return nil, fmt.Errorf("store: events: %w", err)
		}
		e.At = time.UnixMilli(at)
		out = append(out, e)
	}
	return out, rows.Err()
}
