package quota

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// ent is one subject's entry in a test: JSON limits from the configuration
// file and stored through the API ("" for none).
type ent struct {
	subject        Subject
	config, stored string
}

func entriesOf(t *testing.T, es ...ent) map[Subject]Entry {
	t.Helper()
	m := map[Subject]Entry{}
	for _, e := range es {
		if _, dup := m[e.subject]; dup {
			t.Fatalf("test lists %s twice", e.subject)
		}
		entry := Entry{Subject: e.subject}
		if e.config != "" {
			l := mustParse(t, e.config)
			entry.Config = &l
		}
		if e.stored != "" {
			l := mustParse(t, e.stored)
			entry.Stored = &l
		}
		m[e.subject] = entry
	}
	return m
}

// flatten renders each set limit as its JSON value, GPU types as
// "max_gpus_by_type.<type>".
func flatten(t *testing.T, l Limits) map[string]string {
	t.Helper()
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(asJSON(t, l)), &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range raw {
		if k == gpuTypeField {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v, &m); err != nil {
				t.Fatal(err)
			}
			for typ, n := range m {
				out[gpuTypeField+"."+typ] = string(n)
			}
			continue
		}
		out[k] = string(v)
	}
	return out
}

func TestResolve(t *testing.T) {
	ann := func(groups ...string) Who { return Who{ID: "id-ann", Name: "ann", Groups: groups} }
	tests := []struct {
		name    string
		entries []ent
		who     Who
		want    map[string]string // field -> JSON value; nothing else may be set
		sources map[string]string // exactly
	}{
		{
			name:    "no entries: no limits",
			who:     ann("gpu"),
			want:    map[string]string{},
			sources: map[string]string{},
		},
		{
			name: "user with no matching entries gets no limits",
			entries: []ent{
				{subject: "user:bob", config: `{"max_clusters": 1}`},
				{subject: "group:gpu", config: `{"max_gpus": 4}`},
				{subject: "user:ann2", stored: `{"max_vcpus": 2}`},
			},
			who:     ann("analysts"),
			want:    map[string]string{},
			sources: map[string]string{},
		},
		{
			name:    "default applies to everyone else",
			entries: []ent{{subject: "default", config: `{"max_clusters": 2, "max_idle_timeout": "1h"}`}, {subject: "user:bob", config: `{"max_clusters": 9}`}},
			who:     ann(),
			want:    map[string]string{"max_clusters": `2`, "max_idle_timeout": `"1h0m0s"`},
			sources: map[string]string{"max_clusters": "default (config)", "max_idle_timeout": "default (config)"},
		},
		{
			name: "user beats groups beats default, field by field",
			entries: []ent{
				{subject: "default", config: `{"max_clusters": 1, "max_vcpus": 8, "max_gpus": 0, "max_lifetime": "8h"}`},
				{subject: "group:gpu", config: `{"max_vcpus": 64, "max_gpus": 4}`},
				{subject: "user:ann", stored: `{"max_gpus": 1}`},
			},
			who:  ann("gpu"),
			want: map[string]string{"max_clusters": `1`, "max_vcpus": `64`, "max_gpus": `1`, "max_lifetime": `"8h0m0s"`},
			sources: map[string]string{
				"max_clusters": "default (config)",
				"max_vcpus":    "group:gpu (config)",
				"max_gpus":     "user:ann (api)",
				"max_lifetime": "default (config)",
			},
		},
		{
			name: "a group less generous than the default still replaces it",
			entries: []ent{
				{subject: "default", config: `{"max_clusters": 10}`},
				{subject: "group:interns", config: `{"max_clusters": 2}`},
			},
			who:     ann("interns"),
			want:    map[string]string{"max_clusters": `2`},
			sources: map[string]string{"max_clusters": "group:interns (config)"},
		},
		{
			name: "a user less generous than their groups still wins",
			entries: []ent{
				{subject: "group:gpu", config: `{"max_gpus": "unlimited", "allowed_providers": ["*"]}`},
				{subject: "user:ann", config: `{"max_gpus": 0, "allowed_providers": ["local"]}`},
			},
			who:     ann("gpu"),
			want:    map[string]string{"max_gpus": `0`, "allowed_providers": `["local"]`},
			sources: map[string]string{"max_gpus": "user:ann (config)", "allowed_providers": "user:ann (config)"},
		},
		{
			name: "most generous among groups: numbers, durations, unlimited",
			entries: []ent{
				{subject: "group:a", config: `{"max_clusters": 2, "max_idle_timeout": "1h", "max_vcpus": 100, "monthly_gpu_hours": 50}`},
				{subject: "group:b", config: `{"max_clusters": 5, "max_idle_timeout": "30m", "max_vcpus": "unlimited", "max_lifetime": "unlimited"}`},
				{subject: "group:c", config: `{"max_clusters": 3, "max_idle_timeout": "45m", "max_vcpus": 1000, "max_lifetime": "72h", "monthly_gpu_hours": 10}`},
			},
			who: ann("c", "a", "b"),
			want: map[string]string{
				"max_clusters": `5`, "max_idle_timeout": `"1h0m0s"`, "max_vcpus": `"unlimited"`,
				"max_lifetime": `"unlimited"`, "monthly_gpu_hours": `50`,
			},
			sources: map[string]string{
				"max_clusters":      "group:b (config)",
				"max_idle_timeout":  "group:a (config)",
				"max_vcpus":         "group:b (config)",
				"max_lifetime":      "group:b (config)",
				"monthly_gpu_hours": "group:a (config)",
			},
		},
		{
			name: "only the user's groups count",
			entries: []ent{
				{subject: "group:a", config: `{"max_clusters": 2}`},
				{subject: "group:big", config: `{"max_clusters": 50}`},
			},
			who:     ann("a", "other"),
			want:    map[string]string{"max_clusters": `2`},
			sources: map[string]string{"max_clusters": "group:a (config)"},
		},
		{
			name: "allow-lists from groups are unioned",
			entries: []ent{
				{subject: "default", config: `{"allowed_providers": ["local"], "allowed_instance_types": ["t3.micro"]}`},
				{subject: "group:a", config: `{"allowed_providers": ["aws"], "allowed_regions": ["us-east-1"]}`},
				{subject: "group:b", config: `{"allowed_providers": ["gcp", "aws"], "allowed_regions": ["europe-west1", "us-east-1"]}`},
				{subject: "group:c", config: `{"max_clusters": 1}`},
			},
			who: ann("c", "b", "a"),
			want: map[string]string{
				"allowed_providers":      `["aws","gcp"]`,
				"allowed_regions":        `["europe-west1","us-east-1"]`,
				"allowed_instance_types": `["t3.micro"]`,
				"max_clusters":           `1`,
			},
			sources: map[string]string{
				"allowed_providers":      "group:a (config), group:b (config)",
				"allowed_regions":        "group:a (config), group:b (config)",
				"allowed_instance_types": "default (config)",
				"max_clusters":           "group:c (config)",
			},
		},
		{
			name: "a group allowing * allows everything",
			entries: []ent{
				{subject: "group:a", config: `{"allowed_instance_types": ["m5.*"]}`},
				{subject: "group:b", config: `{"allowed_instance_types": ["*"]}`},
			},
			who:     ann("a", "b"),
			want:    map[string]string{"allowed_instance_types": `["*"]`},
			sources: map[string]string{"allowed_instance_types": "group:a (config), group:b (config)"},
		},
		{
			name: "a group's allow-list replaces the default's",
			entries: []ent{
				{subject: "default", config: `{"allowed_providers": ["aws"]}`},
				{subject: "group:gcp", config: `{"allowed_providers": ["gcp"]}`},
			},
			who:     ann("gcp"),
			want:    map[string]string{"allowed_providers": `["gcp"]`},
			sources: map[string]string{"allowed_providers": "group:gcp (config)"},
		},
		{
			name: "a user's allow-list replaces the groups'",
			entries: []ent{
				{subject: "group:a", config: `{"allowed_regions": ["r1", "r2"]}`},
				{subject: "user:ann", stored: `{"allowed_regions": ["r3"]}`},
			},
			who:     ann("a"),
			want:    map[string]string{"allowed_regions": `["r3"]`},
			sources: map[string]string{"allowed_regions": "user:ann (api)"},
		},
		{
			name: "each GPU type is resolved on its own",
			entries: []ent{
				{subject: "default", config: `{"max_gpus": 1, "max_gpus_by_type": {"a100": 0, "t4": 1}}`},
				{subject: "group:g1", config: `{"max_gpus_by_type": {"a100": 2}}`},
				{subject: "group:g2", stored: `{"max_gpus_by_type": {"a100": 4, "h100": 1}}`},
				{subject: "group:g3", config: `{"max_gpus_by_type": {"l4": "unlimited"}}`, stored: `{"max_gpus_by_type": {"l4": 3}}`},
				{subject: "group:g4", config: `{"max_gpus_by_type": {"l4": 8}}`},
				{subject: "user:ann", config: `{"max_gpus_by_type": {"h100": 0}}`},
			},
			who: ann("g1", "g2", "g3", "g4"),
			want: map[string]string{
				"max_gpus":              `1`,
				"max_gpus_by_type.a100": `4`,
				"max_gpus_by_type.t4":   `1`,
				"max_gpus_by_type.h100": `0`,
				"max_gpus_by_type.l4":   `8`,
			},
			sources: map[string]string{
				"max_gpus":              "default (config)",
				"max_gpus_by_type.a100": "group:g2 (api)",
				"max_gpus_by_type.t4":   "default (config)",
				"max_gpus_by_type.h100": "user:ann (config)",
				"max_gpus_by_type.l4":   "group:g4 (config)",
			},
		},
		{
			name: "unlimited beats a number for a GPU type",
			entries: []ent{
				{subject: "group:a", config: `{"max_gpus_by_type": {"a100": "unlimited"}}`},
				{subject: "group:b", config: `{"max_gpus_by_type": {"a100": 64}}`},
			},
			who:     ann("b", "a"),
			want:    map[string]string{"max_gpus_by_type.a100": `"unlimited"`},
			sources: map[string]string{"max_gpus_by_type.a100": "group:a (config)"},
		},
		{
			name: "stored overrides config field by field for one subject",
			entries: []ent{{
				subject: "user:ann",
				config:  `{"max_clusters": 2, "max_vcpus": 16, "allowed_providers": ["aws"], "max_gpus_by_type": {"a100": 1, "t4": 1}}`,
				stored:  `{"max_vcpus": 32, "allowed_providers": ["gcp"], "max_gpus_by_type": {"t4": 2}, "max_idle_timeout": "unlimited"}`,
			}},
			who: ann(),
			want: map[string]string{
				"max_clusters": `2`, "max_vcpus": `32`, "allowed_providers": `["gcp"]`,
				"max_gpus_by_type.a100": `1`, "max_gpus_by_type.t4": `2`, "max_idle_timeout": `"unlimited"`,
			},
			sources: map[string]string{
				"max_clusters":          "user:ann (config)",
				"max_vcpus":             "user:ann (api)",
				"allowed_providers":     "user:ann (api)",
				"max_gpus_by_type.a100": "user:ann (config)",
				"max_gpus_by_type.t4":   "user:ann (api)",
				"max_idle_timeout":      "user:ann (api)",
			},
		},
		{
			name: "stored unlimited overrides a configured number; stored entries of groups and default",
			entries: []ent{
				{subject: "default", config: `{"max_clusters": 1}`, stored: `{"max_clusters": "unlimited", "max_vcpus": 4}`},
				{subject: "group:gpu", config: `{"max_gpus": 2}`, stored: `{"max_gpus": 8}`},
			},
			who:  ann("gpu"),
			want: map[string]string{"max_clusters": `"unlimited"`, "max_vcpus": `4`, "max_gpus": `8`},
			sources: map[string]string{
				"max_clusters": "default (api)",
				"max_vcpus":    "default (api)",
				"max_gpus":     "group:gpu (api)",
			},
		},
		{
			name: "a stored group entry competes with configured ones as its layered value",
			entries: []ent{
				{subject: "group:a", config: `{"max_vcpus": 100}`, stored: `{"max_vcpus": 10}`},
				{subject: "group:b", config: `{"max_vcpus": 50}`},
			},
			who:     ann("a", "b"),
			want:    map[string]string{"max_vcpus": `50`},
			sources: map[string]string{"max_vcpus": "group:b (config)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := entriesOf(t, tt.entries...)
			before := asJSON(t, entries)
			eff := Resolve(entries, tt.who)
			if got := flatten(t, eff.Limits); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("limits:\n got %v\nwant %v", got, tt.want)
			}
			if !reflect.DeepEqual(eff.Sources, tt.sources) {
				t.Errorf("sources:\n got %q\nwant %q", eff.Sources, tt.sources)
			}
			for field, src := range tt.sources {
				if got := eff.Source(field); got != src {
					t.Errorf("Source(%q) = %q, want %q", field, got, src)
				}
			}
			if got := asJSON(t, entries); got != before {
				t.Errorf("Resolve changed the entries:\n%s\nwas\n%s", got, before)
			}
			// The order the user's groups come in does not matter.
			if len(tt.who.Groups) > 1 {
				rev := tt.who
				rev.Groups = append([]string(nil), tt.who.Groups...)
				sort.Sort(sort.Reverse(sort.StringSlice(rev.Groups)))
				again := Resolve(entries, rev)
				if asJSON(t, again) != asJSON(t, eff) {
					t.Errorf("groups %q and %q resolve differently:\n%s\n%s", tt.who.Groups, rev.Groups, asJSON(t, eff), asJSON(t, again))
				}
			}
		})
	}
}

