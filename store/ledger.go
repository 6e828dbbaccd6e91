package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Ledger entry kinds.
const (
	LedgerStart = "start"
	LedgerStop  = "stop"
)

// LedgerEntry is one event of the usage ledger: a member of a cluster
// started (with its size and price) or stopped. A stop copies the size
// of its start.
type LedgerEntry struct {
	Member       string
	Kind         string    // LedgerStart or LedgerStop
	At           time.Time // zero: now; a stop is never dated before its start
	VCPUs        float64
	MemoryGiB    float64
	GPUs         int
	GPUType      string
	InstanceType string
	PriceHour    float64
}

// Interval is one member's time in the ledger, clipped to a filter's
// window; Open means no stop is recorded yet (it ran until the window's
// end as far as the ledger knows).
type Interval struct {
	Cluster      string
	Member       string
	Owner        string
	OwnerName    string
	Start, Stop  time.Time
	Open         bool
	VCPUs        float64
	MemoryGiB    float64
	GPUs         int
	GPUType      string
	InstanceType string
	PriceHour    float64
}

// Seconds is the interval's length.
func (i Interval) Seconds() float64 { return i.Stop.Sub(i.Start).Seconds() }

// LedgerFilter selects intervals overlapping [Since, Until). Zero Since
// means from the beginning; zero Until means now.
type LedgerFilter struct {
	Owner     string // owner id
	OwnerName string // or the owner's user name
	Cluster   string
	// Clusters, when not empty, keeps only these clusters' intervals (a
	// page of a user's clusters); at most MaxLedgerClusters names.
	Clusters []string
	Since    time.Time
	Until    time.Time
}

// Totals sums intervals.
type Totals struct {
	VCPUSeconds      float64
	MemoryGiBSeconds float64
	GPUSeconds       float64
	GPUSecondsByType map[string]float64
	Cost             float64 // estimated, from the recorded prices
}

// Add counts one interval.
func (t *Totals) Add(i Interval) {
	sec := i.Seconds()
	t.VCPUSeconds += i.VCPUs * sec
	t.MemoryGiBSeconds += i.MemoryGiB * sec
	if i.GPUs > 0 {
		g := float64(i.GPUs) * sec
		t.GPUSeconds += g
		if t.GPUSecondsByType == nil {
			t.GPUSecondsByType = map[string]float64{}
		}
		t.GPUSecondsByType[i.GPUType] += g
	}
	t.Cost += i.PriceHour * sec / 3600
}

const ledgerColumns = `cluster, member, kind, at, owner, owner_name, vcpus, memory_gib, gpus, gpu_type, instance_type, price_hour`

