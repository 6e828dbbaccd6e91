package build

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// pushCounter is a transport that records which blobs a push uploaded:
// go-containerregistry asks the registry for each blob first (HEAD, or a
// cross-repository mount) and uploads only the ones it lacks, ending each
// upload with a PUT that names the blob's digest.
type pushCounter struct {
	next http.RoundTripper

	mu       sync.Mutex
	uploaded map[string]bool
}

func newPushCounter(next http.RoundTripper) *pushCounter {
	return &pushCounter{next: next, uploaded: map[string]bool{}}
}

func (p *pushCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := p.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodPut && resp.StatusCode < 300 {
		if d := req.URL.Query().Get("digest"); d != "" {
			p.mu.Lock()
			p.uploaded[d] = true
			p.mu.Unlock()
		}
	}
	return resp, err
}

// pushSummary is what a push did with an image's layers.
type pushSummary struct {
	Layers, Uploaded int
	UploadedBytes    int64
	ReusedBytes      int64
}

func (s pushSummary) String() string {
	return fmt.Sprintf("%s of the image: %d reused (%s), %d uploaded (%s), then the config and manifest",
		plural(s.Layers, "layer"), s.Layers-s.Uploaded, size(s.ReusedBytes), s.Uploaded, size(s.UploadedBytes))
}

// PushStep is what a build's push did with its image's layers, read
// back from the step that says it (pushSummary.String): how many the
// registry had already (reused) and how many were uploaded, with their
// sizes as the step writes them.
type PushStep struct {
	Layers, Reused, Uploaded int
	ReusedSize, UploadedSize string
}

var rePushStep = regexp.MustCompile(`^(\d+) layers? of the image: (\d+) reused \(([^()]*)\), (\d+) uploaded \(([^()]*)\), then the config and manifest$`)

// ParsePushStep reads a build's step; ok is false for any step but the
// one a push writes.
func ParsePushStep(step string) (p PushStep, ok bool) {
	m := rePushStep.FindStringSubmatch(step)
	if m == nil {
		return PushStep{}, false
	}
	p.Layers, _ = strconv.Atoi(m[1])
	p.Reused, _ = strconv.Atoi(m[2])
	p.Uploaded, _ = strconv.Atoi(m[4])
	p.ReusedSize, p.UploadedSize = m[3], m[5]
	return p, true
}

// summary counts img's layers the push uploaded and those the registry
// had already.
func (p *pushCounter) summary(img v1.Image) (pushSummary, error) {
	m, err := img.Manifest()
	if err != nil {
		return pushSummary{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var s pushSummary
	seen := map[string]bool{}
	for _, l := range m.Layers {
		d := l.Digest.String()
		if seen[d] {
			continue
		}
		seen[d] = true
		s.Layers++
		if p.uploaded[d] {
			s.Uploaded++
			s.UploadedBytes += l.Size
		} else {
			s.ReusedBytes += l.Size
		}
	}
	return s, nil
}

// size prints a byte count in B, KiB or MiB.
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return mib(n)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
