package build

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gatewayhq/gateway/images"
)

// ErrTooManyBuilds is wrapped by EnsureFor's error when the owner has as
// many builds queued or running as Owner.MaxBuilds allows.
var ErrTooManyBuilds = errors.New("too many environment builds queued or running")

// Owner is who a build is for. Builds are shared (content-addressed): a
// build counts for the owner who started it, and one who asks for a build
// that runs already joins it at no cost.
type Owner struct {
	// ID is the owner's stable id ("" for none: no per-owner rules).
	ID string
	// MaxBuilds bounds the owner's builds queued or running at once
	// (below 0: no bound; 0: no new builds, only images that exist).
	MaxBuilds int
}

// TooManyBuildsError says how many builds the owner has.
type TooManyBuildsError struct {
	Active, Max int
	Hashes      []string // the owner's queued and running builds
}

func (e *TooManyBuildsError) Error() string {
	return fmt.Sprintf("%d environment builds of yours are queued or running, your limit is %d", e.Active, e.Max)
}

func (e *TooManyBuildsError) Is(target error) bool { return target == ErrTooManyBuilds }

// activeOf lists the owner's builds that have not ended. b.mu is held.
func (b *Builder) activeOf(owner string) []string {
	var out []string
	for h, j := range b.jobs {
		if j.owner == owner && !j.finished() {
			out = append(out, h)
		}
	}
	return out
}

// Active lists the owner's builds queued or running on this builder, so
// that a caller can refuse a new one before it reads the build's code.
func (b *Builder) Active(owner string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.activeOf(owner)
}

// checkCap refuses a new build over the owner's MaxBuilds. b.mu is held.
func (b *Builder) checkCap(o Owner) error {
	if o.ID == "" || o.MaxBuilds < 0 {
		return nil
	}
	if active := b.activeOf(o.ID); len(active) >= o.MaxBuilds {
		return &TooManyBuildsError{Active: len(active), Max: o.MaxBuilds, Hashes: active}
	}
	return nil
}

// acquire waits for a build slot for j: at most MaxConcurrentBuilds run at
// once, and at most one of each owner, so that one user's queue cannot
// hold every slot while others wait. Waiting builds get slots in the
// order they asked, skipping those whose owner has one running.
func (b *Builder) acquire(ctx context.Context, j *job) error {
	j.slot = make(chan struct{})
	b.schedMu.Lock()
	b.queue = append(b.queue, j)
	b.dispatchLocked()
	granted := isClosed(j.slot)
	b.schedMu.Unlock()
	if !granted {
		j.step("waiting for a build slot (%d builds run at once, one of each user)", b.cfg.MaxConcurrentBuilds)
	}
	select {
	case <-j.slot:
		return nil
	case <-ctx.Done():
	}
	b.schedMu.Lock()
	defer b.schedMu.Unlock()
	if isClosed(j.slot) { // granted meanwhile
		b.releaseLocked(j)
		return ctx.Err()
	}
	for i, q := range b.queue {
		if q == j {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			break
		}
	}
	return ctx.Err()
}

func (b *Builder) release(j *job) {
	b.schedMu.Lock()
	defer b.schedMu.Unlock()
	b.releaseLocked(j)
}

func (b *Builder) releaseLocked(j *job) {
	b.slotsUsed--
	if j.owner != "" {
		if b.runningBy[j.owner]--; b.runningBy[j.owner] <= 0 {
			delete(b.runningBy, j.owner)
		}
	}
	b.dispatchLocked()
}

// dispatchLocked grants free slots to waiting builds. b.schedMu is held.
func (b *Builder) dispatchLocked() {
	for b.slotsUsed < b.cfg.MaxConcurrentBuilds {
		i := -1
		for k, q := range b.queue {
			if q.owner == "" || b.runningBy[q.owner] == 0 {
				i = k
				break
			}
		}
		if i < 0 {
			return
		}
		j := b.queue[i]
		b.queue = append(b.queue[:i], b.queue[i+1:]...)
		b.slotsUsed++
		if j.owner != "" {
			b.runningBy[j.owner]++
		}
		close(j.slot)
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// spooled is a code layer written to a file under SpoolDir while its
// build waits and runs: a queued build holds a descriptor, not the bytes.
type spooled struct {
	f    *os.File
	path string
}

// spool writes l's tar to a new mode-0600 file in SpoolDir and returns it
// with a layer that reads it.
func (b *Builder) spool(hash string, l images.Layer) (*spooled, images.Layer, error) {
	f, err := os.CreateTemp(b.cfg.SpoolDir, hash[:16]+"-*.tar") // CreateTemp makes it 0600
	if err != nil {
		return nil, images.Layer{}, fmt.Errorf("spool the code: %w", err)
	}
	s := &spooled{f: f, path: f.Name()}
	if err := l.WriteTar(f); err != nil {
		s.remove()
		return nil, images.Layer{}, fmt.Errorf("spool the code: %w", err)
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		s.remove()
		return nil, images.Layer{}, fmt.Errorf("spool the code: %w", err)
	}
	return s, images.Layer{Name: l.Name, Spooled: io.NewSectionReader(f, 0, size)}, nil
}

func (s *spooled) remove() {
	if s == nil {
		return
	}
	_ = s.f.Close()
	_ = os.Remove(s.path)
}

// spoolMaxAge is the age past which New removes spool files: those of a
// gateway that died. A build that runs on holds its file open, so that a
// replica sharing the directory removing its name does not lose its code.
const spoolMaxAge = time.Hour

func sweepSpool(dir string, now time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && now.Sub(fi.ModTime()) > spoolMaxAge {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
