package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/store"
)

// Store benchmarks run on a fresh SQLite file and, when
// GATEWAY_TEST_POSTGRES_URL is set, on a fresh PostgreSQL schema (see
// internal/testdb), as sub-benchmarks "sqlite" and "postgres".

const (
	benchPerOwner = 1000 // clusters of the owner whose list is read
	benchOwners   = 2    // owners with that many clusters each
	benchTokens   = 1000
)

// fakePEM is text the size of a P-256 certificate or key in PEM, so that
// rows weigh what real ones do.
func fakePEM(kind string, n int, seed string) []byte {
	var b strings.Builder
	b.WriteString("-----BEGIN " + kind + "-----\n")
	body := strings.Repeat(hex.EncodeToString([]byte(seed)), n/(2*len(seed))+1)[:n]
	for len(body) > 64 {
		b.WriteString(body[:64] + "\n")
		body = body[64:]
	}
	b.WriteString(body + "\n-----END " + kind + "-----\n")
	return []byte(b.String())
}

func benchClusterName(owner, i int) string {
	return "c" + strconv.Itoa(owner) + "x" + strconv.Itoa(i) + "0123456789abcdef"
}

func benchOwner(owner int) string { return "oidc:owner-" + strconv.Itoa(owner) }

// openBenchStore opens the store at url; it is closed when b ends, before
// testdb drops a PostgreSQL schema.
func openBenchStore(b *testing.B, url string) *store.DB {
	b.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// seedClusters creates benchPerOwner clusters for each of benchOwners
// owners, cycling through every status, and returns the number of each
// owner's clusters in LiveStatuses.
func seedClusters(b *testing.B, db *store.DB) (live int) {
	b.Helper()
	ctx := context.Background()
	for o := range benchOwners {
		for i := range benchPerOwner {
			name := benchClusterName(o, i)
			st := store.AllStatuses[i%len(store.AllStatuses)]
			c := &store.Cluster{
				Name: name, Owner: benchOwner(o), OwnerName: "owner-" + strconv.Itoa(o), OwnerGroups: []string{"data", "ops"},
				Status: st, Phase: "phase", Provider: "local",
				Options:        `{"worker_cores":2,"worker_memory":"4 GiB","image":"ghcr.io/dask/dask:latest"}`,
				Shape:          `{"scheduler":{"cores":1,"memory_gib":2},"worker":{"cores":2,"memory_gib":4}}`,
				DesiredWorkers: 4, ReadyWorkers: 4, NextWorkerSeq: 4,
				TLSCert:          fakePEM("CERTIFICATE", 560, name),
				TLSKey:           fakePEM("EC PRIVATE KEY", 300, name),
				SchedulerAddress: "10.0." + strconv.Itoa(o) + "." + strconv.Itoa(i%250) + ":8786",
				DashboardAddress: "http://10.0." + strconv.Itoa(o) + "." + strconv.Itoa(i%250) + ":8787",
			}
			if err := db.CreateCluster(ctx, c); err != nil {
				b.Fatalf("CreateCluster(%s): %v", name, err)
			}
			if o == 0 && (st == store.Pending || st == store.Starting || st == store.Running) {
				live++
			}
		}
	}
	return live
}

func forEachStore(b *testing.B, fn func(b *testing.B, db *store.DB)) {
	for _, s := range testdb.URLs(b) {
		b.Run(s.Name, func(b *testing.B) { fn(b, openBenchStore(b, s.URL)) })
	}
}

// BenchmarkListClusters lists one owner's 1,000 clusters (another owner has
// as many), all of them and the live ones only (the quota check's query).
func BenchmarkListClusters(b *testing.B) {
	ctx := context.Background()
	forEachStore(b, func(b *testing.B, db *store.DB) {
		live := seedClusters(b, db)
		owner := benchOwner(0)
		for _, bc := range []struct {
			name string
			f    store.Filter
			want int
		}{
			{"owner-1000", store.Filter{Owner: owner}, benchPerOwner},
			{"owner-live-" + strconv.Itoa(live), store.Filter{Owner: owner, Statuses: store.LiveStatuses}, live},
		} {
			b.Run(bc.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					list, err := db.ListClusters(ctx, bc.f)
					if err != nil {
						b.Fatal(err)
					}
					if len(list) != bc.want || list[0].Owner != owner || len(list[0].TLSCert) == 0 {
						b.Fatalf("ListClusters returned %d clusters (first %+v), want %d of %s", len(list), list[0], bc.want, owner)
					}
				}
			})
		}
	})
}

