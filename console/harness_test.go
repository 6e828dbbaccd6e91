package console

import (
	"context"
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
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// The console's unit tests run it over HTTP with real browser sessions
// (auth.Sessions in a real SQLite store) and a fake of the control loop
// (fakeClusters): what the pages do with the clusters is the console's;
// the real loop behind them is driven by the browser suite
// (integration/console_browser_test.go).

// errNotFound and errInvalid stand in for the loop's errors; explain
// answers them as the API's mapping does.
var (
	errNotFound = errors.New("not found")
	errInvalid  = errors.New("invalid")
)

func explain(r *http.Request, err error) (int, string, bool) {
	switch {
	case errors.Is(err, context.Canceled):
		return 0, "", false
	case errors.Is(err, errNotFound):
		return http.StatusNotFound, err.Error(), true
	case errors.Is(err, errInvalid):
		return http.StatusUnprocessableEntity, err.Error(), true
	case errors.Is(err, store.ErrNotFound):
		// The API's mapping says which run (benchmark runs are the only
		// store records the console looks up by a user's word).
		return http.StatusNotFound, "benchmark run " + r.PathValue("id") + " not found", true
	case errors.Is(err, auth.ErrTokenRequest):
		// As the API's mapping: 422 with the message less the sentinel's.
		return http.StatusUnprocessableEntity, strings.TrimPrefix(err.Error(), auth.ErrTokenRequest.Error()+": "), true
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
}

func newFakeClusters(cls ...*store.Cluster) *fakeClusters {
	f := &fakeClusters{clusters: map[string]*store.Cluster{}, events: map[string][]store.Event{}, logs: map[string]string{},
		gen: map[string]int64{}, scaled: map[string]int{}}
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

func (f *fakeClusters) Logs(_ context.Context, owner, name string, _ int, w io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.owned(owner, name); err != nil {
		return err
	}
	_, err := io.WriteString(w, f.logs[name])
	return err
}

func (f *fakeClusters) Scale(_ context.Context, who quota.Who, name string, n int) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.owned(who.ID, name)
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