func TestResolveSourceOfUnsetField(t *testing.T) {
	eff := Resolve(entriesOf(t, ent{subject: "default", config: `{"max_clusters": 1}`}), Who{Name: "ann"})
	if got := eff.Source("max_vcpus"); got != "" {
		t.Errorf("Source of an unset limit = %q, want empty", got)
	}
	if eff.Limits.MaxVCPUs != nil {
		t.Errorf("max_vcpus = %v, want unset (unlimited)", *eff.Limits.MaxVCPUs)
	}
}

// Changing the effective limits (callers may) does not change the entries
// they were resolved from.
func TestResolveCopiesValues(t *testing.T) {
	entries := entriesOf(t,
		ent{subject: "user:ann", config: `{"max_clusters": 2, "max_idle_timeout": "1h", "allowed_regions": ["r1"], "max_gpus_by_type": {"a100": 1}}`},
		ent{subject: "group:g", config: `{"allowed_providers": ["aws"]}`},
	)
	before := asJSON(t, entries)
	eff := Resolve(entries, Who{Name: "ann", Groups: []string{"g"}})
	*eff.Limits.MaxClusters = 50
	*eff.Limits.MaxIdleTimeout = Duration(time.Minute)
	eff.Limits.AllowedRegions[0] = "changed"
	eff.Limits.AllowedProviders[0] = "changed"
	eff.Limits.MaxGPUsByType["a100"] = 50
	if got := asJSON(t, entries); got != before {
		t.Errorf("entries follow the effective limits:\n%s\nwas\n%s", got, before)
	}
}

