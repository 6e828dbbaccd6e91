package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Bench run statuses.
const (
	BenchRunning   = "running"
	BenchOK        = "ok"
	BenchFailed    = "failed"
	BenchCancelled = "cancelled"
	BenchPartial   = "partial" // it went to its end, but some samples failed
)

// Bench sample statuses.
const (
	SampleOK      = "ok"
	SampleFailed  = "failed"
	SampleTimeout = "timeout"
)

// BenchEnv is one environment a run compared, by label: "A", "B", or
// "A2" (the second set of A in an A/A run).
type BenchEnv struct {
	Label string
	Name  string // as the user named it (environment name, file or image)
	Hash  string // the environment's hash
	Image string
	// Packages are the key package versions (python, dask, distributed,
	// numpy, pandas, ...) by name.
	Packages map[string]string
}

// BenchRun is one run of a suite.
type BenchRun struct {
	ID        string // "br-" and 16 hex digits; made by CreateBenchRun when empty
	Owner     string
	OwnerName string
	Suite     string
	Envs      []BenchEnv
	Tests     []string // test names, sorted (read back from bench_tests)
	// Shape is a JSON object of the clusters' shape (workers, worker
	// cpus and memory or VM type), identical for every environment.
	Shape          string
	Provider       string
	Region         string
	GatewayVersion string
	// Options is a JSON object of the run's options (repeat, null, -k
	// pattern, timeout, ...), as the runner chose to record them.
	Options    string
	ScheduleID string // the schedule that started it, if any
	Status     string // BenchRunning, BenchOK, BenchPartial, BenchFailed, BenchCancelled
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time // zero while running
}

// Env returns the run's environment of a label, or nil.
func (r *BenchRun) Env(label string) *BenchEnv {
	for i := range r.Envs {
		if r.Envs[i].Label == label {
			return &r.Envs[i]
		}
	}
	return nil
}

// BenchSample is one repeat of one test on one environment of a run.
type BenchSample struct {
	RunID         string
	Test          string
	Env           string // the environment's label: A, B or A2
	Repeat        int    // from 0
	WallSeconds   float64
	PeakManaged   int64 // bytes, cluster-wide
	PeakUnmanaged int64
	AvgManaged    int64
	AvgUnmanaged  int64
	Spilled       int64 // bytes spilled to disk
	Transferred   int64 // bytes sent between workers
	CPUSeconds    float64
	Status        string // SampleOK, SampleFailed, SampleTimeout
	Error         string
	At            time.Time // when it finished; now when zero
}

// BenchRunFilter selects runs. Zero fields select everything.
type BenchRunFilter struct {
	Owner string
	Suite string
	Limit int // newest first; 0 means 100
}

// BenchHistoryFilter selects samples across runs.
type BenchHistoryFilter struct {
	Owner string // "" for every owner (admins)
	Test  string // exact test name; "" for every test
	// Env matches the environment's name, or its hash or a prefix of it
	// (at least 8 hex digits); "" for every environment.
	Env   string
	Since time.Time // zero: from the start
	Until time.Time // zero: to now
	Limit int       // newest first; 0 means 10000
	// Baseline leaves out the samples of runs that are still running or
	// failed (a run whose client went away is marked failed): what a
	// regression check may compare with.
	Baseline bool
}

// BenchPoint is a sample with what history needs of its run.
type BenchPoint struct {
	BenchSample
	Owner     string
	Suite     string
	EnvName   string
	EnvHash   string
	StartedAt time.Time // the run's start
}

