package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"
)

// usageMigration is the migration that makes the usage summary; the store
// fills it from the clusters table when it runs.
const usageMigration = "0012_owner_usage"

// Usage is what one owner's live clusters (PENDING, STARTING, RUNNING)
// hold: each counts its scheduler once and its worker size times the
// workers it wants, as its shape says. vCPUs are counted in thousandths
// and memory in MiB, so the sums are exact.
type Usage struct {
	Clusters   int
	VCPUs      float64
	MemoryGiB  float64
	GPUs       int
	GPUsByType map[string]int
}

// usageDelta is a cluster's share of its owner's Usage, in the units the
// summary keeps.
type usageDelta struct {
	clusters, vcpuMilli, memoryMiB, gpus int64
	gpusByType                           map[string]int64
}

// shapeSizes is the part of a cluster's shape (quota.Shape, which this
// package cannot import) that usage counts; quota's tests check that both
// count alike.
type shapeSizes struct {
	Worker    sizeJSON `json:"worker"`
	Scheduler sizeJSON `json:"scheduler"`
}

type sizeJSON struct {
	VCPUs     float64 `json:"vcpus"`
	MemoryGiB float64 `json:"memory_gib"`
	GPUs      int     `json:"gpus"`
	GPUType   string  `json:"gpu_type"`
}

// shareOf is c's share of its owner's usage: nothing unless it is live.
func shareOf(c *Cluster) usageDelta {
	var d usageDelta
	if !c.Status.Live() {
		return d
	}
	var sh shapeSizes
	_ = json.Unmarshal([]byte(c.Shape), &sh) // written by the core; a row without a shape holds nothing but itself
	d.clusters = 1
	for _, m := range []struct {
		size  sizeJSON
		count int
	}{{sh.Scheduler, 1}, {sh.Worker, c.DesiredWorkers}} {
		n := int64(m.count)
		d.vcpuMilli += int64(math.Round(m.size.VCPUs*1000)) * n
		d.memoryMiB += int64(math.Round(m.size.MemoryGiB*1024)) * n
		if g := int64(m.size.GPUs) * n; g > 0 {
			d.gpus += g
			if d.gpusByType == nil {
				d.gpusByType = map[string]int64{}
			}
			d.gpusByType[m.size.GPUType] += g
		}
	}
	return d
}

func (d *usageDelta) add(o usageDelta, sign int64) {
	d.clusters += sign * o.clusters
	d.vcpuMilli += sign * o.vcpuMilli
	d.memoryMiB += sign * o.memoryMiB
	d.gpus += sign * o.gpus
	for t, g := range o.gpusByType {
		if d.gpusByType == nil {
			d.gpusByType = map[string]int64{}
		}
		d.gpusByType[t] += sign * g
	}
}

func deltaOf(u Usage) usageDelta {
	d := usageDelta{clusters: int64(u.Clusters), vcpuMilli: int64(math.Round(u.VCPUs * 1000)),
		memoryMiB: int64(math.Round(u.MemoryGiB * 1024)), gpus: int64(u.GPUs)}
	for t, g := range u.GPUsByType {
		if d.gpusByType == nil {
			d.gpusByType = map[string]int64{}
		}
		d.gpusByType[t] = int64(g)
	}
	return d
}

func (d usageDelta) usage() Usage {
	u := Usage{Clusters: int(d.clusters), VCPUs: float64(d.vcpuMilli) / 1000, MemoryGiB: float64(d.memoryMiB) / 1024, GPUs: int(d.gpus)}
	for t, g := range d.gpusByType {
		if g == 0 {
			continue
		}
		if u.GPUsByType == nil {
			u.GPUsByType = map[string]int{}
		}
		u.GPUsByType[t] = int(g)
	}
	return u
}

