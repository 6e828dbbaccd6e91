package providers

import (
	"sync"
	"time"
)

// endMemory is how long EndTimes keeps a cluster's record that nobody
// asked for (the caller died between StopCluster and asking).
const endMemory = 3 * time.Hour

// EndTimes is what a backend keeps to implement StopTimes: when each member
// stopped by StopCluster ended. Each answer is given once, and a cluster's
// record is forgotten after endMemory, so that nothing accumulates. The
// zero value is ready to use.
type EndTimes struct {
	mu   sync.Mutex
	ends map[string]map[string]time.Time // cluster -> member -> end
	made map[string]time.Time            // cluster -> when its record began
}

// Note records that member of cluster ended at at; the latest of several
// notes wins. An empty member or a zero time records nothing.
func (e *EndTimes) Note(cluster, member string, at time.Time) {
	if member == "" || at.IsZero() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	for c, made := range e.made {
		if now.Sub(made) > endMemory {
			delete(e.ends, c)
			delete(e.made, c)
		}
	}
	if e.ends == nil {
		e.ends, e.made = map[string]map[string]time.Time{}, map[string]time.Time{}
	}
	if e.ends[cluster] == nil {
		e.ends[cluster], e.made[cluster] = map[string]time.Time{}, now
	}
	if at.After(e.ends[cluster][member]) {
		e.ends[cluster][member] = at
	}
}

// StoppedAt implements StopTimes: the noted end, once.
func (e *EndTimes) StoppedAt(cluster, member string) (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.ends[cluster][member]
	delete(e.ends[cluster], member)
	if len(e.ends[cluster]) == 0 {
		delete(e.ends, cluster)
		delete(e.made, cluster)
	}
	return t, ok
}