// BenchmarkGetCluster reads single clusters by name (the route fallback and
// every per-cluster API call), from a table of 2,000.
func BenchmarkGetCluster(b *testing.B) {
	ctx := context.Background()
	forEachStore(b, func(b *testing.B, db *store.DB) {
		seedClusters(b, db)
		n := benchOwners * benchPerOwner
		nameOf := func(k int) string { return benchClusterName(k%benchOwners, k/benchOwners) }

		b.Run("hit", func(b *testing.B) {
			k := 0
			b.ReportAllocs()
			for b.Loop() {
				name := nameOf(k)
				c, err := db.GetCluster(ctx, name)
				if err != nil || c.Name != name || c.SchedulerAddress == "" {
					b.Fatalf("GetCluster(%s) = %+v, %v", name, c, err)
				}
				if k++; k == n {
					k = 0
				}
			}
		})

		b.Run("hit-parallel", func(b *testing.B) {
			var seed, bad atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				k := int(seed.Add(397)) % n
				for pb.Next() {
					name := nameOf(k)
					if c, err := db.GetCluster(ctx, name); err != nil || c.Name != name {
						bad.Add(1)
					}
					if k++; k == n {
						k = 0
					}
				}
			})
			if v := bad.Load(); v != 0 {
				b.Fatalf("%d reads failed", v)
			}
		})

		b.Run("miss", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c, err := db.GetCluster(ctx, "no-such-cluster"); !errors.Is(err, store.ErrNotFound) || c != nil {
					b.Fatalf("GetCluster(no-such-cluster) = %+v, %v", c, err)
				}
			}
		})
	})
}

// BenchmarkTokenByHash is the store half of every API-token request (auth
// keeps no cache of API tokens), over 1,000 tokens.
func BenchmarkTokenByHash(b *testing.B) {
	ctx := context.Background()
	hashOf := func(i int) string {
		sum := sha256.Sum256([]byte("gw_bench-secret-" + strconv.Itoa(i)))
		return hex.EncodeToString(sum[:])
	}
	forEachStore(b, func(b *testing.B, db *store.DB) {
		hashes := make([]string, benchTokens)
		exp := time.Now().Add(24 * time.Hour)
		for i := range hashes {
			hashes[i] = hashOf(i)
			t := &store.APIToken{ID: "tok-" + strconv.Itoa(i), Owner: benchOwner(i % 50), OwnerName: "owner", Name: "bench " + strconv.Itoa(i),
				Hash: hashes[i], Groups: []string{"data", "ops"}, ExpiresAt: exp}
			if err := db.CreateToken(ctx, t); err != nil {
				b.Fatal(err)
			}
		}

		b.Run("hit", func(b *testing.B) {
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				t, err := db.TokenByHash(ctx, hashes[i])
				if err != nil || t.Hash != hashes[i] || t.ID != "tok-"+strconv.Itoa(i) || len(t.Groups) != 2 {
					b.Fatalf("TokenByHash(%d) = %+v, %v", i, t, err)
				}
				if i++; i == benchTokens {
					i = 0
				}
			}
		})

		b.Run("hit-parallel", func(b *testing.B) {
			var seed, bad atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seed.Add(397)) % benchTokens
				for pb.Next() {
					if t, err := db.TokenByHash(ctx, hashes[i]); err != nil || t.Hash != hashes[i] {
						bad.Add(1)
					}
					if i++; i == benchTokens {
						i = 0
					}
				}
			})
			if v := bad.Load(); v != 0 {
				b.Fatalf("%d reads failed", v)
			}
		})

		b.Run("miss", func(b *testing.B) {
			unknown := hashOf(-1)
			b.ReportAllocs()
			for b.Loop() {
				if t, err := db.TokenByHash(ctx, unknown); !errors.Is(err, store.ErrNotFound) || t != nil {
					b.Fatalf("TokenByHash(unknown) = %+v, %v", t, err)
				}
			}
		})
	})
}