// BenchSchedule is a suite the gateway runs on a cron schedule under its
// owner's identity and quotas.
type BenchSchedule struct {
	ID          string // "bs-" and 16 hex digits; made when empty
	Owner       string
	OwnerName   string
	OwnerGroups []string
	Suite       string
	// SuiteArchive is the suite's files as the runner packed them, so
	// that the gateway can run it without the user's machine.
	SuiteArchive []byte
	Envs         []string
	Options      string // JSON object of the run options
	Cron         string
	NextRun      time.Time
	LastRun      time.Time
	LastRunID    string
	LastError    string
	LeaseHolder  string
	LeaseExpires time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

func newBenchID(prefix string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return prefix + hex.EncodeToString(b[:]), nil
}

func jsonObject(s string) string {
	if strings.TrimSpace(s) == "" {
		return "{}"
	}
	return s
}

func checkJSONObject(what, s string) error {
	var v map[string]any
	if err := json.Unmarshal([]byte(jsonObject(s)), &v); err != nil {
		return fmt.Errorf("%s must be a JSON object (%v): %w", what, err, ErrBenchInvalid)
	}
	return nil
}

// Bounds of what a run records: names are identifiers, errors are the
// end of a traceback.
const (
	maxBenchName  = 512
	maxBenchError = 16 << 10
)

func checkBenchName(what, v string) error {
	if len(v) > maxBenchName {
		return fmt.Errorf("store: %s is %d bytes long; at most %d: %w", what, len(v), maxBenchName, ErrBenchInvalid)
	}
	return nil
}

// tailText keeps the end of a long message, where a traceback says what
// went wrong.
func tailText(s string) string {
	if len(s) <= maxBenchError {
		return s
	}
	return "…" + strings.ToValidUTF8(s[len(s)-maxBenchError:], "")
}

// validBenchLabel reports whether an environment label is one a run uses.
func validBenchLabel(l string) bool { return l == "A" || l == "B" || l == "A2" }

// CreateBenchRun stores a new run with its environments and tests. It
// fills in ID (when empty), Status (BenchRunning when empty) and
// StartedAt (now when zero), and fails with ErrExists when the ID is
// taken.
func (s *DB) CreateBenchRun(ctx context.Context, r *BenchRun) error {
	if r.Owner == "" || r.Suite == "" {
		return fmt.Errorf("store: bench run needs an owner and a suite: %w", ErrBenchInvalid)
	}
	if len(r.Envs) == 0 {
		return fmt.Errorf("store: bench run needs at least one environment (label A): %w", ErrBenchInvalid)
	}
	for what, v := range map[string]string{"suite name": r.Suite, "provider": r.Provider, "region": r.Region, "gateway version": r.GatewayVersion} {
		if err := checkBenchName(what, v); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, e := range r.Envs {
		for what, v := range map[string]string{"environment name": e.Name, "environment hash": e.Hash, "environment image": e.Image} {
			if err := checkBenchName(what, v); err != nil {
				return err
			}
		}
		if len(e.Packages) > 200 {
			return fmt.Errorf("store: environment %s lists %d packages; record at most 200 key ones: %w", e.Label, len(e.Packages), ErrBenchInvalid)
		}
		if !validBenchLabel(e.Label) {
			return fmt.Errorf("store: bench run environment label %q: want A, B or A2: %w", e.Label, ErrBenchInvalid)
		}
		if seen[e.Label] {
			return fmt.Errorf("store: bench run environment label %s given twice: %w", e.Label, ErrBenchInvalid)
		}
		seen[e.Label] = true
	}
	if err := checkJSONObject("store: bench run shape", r.Shape); err != nil {
		return err
	}
	if err := checkJSONObject("store: bench run options", r.Options); err != nil {
		return err
	}
	if r.ID == "" {
		id, err := newBenchID("br-")
		if err != nil {
			return fmt.Errorf("store: bench run id: %w", err)
		}
		r.ID = id
	}
	if r.Status == "" {
		r.Status = BenchRunning
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = s.now()
	}
	r.StartedAt = fromMillis(millis(r.StartedAt))
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: create bench run: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO bench_runs (id, owner, owner_name, suite, shape, provider, region,
gateway_version, options, schedule_id, status, error, started_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`),
		r.ID, r.Owner, text(r.OwnerName), text(r.Suite), text(jsonObject(r.Shape)), text(r.Provider), text(r.Region),
		text(r.GatewayVersion), text(jsonObject(r.Options)), r.ScheduleID, r.Status, text(r.Error), millis(r.StartedAt), millis(r.FinishedAt))
	if isUniqueViolation(err) {
		return fmt.Errorf("store: bench run %s: %w", r.ID, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: create bench run: %w", err)
	}
	for _, e := range r.Envs {
		pkgs, err := json.Marshal(e.Packages)
		if err != nil || e.Packages == nil {
			pkgs = []byte("{}")
		}
		if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO bench_run_envs (run_id, label, name, hash, image, packages) VALUES (?,?,?,?,?,?)`),
			r.ID, e.Label, text(e.Name), text(e.Hash), text(e.Image), text(string(pkgs))); err != nil {
			return fmt.Errorf("store: create bench run: environment %s: %w", e.Label, err)
		}
	}
	for _, t := range uniqueStrings(r.Tests) {
		if err := s.addBenchTest(ctx, tx, r.ID, t); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create bench run: %w", err)
	}
	return nil
}