// bumpUsage adds d to owner's summary and moves its generation, inside
// the transaction of the write that changed the owner's clusters.
func (s *DB) bumpUsage(ctx context.Context, tx *sql.Tx, owner string, d usageDelta) error {
	_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO owner_usage (owner, gen, clusters, vcpu_milli, memory_mib, gpus) VALUES (?, 1, ?, ?, ?, ?)
ON CONFLICT (owner) DO UPDATE SET gen = owner_usage.gen + 1, clusters = owner_usage.clusters + excluded.clusters,
vcpu_milli = owner_usage.vcpu_milli + excluded.vcpu_milli, memory_mib = owner_usage.memory_mib + excluded.memory_mib,
gpus = owner_usage.gpus + excluded.gpus`), owner, d.clusters, d.vcpuMilli, d.memoryMiB, d.gpus)
	if err != nil {
		return fmt.Errorf("store: usage summary: %w", err)
	}
	types := make([]string, 0, len(d.gpusByType))
	for t, g := range d.gpusByType {
		if g != 0 {
			types = append(types, t)
		}
	}
	sort.Strings(types) // one order of row locks for every writer (PostgreSQL)
	for _, t := range types {
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO owner_gpu_usage (owner, gpu_type, gpus) VALUES (?, ?, ?)
ON CONFLICT (owner, gpu_type) DO UPDATE SET gpus = owner_gpu_usage.gpus + excluded.gpus`), owner, text(t), d.gpusByType[t])
		if err != nil {
			return fmt.Errorf("store: usage summary: %w", err)
		}
	}
	return nil
}

// ownerUsage reads owner's summary through q.
func (s *DB) ownerUsage(ctx context.Context, q querier, owner string) (Usage, error) {
	var d usageDelta
	rows, err := q.QueryContext(ctx, s.rebind(`SELECT clusters, vcpu_milli, memory_mib, gpus FROM owner_usage WHERE owner = ?`), owner)
	if err != nil {
		return Usage{}, err
	}
	for rows.Next() {
		if err := rows.Scan(&d.clusters, &d.vcpuMilli, &d.memoryMiB, &d.gpus); err != nil {
			rows.Close()
			return Usage{}, err
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Usage{}, err
	}
	if d.gpus != 0 {
		rows, err := q.QueryContext(ctx, s.rebind(`SELECT gpu_type, gpus FROM owner_gpu_usage WHERE owner = ? AND gpus <> 0`), owner)
		if err != nil {
			return Usage{}, err
		}
		defer rows.Close()
		d.gpusByType = map[string]int64{}
		for rows.Next() {
			var t string
			var g int64
			if err := rows.Scan(&t, &g); err != nil {
				return Usage{}, err
			}
			d.gpusByType[t] = g
		}
		if err := rows.Err(); err != nil {
			return Usage{}, err
		}
	}
	return d.usage(), nil
}

// OwnerUsage returns what the owner's live clusters hold, from the
// summary kept with every cluster write.
func (s *DB) OwnerUsage(ctx context.Context, owner string) (Usage, error) {
	u, err := s.ownerUsage(ctx, s.db, owner)
	if err != nil {
		return Usage{}, fmt.Errorf("store: usage of %s: %w", owner, err)
	}
	return u, nil
}

// OwnerState is what the owner's live clusters hold and the owner's
// ledger totals since monthStart: what an admission checks (AdmitCluster),
// read without taking the owner's lock, for a check that admits nothing.
func (s *DB) OwnerState(ctx context.Context, owner string, monthStart time.Time) (Usage, Totals, error) {
	u, err := s.ownerUsage(ctx, s.db, owner)
	if err != nil {
		return Usage{}, Totals{}, fmt.Errorf("store: usage of %s: %w", owner, err)
	}
	month, err := s.sumTotals(ctx, s.db, owner, monthStart, s.now())
	if err != nil {
		return Usage{}, Totals{}, fmt.Errorf("store: usage of %s: %w", owner, err)
	}
	return u, month, nil
}

// CountUsage counts what the owner's live clusters hold from the clusters
// themselves, as the summary should say (checks and tests).
func (s *DB) CountUsage(ctx context.Context, owner string) (Usage, error) {
	live, err := s.queryClusters(ctx, s.db, Filter{Owner: owner, Statuses: LiveStatuses})
	if err != nil {
		return Usage{}, fmt.Errorf("store: count usage of %s: %w", owner, err)
	}
	var d usageDelta
	for _, c := range live {
		d.add(shareOf(c), 1)
	}
	return d.usage(), nil
}

// ClustersGeneration is a number that changes whenever any of the owner's
// clusters is created or changed (in any process on the database): an
// answer made from the owner's clusters stays right while it has not
// moved. An owner with no cluster ever is 0.
func (s *DB) ClustersGeneration(ctx context.Context, owner string) (int64, error) {
	var gen int64
	err := s.queryRow(ctx, `SELECT gen FROM owner_usage WHERE owner = ?`, owner).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: clusters generation: %w", err)
	}
	return gen, nil
}

