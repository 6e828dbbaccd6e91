package providers

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// endMemory is how long EndTimes keeps a cluster's record that nobody
// asked for (the caller died between StopCluster and asking).
const endMemory = 3 * time.Hour

// endSuffix names the file, beside a member's log, that keeps when the
// member ended.
const endSuffix = ".ended"

// EndTimes is what a backend keeps to implement StopTimes: when each member
// stopped by StopCluster ended. Each answer from memory is given once, and
// a cluster's record is forgotten after endMemory, so that nothing
// accumulates. The zero value is ready to use.
//
// A backend whose machines leave no trace once stopped (local processes,
// removed containers) sets Dir: each end is then also written to
// Dir/<cluster>/<member>.ended, beside the member's saved log. A gateway
// killed after StopCluster returned but before the stop was recorded
// would otherwise, once restarted, date the stop when it saw it, and
// charge the time it was down to every member it had just stopped.
type EndTimes struct {
	Dir string

	mu   sync.Mutex
	ends map[string]map[string]time.Time // cluster -> member -> end
	made map[string]time.Time            // cluster -> when its record began
}

// Note records that member of cluster ended at at; the latest of several
// notes wins. An empty member or a zero time records nothing. With Dir
// set it is also saved; a failed save only loses the precision a restart
// would need, so it is not reported.
func (e *EndTimes) Note(cluster, member string, at time.Time) {
	if member == "" || at.IsZero() {
		return
	}
	e.save(cluster, member, at)
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

// StoppedAt implements StopTimes: the noted end, once from memory; with
// Dir set, the saved end as often as asked (names are never reused, so a
// saved end is never another member's).
func (e *EndTimes) StoppedAt(cluster, member string) (time.Time, bool) {
	e.mu.Lock()
	t, ok := e.ends[cluster][member]
	delete(e.ends[cluster], member)
	if len(e.ends[cluster]) == 0 {
		delete(e.ends, cluster)
		delete(e.made, cluster)
	}
	e.mu.Unlock()
	if ok {
		return t, true
	}
	return e.Saved(cluster, member)
}

// Saved returns the end saved for the member under Dir, if any.
func (e *EndTimes) Saved(cluster, member string) (time.Time, bool) {
	path, ok := e.path(cluster, member)
	if !ok {
		return time.Time{}, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}, false // cut short by a crash while writing
	}
	return t, true
}

func (e *EndTimes) save(cluster, member string, at time.Time) {
	path, ok := e.path(cluster, member)
	if !ok {
		return
	}
	if old, ok := e.Saved(cluster, member); ok && !at.After(old) {
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return
	}
	// Written whole or not at all: a crash mid-write must not leave a
	// truncated time that parses.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(at.UTC().Format(time.RFC3339Nano)+"\n"), 0o600); err != nil {
		return
	}
	_ = os.Rename(tmp, path)
}

// path is where the member's end is saved; names that are not a single
// path element get none.
func (e *EndTimes) path(cluster, member string) (string, bool) {
	if e.Dir == "" || !PlainName(cluster) || !PlainName(member) {
		return "", false
	}
	return filepath.Join(e.Dir, cluster, member+endSuffix), true
}

// PlainName reports whether a cluster or member name can name a file or
// folder of a backend's own (a log, a saved end) as it is: one path
// element that escapes nothing, with no space, NUL or line break.
func PlainName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\ \x00\n")
}