func uniqueStrings(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (s *DB) addBenchTest(ctx context.Context, tx *sql.Tx, run, name string) error {
	if name == "" {
		return fmt.Errorf("store: bench test has no name: %w", ErrBenchInvalid)
	}
	if err := checkBenchName("test name", name); err != nil {
		return err
	}
	q := `INSERT INTO bench_tests (run_id, name) VALUES (?, ?) ON CONFLICT (run_id, name) DO NOTHING`
	if _, err := tx.ExecContext(ctx, s.rebind(q), run, text(name)); err != nil {
		return fmt.Errorf("store: bench test %s: %w", name, err)
	}
	return nil
}

// Errors of bench runs callers match with errors.Is.
var (
	// ErrBenchInvalid wraps every refusal of a bad run, sample or
	// schedule; the message says what to fix.
	ErrBenchInvalid = errors.New("invalid")
	// ErrBenchFinished is a write to a run that has finished.
	ErrBenchFinished = errors.New("bench run finished")
)

// AddBenchSample records one sample of a running run (AddBenchSamples).
func (s *DB) AddBenchSample(ctx context.Context, smp *BenchSample) error {
	return s.AddBenchSamples(ctx, smp.RunID, []*BenchSample{smp})
}

func checkBenchSample(smp *BenchSample) error {
	if smp.Test == "" {
		return fmt.Errorf("store: bench sample has no test name: %w", ErrBenchInvalid)
	}
	if err := checkBenchName("test name", smp.Test); err != nil {
		return err
	}
	if !validBenchLabel(smp.Env) {
		return fmt.Errorf("store: bench sample environment %q: want A, B or A2: %w", smp.Env, ErrBenchInvalid)
	}
	switch smp.Status {
	case SampleOK, SampleFailed, SampleTimeout:
	default:
		return fmt.Errorf("store: bench sample status %q: want ok, failed or timeout: %w", smp.Status, ErrBenchInvalid)
	}
	if smp.Repeat < 0 {
		return fmt.Errorf("store: bench sample repeat %d is negative: %w", smp.Repeat, ErrBenchInvalid)
	}
	for _, v := range []float64{smp.WallSeconds, smp.CPUSeconds} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("store: bench sample of %s: times must be finite and not negative, got %v: %w", smp.Test, v, ErrBenchInvalid)
		}
	}
	for _, v := range []int64{smp.PeakManaged, smp.PeakUnmanaged, smp.AvgManaged, smp.AvgUnmanaged, smp.Spilled, smp.Transferred} {
		if v < 0 {
			return fmt.Errorf("store: bench sample of %s: byte counts must not be negative, got %d: %w", smp.Test, v, ErrBenchInvalid)
		}
	}
	return nil
}

