package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/quota"
)

// fakeEnvs stands in for the environment service (envs.Service, which
// the console may not import, tests included; its own tests run it on a
// real store, and the browser suite drives it behind the console): builds
// by hash, each seen only by those who asked for it, as the service does.
type fakeEnvs struct {
	mu        sync.Mutex
	builds    map[string]apitype.EnvStatus
	askers    map[string][]string // by hash, in the order they asked
	asked     []string            // hashes, in the order asked (any user)
	logs      map[string]string
	published []apitype.PublishedEnv
	gen       map[string]int64
	fail      map[string]error // by method name
	onLogs    func()           // runs once, after the next Logs, unlocked
	ensured   []images.Spec    // what Ensure was asked for
}

func newFakeEnvs() *fakeEnvs {
	return &fakeEnvs{builds: map[string]apitype.EnvStatus{}, askers: map[string][]string{}, logs: map[string]string{},
		gen: map[string]int64{}, fail: map[string]error{}}
}

// add stores a build that the users asked for.
func (f *fakeEnvs) add(st apitype.EnvStatus, log string, users ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds[st.Hash] = st
	if log != "" {
		f.logs[st.Hash] = log
	}
	f.askers[st.Hash] = append(f.askers[st.Hash], users...)
	f.asked = append(f.asked, st.Hash)
	f.gen[st.Hash]++
}

// change edits a build and moves its generation.
func (f *fakeEnvs) change(hash string, fn func(*apitype.EnvStatus, *string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, log := f.builds[hash], f.logs[hash]
	fn(&st, &log)
	f.builds[hash], f.logs[hash] = st, log
	f.gen[hash]++
}

// own finds the build of hash (whole, or a prefix of 8 digits or more)
// that who asked for.
func (f *fakeEnvs) own(who quota.Who, hash string) (apitype.EnvStatus, error) {
	if len(hash) >= 8 {
		for h, st := range f.builds {
			if strings.HasPrefix(h, hash) && slices.Contains(f.askers[h], who.ID) {
				return st, nil
			}
		}
	}
	return apitype.EnvStatus{}, fmt.Errorf("%w: environment %.64s", errNotFound, hash)
}

func (f *fakeEnvs) Builds(_ context.Context, who quota.Who, limit int) ([]apitype.EnvStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Builds"]; err != nil {
		return nil, err
	}
	var out []apitype.EnvStatus
	for i := len(f.asked) - 1; i >= 0 && len(out) < limit; i-- {
		if h := f.asked[i]; slices.Contains(f.askers[h], who.ID) {
			out = append(out, f.builds[h])
		}
	}
	return out, nil
}

func (f *fakeEnvs) Status(_ context.Context, who quota.Who, hash string) (apitype.EnvStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Status"]; err != nil {
		return apitype.EnvStatus{}, err
	}
	return f.own(who, hash)
}

func (f *fakeEnvs) Logs(_ context.Context, who quota.Who, hash string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Logs"]; err != nil {
		return nil, err
	}
	st, err := f.own(who, hash)
	if err != nil {
		return nil, err
	}
	log, ok := f.logs[st.Hash]
	if hook := f.onLogs; hook != nil {
		f.onLogs = nil
		defer func() {
			f.mu.Unlock()
			hook()
			f.mu.Lock()
		}()
	}
	if !ok {
		return nil, fmt.Errorf("%w: no build log of %s yet", errNotFound, st.Hash)
	}
	return []byte(log), nil
}

func (f *fakeEnvs) Published(context.Context) ([]apitype.PublishedEnv, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Published"]; err != nil {
		return nil, err
	}
	return slices.Clone(f.published), nil
}

func (f *fakeEnvs) BuildGeneration(_ context.Context, hash string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["BuildGeneration"]; err != nil {
		return 0, err
	}
	g, ok := f.gen[hash]
	if !ok {
		return 0, fmt.Errorf("%w: environment %s", errNotFound, hash)
	}
	return g, nil
}

