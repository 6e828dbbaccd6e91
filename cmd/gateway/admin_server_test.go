package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// This file runs the CLI against the real API handlers (api.Server), with
// the real quota service, over in-memory stand-ins for the database and
// the scheduling core: the JSON the commands read is the JSON the API
// writes.

// tokens maps bearer tokens to users.
type tokens map[string]*auth.User

func (t tokens) Authenticate(_ context.Context, tok string) (*auth.User, error) {
	if u, ok := t[tok]; ok {
		return u, nil
	}
	return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalid)
}

// records is the usage ledger, the audit log and the quota table.
type records struct {
	mu        sync.Mutex
	quotas    map[string]store.QuotaRow
	audit     []store.AuditEntry
	intervals []store.Interval
	now       func() time.Time
}

func (r *records) QuotaEntries(context.Context) ([]store.QuotaRow, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []store.QuotaRow
	for _, q := range r.quotas {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Subject < out[j].Subject })
	return out, nil
}

func (r *records) UpdateQuota(_ context.Context, subject string, by store.Actor, action string, change store.QuotaChange) (string, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, exists := r.quotas[subject]
	after, err := change(old.Limits, exists)
	if err != nil {
		return "", "", err
	}
	if after == "" && !exists {
		return "", "", nil
	}
	if after == "" {
		delete(r.quotas, subject)
	} else {
		r.quotas[subject] = store.QuotaRow{Subject: subject, Limits: after, UpdatedAt: r.now(), UpdatedBy: by.Name}
	}
	r.logLocked(store.AuditEntry{Actor: by.Name, ActorID: by.ID, Action: action, Target: subject, Before: old.Limits, After: after})
	return old.Limits, after, nil
}

func (r *records) logLocked(e store.AuditEntry) {
	e.ID, e.At = int64(len(r.audit)+1), r.now()
	r.audit = append(r.audit, e)
}

func (r *records) Intervals(_ context.Context, f store.LedgerFilter) ([]store.Interval, error) {
	var out []store.Interval
	for _, iv := range r.intervals {
		if (f.Owner == "" || iv.Owner == f.Owner) && (f.OwnerName == "" || iv.OwnerName == f.OwnerName) {
			out = append(out, iv)
		}
	}
	return out, nil
}