// writeLedger records ev's ledger entries for cluster c inside tx. Entries
// already recorded are left as they are: a start or stop is written once.
func (s *DB) writeLedger(ctx context.Context, tx *sql.Tx, c *Cluster, ev Event) error {
	now := s.now().UnixMilli()
	for _, e := range ev.Ledger {
		at := now
		if !e.At.IsZero() {
			at = e.At.UnixMilli()
		}
		var err error
		switch e.Kind {
		case LedgerStart:
			_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO usage_events (`+ledgerColumns+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)
ON CONFLICT (cluster, member, kind) DO NOTHING`),
				c.Name, text(e.Member), LedgerStart, at, c.Owner, c.OwnerName, e.VCPUs, e.MemoryGiB, e.GPUs, text(e.GPUType), text(e.InstanceType), e.PriceHour)
		case LedgerStop:
			_, err = tx.ExecContext(ctx, s.rebind(`INSERT INTO usage_events (`+ledgerColumns+`)
SELECT cluster, member, 'stop', CASE WHEN at > ? THEN at ELSE ? END, owner, owner_name, vcpus, memory_gib, gpus, gpu_type, instance_type, price_hour
FROM usage_events WHERE cluster = ? AND member = ? AND kind = 'start'
ON CONFLICT (cluster, member, kind) DO NOTHING`), at, at, c.Name, e.Member)
		default:
			err = fmt.Errorf("unknown ledger entry kind %q", e.Kind)
		}
		if err != nil {
			return fmt.Errorf("store: ledger: %w", err)
		}
	}
	closing := ev.CloseLedger
	for _, e := range ev.Ledger {
		closing = closing || e.Kind == LedgerStop
	}
	if ev.CloseLedger {
		_, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO usage_events (`+ledgerColumns+`)
SELECT cluster, member, 'stop', ?, owner, owner_name, vcpus, memory_gib, gpus, gpu_type, instance_type, price_hour
FROM usage_events s WHERE s.cluster = ? AND s.kind = 'start'
AND NOT EXISTS (SELECT 1 FROM usage_events e WHERE e.cluster = s.cluster AND e.member = s.member AND e.kind = 'stop')
ON CONFLICT (cluster, member, kind) DO NOTHING`), now, c.Name)
		if err != nil {
			return fmt.Errorf("store: ledger: close: %w", err)
		}
	}
	if closing {
		// Each start row learns its stop's time, once.
		_, err := tx.ExecContext(ctx, s.rebind(`UPDATE usage_events SET stop_at = (SELECT e.at FROM usage_events e
WHERE e.cluster = usage_events.cluster AND e.member = usage_events.member AND e.kind = 'stop')
WHERE cluster = ? AND kind = 'start' AND stop_at = `+openStop+` AND EXISTS (SELECT 1 FROM usage_events e
WHERE e.cluster = usage_events.cluster AND e.member = usage_events.member AND e.kind = 'stop')`), c.Name)
		if err != nil {
			return fmt.Errorf("store: ledger: stop times: %w", err)
		}
	}
	return nil
}

// openStop is stop_at of a start row whose member has not stopped: the
// largest BIGINT, so that "stopped after t or still running" is one range.
const openStop = "9223372036854775807"

// RecordLedger writes ledger entries for a cluster outside a cluster
// update (a worker stopped on request).
func (s *DB) RecordLedger(ctx context.Context, cluster string, entries ...LedgerEntry) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after commit
	var c Cluster
	err = tx.QueryRowContext(ctx, s.rebind(`SELECT name, owner, owner_name FROM clusters WHERE name = ?`), cluster).Scan(&c.Name, &c.Owner, &c.OwnerName)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: cluster %s: %w", cluster, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: ledger: %w", err)
	}
	if err := s.writeLedger(ctx, tx, &c, Event{Ledger: entries}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: ledger: %w", err)
	}
	return nil
}

// OpenMembers returns the cluster's members whose ledger interval is open,
// with when each started.
func (s *DB) OpenMembers(ctx context.Context, cluster string) (map[string]time.Time, error) {
	rows, err := s.db.QueryContext(ctx, s.rebind(`SELECT member, at FROM usage_events WHERE cluster = ? AND kind = 'start' AND stop_at = `+openStop), cluster)
	if err != nil {
		return nil, fmt.Errorf("store: open members: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var m string
		var at int64
		if err := rows.Scan(&m, &at); err != nil {
			return nil, fmt.Errorf("store: open members: %w", err)
		}
		out[m] = time.UnixMilli(at)
	}
	return out, rows.Err()
}

// Intervals returns the ledger's intervals overlapping the filter's window,
// clipped to it, oldest first.
func (s *DB) Intervals(ctx context.Context, f LedgerFilter) ([]Interval, error) {
	out, err := s.intervals(ctx, s.db, f)
	if err != nil {
		return nil, fmt.Errorf("store: usage: %w", err)
	}
	return out, nil
}

// MaxLedgerClusters bounds LedgerFilter.Clusters: one query's
// parameters stay well under either database's limit.
const MaxLedgerClusters = 500

func (s *DB) intervals(ctx context.Context, q querier, f LedgerFilter) ([]Interval, error) {
	until := f.Until
	if until.IsZero() {
		until = s.now()
	}
	where := []string{"kind = 'start'", "stop_at > ?", "at < ?"}
	args := []any{f.Since.UnixMilli(), until.UnixMilli()}
	for _, c := range []struct{ col, v string }{{"owner", f.Owner}, {"owner_name", f.OwnerName}, {"cluster", f.Cluster}} {
		if c.v != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.v)
		}
	}
	if len(f.Clusters) > MaxLedgerClusters {
		return nil, fmt.Errorf("%d clusters named, at most %d", len(f.Clusters), MaxLedgerClusters)
	}
	if len(f.Clusters) > 0 {
		where = append(where, "cluster IN (?"+strings.Repeat(", ?", len(f.Clusters)-1)+")")
		for _, c := range f.Clusters {
			args = append(args, c)
		}
	}
	rows, err := q.QueryContext(ctx, s.rebind(`SELECT cluster, member, owner, owner_name, at, stop_at,
vcpus, memory_gib, gpus, gpu_type, instance_type, price_hour
FROM usage_events WHERE `+strings.Join(where, " AND ")+` ORDER BY at, id`), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Interval
	for rows.Next() {
		var i Interval
		var start, stopAt int64
		if err := rows.Scan(&i.Cluster, &i.Member, &i.Owner, &i.OwnerName, &start, &stopAt, &i.VCPUs, &i.MemoryGiB,
			&i.GPUs, &i.GPUType, &i.InstanceType, &i.PriceHour); err != nil {
			return nil, err
		}
		stop := sql.NullInt64{Int64: stopAt, Valid: stopAt != math.MaxInt64}
		i.Start, i.Open = time.UnixMilli(start), !stop.Valid
		i.Stop = until
		if stop.Valid && time.UnixMilli(stop.Int64).Before(until) {
			i.Stop = time.UnixMilli(stop.Int64)
		}
		if i.Start.Before(f.Since) {
			i.Start = f.Since
		}
		if i.Stop.Before(i.Start) {
			i.Stop = i.Start
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

func (s *DB) totals(ctx context.Context, q querier, f LedgerFilter) (Totals, error) {
	var t Totals
	if f.Owner == "" && f.OwnerName == "" && f.Cluster == "" {
		return t, nil // nobody to count for
	}
	ivs, err := s.intervals(ctx, q, f)
	if err != nil {
		return t, err
	}
	for _, i := range ivs {
		t.Add(i)
	}
	return t, nil
}