// BuildsGeneration is the sum of the generations of the builds user
// asked for, and how many times they asked: it moves with each.
func (f *fakeEnvs) BuildsGeneration(_ context.Context, user string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["BuildsGeneration"]; err != nil {
		return 0, err
	}
	var g int64
	for h, users := range f.askers {
		for _, u := range users {
			if u == user {
				g += f.gen[h] + 1
			}
		}
	}
	return g, nil
}

// Ensure starts a build of spec (its hash as the service's) that who
// asked for; a spec refused is errInvalid, as the service's
// images.ErrInvalidSpec is the API's 422.
func (f *fakeEnvs) Ensure(_ context.Context, who quota.Who, spec images.Spec, code images.Code) (apitype.EnvStatus, error) {
	f.mu.Lock()
	if err := f.fail["Ensure"]; err != nil {
		f.mu.Unlock()
		return apitype.EnvStatus{}, err
	}
	f.ensured = append(f.ensured, spec)
	f.mu.Unlock()
	if len(code) > 0 {
		return apitype.EnvStatus{}, fmt.Errorf("%w: the console sent code", errInvalid)
	}
	n, err := spec.Normalize()
	if err != nil {
		return apitype.EnvStatus{}, fmt.Errorf("%w: %v", errInvalid, err)
	}
	h, err := n.Hash()
	if err != nil {
		return apitype.EnvStatus{}, err
	}
	st := apitype.EnvStatus{Hash: h, Image: "reg.example/envs:env-" + h[:8], State: "building", Built: true, Steps: []string{"queued"}, StartedAt: time.Now()}
	f.add(st, "", who.ID)
	return st, nil
}

var (
	hashReady    = strings.Repeat("a", 64)
	hashBuilding = strings.Repeat("b", 64)
	hashBobs     = strings.Repeat("c", 64)
)

// envFixture is alice's two builds (one ready, pushed and published, one
// building) and bob's one.
func envFixture() *fakeEnvs {
	f := newFakeEnvs()
	f.add(apitype.EnvStatus{Hash: hashReady, Image: "reg.example/envs:env-aaaa", State: "ready", Built: true,
		Steps:    []string{"finding wheels for 1 package", "2 layers of the image: 1 reused (3.0 MiB), 1 uploaded (12 B), then the config and manifest"},
		Versions: map[string]string{"dask": "2024.8.0", "python": "3.11"}, StartedAt: testTime, FinishedAt: testTime.Add(95 * time.Second),
		Layers: &apitype.EnvLayers{Layers: 2, Reused: 1, ReusedSize: "3.0 MiB", Uploaded: 1, UploadedSize: "12 B"}},
		"step: finding wheels\nstep: pushed\n", "alice")
	f.add(apitype.EnvStatus{Hash: hashBuilding, Image: "reg.example/envs:env-bbbb", State: "building", Built: true,
		Steps: []string{"fetching 3 wheels"}, StartedAt: time.Now().Add(-time.Minute)}, "step: fetching 3 wheels\n", "alice")
	f.add(apitype.EnvStatus{Hash: hashBobs, Image: "reg.example/envs:env-cccc", State: "failed", Built: true, Error: "pip said no",
		StartedAt: testTime}, "bob's secret log\n", "bob")
	f.published = []apitype.PublishedEnv{
		{Name: "team", Image: "reg.example/envs:env-aaaa", Description: "the team's", Versions: map[string]string{"dask": "2024.8.0"}},
		{Name: "nightly", Image: "reg.example/nightly:1"},
	}
	return f
}

func envConsole(t *testing.T, f *fakeEnvs) *testConsole {
	t.Helper()
	return newTestConsole(t, newFakeClusters(), func(tc *testConsole) {
		if f == nil {
			tc.console.SetEnvs(nil)
			return
		}
		tc.console.SetEnvs(f)
	})
}

