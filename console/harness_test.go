package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/auth/authtest"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/sharing"
	"github.com/gatewayhq/gateway/store"
)

// The console's unit tests run it over HTTP with real browser sessions
// (auth.Sessions in a real SQLite store) and a fake of the control loop
// (fakeClusters): what the pages do with the clusters is the console's;
// the real loop behind them is driven by the browser suite
// (integration/console_browser_test.go).

// errNotFound, errInvalid and errConflict stand in for the loop's
// errors; explain answers them, and the quota service's, as the API's
// mapping does (quota.ErrInvalid's message without its sentinel's words).
var (
	errNotFound = errors.New("not found")
	errInvalid  = errors.New("invalid")
	errConflict = errors.New("conflict")
	// errForbidden: shared, but not for that (scheduler.ErrForbidden).
	errForbidden = errors.New("forbidden")
)

func explain(r *http.Request, err error) (int, string, bool) {
	switch {
	case errors.Is(err, context.Canceled):
		return 0, "", false
	case errors.Is(err, errNotFound):
		return http.StatusNotFound, err.Error(), true
	case errors.Is(err, errForbidden):
		return http.StatusForbidden, err.Error(), true
	case errors.Is(err, errInvalid):
		return http.StatusUnprocessableEntity, strings.TrimPrefix(err.Error(), errInvalid.Error()+": "), true
	case errors.Is(err, quota.ErrExceeded):
		return http.StatusForbidden, err.Error(), true
	case errors.Is(err, store.ErrNotFound):
		// The API's mapping says which run (benchmark runs are the only
		// store records the console looks up by a user's word).
		return http.StatusNotFound, "benchmark run " + r.PathValue("id") + " not found", true
	case errors.Is(err, auth.ErrTokenRequest):
		// As the API's mapping: 422 with the message less the sentinel's.
		return http.StatusUnprocessableEntity, strings.TrimPrefix(err.Error(), auth.ErrTokenRequest.Error()+": "), true
	case errors.Is(err, errConflict):
		return http.StatusConflict, err.Error(), true
	case errors.Is(err, quota.ErrInvalid):
		return http.StatusUnprocessableEntity, strings.TrimPrefix(err.Error(), quota.ErrInvalid.Error()+": "), true
	case errors.Is(err, quota.ErrNoEntry):
		return http.StatusNotFound, err.Error(), true
	}
	return http.StatusInternalServerError, "internal error", true
}

// fakeClusters keeps clusters in memory, by name, with their owner.
type fakeClusters struct {
	mu       sync.Mutex
	clusters map[string]*store.Cluster
	events   map[string][]store.Event
	logs     map[string]string
	gen      map[string]int64
	stopped  []string
	scaled   map[string]int
	lists    int // List calls

	// The cluster pages' part of the loop (ClusterLoop).
	spec    []clusteropts.Field
	specErr error
	created []map[string]json.RawMessage // what Create was asked, in order
	checked int                          // CheckCreate calls
	idle    map[string]time.Duration     // IdleLeft, by cluster
	tails   []int                        // the tail of each Logs call

	shares *fakeSharing // set by sharedWith (shared_test.go)
}

// fakeSpec is options as the loop publishes them (scheduler.Limits.Spec's
// kinds): each kind of input the form makes.
func fakeSpec() []clusteropts.Field {
	return []clusteropts.Field{
		{Field: "workers", Label: "Workers at start", Default: 0, Spec: map[string]any{"type": "int", "min": 0, "max": 5}},
		{Field: "worker_memory", Label: "Memory per worker (GiB)", Default: 2.0, Spec: map[string]any{"type": "float", "min": 0.25, "max": 16.0}},
		{Field: "idle_timeout", Label: "Stop after idle for (seconds; 0: never)", Default: 1200, Spec: map[string]any{"type": "int", "min": 0, "max": 3600}},
		{Field: "image", Label: "Container image", Default: "", Spec: map[string]any{"type": "string"}},
		{Field: "client_env", Label: "The client's versions", Default: map[string]string{}, Spec: map[string]any{"type": "mapping"}},
		{Field: "gpu_type", Label: "GPU model", Default: "", Spec: map[string]any{"type": "select", "options": []string{"", "t4", "a10g"}}},
		{Field: "spot", Label: "Workers on spot capacity", Default: false, Spec: map[string]any{"type": "bool"}},
	}
}

