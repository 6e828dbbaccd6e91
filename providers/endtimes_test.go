package providers

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
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

// With Dir set, an end outlives the process that noted it: a gateway
// killed between StopCluster and recording the stop finds it, once
// restarted, instead of dating the stop when it sees it.
func TestEndTimesSaved(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 123456789, time.UTC)
	before := EndTimes{Dir: dir}
	before.Note("c", "worker-0", t0)
	before.Note("c", "worker-0", t0.Add(-time.Second)) // an older note does not win, saved either
	before.Note("c", "worker-1", t0.Add(time.Second))

	after := EndTimes{Dir: dir} // the restarted gateway's
	for range 2 {               // as often as asked: the name is never reused
		if got, ok := after.StoppedAt("c", "worker-0"); !ok || !got.Equal(t0) {
			t.Errorf("after a restart, worker-0 = %v, %v; want %v", got, ok, t0)
		}
	}
	if got, ok := after.StoppedAt("c", "worker-1"); !ok || !got.Equal(t0.Add(time.Second)) {
		t.Errorf("after a restart, worker-1 = %v, %v", got, ok)
	}
	if _, ok := after.StoppedAt("c", "worker-9"); ok {
		t.Error("an end never noted was found")
	}
	if _, ok := after.StoppedAt("other", "worker-0"); ok {
		t.Error("another cluster's member has the same end")
	}

	// Without Dir nothing is written, and hostile names write nothing
	// anywhere, inside Dir or beside it.
	var memory EndTimes
	memory.Note("c", "worker-2", t0)
	for _, n := range []struct{ cluster, member string }{{"..", "x"}, {"c", "../../escape"}, {"a/b", "w"}, {"c", `w\x`}, {".", "w"}, {"", "w"}, {"c", "w 1"}, {"c", "w\n1"}, {"c\x00", "w"}} {
		before.Note(n.cluster, n.member, t0)
		if _, ok := after.Saved(n.cluster, n.member); ok {
			t.Errorf("an end was saved for %q/%q", n.cluster, n.member)
		}
	}
	var files []string
	_ = filepath.WalkDir(filepath.Dir(dir), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, strings.TrimPrefix(path, filepath.Dir(dir)+"/"))
		}
		return nil
	})
	sort.Strings(files)
	want := []string{filepath.Base(dir) + "/c/worker-0.ended", filepath.Base(dir) + "/c/worker-1.ended"}
	if !slices.Equal(files, want) {
		t.Errorf("files written: %v, want %v", files, want)
	}

	// A save cut short by a crash is no end.
	if err := os.WriteFile(filepath.Join(dir, "c", "worker-3.ended"), []byte("2026-12-06T04:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, ok := after.StoppedAt("c", "worker-3"); ok {
		t.Errorf("a truncated end was read as %v", got)
	}
}
