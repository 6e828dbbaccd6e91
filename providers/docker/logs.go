package docker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/gatewayhq/gateway/internal/logtail"
	"github.com/gatewayhq/gateway/providers"
)

// maxLogBytes is how much of each member's log is read, from the end.
const maxLogBytes = 4 << 20

// Logs implements providers.LogReader: the logs of the cluster's live
// containers, after what was saved of removed ones.
func (p *Provider) Logs(ctx context.Context, cluster string, tail int, w io.Writer) error {
	if err := checkCluster(cluster); err != nil {
		return fmt.Errorf("%w: %w", err, providers.ErrNotFound)
	}
	list, err := p.containers(ctx, cluster, "")
	if err != nil {
		return err
	}
	live := map[string]string{} // member -> container id
	for _, c := range list {
		live[c.Labels[labelMember]] = c.ID
	}
	saved := map[string]string{} // member -> file
	if p.cfg.Dir != "" {
		files, _ := filepath.Glob(filepath.Join(p.cfg.Dir, cluster, "*.log"))
		for _, f := range files {
			saved[strings.TrimSuffix(filepath.Base(f), ".log")] = f
		}
	}
	names := make([]string, 0, len(live)+len(saved))
	for m := range live {
		names = append(names, m)
	}
	for m := range saved {
		if _, ok := live[m]; !ok {
			names = append(names, m)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("docker provider: no logs for cluster %s: %w", cluster, providers.ErrNotFound)
	}
	sort.Slice(names, func(i, j int) bool { // scheduler first, then workers in order
		a, b := names[i], names[j]
		if (a == "scheduler") != (b == "scheduler") {
			return a == "scheduler"
		}
		return a < b
	})
	for _, member := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		text, cut, err := p.memberLog(ctx, live[member], saved[member], tail)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if _, err := fmt.Fprintf(w, "[%s] (log unavailable: %v)\n", member, err); err != nil {
				return err
			}
		}
		if cut {
			if _, err := fmt.Fprintf(w, "[%s] (earlier lines omitted: only the last %d MiB are shown)\n", member, maxLogBytes>>20); err != nil {
				return err
			}
		}
		for _, line := range logtail.LastLines(text, tail) {
			if line == "" {
				continue
			}
			if _, err := fmt.Fprintf(w, "[%s] %s\n", member, line); err != nil {
				return err
			}
		}
	}
	return nil
}

// memberLog is the end of one member's log: the saved file of its earlier
// containers, then its live container's, maxLogBytes in all.
func (p *Provider) memberLog(ctx context.Context, id, file string, tail int) (string, bool, error) {
	var text string
	var cut bool
	if id != "" {
		t, c, err := p.containerLog(ctx, id, tail, maxLogBytes)
		if err != nil {
			return "", false, err
		}
		text, cut = t, c
	}
	if file == "" || cut {
		return text, cut, nil
	}
	if tail > 0 && strings.Count(text, "\n") >= tail {
		return text, false, nil
	}
	older, c := logtail.ReadEnd(file, int64(maxLogBytes-len(text)))
	return older + text, c, nil
}

// containerLog reads a container's log (the last tail lines when tail > 0),
// stdout and stderr merged, keeping the last limit bytes; it reports
// whether anything was left out.
func (p *Provider) containerLog(ctx context.Context, id string, tail int, limit int) (string, bool, error) {
	opts := container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "all"}
	if tail > 0 {
		opts.Tail = strconv.Itoa(tail)
	}
	rc, err := p.cli.ContainerLogs(ctx, id, opts)
	if err != nil {
		return "", false, fmt.Errorf("docker provider: read log: %w", err)
	}
	defer rc.Close()
	tb := &tailBuffer{max: limit}
	// Members run without a TTY: the engine multiplexes stdout and
	// stderr into one stream, which stdcopy takes apart.
	if _, err := stdcopy.StdCopy(tb, tb, rc); err != nil {
		return "", false, fmt.Errorf("docker provider: read log: %w", err)
	}
	text, cut := tb.text()
	return text, cut, nil
}

// saveLog appends a container's log to <Dir>/<cluster>/<member>.log before
// the container is removed, so that the log outlives it.
func (p *Provider) saveLog(ctx context.Context, cluster, member, id string) {
	if p.cfg.Dir == "" || !providers.PlainName(cluster) || !providers.PlainName(member) {
		return
	}
	text, cut, err := p.containerLog(ctx, id, 0, maxLogBytes)
	if err != nil {
		p.log.Warn("cannot save a member's log", "cluster", cluster, "member", member, "err", err)
		return
	}
	if text == "" {
		return
	}
	dir := filepath.Join(p.cfg.Dir, cluster)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		p.log.Warn("cannot save a member's log", "cluster", cluster, "member", member, "err", err)
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, member+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.log.Warn("cannot save a member's log", "cluster", cluster, "member", member, "err", err)
		return
	}
	defer f.Close()
	if cut {
		text = fmt.Sprintf("(earlier lines omitted: only the last %d MiB were kept)\n", maxLogBytes>>20) + text
	}
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	if _, err := f.WriteString(text); err != nil {
		p.log.Warn("cannot save a member's log", "cluster", cluster, "member", member, "err", err)
	}
}

// tailBuffer keeps the last max bytes written to it, so that a log of any
// size is read in bounded memory.
type tailBuffer struct {
	max int
	buf []byte
	cut bool
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.buf = append(t.buf, b...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
		t.cut = true
	}
	return len(b), nil
}

// text returns what was kept, from a line start when something was cut.
func (t *tailBuffer) text() (string, bool) {
	b := t.buf
	if len(b) > t.max {
		b = b[len(b)-t.max:]
		t.cut = true
	}
	if t.cut {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b), t.cut
}
