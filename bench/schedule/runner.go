package schedule

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/bench/schedspec"
	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/store"
)

const grantPrefix = "gwsched_"

type inProcessKey struct{}

// Grants are the credentials of scheduled runs: one per firing, for the
// schedule's owner, valid while the firing runs and only on requests made
// in process (a copy sent over the network would not be accepted).
type Grants struct {
	mu    sync.Mutex
	users map[string]auth.User
}

// NewGrants makes an empty set of grants.
func NewGrants() *Grants { return &Grants{users: map[string]auth.User{}} }

// Wrap returns an authenticator that accepts the grants, and passes
// every other credential to next.
func (g *Grants) Wrap(next auth.Authenticator) auth.Authenticator { return grantAuth{g: g, next: next} }

type grantAuth struct {
	g    *Grants
	next auth.Authenticator
}

func (a grantAuth) Authenticate(ctx context.Context, token string) (*auth.User, error) {
	if !strings.HasPrefix(token, grantPrefix) {
		return a.next.Authenticate(ctx, token)
	}
	if ctx.Value(inProcessKey{}) == nil {
		return nil, fmt.Errorf("%w: this credential is not valid here", auth.ErrInvalid)
	}
	a.g.mu.Lock()
	u, ok := a.g.users[token]
	a.g.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: the scheduled run has ended", auth.ErrInvalid)
	}
	return &u, nil
}

// Forget passes a revocation on to the credentials the wrapper wraps
// (auth.APITokens remembers tokens for a second): without it a token
// revoked through the API or the console kept working here for that
// second.
func (a grantAuth) Forget() {
	if f, ok := a.next.(interface{ Forget() }); ok {
		f.Forget()
	}
}

func (g *Grants) issue(u auth.User) (string, func(), error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	tok := grantPrefix + hex.EncodeToString(b[:])
	g.mu.Lock()
	g.users[tok] = u
	g.mu.Unlock()
	return tok, func() {
		g.mu.Lock()
		delete(g.users, tok)
		g.mu.Unlock()
	}, nil
}

// inProcess sends requests straight to the API handler.
type inProcess struct{ h http.Handler }

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(context.WithValue(req.Context(), inProcessKey{}, true))
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RemoteAddr = "127.0.0.1:0"
	r.RequestURI = r.URL.RequestURI()
	w := &recorder{header: http.Header{}}
	t.h.ServeHTTP(w, r)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(bytes.NewReader(w.body.Bytes())), ContentLength: int64(w.body.Len()), Request: req,
	}, nil
}

type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }
func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(p)
}

// Runner runs a schedule's suite as its owner through the API.
type Runner struct {
	API       http.Handler // the gateway's API and dashboard proxy
	PublicURL string
	Grants    *Grants
	// Python, when set (bench.python), runs suites' clients on this host;
	// otherwise they run next to each cluster's scheduler, in the
	// cluster's own software (bench.Agent), and this host needs no Python.
	Python   string
	Provider string
	Version  string
	TempDir  string // where suites are unpacked ("" for the system's)
	Log      *slog.Logger
}

// Run implements RunFunc.
func (r *Runner) Run(ctx context.Context, sch *store.BenchSchedule) (string, error) {
	o, err := schedspec.Decode(sch.Options)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(r.TempDir, "bench-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	suite, err := schedspec.WriteSuite(sch.SuiteArchive, tmp, sch.Suite)
	if err != nil {
		return "", err
	}
	tok, revoke, err := r.Grants.issue(auth.User{ID: sch.Owner, Name: sch.OwnerName, Groups: sch.OwnerGroups, Via: "bench-schedule",
		Expires: time.Now().Add(24 * time.Hour)})
	if err != nil {
		return "", err
	}
	defer revoke()
	hc := &http.Client{Transport: inProcess{h: r.API}}
	c := client.NewWithHTTP(r.PublicURL, tok, hc)
	var re *regexp.Regexp
	if o.Select != "" {
		if re, err = regexp.Compile(o.Select); err != nil {
			return "", err
		}
	}
	timeout := 10 * time.Minute
	if o.Timeout != "" {
		if d, err := time.ParseDuration(o.Timeout); err == nil && d > 0 {
			timeout = d
		}
	}
	envs := make([]bench.Env, 0, len(o.Envs))
	for _, e := range o.Envs {
		envs = append(envs, bench.Env{Label: e.Label, Name: e.Name, Options: e.Options, Python: r.Python, Hash: e.Hash, Versions: e.Versions})
	}
	var inCluster *bench.InCluster
	if r.Python == "" {
		inCluster = &bench.InCluster{Token: tok, HTTP: hc, SuiteZip: sch.SuiteArchive}
	}
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	progress := &lineLogger{log: log.With("schedule", sch.ID)}
	defer progress.Flush()
	out, err := bench.Run(ctx, bench.Config{
		Suite: suite, SuiteName: sch.Suite, Envs: envs, Repeat: o.Repeat, Workers: o.Workers, Shape: o.Shape,
		Pattern: re, Timeout: timeout, Clusters: c, Provider: r.Provider, Progress: progress,
		InCluster: inCluster,
		// A gateway stopping must not wait long: what is not stopped yet
		// the gateway's own shutdown or reaper stops.
		StopWait: 30 * time.Second,
		Recorder: bench.APIRecorder{API: c, ScheduleID: sch.ID, GatewayVersion: r.Version,
			Options: map[string]any{"select": o.Select, "timeout": timeout.String(), "schedule": sch.ID}},
	})
	if err == nil && out.Failed() > 0 {
		err = fmt.Errorf("%d of %d samples did not succeed", out.Failed(), len(out.Samples))
	}
	if err == nil && len(out.StopErrors) > 0 {
		err = fmt.Errorf("%d clusters could not be stopped", len(out.StopErrors))
	}
	return out.RunID, err
}

// lineLogger logs a run's progress lines at debug level.
type lineLogger struct {
	log *slog.Logger
	buf bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.log.Debug("bench", "progress", strings.TrimRight(line, "\n"))
	}
}

func (l *lineLogger) Flush() {
	sc := bufio.NewScanner(&l.buf)
	for sc.Scan() {
		l.log.Debug("bench", "progress", sc.Text())
	}
}