func TestEnvironmentsPage(t *testing.T) {
	tc := envConsole(t, envFixture())
	for _, tt := range []struct {
		name   string
		user   *auth.User
		want   []string
		absent []string
	}{
		{"alice", alice, []string{`href="/environments/` + hashReady + `"`, hashReady[:16], "1 reused (3.0 MiB), 1 uploaded (12 B) of 2",
			"everyone (published as team)", "dask 2024.8.0, python 3.11", "<td>1m</td>", `href="/environments/` + hashBuilding + `"`, "fetching 3 wheels",
			"you, and whoever asked for the same environment", `data-published="team"`, "reg.example/nightly:1", "the team&#39;s"},
			[]string{hashBobs[:16], "pip said no"}},
		{"bob", bob, []string{hashBobs[:16], "failed"}, []string{hashReady[:16], hashBuilding[:16]}},
		{"read-only alice", aliceRO, []string{hashReady[:16], "(read-only)"}, []string{`action="/environments`}},
		{"carol, who asked for nothing", &auth.User{ID: "carol", Name: "carol"}, []string{"You have asked for no environment yet.", `data-published="team"`}, []string{hashReady[:16]}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, tc.browser(tt.user).get("/environments"), http.StatusOK, tt.want, tt.absent)
		})
	}
}

func TestBuildPage(t *testing.T) {
	f := envFixture()
	long := ""
	for i := range buildLogTail + 50 {
		long += fmt.Sprintf("line %d\n", i)
	}
	f.change(hashBuilding, func(_ *apitype.EnvStatus, log *string) { *log = long })
	nolog := strings.Repeat("d", 64)
	f.add(apitype.EnvStatus{Hash: nolog, Image: "reg.example/envs:env-dddd", State: "ready"}, "", "alice")
	tc := envConsole(t, f)
	for _, tt := range []struct {
		name   string
		user   *auth.User
		path   string
		status int
		want   []string
		absent []string
	}{
		{"ready", alice, "/environments/" + hashReady, http.StatusOK,
			[]string{"<h1>Environment <code>" + hashReady[:16], "reg.example/envs:env-aaaa", "finding wheels for 1 package", "1 reused (3.0 MiB), 1 uploaded (12 B) of 2",
				"step: pushed", `href="/environments/` + hashReady + `/log"`, "<dt>Took</dt><dd>1m</dd>", "everyone (published as team)", `data-on="build"`},
			[]string{"Running for"}},
		{"by the prefix the CLI shows", alice, "/environments/" + hashReady[:16], http.StatusOK, []string{"<code class=\"hash\">" + hashReady + "</code>"}, nil},
		{"building, its log's last lines", alice, "/environments/" + hashBuilding, http.StatusOK,
			[]string{"Running for", fmt.Sprintf("line %d\n", buildLogTail+49), fmt.Sprintf("last %d lines", buildLogTail), "the whole log",
				"/events?build=" + hashBuilding + "&amp;since=2"},
			[]string{"line 49\n"}},
		{"found, not built: no log", alice, "/environments/" + nolog, http.StatusOK,
			[]string{"the image existed: nothing was built", "no build log of " + nolog + " yet", "none: the image existed"}, []string{`<pre class="logs"`}},
		{"another user's", bob, "/environments/" + hashReady, http.StatusNotFound, []string{"not found"}, []string{"reg.example/envs:env-aaaa", "step: pushed"}},
		{"another user's log", bob, "/environments/" + hashReady + "/log", http.StatusNotFound, nil, []string{"step: pushed"}},
		{"bob's own", bob, "/environments/" + hashBobs, http.StatusOK, []string{"pip said no", "bob&#39;s secret log"}, nil},
		{"unknown", alice, "/environments/" + strings.Repeat("e", 64), http.StatusNotFound, []string{"not found"}, nil},
		{"too short a prefix", alice, "/environments/aaaa", http.StatusNotFound, nil, nil},
		{"the whole log, as text", alice, "/environments/" + hashBuilding + "/log", http.StatusOK, []string{"line 0\n", fmt.Sprintf("line %d\n", buildLogTail+49)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			expect(t, tc.browser(tt.user).get(tt.path), tt.status, tt.want, tt.absent)
		})
	}
	// The log is served as text, never as a page.
	a := tc.browser(alice).get("/environments/" + hashReady + "/log")
	if ct := a.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" || a.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("log's content type %q, headers %v", ct, a.Header)
	}
}