func TestResolveTieNamesOneGroupDeterministically(t *testing.T) {
	entries := entriesOf(t,
		ent{subject: "group:a", config: `{"max_clusters": 3, "max_gpus_by_type": {"t4": 2}}`},
		ent{subject: "group:b", config: `{"max_clusters": 3, "max_gpus_by_type": {"t4": 2}}`},
	)
	var first Effective
	for i := range 20 {
		groups := []string{"a", "b"}
		if i%2 == 1 {
			groups = []string{"b", "a"}
		}
		eff := Resolve(entries, Who{Name: "ann", Groups: groups})
		if *eff.Limits.MaxClusters != 3 || eff.Limits.MaxGPUsByType["t4"] != 2 {
			t.Fatalf("limits = %s", asJSON(t, eff.Limits))
		}
		if i == 0 {
			first = eff
			for _, k := range []string{"max_clusters", "max_gpus_by_type.t4"} {
				if src := eff.Sources[k]; src != "group:a (config)" && src != "group:b (config)" {
					t.Errorf("Sources[%s] = %q, want one of the groups", k, src)
				}
			}
			continue
		}
		if !reflect.DeepEqual(eff.Sources, first.Sources) {
			t.Fatalf("sources change between calls: %q then %q", first.Sources, eff.Sources)
		}
	}
}

