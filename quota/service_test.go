package quota

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// fakeStore keeps quota rows in memory and behaves like store.DB's
// UpdateQuota: the change runs under a lock (the transaction), "" deletes,
// and every applied change is audited.
type fakeStore struct {
	mu         sync.Mutex
	rows       map[string]store.QuotaRow
	audit      []store.AuditEntry
	now        time.Time
	entriesErr error
	updates    int // calls of UpdateQuota
}

func newFakeStore() *fakeStore {
	return &fakeStore{rows: map[string]store.QuotaRow{}, now: time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)}
}

func (f *fakeStore) QuotaEntries(ctx context.Context) ([]store.QuotaRow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.entriesErr != nil {
		return nil, f.entriesErr
	}
	out := make([]store.QuotaRow, 0, len(f.rows))
	for _, r := range f.rows {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Subject < out[j].Subject })
	return out, nil
}

func (f *fakeStore) UpdateQuota(ctx context.Context, subject string, by store.Actor, action string, change store.QuotaChange) (before, after string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates++
	row, exists := f.rows[subject]
	before = row.Limits
	after, err = change(before, exists)
	if err != nil {
		return "", "", err
	}
	switch {
	case after == "" && exists:
		delete(f.rows, subject)
	case after == "":
		return before, after, nil
	default:
		f.rows[subject] = store.QuotaRow{Subject: subject, Limits: after, UpdatedAt: f.now, UpdatedBy: by.Name}
	}
	f.audit = append(f.audit, store.AuditEntry{Actor: by.Name, ActorID: by.ID, Action: action, Target: subject, Before: before, After: after})
	return before, after, nil
}

// put stores a row directly, as an earlier Set would have.
func (f *fakeStore) put(subject, limits string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rows[subject] = store.QuotaRow{Subject: subject, Limits: limits, UpdatedAt: f.now.Add(-time.Hour), UpdatedBy: "earlier"}
}

func (f *fakeStore) row(subject string) (store.QuotaRow, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.rows[subject]
	return r, ok
}

var root = store.Actor{ID: "id-root", Name: "root"}