// A gateway that builds no environments says so, on every page of the
// section.
func TestEnvironmentsOff(t *testing.T) {
	tc := envConsole(t, nil)
	b := tc.browser(alice)
	a := b.get("/environments")
	if a.Status != http.StatusOK || !strings.Contains(a.Body, "builds no environments") || !strings.Contains(a.Body, `href="/environments" aria-current="page"`) {
		t.Fatalf("off: %d\n%s", a.Status, a.Body)
	}
	for _, path := range []string{"/environments/" + hashReady, "/environments/" + hashReady + "/log", "/events?build=" + hashReady} {
		if a := b.get(path); a.Status != http.StatusNotFound || !strings.Contains(a.Body, "builds no environments") {
			t.Errorf("%s: %d\n%s", path, a.Status, a.Body)
		}
	}
}

// What the service cannot answer is the API's answer, on a page.
func TestEnvironmentsErrors(t *testing.T) {
	down := errors.New("the store is down")
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{"Published", "/environments", http.StatusInternalServerError},
		{"Builds", "/environments", http.StatusInternalServerError},
		{"Status", "/environments/" + hashReady, http.StatusInternalServerError},
		{"Published", "/environments/" + hashReady, http.StatusInternalServerError},
		{"BuildGeneration", "/environments/" + hashBuilding, http.StatusInternalServerError},
		{"Logs", "/environments/" + hashReady + "/log", http.StatusInternalServerError},
		{"Status", "/events?build=" + hashReady, http.StatusInternalServerError},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			f := envFixture()
			f.fail[tt.method] = down
			a := envConsole(t, f).browser(alice).get(tt.path)
			if a.Status != tt.status || strings.Contains(a.Body, "the store is down") {
				t.Fatalf("%d, want %d without the error's details:\n%s", a.Status, tt.status, a.Body)
			}
		})
	}
	// A log that cannot be read leaves the build's page, saying why.
	f := envFixture()
	f.fail["Logs"] = fmt.Errorf("%w: the log is elsewhere", errInvalid)
	a := envConsole(t, f).browser(alice).get("/environments/" + hashReady)
	if a.Status != http.StatusOK || !strings.Contains(a.Body, "the log is elsewhere") || !strings.Contains(a.Body, "finding wheels") {
		t.Fatalf("unreadable log: %d\n%s", a.Status, a.Body)
	}
}

// A build's page follows it through its stream: the page's part anew at
// each change of the build, only to those who asked for it, and at once
// when the build changed since the page was made.
func TestBuildStream(t *testing.T) {
	f := envFixture()
	tc := envConsole(t, f)
	base := "/events?build=" + hashBuilding + "&since="
	rd := openStreamAt(t, tc.browser(alice), base+"0")
	event, data := readEvent(t, rd)
	if event != "build" || !strings.Contains(data, "fetching 3 wheels") {
		t.Fatalf("a page older than the build's generation: %q\n%s", event, data)
	}

	rd = openStreamAt(t, tc.browser(alice), base+"1")
	f.change(hashReady, func(st *apitype.EnvStatus, _ *string) { st.Steps = append(st.Steps, "another build's news") })
	f.change(hashBuilding, func(st *apitype.EnvStatus, log *string) {
		st.State, st.Steps = "ready", append(st.Steps, "2 layers of the image: 2 reused (1.0 MiB), 0 uploaded (0 B), then the config and manifest")
		st.Layers = &apitype.EnvLayers{Layers: 2, Reused: 2, ReusedSize: "1.0 MiB", UploadedSize: "0 B"}
		*log += "step: ready\n"
	})
	event, data = readEvent(t, rd)
	if event != "build" || !strings.Contains(data, `data-state="ready"`) || !strings.Contains(data, "2 reused (1.0 MiB), 0 uploaded (0 B) of 2") ||
		!strings.Contains(data, "step: ready") || strings.Contains(data, "another build&#39;s news") || strings.Contains(data, "<html") {
		t.Fatalf("after the build ended: %q\n%s", event, data)
	}

	for _, c := range []struct {
		name string
		u    *auth.User
		path string
	}{{"another user's build", bob, base + "3"}, {"a hash nobody asked for", alice, "/events?build=" + strings.Repeat("e", 64)}} {
		a := tc.browser(c.u).get(c.path)
		if a.Status != http.StatusNotFound || strings.Contains(a.Body, "fetching") {
			t.Errorf("%s: %d\n%s", c.name, a.Status, a.Body)
		}
	}
}

