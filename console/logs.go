package console

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
)

// A cluster's page follows its logs through its event stream: the
// backends answer the last lines of each member's log (Clusters.Logs),
// not what is new, so the stream reads them again at each interval and
// sends the lines the previous read did not have, member by member.

// maxFollows is how many streams of one user may follow logs at once:
// each reads the logs again at every interval.
const maxFollows = 8

// followEvery is how many generation intervals (Config.Generations) a
// follow waits between two reads of the logs: a read is a file or an API
// call per member.
const followEvery = 2

// followTail is how many lines of each member's log a follow read asks
// for after the first: the news of an interval, and the overlap with the
// previous read that tells them.
const followTail = 200

// follows counts each user's streams that follow logs.
type follows struct {
	mu sync.Mutex
	n  map[string]int
}

func (f *follows) take(owner string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	if f.n[owner] >= maxFollows {
		return false
	}
	f.n[owner]++
	return true
}

func (f *follows) give(owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[owner]--; f.n[owner] <= 0 {
		delete(f.n, owner)
	}
}

// clusterStream checks that a cluster's stream may start: the cluster is
// the user's (else the API's answer, 404 for another user's).
func (s *Server) clusterStream(w http.ResponseWriter, r *http.Request, u *auth.User, name string) (owner string, ok bool) {
	_, a, err := s.reach(r.Context(), u, name)
	if err == nil {
		return a.Owner, true
	}
	if errors.Is(err, errNotTheirs) {
		http.Error(w, "no such cluster", http.StatusNotFound)
		return "", false
	}
	if status, msg, ok := s.cfg.Explain(r, err); ok {
		http.Error(w, msg, status)
	}
	return "", false
}

// logStream is one stream's following of a cluster's logs.
type logStream struct {
	s        *Server
	owner    string
	name     string
	tail     int // the first read's
	first    bool
	ticker   *time.Ticker
	follower logFollower
	release  func()
}

// followLogs starts following the cluster's logs for a stream; false: it
// answered why not.
func (s *Server) followLogs(w http.ResponseWriter, r *http.Request, u *auth.User, owner, name, tail string) (*logStream, bool) {
	n := logTail
	if tail != "" {
		v, err := strconv.Atoi(tail)
		if err != nil || v < 1 || v > maxTail {
			http.Error(w, "tail must be a whole number of lines from 1 to "+strconv.Itoa(maxTail), http.StatusUnprocessableEntity)
			return nil, false
		}
		n = v
	}
	if !s.create.follows.take(u.Owner()) {
		http.Error(w, "too many pages follow logs: close some", http.StatusTooManyRequests)
		return nil, false
	}
	// owner is the cluster's, whose logs are read; the follows count
	// against the viewer.
	viewer := u.Owner()
	l := &logStream{s: s, owner: owner, name: name, tail: n, first: true, ticker: time.NewTicker(followEvery * s.cfg.Generations),
		release: func() { s.create.follows.give(viewer) }}
	return l, true
}

func (l *logStream) close() {
	l.ticker.Stop()
	l.release()
}

// tick is when to read the logs again; nil (never) when not following.
func (l *logStream) tick() <-chan time.Time {
	if l == nil {
		return nil
	}
	return l.ticker.C
}

// read reads the logs and returns the event to send, if any: the first
// read's lines all ("logs-reset"), then each read's new lines ("logs").
func (l *logStream) read(ctx context.Context) []byte {
	tail := followTail
	if l.first {
		tail = l.tail
	}
	var buf bytes.Buffer
	if err := l.s.clusters.Logs(ctx, l.owner, l.name, tail, &buf); err != nil {
		l.s.log.Debug("console: reading logs to follow", "cluster", l.name, "err", err)
		return nil
	}
	news := l.follower.news(buf.String())
	if l.first {
		l.first = false
		return sseEvent("logs-reset", strings.Join(news, "\n"))
	}
	if len(news) == 0 {
		return nil
	}
	return sseEvent("logs", strings.Join(news, "\n"))
}

// logFollower tells the new lines of a read of the logs from the
// previous read, member by member (each line starts "[member] ").
type logFollower struct{ seen map[string][]string }

// overlapWindow is how many of the previous read's last lines are looked
// for in a read that does not start where the previous one went on
// (a backend's note above a cut log, a gap of more lines than a read).
const overlapWindow = 8

func (f *logFollower) news(text string) []string {
	if f.seen == nil {
		f.seen = map[string][]string{}
	}
	cur := map[string][]string{}
	var order []string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == "" {
			continue
		}
		m := ""
		if strings.HasPrefix(line, "[") {
			m, _, _ = strings.Cut(line, "] ")
		}
		if _, ok := cur[m]; !ok {
			order = append(order, m)
		}
		cur[m] = append(cur[m], line)
	}
	var out []string
	for _, m := range order {
		out = append(out, cur[m][seenUpTo(f.seen[m], cur[m]):]...)
		f.seen[m] = cur[m]
	}
	return out
}

// seenUpTo is how many of cur's first lines prev already had: the longest
// end of prev that cur starts with (repeated lines stay apart); else the
// last place in cur of prev's last lines (as many of them as are found
// together, up to overlapWindow); else none.
func seenUpTo(prev, cur []string) int {
	for k := min(len(prev), len(cur)); k > 0; k-- {
		if slices.Equal(prev[len(prev)-k:], cur[:k]) {
			return k
		}
	}
	for w := min(len(prev), overlapWindow); w > 0; w-- {
		last := prev[len(prev)-w:]
		for j := len(cur) - w; j >= 0; j-- {
			if slices.Equal(cur[j:j+w], last) {
				return j + w
			}
		}
	}
	return 0
}