// Prices of the fake's machines, per hour.
const (
	fakeSchedulerPrice = 0.25
	fakeWorkerPrice    = 0.5
	fakeMaxWorkers     = 3 // the quota's max_workers_per_cluster
)

func newFakeClusters(cls ...*store.Cluster) *fakeClusters {
	f := &fakeClusters{clusters: map[string]*store.Cluster{}, events: map[string][]store.Event{}, logs: map[string]string{},
		gen: map[string]int64{}, scaled: map[string]int{}, spec: fakeSpec(), idle: map[string]time.Duration{}}
	for _, c := range cls {
		f.clusters[c.Name] = c
	}
	return f
}

func (f *fakeClusters) owned(owner, name string) (*store.Cluster, error) {
	c, ok := f.clusters[name]
	if !ok || c.Owner != owner {
		return nil, fmt.Errorf("%w: cluster %s", errNotFound, name)
	}
	return c, nil
}

func (f *fakeClusters) List(_ context.Context, owner string, _ []store.Status) ([]*store.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var out []*store.Cluster
	for _, c := range f.clusters {
		if c.Owner == owner {
			cp := *c
			out = append(out, &cp)
		}
	}
	return out, nil
}

func (f *fakeClusters) Get(_ context.Context, owner, name string) (*store.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.owned(owner, name)
	if err != nil {
		return nil, err
	}
	cp := *c
	return &cp, nil
}

func (f *fakeClusters) Events(_ context.Context, owner, name string) ([]store.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.owned(owner, name); err != nil {
		return nil, err
	}
	return f.events[name], nil
}

func (f *fakeClusters) Logs(_ context.Context, owner, name string, tail int, w io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.owned(owner, name); err != nil {
		return err
	}
	f.tails = append(f.tails, tail)
	_, err := io.WriteString(w, f.logs[name])
	return err
}

func (f *fakeClusters) Scale(_ context.Context, who quota.Who, name string, n int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.owned(who.ID, name)
	if err != nil && f.shares != nil {
		// As the core: someone a share allows to scale it may.
		c, err = f.shares.reachLocked(who, name, sharing.Scale)
	}
	if err != nil {
		return "", err
	}
	f.scaled[name] = n
	c.DesiredWorkers = n
	f.gen[c.Owner]++
	return "", nil
}

func (f *fakeClusters) Stop(_ context.Context, owner, name, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.owned(owner, name)
	if err != nil {
		return err
	}
	f.stopped = append(f.stopped, name)
	c.Status = store.Stopping
	f.gen[owner]++
	return nil
}

func (f *fakeClusters) ClustersGeneration(_ context.Context, owner string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen[owner], nil
}

func (f *fakeClusters) OptionSpec(context.Context, quota.Who) ([]clusteropts.Field, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.spec, f.specErr
}

// admit is the fake loop's check: the options known to its spec, workers
// a whole number up to 5 (the API's words), at most fakeMaxWorkers by
// the quota.
func (f *fakeClusters) admit(raw map[string]json.RawMessage) (quota.Shape, int, error) {
	known := map[string]bool{}
	for _, o := range f.spec {
		known[o.Field] = true
	}
	for k := range raw {
		if !known[k] {
			return quota.Shape{}, 0, fmt.Errorf("%w: unknown option(s) %s", errInvalid, k)
		}
	}
	n := 0
	if v, ok := raw["workers"]; ok {
		if err := json.Unmarshal(v, &n); err != nil || n < 0 || n > 5 {
			return quota.Shape{}, 0, fmt.Errorf("%w: workers must be a whole number from 0 to 5, got %s", errInvalid, v)
		}
	}
	shape := quota.Shape{Provider: "fake", Scheduler: quota.Size{VCPUs: 2, MemoryGiB: 4, InstanceType: "m5.large", PriceHour: fakeSchedulerPrice},
		Worker: quota.Size{VCPUs: 1, MemoryGiB: 2, PriceHour: fakeWorkerPrice}}
	if n > fakeMaxWorkers {
		return shape, n, &quota.ExceededError{Limit: "max_workers_per_cluster", Source: "user:alice (stored)",
			Msg: fmt.Sprintf("%d workers is over your limit of %d workers per cluster (max_workers_per_cluster, from user:alice (stored))", n, fakeMaxWorkers)}
	}
	return shape, n, nil
}

func (f *fakeClusters) CheckCreate(_ context.Context, _ quota.Who, raw map[string]json.RawMessage) (quota.Shape, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checked++
	return f.admit(raw)
}