// A build that changes while its page is made is not missed: the page's
// generation is never newer than what it shows, so its stream sends the
// change at once.
func TestBuildPageRacingItsBuild(t *testing.T) {
	f := envFixture()
	tc := envConsole(t, f)
	f.mu.Lock()
	f.onLogs = func() {
		f.change(hashBuilding, func(st *apitype.EnvStatus, _ *string) { st.State = "ready" })
	}
	f.mu.Unlock()
	a := tc.browser(alice).get("/environments/" + hashBuilding)
	m := regexp.MustCompile(`data-stream="(/events\?build=[0-9a-f]+&amp;since=\d+)"`).FindStringSubmatch(a.Body)
	if a.Status != http.StatusOK || m == nil || !strings.Contains(a.Body, `data-state="building"`) {
		t.Fatalf("the page: %d\n%s", a.Status, a.Body)
	}
	rd := openStreamAt(t, tc.browser(alice), strings.ReplaceAll(m[1], "&amp;", "&"))
	if event, data := readEvent(t, rd); event != "build" || !strings.Contains(data, `data-state="ready"`) {
		t.Fatalf("the stream: %q\n%s", event, data)
	}
}

// openStreamAt opens the event stream at path as b and reads past its
// first (retry) line, so that the stream is subscribed.
func openStreamAt(t *testing.T, b *browser, path string) *bufio.Reader {
	t.Helper()
	resp, rd := openStream(t, b, path)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if line, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(line, "retry:") {
		t.Fatalf("stream's first line %q: %v", line, err)
	}
	return rd
}

// The environments section renders what users control as text: package
// names and versions, steps, log lines, errors, published names.
func TestEnvironmentsHostileValuesEscaped(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>"'`
	f := newFakeEnvs()
	h := strings.Repeat("f", 64)
	f.add(apitype.EnvStatus{Hash: h, Image: "reg.example/" + evil, State: "failed", Built: true, Steps: []string{evil}, Error: evil,
		Versions: map[string]string{evil: evil}, StartedAt: testTime}, evil+"\n</pre><script>alert(1)</script>\n", "alice")
	f.published = []apitype.PublishedEnv{{Name: evil, Image: evil, Description: evil, Versions: map[string]string{evil: evil}}}
	tc := envConsole(t, f)
	b := tc.browser(&auth.User{ID: "alice", Name: evil})
	for _, path := range []string{"/environments", "/environments/" + h} {
		expectEscaped(t, path, b.get(path))
	}
	// The stream's part is escaped as the page is.
	rd := openStreamAt(t, b, "/events?build="+h+"&since=0")
	if _, data := readEvent(t, rd); strings.Contains(data, "<img src=x") || strings.Contains(data, "<script>alert") || !strings.Contains(data, "&lt;img") {
		t.Errorf("the stream renders a hostile value as HTML:\n%s", data)
	}
	// A hash in the URL is the user's word: not found, and shown as text.
	a := b.get("/environments/" + url.PathEscape(evil))
	if a.Status != http.StatusNotFound || strings.Contains(a.Body, "<img src=x") {
		t.Errorf("a hostile hash: %d\n%s", a.Status, a.Body)
	}
}
