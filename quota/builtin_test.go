package quota

import (
	"context"
	"testing"
	"time"
)

// A gateway nobody configured quotas for still bounds each user (issue
// 14, finding 11), and every way of writing a default entry raises or
// lifts the built-in values field by field.
func TestBuiltinDefaultsResolve(t *testing.T) {
	ctx := context.Background()
	unlimited := "unlimited"
	tests := []struct {
		name    string
		config  []ConfigEntry
		stored  map[Subject]string
		opts    []Option
		who     Who
		want    map[string]string // limit -> value; absent means unset
		sources map[string]string
	}{
		{
			name:    "no entries at all",
			who:     Who{ID: "id-ann", Name: "ann"},
			want:    map[string]string{"max_clusters": "5", "max_builds": "2"},
			sources: map[string]string{"max_clusters": BuiltinSource, "max_builds": BuiltinSource},
		},
		{
			name:    "entries without a default entry",
			config:  []ConfigEntry{cfgEntry(t, "user:bob", `{"max_clusters": 10}`), cfgEntry(t, "group:gpu", `{"max_gpus": 4}`)},
			who:     Who{ID: "id-ann", Name: "ann", Groups: []string{"gpu"}},
			want:    map[string]string{"max_clusters": "5", "max_builds": "2", "max_gpus": "4"},
			sources: map[string]string{"max_clusters": BuiltinSource, "max_builds": BuiltinSource, "max_gpus": "group:gpu (config)"},
		},
		{
			name:    "a user's own entry raises one field; the other stays built-in",
			config:  []ConfigEntry{cfgEntry(t, "user:bob", `{"max_clusters": 10}`)},
			who:     Who{ID: "id-bob", Name: "bob"},
			want:    map[string]string{"max_clusters": "10", "max_builds": "2"},
			sources: map[string]string{"max_clusters": "user:bob (config)", "max_builds": BuiltinSource},
		},
		{
			name:    "a group's entry raises it for members",
			config:  []ConfigEntry{cfgEntry(t, "group:team", `{"max_builds": 6}`)},
			who:     Who{ID: "id-ann", Name: "ann", Groups: []string{"team"}},
			want:    map[string]string{"max_clusters": "5", "max_builds": "6"},
			sources: map[string]string{"max_clusters": BuiltinSource, "max_builds": "group:team (config)"},
		},
		{
			name:    "default entry in the file lifts max_clusters",
			config:  []ConfigEntry{cfgEntry(t, "default", `{"max_clusters": "unlimited"}`)},
			who:     Who{ID: "id-ann", Name: "ann"},
			want:    map[string]string{"max_clusters": unlimited, "max_builds": "2"},
			sources: map[string]string{"max_clusters": "default (config)", "max_builds": BuiltinSource},
		},
		{
			name:    "default entry through the admin API over the file",
			config:  []ConfigEntry{cfgEntry(t, "default", `{"max_clusters": 8}`)},
			stored:  map[Subject]string{"default": `{"max_clusters": 20, "max_builds": 3}`},
			who:     Who{ID: "id-ann", Name: "ann"},
			want:    map[string]string{"max_clusters": "20", "max_builds": "3"},
			sources: map[string]string{"max_clusters": "default (api)", "max_builds": "default (api)"},
		},
		{
			name:    "turned off (gateway dev)",
			opts:    []Option{WithBuiltinDefaults(Limits{})},
			who:     Who{ID: "id-ann", Name: "ann"},
			want:    map[string]string{},
			sources: map[string]string{},
		},
		{
			name:    "replaced",
			opts:    []Option{WithBuiltinDefaults(mustParse(t, `{"max_vcpus": 4}`))},
			who:     Who{ID: "id-ann", Name: "ann"},
			want:    map[string]string{"max_vcpus": "4"},
			sources: map[string]string{"max_vcpus": BuiltinSource},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			for subj, l := range tt.stored {
				st.put(string(subj), l)
			}
			s, err := NewService(st, tt.config, Clamp, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			eff, err := s.Effective(ctx, tt.who)
			if err != nil {
				t.Fatal(err)
			}
			got := flatten(t, eff.Limits)
			for k, v := range got {
				if v == `"unlimited"` {
					got[k] = unlimited
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("limits = %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
				}
			}
			if len(eff.Sources) != len(tt.sources) {
				t.Errorf("sources = %q, want %q", eff.Sources, tt.sources)
			}
			for k, v := range tt.sources {
				if eff.Source(k) != v {
					t.Errorf("source of %s = %q, want %q", k, eff.Source(k), v)
				}
			}
		})
	}
}

// With the built-in defaults, the sixth cluster is refused with the usual
// message, which names where the limit comes from.
func TestBuiltinDefaultsAdmit(t *testing.T) {
	s, err := NewService(newFakeStore(), nil, Clamp)
	if err != nil {
		t.Fatal(err)
	}
	eff, err := s.Effective(context.Background(), Who{ID: "id-ann", Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	month := Month{Since: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}
	if err := eff.Admit(inUseOf(sn{cpuShape, 1}, sn{cpuShape, 1}, sn{cpuShape, 1}, sn{cpuShape, 1}), month, cpuShape, 1); err != nil {
		t.Fatalf("the fifth cluster: %v", err)
	}
	err = eff.Admit(inUseOf(sn{cpuShape, 1}, sn{cpuShape, 1}, sn{cpuShape, 1}, sn{cpuShape, 1}, sn{cpuShape, 1}), month, cpuShape, 1)
	wantExceeded(t, err, "max_clusters", BuiltinSource, "would run 6 clusters of your 5")
}

// The default entry as listed carries the built-in layer, so that the
// admin sees where the limits come from; the file and the API layers are
// kept apart from it.
func TestBuiltinDefaultsListed(t *testing.T) {
	ctx := context.Background()
	st := newFakeStore()
	s, err := NewService(st, []ConfigEntry{cfgEntry(t, "default", `{"max_clusters": 8}`)}, Clamp)
	if err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Subject != DefaultSubject {
		t.Fatalf("List = %s, want the default entry alone", asJSON(t, list))
	}
	e := list[0]
	if got := asJSON(t, e.Builtin); got != `{"max_clusters":5,"max_builds":2}` {
		t.Errorf("builtin layer = %s", got)
	}
	if got := asJSON(t, e.Config); got != `{"max_clusters":8}` {
		t.Errorf("config layer = %s", got)
	}
	if got := asJSON(t, e.Limits()); got != `{"max_clusters":8,"max_builds":2}` {
		t.Errorf("limits = %s", got)
	}
	if o := e.Origins(); o["max_clusters"] != FromConfig || o["max_builds"] != FromBuiltin {
		t.Errorf("origins = %q", o)
	}
	// Changing what a caller got does not change the service.
	*e.Builtin.MaxBuilds = 99
	eff, err := s.Effective(ctx, Who{Name: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	if *eff.Limits.MaxBuilds != 2 {
		t.Errorf("max_builds = %v after a caller changed its copy", *eff.Limits.MaxBuilds)
	}
	// Unsetting the stored default brings the built-in value back.
	if _, err := s.Set(ctx, root, DefaultSubject, mustParse(t, `{"max_builds": "unlimited"}`)); err != nil {
		t.Fatal(err)
	}
	if eff, _ = s.Effective(ctx, Who{Name: "ann"}); !eff.Limits.MaxBuilds.IsUnlimited() || eff.Source("max_builds") != "default (api)" {
		t.Errorf("after set: max_builds %v from %q", *eff.Limits.MaxBuilds, eff.Source("max_builds"))
	}
	if _, err := s.Unset(ctx, root, DefaultSubject, []string{"max_builds"}); err != nil {
		t.Fatal(err)
	}
	if eff, _ = s.Effective(ctx, Who{Name: "ann"}); *eff.Limits.MaxBuilds != 2 || eff.Source("max_builds") != BuiltinSource {
		t.Errorf("after unset: max_builds %v from %q", *eff.Limits.MaxBuilds, eff.Source("max_builds"))
	}
}