// newService makes a service without the built-in defaults, so that tests
// of entries see only the entries they wrote (TestBuiltinDefaults* cover
// the built-in layer).
func newService(t *testing.T, st Store, config ...ConfigEntry) *Service {
	t.Helper()
	s, err := NewService(st, config, Clamp, WithBuiltinDefaults(Limits{}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func cfgEntry(t *testing.T, subject Subject, limits string) ConfigEntry {
	t.Helper()
	return ConfigEntry{Subject: subject, Limits: mustParse(t, limits)}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name   string
		list   []map[string]any
		want   []string // "subject limits-JSON", in order
		errHas []string
	}{
		{name: "none", list: nil, want: nil},
		{
			name: "entries as the configuration file gives them",
			list: []map[string]any{
				{"subject": "default", "max_clusters": 2, "max_idle_timeout": "2h"},
				{"subject": "group:gpu", "max_gpus": 4, "max_gpus_by_type": map[string]any{"a100": 2, "t4": "unlimited"}, "monthly_gpu_hours": 100.5},
				{"subject": " user:ann ", "allowed_providers": []any{"aws", "gcp"}, "max_vcpus": "unlimited", "max_lifetime": 3600},
				{"subject": "group:empty"},
			},
			want: []string{
				`default {"max_clusters":2,"max_idle_timeout":"2h0m0s"}`,
				`group:gpu {"max_gpus":4,"max_gpus_by_type":{"a100":2,"t4":"unlimited"},"monthly_gpu_hours":100.5}`,
				`user:ann {"max_vcpus":"unlimited","allowed_providers":["aws","gcp"],"max_lifetime":"1h0m0s"}`,
				`group:empty {}`,
			},
		},
		{
			name:   "duplicate subject",
			list:   []map[string]any{{"subject": "user:ann", "max_clusters": 1}, {"subject": "default"}, {"subject": "user:ann", "max_clusters": 2}},
			errHas: []string{"entry 3: user:ann appears twice"},
		},
		{
			name:   "duplicate subject once trimmed",
			list:   []map[string]any{{"subject": "group:gpu"}, {"subject": "group:gpu  "}},
			errHas: []string{"entry 2: group:gpu appears twice"},
		},
		{
			name:   "bad subject kind",
			list:   []map[string]any{{"subject": "default"}, {"subject": "team:x", "max_clusters": 1}},
			errHas: []string{"entry 2: ", `"team:x"`, "default, user:<name> or group:<name>"},
		},
		{
			name:   "no subject",
			list:   []map[string]any{{"max_clusters": 1}},
			errHas: []string{"entry 1: ", "must be default, user:<name> or group:<name>"},
		},
		{
			name:   "subject not a string",
			list:   []map[string]any{{"subject": 7}},
			errHas: []string{"entry 1: "},
		},
		{
			name:   "empty name",
			list:   []map[string]any{{"subject": "user:"}},
			errHas: []string{"entry 1: ", "needs a name"},
		},
		{
			name:   "control character in name",
			list:   []map[string]any{{"subject": "group:a\x00b"}},
			errHas: []string{"entry 1: ", "printable"},
		},
		{
			name:   "unknown limit",
			list:   []map[string]any{{"subject": "default"}, {"subject": "group:gpu", "max_gpu": 4}},
			errHas: []string{"entry 2 (group:gpu): ", `unknown limit "max_gpu"`, "known limits are", "max_gpus_by_type"},
		},
		{
			name:   "wrong type",
			list:   []map[string]any{{"subject": "default", "allowed_providers": "aws"}},
			errHas: []string{"entry 1 (default): ", "allowed_providers"},
		},
		{
			name:   "negative number",
			list:   []map[string]any{{"subject": "default", "max_vcpus": 1}, {"subject": "user:bob", "max_vcpus": -4}},
			errHas: []string{"entry 2 (user:bob): ", "at least 0"},
		},
		{
			name:   "bad name in a list",
			list:   []map[string]any{{"subject": "default", "allowed_regions": []any{"us east"}}},
			errHas: []string{"entry 1 (default): ", "allowed_regions", `"us east"`},
		},
		{
			name:   "value JSON cannot hold",
			list:   []map[string]any{{"subject": "default", "max_vcpus": math.Inf(1)}},
			errHas: []string{"entry 1 (default): "},
		},
		{
			name: "every problem reported together",
			list: []map[string]any{
				{"subject": "nobody"},
				{"subject": "default", "max_clusters": 1},
				{"subject": "default"},
				{"subject": "user:ann", "cpus": 3},
			},
			errHas: []string{"entry 1: ", "entry 3: default appears twice", `entry 4 (user:ann): unknown limit "cpus"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig(tt.list)
			if tt.errHas != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseConfig = %v, want ErrInvalid", err)
				}
				wantErrContains(t, err, append(tt.errHas, "quotas.entries")...)
				if n := strings.Count(err.Error(), ErrInvalid.Error()); n != 1 {
					t.Errorf("%q says %q %d times", err, ErrInvalid, n)
				}
				if got != nil {
					t.Errorf("ParseConfig returned entries with its error: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			var lines []string
			for _, e := range got {
				lines = append(lines, string(e.Subject)+" "+asJSON(t, e.Limits))
			}
			if strings.Join(lines, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("ParseConfig:\n got %s\nwant %s", strings.Join(lines, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestParseConfigDoesNotChangeItsInput(t *testing.T) {
	list := []map[string]any{{"subject": "default", "max_clusters": 1}}
	if _, err := ParseConfig(list); err != nil {
		t.Fatal(err)
	}
	if len(list[0]) != 2 || list[0]["subject"] != "default" {
		t.Errorf("input changed: %v", list)
	}
}

func TestNewServiceOnExceed(t *testing.T) {
	tests := []struct {
		in     OnExceed
		want   OnExceed
		errHas []string
	}{
		{in: "", want: Clamp},
		{in: "clamp", want: Clamp},
		{in: "refuse", want: Refuse},
		{in: "block", errHas: []string{`"block"`, "clamp or refuse", "quotas.on_exceed"}},
		{in: "Clamp", errHas: []string{`"Clamp"`, "clamp or refuse"}},
		{in: " refuse", errHas: []string{"clamp or refuse"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.in), func(t *testing.T) {
			s, err := NewService(newFakeStore(), nil, tt.in)
			if tt.errHas != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("NewService(%q) = %v, want ErrInvalid", tt.in, err)
				}
				wantErrContains(t, err, tt.errHas...)
				if s != nil {
					t.Error("a service came with the error")
				}
				return
			}
			if err != nil {
				t.Fatalf("NewService(%q): %v", tt.in, err)
			}
			if got := s.OnExceed(); got != tt.want {
				t.Errorf("OnExceed() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestServiceSet(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	s := newService(t, st, cfgEntry(t, "user:ann", `{"max_clusters": 1, "max_vcpus": 4}`))

	// A first set creates the stored entry, on top of the configured one.
	e, err := s.Set(ctx, root, "user:ann", mustParse(t, `{"max_vcpus": 8, "max_gpus_by_type": {"a100": 1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e.Subject != "user:ann" || e.Config == nil || e.Stored == nil {
		t.Fatalf("entry = %s", asJSON(t, e))
	}
	if got, want := asJSON(t, e.Stored), `{"max_vcpus":8,"max_gpus_by_type":{"a100":1}}`; got != want {
		t.Errorf("stored = %s, want %s", got, want)
	}
	if got, want := asJSON(t, e.Config), `{"max_clusters":1,"max_vcpus":4}`; got != want {
		t.Errorf("config = %s, want %s", got, want)
	}
	if !e.UpdatedAt.Equal(st.now) || e.UpdatedBy != "root" {
		t.Errorf("updated %v by %q, want %v by root", e.UpdatedAt, e.UpdatedBy, st.now)
	}
	if got, want := asJSON(t, e.Limits()), `{"max_clusters":1,"max_vcpus":8,"max_gpus_by_type":{"a100":1}}`; got != want {
		t.Errorf("Limits() = %s, want %s", got, want)
	}

	// Later sets merge into what is stored, field by field and per GPU type.
	if _, err := s.Set(ctx, root, "user:ann", mustParse(t, `{"max_gpus_by_type": {"t4": 2}, "allowed_regions": ["eu-west-1"]}`)); err != nil {
		t.Fatal(err)
	}
	e, err = s.Set(ctx, store.Actor{ID: "id-eve", Name: "eve"}, "user:ann", mustParse(t, `{"max_vcpus": "unlimited", "max_gpus_by_type": {"a100": 3}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"max_vcpus":"unlimited","max_gpus_by_type":{"a100":3,"t4":2},"allowed_regions":["eu-west-1"]}`
	if got := asJSON(t, e.Stored); got != want {
		t.Errorf("stored after merges = %s, want %s", got, want)
	}
	if e.UpdatedBy != "eve" {
		t.Errorf("UpdatedBy = %q, want eve", e.UpdatedBy)
	}
	// What the store holds is what the entry shows, and it reads back.
	r, ok := st.row("user:ann")
	if !ok {
		t.Fatal("no row stored")
	}
	if got := asJSON(t, mustParse(t, r.Limits)); got != want {
		t.Errorf("row = %s, want %s", r.Limits, want)
	}
	// Every set is audited, with what was there before.
	if len(st.audit) != 3 {
		t.Fatalf("audit = %+v, want 3 entries", st.audit)
	}
	a := st.audit[2]
	if a.Action != "quota.set" || a.Target != "user:ann" || a.Actor != "eve" || a.ActorID != "id-eve" || a.After != r.Limits || a.Before == "" {
		t.Errorf("audit entry = %+v", a)
	}
	if st.audit[0].Before != "" {
		t.Errorf("first set audited with a before: %q", st.audit[0].Before)
	}

	// The effective limits follow: stored over config.
	eff, err := s.Effective(ctx, Who{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if eff.Source("max_vcpus") != "user:ann (api)" || eff.Source("max_clusters") != "user:ann (config)" || !eff.Limits.MaxVCPUs.IsUnlimited() {
		t.Errorf("effective = %s", asJSON(t, eff))
	}
}

func TestServiceSetRefuses(t *testing.T) {
	tests := []struct {
		name   string
		patch  Limits
		errHas []string
	}{
		{"empty patch", Limits{}, []string{"nothing to set", "max_clusters", "max_gpus_by_type"}},
		{"empty GPU map", Limits{MaxGPUsByType: map[string]Amount{}}, []string{"nothing to set"}},
		{"bad list name", Limits{AllowedProviders: []string{"a b"}}, []string{"allowed_providers", `"a b"`}},
		{"bad GPU type", Limits{MaxGPUsByType: map[string]Amount{"": 1}}, []string{"max_gpus_by_type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			st.put("user:ann", `{"max_clusters":3}`)
			s := newService(t, st)
			_, err := s.Set(context.Background(), root, "user:ann", tt.patch)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Set = %v, want ErrInvalid", err)
			}
			wantErrContains(t, err, tt.errHas...)
			if st.updates != 0 || len(st.audit) != 0 {
				t.Errorf("the store was changed: %d updates, audit %+v", st.updates, st.audit)
			}
			if r, _ := st.row("user:ann"); r.Limits != `{"max_clusters":3}` {
				t.Errorf("row = %q", r.Limits)
			}
		})
	}
}

func TestServiceSetCorruptStoredEntry(t *testing.T) {
	st := newFakeStore()
	st.put("user:ann", `{"max_clusters": "many"}`)
	s := newService(t, st)
	_, err := s.Set(context.Background(), root, "user:ann", mustParse(t, `{"max_vcpus": 1}`))
	if err == nil {
		t.Fatal("Set merged into an unreadable entry")
	}
	if r, _ := st.row("user:ann"); r.Limits != `{"max_clusters": "many"}` || len(st.audit) != 0 {
		t.Errorf("row changed to %q, audit %+v", r.Limits, st.audit)
	}
}

// Sets of different fields at once all land: each merges inside the
// store's transaction, not over a copy read before it.
func TestServiceSetConcurrent(t *testing.T) {
	st := newFakeStore()
	s := newService(t, st)
	names := []string{"max_clusters", "max_workers_per_cluster", "max_vcpus", "max_memory_gib", "max_gpus", "monthly_vcpu_hours", "monthly_gpu_hours"}
	var wg sync.WaitGroup
	for i, name := range names {
		patch := mustParse(t, fmt.Sprintf(`{%q: %d}`, name, i+1))
		wg.Go(func() {
			if _, err := s.Set(context.Background(), root, "group:g", patch); err != nil {
				t.Error(err)
			}
			if _, err := s.Effective(context.Background(), Who{Name: "ann", Groups: []string{"g"}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	e, err := s.Entry(context.Background(), "group:g")
	if err != nil {
		t.Fatal(err)
	}
	got := flatten(t, e.Limits())
	for i, name := range names {
		if got[name] != fmt.Sprint(i+1) {
			t.Errorf("%s = %q, want %d (entry %s)", name, got[name], i+1, asJSON(t, e.Stored))
		}
	}
}

func TestServiceUnset(t *testing.T) {
	stored := `{"max_clusters":2,"max_vcpus":8,"max_gpus_by_type":{"a100":1,"t4":2},"allowed_regions":["r1"]}`
	tests := []struct {
		name       string
		stored     string // "" for no stored entry
		config     string // "" for no configured entry
		names      []string
		wantStored string // "" when the stored entry is gone
		errIs      error
		errHas     []string
	}{
		{name: "one field", stored: stored, names: []string{"max_vcpus"},
			wantStored: `{"max_clusters":2,"max_gpus_by_type":{"a100":1,"t4":2},"allowed_regions":["r1"]}`},
		{name: "fields and one GPU type", stored: stored, names: []string{"max_clusters", "max_gpus_by_type.a100", "allowed_regions"},
			wantStored: `{"max_vcpus":8,"max_gpus_by_type":{"t4":2}}`},
		{name: "all GPU types", stored: stored, names: []string{"max_gpus_by_type"},
			wantStored: `{"max_clusters":2,"max_vcpus":8,"allowed_regions":["r1"]}`},
		{name: "a field that is not stored", stored: stored, names: []string{"max_lifetime"}, wantStored: stored},
		{name: "every stored field removes the entry", stored: stored, config: `{"max_clusters": 1}`,
			names: []string{"max_clusters", "max_vcpus", "max_gpus_by_type.a100", "max_gpus_by_type.t4", "allowed_regions"}},
		{name: "no names removes the whole entry", stored: stored, config: `{"max_clusters": 1}`},
		{name: "whole entry with an empty list", stored: stored, names: []string{}},
		{name: "missing entry", names: []string{"max_clusters"}, errIs: ErrNoEntry,
			errHas: []string{"no stored quota entry for user:ann", "configuration file"}},
		{name: "missing entry, whole", errIs: ErrNoEntry, errHas: []string{"user:ann"}},
		{name: "only a configured entry", config: `{"max_clusters": 1}`, names: []string{"max_clusters"}, errIs: ErrNoEntry},
		{name: "unknown name", stored: stored, names: []string{"max_vcpus", "max_cpus"}, errIs: ErrInvalid,
			errHas: []string{"max_cpus", "known limits are"}},
		{name: "unknown name without an entry", names: []string{"bogus"}, errIs: ErrInvalid, errHas: []string{"bogus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st := newFakeStore()
			if tt.stored != "" {
				st.put("user:ann", tt.stored)
			}
			st.put("user:bob", `{"max_clusters":7}`)
			var config []ConfigEntry
			if tt.config != "" {
				config = append(config, cfgEntry(t, "user:ann", tt.config))
			}
			s := newService(t, st, config...)
			e, err := s.Unset(ctx, root, "user:ann", tt.names)
			if tt.errIs != nil {
				if !errors.Is(err, tt.errIs) {
					t.Fatalf("Unset = %v, want %v", err, tt.errIs)
				}
				wantErrContains(t, err, tt.errHas...)
				if len(st.audit) != 0 {
					t.Errorf("a refused unset was audited: %+v", st.audit)
				}
				if r, _ := st.row("user:ann"); r.Limits != tt.stored {
					t.Errorf("row changed to %q", r.Limits)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unset: %v", err)
			}
			if e.Subject != "user:ann" {
				t.Errorf("entry subject = %q", e.Subject)
			}
			r, ok := st.row("user:ann")
			if tt.wantStored == "" {
				if ok || e.Stored != nil {
					t.Errorf("stored entry kept: row %q, entry %s", r.Limits, asJSON(t, e))
				}
			} else {
				if !ok || e.Stored == nil {
					t.Fatalf("stored entry gone: %s", asJSON(t, e))
				}
				if got := asJSON(t, e.Stored); got != tt.wantStored {
					t.Errorf("stored = %s, want %s", got, tt.wantStored)
				}
				if got := asJSON(t, mustParse(t, r.Limits)); got != tt.wantStored {
					t.Errorf("row = %s, want %s", r.Limits, tt.wantStored)
				}
			}
			// The configured entry applies again for what was removed.
			if tt.config != "" {
				if e.Config == nil || asJSON(t, e.Config) != asJSON(t, mustParse(t, tt.config)) {
					t.Errorf("config = %s, want %s", asJSON(t, e.Config), tt.config)
				}
			} else if e.Config != nil {
				t.Errorf("config = %s, want none", asJSON(t, e.Config))
			}
			if len(st.audit) != 1 || st.audit[0].Action != "quota.unset" || st.audit[0].Target != "user:ann" || st.audit[0].Before != tt.stored {
				t.Errorf("audit = %+v", st.audit)
			}
			if r, _ := st.row("user:bob"); r.Limits != `{"max_clusters":7}` {
				t.Errorf("another subject's row changed: %q", r.Limits)
			}
		})
	}
}

func TestServiceUnsetThenConfigApplies(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	s := newService(t, st, cfgEntry(t, "default", `{"max_clusters": 1}`))
	if _, err := s.Set(ctx, root, "default", mustParse(t, `{"max_clusters": 4}`)); err != nil {
		t.Fatal(err)
	}
	eff, err := s.Effective(ctx, Who{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if *eff.Limits.MaxClusters != 4 || eff.Source("max_clusters") != "default (api)" {
		t.Fatalf("after set: %s", asJSON(t, eff))
	}
	if _, err := s.Unset(ctx, root, "default", []string{"max_clusters"}); err != nil {
		t.Fatal(err)
	}
	eff, err = s.Effective(ctx, Who{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if *eff.Limits.MaxClusters != 1 || eff.Source("max_clusters") != "default (config)" {
		t.Errorf("after unset: %s", asJSON(t, eff))
	}
	if _, err := s.Unset(ctx, root, "default", nil); !errors.Is(err, ErrNoEntry) {
		t.Errorf("second unset = %v, want ErrNoEntry", err)
	}
}

func TestServiceEntries(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	st.put("group:gpu", `{"max_gpus": 8}`)
	st.put("user:ann", `{"max_vcpus": 16}`)
	s := newService(t, st,
		cfgEntry(t, "default", `{"max_clusters": 1}`),
		cfgEntry(t, "group:gpu", `{"max_gpus": 2, "max_vcpus": 64}`),
	)
	m, err := s.Entries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 {
		t.Fatalf("Entries = %s, want 3", asJSON(t, m))
	}
	tests := []struct {
		subject        Subject
		config, stored string // "null" for none
		limits         string
		by             string
	}{
		{"default", `{"max_clusters":1}`, `null`, `{"max_clusters":1}`, ""},
		{"group:gpu", `{"max_vcpus":64,"max_gpus":2}`, `{"max_gpus":8}`, `{"max_vcpus":64,"max_gpus":8}`, "earlier"},
		{"user:ann", `null`, `{"max_vcpus":16}`, `{"max_vcpus":16}`, "earlier"},
	}
	for _, tt := range tests {
		e, ok := m[tt.subject]
		if !ok {
			t.Errorf("no entry for %s", tt.subject)
			continue
		}
		if e.Subject != tt.subject || asJSON(t, e.Config) != tt.config || asJSON(t, e.Stored) != tt.stored || asJSON(t, e.Limits()) != tt.limits || e.UpdatedBy != tt.by {
			t.Errorf("%s: got %s (limits %s)", tt.subject, asJSON(t, e), asJSON(t, e.Limits()))
		}
		if tt.by != "" && !e.UpdatedAt.Equal(st.now.Add(-time.Hour)) {
			t.Errorf("%s: UpdatedAt = %v", tt.subject, e.UpdatedAt)
		}
		if tt.by == "" && !e.UpdatedAt.IsZero() {
			t.Errorf("%s: a configured entry has UpdatedAt %v", tt.subject, e.UpdatedAt)
		}
	}

}

func TestServiceEntriesErrors(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("database down")
	st := newFakeStore()
	st.entriesErr = boom
	s := newService(t, st)
	if _, err := s.Entries(ctx); !errors.Is(err, boom) {
		t.Errorf("Entries = %v, want %v", err, boom)
	}
	if _, err := s.List(ctx); !errors.Is(err, boom) {
		t.Errorf("List = %v, want %v", err, boom)
	}
	if _, err := s.Effective(ctx, Who{Name: "ann"}); !errors.Is(err, boom) {
		t.Errorf("Effective = %v, want %v", err, boom)
	}
	if _, err := s.Entry(ctx, "default"); !errors.Is(err, boom) {
		t.Errorf("Entry = %v, want %v", err, boom)
	}

	// A stored entry this code cannot read stops everything rather than
	// dropping limits.
	st = newFakeStore()
	st.put("group:gpu", `{"max_gpus": 2, "gpu_hours": 5}`)
	s = newService(t, st)
	_, err := s.Effective(ctx, Who{Name: "ann", Groups: []string{"gpu"}})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Effective = %v, want ErrInvalid", err)
	}
	wantErrContains(t, err, "cannot be read: group:gpu", `"gpu_hours"`, "gateway admin quota unset group:gpu")
	if !errors.Is(err, ErrUnreadable) {
		t.Errorf("Effective = %v, want ErrUnreadable", err)
	}
}

func TestServiceList(t *testing.T) {
	st := newFakeStore()
	st.put("user:ann", `{"max_clusters": 1}`)
	st.put("group:c", `{"max_clusters": 1}`)
	st.put("group:a", `{"max_clusters": 1}`)
	st.put("default", `{"max_vcpus": 1}`)
	s := newService(t, st,
		cfgEntry(t, "user:bob", `{"max_clusters": 2}`),
		cfgEntry(t, "group:b", `{"max_clusters": 2}`),
		cfgEntry(t, "user:Zed", `{"max_clusters": 2}`),
		cfgEntry(t, "default", `{"max_clusters": 2}`),
		cfgEntry(t, "group:A", `{"max_clusters": 2}`),
	)
	for range 5 { // map order must not show
		list, err := s.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range list {
			got = append(got, string(e.Subject))
		}
		want := []string{"default", "group:A", "group:a", "group:b", "group:c", "user:Zed", "user:ann", "user:bob"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("List order = %q, want %q", got, want)
		}
		if list[0].Config == nil || list[0].Stored == nil {
			t.Errorf("default entry = %s, want both layers", asJSON(t, list[0]))
		}
	}
}

func TestServiceListEmpty(t *testing.T) {
	list, err := newService(t, newFakeStore()).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("List = %s, want none", asJSON(t, list))
	}
}

func TestServiceEntry(t *testing.T) {
	st := newFakeStore()
	st.put("group:gpu", `{"max_gpus": 1}`)
	s := newService(t, st, cfgEntry(t, "default", `{"max_clusters": 1}`))
	ctx := context.Background()

	e, err := s.Entry(ctx, "user:nobody")
	if err != nil {
		t.Fatal(err)
	}
	if l := e.Limits(); e.Subject != "user:nobody" || e.Config != nil || e.Stored != nil || !l.Empty() {
		t.Errorf("missing entry = %s", asJSON(t, e))
	}
	e, err = s.Entry(ctx, "group:gpu")
	if err != nil || e.Stored == nil || *e.Stored.MaxGPUs != 1 || e.Config != nil {
		t.Errorf("Entry(group:gpu) = %s, %v", asJSON(t, e), err)
	}
	e, err = s.Entry(ctx, "default")
	if err != nil || e.Config == nil || *e.Config.MaxClusters != 1 || e.Stored != nil {
		t.Errorf("Entry(default) = %s, %v", asJSON(t, e), err)
	}
}

// The configuration file's entries, parsed and given to a service, resolve
// with stored ones as the package comment says.
func TestServiceEffectiveFromParsedConfig(t *testing.T) {
	config, err := ParseConfig([]map[string]any{
		{"subject": "default", "max_clusters": 1, "max_vcpus": 8, "allowed_providers": []any{"local"}},
		{"subject": "group:gpu", "max_gpus": 4, "allowed_providers": []any{"aws"}},
		{"subject": "group:big", "max_vcpus": 128, "allowed_providers": []any{"gcp"}},
		{"subject": "user:ann", "max_clusters": 3},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := newFakeStore()
	s, err := NewService(st, config, Refuse)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.Set(ctx, root, "group:gpu", mustParse(t, `{"max_vcpus": 256}`)); err != nil {
		t.Fatal(err)
	}
	eff, err := s.Effective(ctx, Who{ID: "x", Name: "ann", Groups: []string{"gpu", "big"}})
	if err != nil {
		t.Fatal(err)
	}
	// max_builds: no entry sets it, so the built-in default applies.
	want := map[string]string{"max_clusters": "3", "max_vcpus": "256", "max_gpus": "4", "allowed_providers": `["aws","gcp"]`, "max_builds": "2"}
	if got := flatten(t, eff.Limits); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("limits = %v, want %v", got, want)
	}
	wantSources := map[string]string{
		"max_clusters":      "user:ann (config)",
		"max_vcpus":         "group:gpu (api)",
		"max_gpus":          "group:gpu (config)",
		"allowed_providers": "group:big (config), group:gpu (config)",
		"max_builds":        BuiltinSource,
	}
	if fmt.Sprint(eff.Sources) != fmt.Sprint(wantSources) {
		t.Errorf("sources = %q, want %q", eff.Sources, wantSources)
	}
	if s.OnExceed() != Refuse {
		t.Errorf("OnExceed = %q", s.OnExceed())
	}
}

func TestServiceUnsetCorruptStoredEntry(t *testing.T) {
	st := newFakeStore()
	st.put("user:ann", `{"max_clusters": 1, "cpus": 2}`)
	s := newService(t, st)
	_, err := s.Unset(context.Background(), root, "user:ann", []string{"max_clusters"})
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Unset = %v, want ErrInvalid", err)
	}
	if r, _ := st.row("user:ann"); r.Limits != `{"max_clusters": 1, "cpus": 2}` || len(st.audit) != 0 {
		t.Errorf("row changed to %q, audit %+v", r.Limits, st.audit)
	}
	// Removing the whole entry needs no reading: it is how to get rid of it.
	if _, err := s.Unset(context.Background(), root, "user:ann", nil); err != nil {
		t.Fatalf("Unset of the whole unreadable entry: %v", err)
	}
	if _, ok := st.row("user:ann"); ok {
		t.Error("the unreadable entry is still stored")
	}
}
