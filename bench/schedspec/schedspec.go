// Package schedspec is what a benchmark schedule stores: its cron
// expression, its run options and its suite's files, each checked before
// it is stored and again before the gateway runs it. It imports nothing of
// the gateway, so that the API and the scheduler can both use it.
package schedspec

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Limits on a stored suite.
const (
	MaxSuiteBytes = 1 << 20 // all files, unpacked
	MaxSuiteFiles = 200
)

var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Next is the first time after t that the five-field cron expression
// (minute hour day-of-month month day-of-week, in UTC; or @daily,
// @hourly, ...) names.
func Next(expr string, t time.Time) (time.Time, error) {
	s, err := parser.Parse(strings.TrimSpace(expr))
	if err != nil {
		return time.Time{}, fmt.Errorf("cron %q: %w (want five fields: minute hour day-of-month month day-of-week, e.g. '0 2 * * *' for 02:00 UTC every day)", expr, err)
	}
	n := s.Next(t.UTC())
	if n.IsZero() {
		return time.Time{}, fmt.Errorf("cron %q never fires", expr)
	}
	return n, nil
}

// Env is one environment of a schedule, resolved when it was made: what
// its clusters run.
type Env struct {
	Label    string            `json:"label"`
	Name     string            `json:"name"`
	Hash     string            `json:"hash,omitempty"`
	Options  map[string]any    `json:"options"`
	Versions map[string]string `json:"versions,omitempty"`
}

// Options are a schedule's run options.
type Options struct {
	Envs      []Env          `json:"envs"`
	Repeat    int            `json:"repeat"`
	Workers   int            `json:"workers"`
	Shape     map[string]any `json:"shape,omitempty"`
	Select    string         `json:"select,omitempty"`
	Timeout   string         `json:"timeout,omitempty"`
	Window    string         `json:"window,omitempty"`    // the regression check's window (default 7d)
	Threshold float64        `json:"threshold,omitempty"` // the check's threshold, a fraction (default 0.10)
}

// Check validates options as the API receives them.
func (o *Options) Check() error {
	if len(o.Envs) == 0 || len(o.Envs) > 2 {
		return fmt.Errorf("a schedule runs one or two environments, not %d", len(o.Envs))
	}
	if o.Repeat < 1 || o.Repeat > 1000 {
		return fmt.Errorf("repeat %d: give 1 to 1000", o.Repeat)
	}
	if o.Workers < 1 || o.Workers > 1000 {
		return fmt.Errorf("workers %d: give 1 to 1000", o.Workers)
	}
	if o.Select != "" {
		if _, err := regexp.Compile(o.Select); err != nil {
			return fmt.Errorf("select %q: %w", o.Select, err)
		}
	}
	if o.Timeout != "" {
		if d, err := time.ParseDuration(o.Timeout); err != nil || d <= 0 {
			return fmt.Errorf("timeout %q must be a positive duration like 10m", o.Timeout)
		}
	}
	if o.Threshold < 0 || o.Threshold > 10 {
		return fmt.Errorf("threshold %v must be a fraction like 0.1", o.Threshold)
	}
	for i, e := range o.Envs {
		if e.Name == "" {
			return fmt.Errorf("environment %d has no name", i+1)
		}
	}
	return nil
}

// Encode is the options as the store keeps them.
func (o Options) Encode() (string, error) {
	b, err := json.Marshal(o)
	return string(b), err
}

// Decode reads stored options.
func Decode(s string) (Options, error) {
	var o Options
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		return o, fmt.Errorf("schedule options: %w", err)
	}
	return o, o.Check()
}

var fileName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*\.py$`)

// PackSuite zips the suite's top-level Python files (the bench_*.py files
// and the modules next to them they may import), refusing symlinks,
// other files' names and sizes over the limits.
func PackSuite(dir string) ([]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("suite %s: %w", dir, err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	total, files, benches := 0, 0, 0
	for _, e := range ents {
		if !fileName.MatchString(e.Name()) {
			continue
		}
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("suite %s: %s is not a regular file (symlinks are not sent)", dir, e.Name())
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("suite %s: %w", dir, err)
		}
		total += len(b)
		files++
		if total > MaxSuiteBytes || files > MaxSuiteFiles {
			return nil, fmt.Errorf("suite %s: over %d files or %d KiB of Python: a schedule keeps small suites only", dir, MaxSuiteFiles, MaxSuiteBytes>>10)
		}
		if strings.HasPrefix(e.Name(), "bench_") {
			benches++
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.Name(), Method: zip.Deflate, Modified: time.Unix(0, 0).UTC()})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(b); err != nil {
			return nil, err
		}
	}
	if benches == 0 {
		return nil, fmt.Errorf("suite %s has no bench_*.py file", dir)
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ErrBadSuite is a stored suite that is not what PackSuite makes.
var ErrBadSuite = errors.New("bad suite archive")

// SuiteFiles reads a packed suite, checking every name and size whatever
// the archive claims.
func SuiteFiles(archive []byte) (map[string][]byte, error) {
	if len(archive) > 2*MaxSuiteBytes {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadSuite, len(archive))
	}
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSuite, err)
	}
	if len(zr.File) > MaxSuiteFiles {
		return nil, fmt.Errorf("%w: %d files", ErrBadSuite, len(zr.File))
	}
	out := map[string][]byte{}
	total := int64(0)
	for _, f := range zr.File {
		if !fileName.MatchString(f.Name) || !f.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: %q is not a plain Python file name", ErrBadSuite, f.Name)
		}
		if _, dup := out[f.Name]; dup {
			return nil, fmt.Errorf("%w: %s twice", ErrBadSuite, f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadSuite, f.Name, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, MaxSuiteBytes-total+1))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadSuite, f.Name, err)
		}
		total += int64(len(b))
		if total > MaxSuiteBytes {
			return nil, fmt.Errorf("%w: over %d KiB unpacked", ErrBadSuite, MaxSuiteBytes>>10)
		}
		out[f.Name] = b
	}
	benches := 0
	for n := range out {
		if strings.HasPrefix(n, "bench_") {
			benches++
		}
	}
	if benches == 0 {
		return nil, fmt.Errorf("%w: no bench_*.py file", ErrBadSuite)
	}
	return out, nil
}

// WriteSuite unpacks a suite into a new folder under parent and returns it.
func WriteSuite(archive []byte, parent, name string) (string, error) {
	files, err := SuiteFiles(archive)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(parent, "suite-")
	if err != nil {
		return "", err
	}
	if name != "" && fileName.MatchString(name+".py") {
		// The suite keeps its name (the runner records the folder's).
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			return "", err
		}
		dir = d
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), files[n], 0o600); err != nil {
			return "", err
		}
	}
	return dir, nil
}