// RecountUsage rebuilds every owner's summary from the clusters table,
// keeping the generations moving forward.
func (s *DB) RecountUsage(ctx context.Context) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: recount usage: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	if err := s.recountUsage(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: recount usage: %w", err)
	}
	return nil
}

func (s *DB) recountUsage(ctx context.Context, tx *sql.Tx) error {
	if s.dialect == postgres {
		// Against concurrent cluster writes of other replicas: they add to
		// rows this replaces.
		if _, err := tx.ExecContext(ctx, `LOCK TABLE owner_usage, owner_gpu_usage IN EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("store: recount usage: %w", err)
		}
	}
	// Only what counting needs: every live row's shape and workers.
	rows, err := tx.QueryContext(ctx, s.rebind(`SELECT owner, status, desired_workers, shape FROM clusters WHERE status IN (?, ?, ?)`),
		string(Pending), string(Starting), string(Running))
	if err != nil {
		return fmt.Errorf("store: recount usage: %w", err)
	}
	sums := map[string]*usageDelta{}
	for rows.Next() {
		var c Cluster
		var status string
		if err := rows.Scan(&c.Owner, &status, &c.DesiredWorkers, &c.Shape); err != nil {
			rows.Close()
			return fmt.Errorf("store: recount usage: %w", err)
		}
		c.Status = Status(status)
		d := sums[c.Owner]
		if d == nil {
			d = &usageDelta{}
			sums[c.Owner] = d
		}
		d.add(shareOf(&c), 1)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: recount usage: %w", err)
	}
	// Owners who have clusters but none live keep a row (and a moving
	// generation), at zero.
	for _, q := range []string{
		`UPDATE owner_usage SET gen = gen + 1, clusters = 0, vcpu_milli = 0, memory_mib = 0, gpus = 0`,
		`DELETE FROM owner_gpu_usage`,
		`INSERT INTO owner_usage (owner, gen) SELECT DISTINCT owner, 1 FROM clusters WHERE owner NOT IN (SELECT owner FROM owner_usage)`,
	} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("store: recount usage: %w", err)
		}
	}
	owners := make([]string, 0, len(sums))
	for o := range sums {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		d := *sums[o]
		// bumpUsage adds to the zeroed row, and moves gen once more.
		if err := s.bumpUsage(ctx, tx, o, d); err != nil {
			return err
		}
	}
	return nil
}

// sumTotals is totals for one owner summed by the database rather than
// read interval by interval: an admission of an owner with 1,000 running
// clusters read their 1,000 open ledger intervals (2.6 ms of its 2.9 ms in
// the store). Same clipping as intervals: each start row counts from the
// later of its start and since to the earlier of its stop and until.
func (s *DB) sumTotals(ctx context.Context, q querier, owner string, since, until time.Time) (Totals, error) {
	var t Totals
	if owner == "" {
		return t, nil
	}
	lo, hi := since.UnixMilli(), until.UnixMilli()
	rows, err := q.QueryContext(ctx, s.rebind(`SELECT gpu_type, SUM(vcpus * d), SUM(memory_gib * d), SUM(CAST(gpus AS DOUBLE PRECISION) * d), SUM(price_hour * d)
FROM (SELECT vcpus, memory_gib, gpus, gpu_type, price_hour,
  (CASE WHEN stop_at < ? THEN stop_at ELSE ? END) - (CASE WHEN at > ? THEN at ELSE ? END) AS d
  FROM usage_events WHERE kind = 'start' AND stop_at > ? AND at < ? AND owner = ?) x
WHERE d > 0 GROUP BY gpu_type`), hi, hi, lo, lo, lo, hi, owner)
	if err != nil {
		return t, err
	}
	defer rows.Close()
	for rows.Next() {
		var typ string
		var vcpu, mem, gpu, price float64
		if err := rows.Scan(&typ, &vcpu, &mem, &gpu, &price); err != nil {
			return t, err
		}
		t.VCPUSeconds += vcpu / 1000
		t.MemoryGiBSeconds += mem / 1000
		t.Cost += price / 1000 / 3600
		if gpu > 0 {
			t.GPUSeconds += gpu / 1000
			if t.GPUSecondsByType == nil {
				t.GPUSecondsByType = map[string]float64{}
			}
			t.GPUSecondsByType[typ] += gpu / 1000
		}
	}
	return t, rows.Err()
}