func (f *fakeClusters) Create(_ context.Context, who quota.Who, raw map[string]json.RawMessage) (*store.Cluster, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	shape, n, err := f.admit(raw)
	if err != nil {
		return nil, err
	}
	f.created = append(f.created, raw)
	opts, _ := json.Marshal(raw)
	sh, _ := json.Marshal(shape)
	c := &store.Cluster{Name: fmt.Sprintf("new%d", len(f.created)), Owner: who.ID, OwnerName: who.Name, Status: store.Pending, Phase: "queued",
		Provider: "fake", Options: string(opts), Shape: string(sh), DesiredWorkers: n, CreatedAt: time.Now()}
	f.clusters[c.Name] = c
	f.gen[who.ID]++
	cp := *c
	return &cp, nil
}

func (f *fakeClusters) IdleLeft(c *store.Cluster) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.idle[c.Name]
	return d, ok
}

// change runs fn on the clusters and moves owner's generation.
func (f *fakeClusters) change(owner string, fn func(map[string]*store.Cluster)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.clusters)
	f.gen[owner]++
}

// testConsole is a console served over HTTP.
type testConsole struct {
	t        *testing.T
	srv      *httptest.Server
	console  *Server
	sessions *auth.Sessions
	db       *store.DB
	clusters *fakeClusters
}

// newTestConsole serves a console over the given clusters; "admin" is an
// admin user. setup runs before it serves (a section's Set method).
func newTestConsole(t *testing.T, f *fakeClusters, setup ...func(*testConsole)) *testConsole {
	t.Helper()
	sessions, db := authtest.StoredSessions(t)
	sessions.SetStore(db, auth.Access{AdminUsers: []string{"admin"}})
	tc := &testConsole{t: t, sessions: sessions, db: db, clusters: f}
	tc.srv = httptest.NewUnstartedServer(nil)
	c, err := New(Config{PublicURL: "http://" + tc.srv.Listener.Addr().String(), Version: "test", SignIn: true, Explain: explain,
		Generations: 20 * time.Millisecond}, f, sessions, nil)
	if err != nil {
		t.Fatal(err)
	}
	tc.console = c
	for _, fn := range setup {
		fn(tc)
	}
	tc.srv.Config.Handler = c
	tc.srv.Start()
	t.Cleanup(func() {
		c.Close()
		tc.srv.Close()
	})
	return tc
}

// clusterPages adds the cluster pages' section (SetClusterPages), over
// the fake loop and the real store's ledger, before the test's first
// request.
func (tc *testConsole) clusterPages() *testConsole {
	tc.console.SetClusterPages(tc.clusters, tc.db)
	return tc
}

// browser is a client with u's session cookie (nil: signed out) that
// sends what a browser's same-origin navigation sends.
type browser struct {
	tc     *testConsole
	client *http.Client
}

func (tc *testConsole) browser(u *auth.User) *browser {
	tc.t.Helper()
	jar, _ := cookiejar.New(nil)
	if u != nil {
		c, err := tc.sessions.Start(context.Background(), *u, "login")
		if err != nil {
			tc.t.Fatal(err)
		}
		base, _ := url.Parse(tc.srv.URL)
		jar.SetCookies(base, []*http.Cookie{c})
	}
	return &browser{tc: tc, client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// answer is a response, its body read.
type answer struct {
	Status int
	Header http.Header
	Body   string
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) answer {
	b.tc.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.tc.srv.URL+path, body)
	if err != nil {
		b.tc.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.tc.srv.URL)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	return b.send(req, header)
}

// send sends req with header's fields set, and reads the answer.
func (b *browser) send(req *http.Request, header map[string]string) answer {
	b.tc.t.Helper()
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.tc.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.tc.t.Fatal(err)
	}
	return answer{Status: resp.StatusCode, Header: resp.Header, Body: string(raw)}
}

func (b *browser) get(path string) answer { b.tc.t.Helper(); return b.do("GET", path, nil, nil) }

func (b *browser) post(path string, form url.Values) answer {
	b.tc.t.Helper()
	return b.do("POST", path, form, nil)
}

var (
	alice    = &auth.User{ID: "alice", Name: "alice"}
	bob      = &auth.User{ID: "bob", Name: "bob"}
	admin    = &auth.User{ID: "admin", Name: "admin"}
	aliceRO  = &auth.User{ID: "alice", Name: "alice", ReadOnly: true}
	testTime = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
)
