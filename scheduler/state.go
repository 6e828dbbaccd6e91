package scheduler

import "time"

// clusterState is what the loop keeps in memory of one cluster between
// passes: everything per cluster that is not in the store. The loop's
// clusterTable holds one per cluster it has worked on; ensure is the one
// place a record is made and forget the one place it goes, so that a
// stopped cluster leaves nothing behind.
type clusterState struct {
	// exits are the workers seen exiting on their own (names are never
	// reused, so each is counted once however often it is reported).
	exits map[string]bool
	// lastBusy is the idle clock: when the cluster was last seen busy
	// (zero before its scheduler was first asked).
	lastBusy time.Time
	// answered is the heartbeat clock: its scheduler's last answer (zero
	// before the first).
	answered time.Time
	// unanswered counts the passes in a row whose scheduler did not
	// answer: the wait before the next grows with it (silentWait).
	unanswered int
	// downSince is when adaptive scaling first asked for fewer workers
	// (zero: it does not).
	downSince time.Time
	// quotaNote is the last quota message recorded for adaptive scaling.
	quotaNote string
	// settled is what the last full pass saw, while the sweep watches the
	// cluster (sweep.go); nil while it is the loop's.
	settled *settled
}

// clusterTable is the loop's records, one per cluster, and the sweep's
// index of the settled ones not yet on the due heaps. Its users hold the
// core's lock.
type clusterTable struct {
	m map[string]*clusterState
	// polled are the settled clusters whose streams are not live yet, or
	// whose schedulers are polled: the sweep's work-list.
	polled   map[string]*settled
	nSettled int // records with settled set
}

func newClusterTable() *clusterTable {
	return &clusterTable{m: map[string]*clusterState{}, polled: map[string]*settled{}}
}

// get is the cluster's record, nil if it has none.
func (t *clusterTable) get(name string) *clusterState { return t.m[name] }

// ensure is the cluster's record, made if it has none.
func (t *clusterTable) ensure(name string) *clusterState {
	st := t.m[name]
	if st == nil {
		st = &clusterState{}
		t.m[name] = st
	}
	return st
}

// forget drops the cluster's record.
func (t *clusterTable) forget(name string) {
	if st := t.m[name]; st != nil && st.settled != nil {
		st.settled = nil // what was settled is no longer current
		t.nSettled--
	}
	delete(t.m, name)
	delete(t.polled, name)
}

// settledOf is what the sweep holds of the cluster, nil if not settled.
func (t *clusterTable) settledOf(name string) *settled {
	if st := t.m[name]; st != nil {
		return st.settled
	}
	return nil
}

// settle hands the cluster to the sweep, on its work-list until it sees
// the cluster's stream live.
func (t *clusterTable) settle(name string, s *settled) {
	st := t.ensure(name)
	if st.settled == nil {
		t.nSettled++
	}
	st.settled, s.st = s, st
	t.polled[name] = s
}

// unsettle takes the cluster from the sweep and returns what it held.
func (t *clusterTable) unsettle(name string) *settled {
	st := t.m[name]
	if st == nil || st.settled == nil {
		return nil
	}
	s := st.settled
	st.settled = nil
	t.nSettled--
	return s
}

// settledCount is how many clusters the sweep holds.
func (t *clusterTable) settledCount() int { return t.nSettled }

// eachSettled calls fn for every settled cluster.
func (t *clusterTable) eachSettled(fn func(name string, s *settled)) {
	for name, st := range t.m {
		if st.settled != nil {
			fn(name, st.settled)
		}
	}
}

// current says whether s is still what the sweep holds of its cluster
// (c.mu): not taken back by a full pass, nor settled anew, nor forgotten.
// It spares the sweep a lookup per cluster.
func (s *settled) current() bool { return s.st != nil && s.st.settled == s }

// lastBusy is the cluster's idle clock, zero if it has none (c.mu).
func (c *Core) lastBusy(name string) time.Time {
	if st := c.clusters.get(name); st != nil {
		return st.lastBusy
	}
	return time.Time{}
}
