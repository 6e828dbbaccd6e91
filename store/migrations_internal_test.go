package store

import (
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// TestMigrationsFor: shared migration files apply to both dialects, the
// .sqlite.sql and .postgres.sql ones to their own only, under the shared
// version name, in version order; two files of one version for one
// dialect are refused.
func TestMigrationsFor(t *testing.T) {
	files := func(names ...string) fstest.MapFS {
		m := fstest.MapFS{}
		for _, n := range names {
			m["migrations/"+n] = &fstest.MapFile{Data: []byte("SELECT 1;")}
		}
		return m
	}
	mixed := files("0001_init.sql", "0002_b.postgres.sql", "0002_b.sqlite.sql", "0003_c.sql", "0004_pg_only.postgres.sql", "notes.txt")
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		dialect string
		want    []migration
		wantErr string
	}{
		{"sqlite", mixed, "sqlite", []migration{
			{"0001_init", "migrations/0001_init.sql"},
			{"0002_b", "migrations/0002_b.sqlite.sql"},
			{"0003_c", "migrations/0003_c.sql"},
		}, ""},
		{"postgres", mixed, "postgres", []migration{
			{"0001_init", "migrations/0001_init.sql"},
			{"0002_b", "migrations/0002_b.postgres.sql"},
			{"0003_c", "migrations/0003_c.sql"},
			{"0004_pg_only", "migrations/0004_pg_only.postgres.sql"},
		}, ""},
		{"shared and dialect file of one version", files("0001_a.sql", "0001_a.sqlite.sql"), "sqlite", nil,
			"migrations/0001_a.sql and migrations/0001_a.sqlite.sql are both version 0001_a"},
		{"shared and the other dialect's file", files("0001_a.sql", "0001_a.sqlite.sql"), "postgres", []migration{
			{"0001_a", "migrations/0001_a.sql"},
		}, ""},
		{"none", files(), "sqlite", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := migrationsFor(tt.fsys, tt.dialect)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("migrationsFor = %v, %v; want an error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("migrationsFor = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// TestMigrationsForEmbedded: the store's own migrations give each dialect
// its own 0014_store_changes.
func TestMigrationsForEmbedded(t *testing.T) {
	for _, d := range []string{"sqlite", "postgres"} {
		ms, err := migrationsFor(migrationFS, d)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		var file string
		for _, m := range ms {
			if m.version == "0014_store_changes" {
				file = m.file
			}
		}
		if want := "migrations/0014_store_changes." + d + ".sql"; file != want {
			t.Errorf("%s: 0014_store_changes from %q, want %q", d, file, want)
		}
	}
}