// AddBenchSamples records samples of one running run, all or none,
// adding their tests to the run when new. A sample of the same run, test,
// environment and repeat replaces the one stored (a runner retrying a
// request). It fails with ErrNotFound when the run does not exist,
// ErrBenchFinished when it finished, and ErrBenchInvalid for a bad
// sample. Samples' RunID is set to runID.
func (s *DB) AddBenchSamples(ctx context.Context, runID string, samples []*BenchSample) error {
	for _, smp := range samples {
		smp.RunID = runID
		if err := checkBenchSample(smp); err != nil {
			return err
		}
		if smp.At.IsZero() {
			smp.At = s.now()
		}
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: add bench sample: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	lock := ""
	if s.dialect == postgres {
		lock = " FOR UPDATE" // a concurrent finish waits for the samples
	}
	var status string
	err = tx.QueryRowContext(ctx, s.rebind(`SELECT status FROM bench_runs WHERE id = ?`+lock), runID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: bench run %s: %w", runID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: add bench sample: %w", err)
	}
	if status != BenchRunning {
		return fmt.Errorf("store: bench run %s is %s: samples can only be added while it runs: %w", runID, status, ErrBenchFinished)
	}
	labels, err := s.strings(ctx, tx, `SELECT label FROM bench_run_envs WHERE run_id = ?`, runID)
	if err != nil {
		return fmt.Errorf("store: add bench sample: %w", err)
	}
	for _, smp := range samples {
		found := false
		for _, l := range labels {
			found = found || l == smp.Env
		}
		if !found {
			return fmt.Errorf("store: bench run %s has no environment %s: %w", runID, smp.Env, ErrBenchInvalid)
		}
		if err := s.addBenchTest(ctx, tx, runID, smp.Test); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.rebind(`DELETE FROM bench_samples WHERE run_id = ? AND test = ? AND env = ? AND rep = ?`),
			runID, text(smp.Test), smp.Env, smp.Repeat); err != nil {
			return fmt.Errorf("store: add bench sample: %w", err)
		}
		_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO bench_samples (run_id, test, env, rep, wall_seconds, peak_managed,
peak_unmanaged, avg_managed, avg_unmanaged, spilled, transferred, cpu_seconds, status, error, at)
VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`),
			runID, text(smp.Test), smp.Env, smp.Repeat, smp.WallSeconds, smp.PeakManaged, smp.PeakUnmanaged,
			smp.AvgManaged, smp.AvgUnmanaged, smp.Spilled, smp.Transferred, smp.CPUSeconds, smp.Status, text(tailText(smp.Error)), millis(smp.At))
		if err != nil {
			return fmt.Errorf("store: add bench sample: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: add bench sample: %w", err)
	}
	return nil
}

// FinishBenchRun ends a running run with a final status (BenchOK,
// BenchPartial, BenchFailed or BenchCancelled) and an error message (may be empty).
// It fails with ErrNotFound for an unknown run, and refuses a run that
// has already finished.
func (s *DB) FinishBenchRun(ctx context.Context, id, status, errMsg string) error {
	switch status {
	case BenchOK, BenchPartial, BenchFailed, BenchCancelled:
	default:
		return fmt.Errorf("store: finish bench run: status %q: want ok, partial, failed or cancelled: %w", status, ErrBenchInvalid)
	}
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE bench_runs SET status = ?, error = ?, finished_at = ? WHERE id = ? AND status = ?`),
		status, text(tailText(errMsg)), millis(s.now()), id, BenchRunning)
	if err != nil {
		return fmt.Errorf("store: finish bench run: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	r, err := s.GetBenchRun(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("store: bench run %s already finished (%s): %w", id, r.Status, ErrBenchFinished)
}

const benchRunColumns = `id, owner, owner_name, suite, shape, provider, region, gateway_version, options, schedule_id, status, error, started_at, finished_at`

func scanBenchRun(r scanner) (*BenchRun, error) {
	var b BenchRun
	var started, finished int64
	if err := r.Scan(&b.ID, &b.Owner, &b.OwnerName, &b.Suite, &b.Shape, &b.Provider, &b.Region, &b.GatewayVersion,
		&b.Options, &b.ScheduleID, &b.Status, &b.Error, &started, &finished); err != nil {
		return nil, err
	}
	b.StartedAt, b.FinishedAt = fromMillis(started), fromMillis(finished)
	return &b, nil
}

// GetBenchRun returns a run with its environments and tests (not its
// samples: BenchSamples).
func (s *DB) GetBenchRun(ctx context.Context, id string) (*BenchRun, error) {
	r, err := scanBenchRun(s.db.QueryRowContext(ctx, s.rebind(`SELECT `+benchRunColumns+` FROM bench_runs WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: bench run %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: bench run %s: %w", id, err)
	}
	if err := s.fillBenchRuns(ctx, []*BenchRun{r}); err != nil {
		return nil, err
	}
	return r, nil
}

// ListBenchRuns returns runs, newest first, with environments and tests.
func (s *DB) ListBenchRuns(ctx context.Context, f BenchRunFilter) ([]*BenchRun, error) {
	q := `SELECT ` + benchRunColumns + ` FROM bench_runs WHERE 1=1`
	var args []any
	if f.Owner != "" {
		q += ` AND owner = ?`
		args = append(args, f.Owner)
	}
	if f.Suite != "" {
		q += ` AND suite = ?`
		args = append(args, f.Suite)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += ` ORDER BY started_at DESC, id LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: bench runs: %w", err)
	}
	var out []*BenchRun
	for rows.Next() {
		r, err := scanBenchRun(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: bench runs: %w", err)
		}
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: bench runs: %w", err)
	}
	if err := s.fillBenchRuns(ctx, out); err != nil {
		return nil, err
	}
	return out, nil
}

// fillBenchRuns reads the environments and tests of runs.
func (s *DB) fillBenchRuns(ctx context.Context, runs []*BenchRun) error {
	for _, r := range runs {
		rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT label, name, hash, image, packages FROM bench_run_envs WHERE run_id = ? ORDER BY label`), r.ID)
		if err != nil {
			return fmt.Errorf("store: bench run %s: %w", r.ID, err)
		}
		for rows.Next() {
			var e BenchEnv
			var pkgs string
			if err := rows.Scan(&e.Label, &e.Name, &e.Hash, &e.Image, &pkgs); err != nil {
				rows.Close()
				return fmt.Errorf("store: bench run %s: %w", r.ID, err)
			}
			if err := json.Unmarshal([]byte(pkgs), &e.Packages); err != nil {
				rows.Close()
				return fmt.Errorf("store: bench run %s: packages: %w", r.ID, err)
			}
			r.Envs = append(r.Envs, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("store: bench run %s: %w", r.ID, err)
		}
		tests, err := s.strings(ctx, s.db, `SELECT name FROM bench_tests WHERE run_id = ? ORDER BY name`, r.ID)
		if err != nil {
			return fmt.Errorf("store: bench run %s: tests: %w", r.ID, err)
		}
		r.Tests = tests
	}
	return nil
}

// strings reads one text column, in a transaction or not (q).
func (s *DB) strings(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, s.rebind(query), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const benchSampleColumns = `s.run_id, s.test, s.env, s.rep, s.wall_seconds, s.peak_managed, s.peak_unmanaged, s.avg_managed,
s.avg_unmanaged, s.spilled, s.transferred, s.cpu_seconds, s.status, s.error, s.at`

func scanBenchSample(r scanner, extra ...any) (BenchSample, error) {
	var m BenchSample
	var at int64
	dest := append([]any{&m.RunID, &m.Test, &m.Env, &m.Repeat, &m.WallSeconds, &m.PeakManaged, &m.PeakUnmanaged,
		&m.AvgManaged, &m.AvgUnmanaged, &m.Spilled, &m.Transferred, &m.CPUSeconds, &m.Status, &m.Error, &at}, extra...)
	if err := r.Scan(dest...); err != nil {
		return m, err
	}
	m.At = fromMillis(at)
	return m, nil
}

// BenchSamples returns a run's samples ordered by test, environment and
// repeat.
func (s *DB) BenchSamples(ctx context.Context, runID string) ([]BenchSample, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT `+benchSampleColumns+` FROM bench_samples s WHERE s.run_id = ? ORDER BY s.test, s.env, s.rep`), runID)
	if err != nil {
		return nil, fmt.Errorf("store: bench samples: %w", err)
	}
	defer rows.Close()
	var out []BenchSample
	for rows.Next() {
		m, err := scanBenchSample(rows)
		if err != nil {
			return nil, fmt.Errorf("store: bench samples: %w", err)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// BenchHistory returns the samples that match f across runs, oldest first
// (the newest f.Limit of them).
func (s *DB) BenchHistory(ctx context.Context, f BenchHistoryFilter) ([]BenchPoint, error) {
	q := `SELECT ` + benchSampleColumns + `, r.owner, r.suite, e.name, e.hash, r.started_at
FROM bench_samples s
JOIN bench_runs r ON r.id = s.run_id
JOIN bench_run_envs e ON e.run_id = s.run_id AND e.label = s.env
WHERE 1=1`
	var args []any
	if f.Owner != "" {
		q += ` AND r.owner = ?`
		args = append(args, f.Owner)
	}
	if f.Test != "" {
		q += ` AND s.test = ?`
		args = append(args, f.Test)
	}
	if f.Env != "" {
		q += ` AND (e.name = ? OR e.hash = ?`
		args = append(args, f.Env, f.Env)
		if len(f.Env) >= 8 && isHex(f.Env) {
			q += ` OR substr(e.hash, 1, ?) = ?`
			args = append(args, len(f.Env), strings.ToLower(f.Env))
		}
		q += `)`
	}
	if f.Baseline {
		q += ` AND r.status NOT IN (?, ?)`
		args = append(args, BenchRunning, BenchFailed)
	}
	if !f.Since.IsZero() {
		q += ` AND s.at >= ?`
		args = append(args, millis(f.Since))
	}
	if !f.Until.IsZero() {
		q += ` AND s.at <= ?`
		args = append(args, millis(f.Until))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 10000
	}
	q += ` ORDER BY s.at DESC, s.run_id, s.test, s.env, s.rep LIMIT ?`
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: bench history: %w", err)
	}
	defer rows.Close()
	var out []BenchPoint
	for rows.Next() {
		var p BenchPoint
		var started int64
		m, err := scanBenchSample(rows, &p.Owner, &p.Suite, &p.EnvName, &p.EnvHash, &started)
		if err != nil {
			return nil, fmt.Errorf("store: bench history: %w", err)
		}
		p.BenchSample, p.StartedAt = m, fromMillis(started)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: bench history: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// Schedules.

const benchScheduleColumns = `id, owner, owner_name, owner_groups, suite, suite_archive, envs, options, cron, next_run, last_run,
last_run_id, last_error, lease_holder, lease_expires, created_at, updated_at`

func scanBenchSchedule(r scanner) (*BenchSchedule, error) {
	var b BenchSchedule
	var groups, archive, envs string
	var next, last, expires, created, updated int64
	if err := r.Scan(&b.ID, &b.Owner, &b.OwnerName, &groups, &b.Suite, &archive, &envs, &b.Options, &b.Cron, &next, &last,
		&b.LastRunID, &b.LastError, &b.LeaseHolder, &expires, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(groups), &b.OwnerGroups); err != nil {
		return nil, fmt.Errorf("bench schedule %s: owner groups: %w", b.ID, err)
	}
	if len(b.OwnerGroups) == 0 {
		b.OwnerGroups = nil
	}
	if err := json.Unmarshal([]byte(envs), &b.Envs); err != nil {
		return nil, fmt.Errorf("bench schedule %s: envs: %w", b.ID, err)
	}
	a, err := base64.StdEncoding.DecodeString(archive)
	if err != nil {
		return nil, fmt.Errorf("bench schedule %s: suite archive: %w", b.ID, err)
	}
	if len(a) > 0 {
		b.SuiteArchive = a
	}
	b.NextRun, b.LastRun, b.LeaseExpires = fromMillis(next), fromMillis(last), fromMillis(expires)
	b.CreatedAt, b.UpdatedAt = fromMillis(created), fromMillis(updated)
	return &b, nil
}

// CreateBenchSchedule stores a new schedule. It fills in ID (when empty)
// and the creation times; NextRun must be set (the caller parses Cron).
func (s *DB) CreateBenchSchedule(ctx context.Context, b *BenchSchedule) error {
	if b.Owner == "" || b.Suite == "" || b.Cron == "" {
		return fmt.Errorf("store: bench schedule needs an owner, a suite and a cron expression: %w", ErrBenchInvalid)
	}
	if len(b.Envs) == 0 {
		return fmt.Errorf("store: bench schedule needs at least one environment: %w", ErrBenchInvalid)
	}
	if b.NextRun.IsZero() {
		return fmt.Errorf("store: bench schedule needs its next run time: %w", ErrBenchInvalid)
	}
	if err := checkJSONObject("store: bench schedule options", b.Options); err != nil {
		return err
	}
	if b.ID == "" {
		id, err := newBenchID("bs-")
		if err != nil {
			return fmt.Errorf("store: bench schedule id: %w", err)
		}
		b.ID = id
	}
	now := fromMillis(millis(s.now()))
	b.CreatedAt, b.UpdatedAt = now, now
	b.NextRun = fromMillis(millis(b.NextRun))
	groups, _ := json.Marshal(nonNil(b.OwnerGroups))
	envs, _ := json.Marshal(nonNil(b.Envs))
	_, err := s.db.ExecContext(ctx, s.rebind(`INSERT INTO bench_schedules (`+benchScheduleColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`),
		b.ID, b.Owner, text(b.OwnerName), text(string(groups)), text(b.Suite), base64.StdEncoding.EncodeToString(b.SuiteArchive),
		text(string(envs)), text(jsonObject(b.Options)), text(b.Cron), millis(b.NextRun), millis(b.LastRun), b.LastRunID,
		text(b.LastError), "", 0, millis(now), millis(now))
	if isUniqueViolation(err) {
		return fmt.Errorf("store: bench schedule %s: %w", b.ID, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("store: create bench schedule: %w", err)
	}
	return nil
}

// GetBenchSchedule returns one schedule.
func (s *DB) GetBenchSchedule(ctx context.Context, id string) (*BenchSchedule, error) {
	b, err := scanBenchSchedule(s.db.QueryRowContext(ctx, s.rebind(`SELECT `+benchScheduleColumns+` FROM bench_schedules WHERE id = ?`), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: bench schedule %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: bench schedule %s: %w", id, err)
	}
	return b, nil
}

// ListBenchSchedules returns an owner's schedules ("" for everyone's),
// ordered by next run.
func (s *DB) ListBenchSchedules(ctx context.Context, owner string) ([]*BenchSchedule, error) {
	q := `SELECT ` + benchScheduleColumns + ` FROM bench_schedules`
	var args []any
	if owner != "" {
		q += ` WHERE owner = ?`
		args = append(args, owner)
	}
	return s.querySchedules(ctx, q+` ORDER BY next_run, id`, args...)
}

func (s *DB) querySchedules(ctx context.Context, q string, args ...any) ([]*BenchSchedule, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("store: bench schedules: %w", err)
	}
	defer rows.Close()
	var out []*BenchSchedule
	for rows.Next() {
		b, err := scanBenchSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("store: bench schedules: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// DeleteBenchSchedule removes a schedule of owner ("" for any owner: an
// admin). It fails with ErrNotFound when there is no such schedule of
// that owner.
func (s *DB) DeleteBenchSchedule(ctx context.Context, id, owner string) error {
	q := `DELETE FROM bench_schedules WHERE id = ?`
	args := []any{id}
	if owner != "" {
		q += ` AND owner = ?`
		args = append(args, owner)
	}
	res, err := s.db.ExecContext(ctx, s.rebind(q), args...)
	if err != nil {
		return fmt.Errorf("store: delete bench schedule: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: bench schedule %s: %w", id, ErrNotFound)
	}
	return nil
}

// ClaimDueSchedules takes, for holder, every schedule whose NextRun is at
// or before now and whose lease is free or expired, leasing each until
// now+lease. Each schedule is taken by one conditional update, so of
// replicas claiming at once exactly one gets it. The caller runs them and
// then calls CompleteBenchSchedule (or RenewBenchScheduleLease while a
// run is long).
func (s *DB) ClaimDueSchedules(ctx context.Context, now time.Time, holder string, lease time.Duration) ([]*BenchSchedule, error) {
	if holder == "" {
		return nil, errors.New("store: claim bench schedules: no holder")
	}
	if lease <= 0 {
		return nil, errors.New("store: claim bench schedules: lease must be positive")
	}
	due, err := s.querySchedules(ctx, `SELECT `+benchScheduleColumns+` FROM bench_schedules
WHERE next_run <= ? AND (lease_holder = '' OR lease_expires < ?) ORDER BY next_run, id`, millis(now), millis(now))
	if err != nil {
		return nil, err
	}
	var out []*BenchSchedule
	for _, b := range due {
		res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE bench_schedules SET lease_holder = ?, lease_expires = ?
WHERE id = ? AND next_run = ? AND (lease_holder = '' OR lease_expires < ?)`),
			holder, millis(now.Add(lease)), b.ID, millis(b.NextRun), millis(now))
		if err != nil {
			return out, fmt.Errorf("store: claim bench schedule %s: %w", b.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			b.LeaseHolder, b.LeaseExpires = holder, fromMillis(millis(now.Add(lease)))
			out = append(out, b)
		}
	}
	return out, nil
}

// RenewBenchScheduleLease extends holder's lease on a schedule to
// now+lease; false means holder no longer holds it.
func (s *DB) RenewBenchScheduleLease(ctx context.Context, id, holder string, now time.Time, lease time.Duration) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE bench_schedules SET lease_expires = ? WHERE id = ? AND lease_holder = ?`),
		millis(now.Add(lease)), id, holder)
	if err != nil {
		return false, fmt.Errorf("store: renew bench schedule lease: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// CompleteBenchSchedule records a firing held by holder: when it ran
// (lastRun), the run it started (runID, may be empty), its error (may be
// empty), and when it runs next; the lease is released. false means
// holder no longer held the schedule (it expired and another replica
// took it, or the schedule was deleted), and nothing was changed.
func (s *DB) CompleteBenchSchedule(ctx context.Context, id, holder string, lastRun time.Time, runID, errMsg string, nextRun time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.rebind(`UPDATE bench_schedules SET last_run = ?, last_run_id = ?, last_error = ?, next_run = ?,
lease_holder = '', lease_expires = 0, updated_at = ? WHERE id = ? AND lease_holder = ?`),
		millis(lastRun), runID, text(errMsg), millis(nextRun), millis(s.now()), id, holder)
	if err != nil {
		return false, fmt.Errorf("store: complete bench schedule: %w", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}
