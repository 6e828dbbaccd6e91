package integration

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// lifetimes watches the processes of a gateway's members from outside the
// gateway (/proc, every 25 ms) and records when each was first and last
// seen alive: what the usage ledger must agree with.
type lifetimes struct {
	mu    sync.Mutex
	first map[string]time.Time // cluster/member -> first seen
	last  map[string]time.Time
	stop  context.CancelFunc
	done  chan struct{}
}

func watchLifetimes(gatewayID string) *lifetimes {
	ctx, cancel := context.WithCancel(context.Background())
	l := &lifetimes{first: map[string]time.Time{}, last: map[string]time.Time{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			now := time.Now()
			seen := memberNames(gatewayID)
			l.mu.Lock()
			for m := range seen {
				if _, ok := l.first[m]; !ok {
					l.first[m] = now
				}
				l.last[m] = now
			}
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

// seconds returns each member's observed lifetime, after stopping the watch.
func (l *lifetimes) seconds() map[string]float64 {
	l.stop()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]float64{}
	for m, f := range l.first {
		out[m] = l.last[m].Sub(f).Seconds()
	}
	return out
}

// checkLedger compares the usage ledger, read through the admin usage API
// as an operator would, with the lifetimes of the worker processes watched
// from outside: per cluster and in total. A worker counted twice or lost
// would be off by its whole lifetime (tens of seconds here); the
// tolerance covers the watch's granularity, the moments between a
// process's start or end and its record, and, for a worker that ended
// while the gateway was down, its Python teardown after its last log line
// (by which the local backend dates such an end).
func checkLedger(t *testing.T, gatewayURL, adminToken string, observed map[string]float64) (ledgerTotal, observedTotal float64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, gatewayURL+"/api/v1/admin/usage?by=cluster&since=2000-01-01", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep struct {
		Rows []struct {
			Cluster   string  `json:"cluster"`
			VCPUHours float64 `json:"vcpu_hours"`
			Running   bool    `json:"running"`
		} `json:"rows"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&rep) != nil {
		t.Fatalf("admin usage: %s", resp.Status)
	}
	perCluster := map[string]float64{}
	for m, sec := range observed {
		cluster, member, _ := strings.Cut(m, "/")
		if strings.HasPrefix(member, "worker-") { // one thread: one vCPU; schedulers count none locally
			perCluster[cluster] += sec
			observedTotal += sec
		}
	}
	ledger := map[string]float64{}
	for _, r := range rep.Rows {
		ledger[r.Cluster] = r.VCPUHours * 3600
		ledgerTotal += r.VCPUHours * 3600
		if r.Running {
			t.Errorf("cluster %s still counting after every process ended", r.Cluster)
		}
	}
	var names []string
	for c := range perCluster {
		names = append(names, c)
	}
	for c := range ledger {
		if _, ok := perCluster[c]; !ok {
			names = append(names, c)
		}
	}
	sort.Strings(names)
	for _, c := range names {
		if d := ledger[c] - perCluster[c]; math.Abs(d) > 4 {
			t.Errorf("cluster %s: ledger %.1f worker-seconds, processes lived %.1f (off by %.1f)", c, ledger[c], perCluster[c], d)
		}
	}
	if d := math.Abs(ledgerTotal - observedTotal); d > 5+0.005*observedTotal {
		t.Errorf("ledger total %.1f worker-seconds, processes lived %.1f in total", ledgerTotal, observedTotal)
	}
	return ledgerTotal, observedTotal
}