func (r *records) AuditLog(_ context.Context, f store.AuditFilter) ([]store.AuditEntry, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []store.AuditEntry
	for i := len(r.audit) - 1; i >= 0; i-- {
		e := r.audit[i]
		if (f.Target == "" || e.Target == f.Target) && (f.Actor == "" || e.Actor == f.Actor) && !e.At.Before(f.Since) {
			out = append(out, e)
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (r *records) LastGroups(context.Context, string) ([]string, time.Time, error) {
	return nil, time.Time{}, nil
}

// core holds clusters; methods the admin commands do not reach panic
// through the nil embedded interface.
type core struct {
	api.Core
	rec      *records
	clusters []*store.Cluster
}

func (c *core) ListAll(_ context.Context, statuses []store.Status) ([]*store.Cluster, error) {
	var out []*store.Cluster
	for _, cl := range c.clusters {
		if len(statuses) == 0 || slices.Contains(statuses, cl.Status) {
			out = append(out, cl)
		}
	}
	return out, nil
}

func (c *core) List(_ context.Context, owner string, statuses []store.Status) ([]*store.Cluster, error) {
	var out []*store.Cluster
	for _, cl := range c.clusters {
		if cl.Owner == owner && (len(statuses) == 0 || slices.Contains(statuses, cl.Status)) {
			out = append(out, cl)
		}
	}
	return out, nil
}

func (c *core) AdminStop(_ context.Context, by store.Actor, name string) error {
	for _, cl := range c.clusters {
		if cl.Name == name {
			c.rec.mu.Lock()
			defer c.rec.mu.Unlock()
			c.rec.logLocked(store.AuditEntry{Actor: by.Name, ActorID: by.ID, Action: "cluster.stop", Target: "cluster:" + name,
				Before: `{"status":"RUNNING","workers":2}`, After: `{"status":"STOPPING","workers":2}`})
			cl.Status = store.Stopping
			return nil
		}
	}
	return fmt.Errorf("%w: %s", scheduler.ErrNotFound, name)
}

// Create and Scale refuse as the core does when a quota is exceeded.
func (c *core) Create(_ context.Context, _ quota.Who, _ map[string]json.RawMessage) (*store.Cluster, error) {
	return nil, &quota.ExceededError{Limit: "max_clusters", Source: "default (config)",
		Msg: "1 running cluster is your limit of 1 clusters (max_clusters, from default (config))"}
}

func (c *core) Scale(_ context.Context, _ quota.Who, _ string, n int) (string, error) {
	return "", &quota.ExceededError{Limit: "max_workers_per_cluster", Msg: fmt.Sprintf(
		"Scale request of %d workers refused: %d workers is over your limit of 4 workers per cluster (max_workers_per_cluster, from default (config)) (the cluster keeps its 2 workers)", n, n)}
}

// testGateway is an API server with an admin (token "root"), a user ann
// (token "ann", groups analysts) and what they have.
type testGateway struct {
	url string
	rec *records
	now time.Time
	db  *store.DB // the real store, when the gateway has one
}

func newTestGateway(t *testing.T) *testGateway {
	t.Helper()
	now := time.Now().UTC()
	rec := &records{quotas: map[string]store.QuotaRow{}, now: func() time.Time { return now }}
	start := quota.MonthStart(now)
	if now.Sub(start) < 3*time.Hour {
		start = now.Add(-3 * time.Hour) // early on the 1st: keep the intervals in the report's window
	}
	rec.intervals = []store.Interval{
		{Cluster: "c1", Member: "scheduler", Owner: "id-ann", OwnerName: "ann", Start: start.Add(time.Minute), Stop: start.Add(61 * time.Minute), VCPUs: 2, MemoryGiB: 4, PriceHour: 0.5},
		{Cluster: "c1", Member: "w1", Owner: "id-ann", OwnerName: "ann", Start: start.Add(time.Minute), Stop: start.Add(121 * time.Minute), VCPUs: 4, MemoryGiB: 16, GPUs: 1, GPUType: "a100", PriceHour: 3},
		{Cluster: "c2", Member: "scheduler", Owner: "id-bob", OwnerName: "bob", Start: start.Add(time.Minute), Stop: start.Add(31 * time.Minute), VCPUs: 1, MemoryGiB: 2, Open: true},
	}
	cfg, err := quota.ParseConfig([]map[string]any{
		{"subject": "default", "max_clusters": 1, "max_workers_per_cluster": 4, "monthly_vcpu_hours": 100},
		{"subject": "group:analysts", "max_vcpus": 32, "max_gpus_by_type": map[string]any{"t4": 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	qs, err := quota.NewService(rec, cfg, quota.Clamp)
	if err != nil {
		t.Fatal(err)
	}
	c := &core{rec: rec, clusters: []*store.Cluster{
		{Name: "c1", Owner: "id-ann", OwnerName: "ann", Status: store.Running, Provider: "local", DesiredWorkers: 2, ReadyWorkers: 1,
			Shape:     `{"provider":"local","worker":{"vcpus":2,"memory_gib":4,"gpus":1,"gpu_type":"t4"},"scheduler":{"vcpus":1,"memory_gib":2}}`,
			CreatedAt: now.Add(-2 * time.Hour)},
		{Name: "c2", Owner: "id-bob", Status: store.Pending, Provider: "local", DesiredWorkers: 3, CreatedAt: now.Add(-5 * time.Minute)},
	}}
	who := tokens{
		"root": {ID: "id-root", Name: "root", Admin: true},
		"ann":  {ID: "id-ann", Name: "ann", Groups: []string{"analysts"}},
	}
	s := api.New(api.Config{Version: "test", OnExceed: string(quota.Clamp)}, c, who, nil, nil)
	s.SetAdmin(qs, rec)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &testGateway{url: srv.URL, rec: rec, now: now}
}

// run runs the CLI as the holder of token and returns its output.
func (tg *testGateway) run(t *testing.T, token string, args ...string) (string, error) {
	t.Helper()
	out, _, err := tg.runStderr(t, token, args...)
	return out, err
}

// runStderr is run that also returns what the CLI wrote to stderr (its
// progress and notices).
func (tg *testGateway) runStderr(t *testing.T, token string, args ...string) (string, string, error) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("GATEWAY_TOKEN", "")
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(args, "--gateway", tg.url, "--token", token))
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// mustRun fails the test when the command fails.
func (tg *testGateway) mustRun(t *testing.T, token string, args ...string) string {
	t.Helper()
	out, err := tg.run(t, token, args...)
	if err != nil {
		t.Fatalf("gateway %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Limits are a local backend's: new-cluster asks which options there are.
func (c *core) Limits() scheduler.Limits {
	return scheduler.Limits{MaxWorkers: 10, MaxWorkerThreads: 4, MaxWorkerMemory: 8, Provider: "local"}
}