func TestEntryLimits(t *testing.T) {
	tests := []struct {
		name string
		e    ent
		want string
	}{
		{"nothing", ent{subject: "default"}, `{}`},
		{"config only", ent{subject: "default", config: `{"max_clusters": 1}`}, `{"max_clusters":1}`},
		{"stored only", ent{subject: "default", stored: `{"max_vcpus": 4}`}, `{"max_vcpus":4}`},
		{"stored over config", ent{subject: "default", config: `{"max_clusters": 1, "max_vcpus": 2, "max_gpus_by_type": {"a": 1}}`, stored: `{"max_vcpus": 4, "max_gpus_by_type": {"b": 2}}`},
			`{"max_clusters":1,"max_vcpus":4,"max_gpus_by_type":{"a":1,"b":2}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := entriesOf(t, tt.e)[tt.e.subject]
			cfgBefore := asJSON(t, e.Config)
			if got := asJSON(t, e.Limits()); got != tt.want {
				t.Errorf("Limits() = %s, want %s", got, tt.want)
			}
			if got := asJSON(t, e.Config); got != cfgBefore {
				t.Errorf("Limits() changed the config entry: %s, was %s", got, cfgBefore)
			}
		})
	}
}

func TestEffectiveJSON(t *testing.T) {
	eff := Resolve(entriesOf(t, ent{subject: "group:gpu", config: `{"max_gpus": "unlimited"}`}), Who{Name: "ann", Groups: []string{"gpu"}})
	got := asJSON(t, eff)
	for _, want := range []string{`"limits":{"max_gpus":"unlimited"}`, `"sources":{"max_gpus":"group:gpu (config)"}`} {
		if !strings.Contains(got, want) {
			t.Errorf("JSON %s does not contain %s", got, want)
		}
	}
}

// TestResolveUserIDWinsOverName: an entry for the user's stable id applies
// before one for their (changeable) name.
func TestResolveUserIDWinsOverName(t *testing.T) {
	one, two := Amount(1), Amount(2)
	entries := map[Subject]Entry{
		UserSubject("ann"):         {Subject: UserSubject("ann"), Config: &Limits{MaxClusters: &one}},
		UserSubject("oidc:sub-42"): {Subject: UserSubject("oidc:sub-42"), Stored: &Limits{MaxClusters: &two}},
	}
	eff := Resolve(entries, Who{ID: "oidc:sub-42", Name: "ann"})
	if eff.Limits.MaxClusters == nil || *eff.Limits.MaxClusters != 2 || eff.Sources["max_clusters"] != "user:oidc:sub-42 (api)" {
		t.Errorf("by id: %v from %q; want 2 from user:oidc:sub-42 (api)", eff.Limits.MaxClusters, eff.Sources["max_clusters"])
	}
	eff = Resolve(entries, Who{ID: "oidc:sub-7", Name: "ann"})
	if eff.Limits.MaxClusters == nil || *eff.Limits.MaxClusters != 1 {
		t.Errorf("by name: %v, want 1", eff.Limits.MaxClusters)
	}
}
