package store

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkConcurrentAdmission: 8 users admitting clusters at once on
// SQLite while 2 background writers (the reconcile loop) update clusters
// without pause, with this process's writes queued (the store as it is)
// and without (each writer on its own against SQLite's busy handler).
// Reports the admissions' p50, p99 and max.
//
//	go test -run '^$' -bench ConcurrentAdmission -benchtime 1x ./store/
func BenchmarkConcurrentAdmission(b *testing.B) {
	for _, queued := range []bool{true, false} {
		b.Run(fmt.Sprintf("queued=%v", queued), func(b *testing.B) {
			ctx := context.Background()
			db, err := openSQLite(ctx, filepath.Join(b.TempDir(), "b.db"), queued)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			for i := range 2 {
				if err := db.CreateCluster(ctx, &Cluster{Name: fmt.Sprintf("bg%d", i), Owner: "loop", Status: Running}); err != nil {
					b.Fatal(err)
				}
			}
			const users, each = 8, 60
			for range b.N {
				var stop atomic.Bool
				var bgw sync.WaitGroup
				for i := range 2 {
					bgw.Add(1)
					go func() {
						defer bgw.Done()
						for n := 0; !stop.Load() && n < 1_000_000; n++ {
							_, _ = db.UpdateCluster(ctx, fmt.Sprintf("bg%d", i), func(c *Cluster) (Event, error) {
								c.ReadyWorkers++
								return Event{}, nil
							})
						}
					}()
				}
				var mu sync.Mutex
				var lats []time.Duration
				var wg sync.WaitGroup
				for u := range users {
					wg.Add(1)
					go func() {
						defer wg.Done()
						uctx := Interactive(ctx)
						for i := range each {
							c := &Cluster{Name: fmt.Sprintf("u%d-%d-%d", u, i, time.Now().UnixNano()), Owner: fmt.Sprintf("user%d", u), Status: Pending}
							t := time.Now()
							err := db.AdmitCluster(uctx, c, time.Time{}, func(Usage, Totals) error { return nil })
							d := time.Since(t)
							if err != nil {
								b.Error(err)
								return
							}
							mu.Lock()
							lats = append(lats, d)
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				stop.Store(true)
				bgw.Wait()
				slices.Sort(lats)
				at := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))]) / 1e6 }
				b.ReportMetric(at(0.5), "p50-ms")
				b.ReportMetric(at(0.99), "p99-ms")
				b.ReportMetric(at(1), "max-ms")
			}
		})
	}
}
