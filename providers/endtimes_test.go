package providers

import (
	"testing"
	"time"
)

func TestEndTimes(t *testing.T) {
	var e EndTimes
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	e.Note("c", "worker-0", t0)
	e.Note("c", "worker-0", t0.Add(-time.Second)) // an older note does not win
	e.Note("c", "worker-1", t0.Add(time.Second))
	e.Note("c", "", t0)                  // nothing
	e.Note("c", "worker-2", time.Time{}) // nothing
	if got, ok := e.StoppedAt("c", "worker-0"); !ok || !got.Equal(t0) {
		t.Errorf("worker-0 = %v, %v; want %v", got, ok, t0)
	}
	if _, ok := e.StoppedAt("c", "worker-0"); ok {
		t.Error("an end was given twice")
	}
	if _, ok := e.StoppedAt("c", "worker-2"); ok {
		t.Error("a zero time was recorded")
	}
	if got, ok := e.StoppedAt("c", "worker-1"); !ok || !got.Equal(t0.Add(time.Second)) {
		t.Errorf("worker-1 = %v, %v", got, ok)
	}
	if len(e.ends) != 0 || len(e.made) != 0 {
		t.Errorf("records left after every answer: %v %v", e.ends, e.made)
	}
	// A record nobody asked for goes after endMemory, at the next note.
	e.Note("old", "scheduler", t0)
	e.made["old"] = time.Now().Add(-endMemory - time.Minute)
	e.Note("new", "scheduler", t0)
	if _, ok := e.StoppedAt("old", "scheduler"); ok {
		t.Error("a stale record was kept")
	}
}
