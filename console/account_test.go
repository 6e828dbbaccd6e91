package console

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/auth"
	"github.com/gatewayhq/gateway/quota"
	"github.com/gatewayhq/gateway/store"
)

// accountConsole is a console with the account pages over the real store
// (tc.db: tokens, sessions, the usage ledger) and the real quota service.
type accountConsole struct {
	*testConsole
	forgets atomic.Int64
	log     *lockedBuffer
}

// lockedBuffer is the console's log, read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newAccountConsole serves the account pages; change adjusts their
// dependencies (a clock, a failing store).
func newAccountConsole(t *testing.T, change func(tc *testConsole, a *Account)) *accountConsole {
	t.Helper()
	ac := &accountConsole{log: &lockedBuffer{}}
	ac.testConsole = newTestConsole(t, newFakeClusters(), func(tc *testConsole) {
		q, err := quota.NewService(tc.db, nil, quota.Clamp)
		if err != nil {
			t.Fatal(err)
		}
		a := Account{Tokens: tc.db, Sessions: tc.db, Quotas: q, Records: tc.db, OnExceed: string(quota.Clamp),
			Forget: func() { ac.forgets.Add(1); tc.sessions.Forget() }}
		if change != nil {
			change(tc, &a)
		}
		tc.console.log = slog.New(slog.NewTextHandler(ac.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
		tc.console.SetAccount(a)
	})
	return ac
}

// tokens are the owner's tokens in the store, by name.
func (ac *accountConsole) tokens(owner string) map[string]*store.APIToken {
	ac.t.Helper()
	ts, err := ac.db.ListTokens(context.Background(), owner)
	if err != nil {
		ac.t.Fatal(err)
	}
	out := map[string]*store.APIToken{}
	for _, t := range ts {
		out[t.Name] = t
	}
	return out
}

// storeToken stores a token of u's named name, as the API would make it.
func (ac *accountConsole) storeToken(u *auth.User, name string) *store.APIToken {
	ac.t.Helper()
	t, _, err := auth.NewAPIToken(u, auth.TokenRequest{Name: name}, time.Now())
	if err != nil {
		ac.t.Fatal(err)
	}
	if err := ac.db.CreateToken(context.Background(), t); err != nil {
		ac.t.Fatal(err)
	}
	return t
}

// sessionID is the ID of the browser's session, found by its cookie as
// the gateway finds it.
func (ac *accountConsole) sessionID(b *browser) string {
	ac.t.Helper()
	base, _ := url.Parse(ac.srv.URL)
	for _, c := range b.client.Jar.Cookies(base) {
		if c.Name == auth.SessionCookie {
			se, err := ac.db.SessionByHash(context.Background(), auth.HashToken(c.Value))
			if err != nil {
				ac.t.Fatal(err)
			}
			return se.ID
		}
	}
	ac.t.Fatal("the browser has no session cookie")
	return ""
}

var secretRE = regexp.MustCompile(`gw_[A-Za-z0-9_-]{20,}`)

// A token made on the page is shown once: the POST goes to the list
// (POST, redirect, GET: a reload asks for no second token), which shows
// it once; not on the list afterwards, not in a URL, not in the log, not
// cached.
func TestTokensCreateShowOnceRevoke(t *testing.T) {
	ac := newAccountConsole(t, nil)
	b := ac.browser(alice)
	a := b.post("/tokens", url.Values{"name": {"ci"}, "expires_in": {"12h"}, "read_only": {"1"}})
	if a.Status != http.StatusSeeOther || a.Header.Get("Location") != "/tokens" || secretRE.MatchString(a.Body) {
		t.Fatalf("create: %d, Location %q:\n%s", a.Status, a.Header.Get("Location"), a.Body)
	}
	a = b.get("/tokens")
	if a.Status != http.StatusOK || a.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the list after creating: %d, Cache-Control %q:\n%s", a.Status, a.Header.Get("Cache-Control"), a.Body)
	}
	secret := secretRE.FindString(a.Body)
	if secret == "" || !strings.Contains(a.Body, "shown only this once") {
		t.Fatalf("the answer shows no token:\n%s", a.Body)
	}
	tok := ac.tokens("alice")["ci"]
	if tok == nil || tok.Hash != auth.HashToken(secret) || !tok.ReadOnly || tok.OwnerName != "alice" {
		t.Fatalf("stored token %+v for the secret shown", tok)
	}
	if ttl := tok.ExpiresAt.Sub(tok.CreatedAt); ttl != 12*time.Hour {
		t.Errorf("expires after %s, want 12h", ttl)
	}
	if !strings.Contains(ac.log.String(), tok.ID) || strings.Contains(ac.log.String(), secret) {
		t.Errorf("the log should name the token, never its secret:\n%s", ac.log.String())
	}

	list := b.get("/tokens")
	if list.Status != http.StatusOK || strings.Contains(list.Body, secret) || secretRE.MatchString(list.Body) {
		t.Fatalf("the list shows the secret again:\n%s", list.Body)
	}
	// The cookie that carried it shows nothing but the user's own token,
	// with its own secret: not bob's, not another secret planted.
	bobs := ac.storeToken(bob, "bobs")
	for _, planted := range []string{tok.ID + ".gw_planted_secret_of_some_length", bobs.ID + "." + secret, "nonsense"} {
		req, _ := http.NewRequest("GET", ac.srv.URL+"/tokens", nil)
		req.AddCookie(&http.Cookie{Name: createdCookie, Value: planted})
		if a := b.send(req, nil); a.Status != http.StatusOK || secretRE.MatchString(a.Body) || strings.Contains(a.Body, "shown only this once") {
			t.Errorf("cookie %q: %d\n%s", planted, a.Status, a.Body)
		}
	}
	for _, want := range []string{tok.ID, ">ci", "(read-only)", "status-active", `action="/tokens/` + tok.ID + `/revoke"`} {
		if !strings.Contains(list.Body, want) {
			t.Errorf("the list lacks %q", want)
		}
	}

	a = b.post("/tokens/"+tok.ID+"/revoke", url.Values{})
	if a.Status != http.StatusSeeOther || !strings.HasPrefix(a.Header.Get("Location"), "/tokens?msg=Revoked+token+"+tok.ID) {
		t.Fatalf("revoke: %d at %q:\n%s", a.Status, a.Header.Get("Location"), a.Body)
	}
	if got := ac.tokens("alice")["ci"]; got.RevokedAt.IsZero() {
		t.Fatal("the token is not revoked in the store")
	}
	if ac.forgets.Load() == 0 {
		t.Error("the revocation was not applied at once (Forget)")
	}
	list = b.get("/tokens")
	if !strings.Contains(list.Body, "status-revoked") || strings.Contains(list.Body, `/tokens/`+tok.ID+`/revoke"`) {
		t.Errorf("after revoking, the list shows:\n%s", list.Body)
	}
	// Revoking again is idempotent, as the API's DELETE.
	if a := b.post("/tokens/"+tok.ID+"/revoke", url.Values{}); a.Status != http.StatusSeeOther {
		t.Errorf("revoking again: %d", a.Status)
	}
}

// Bad input comes back on the form, with the API's words, and makes
// nothing.
func TestTokenFormErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		form url.Values
		want string
	}{
		{"no name", url.Values{"name": {"  "}, "expires_in": {"30d"}}, `name the token (1 to 64 characters), e.g. &#34;ci&#34;`},
		{"name too long", url.Values{"name": {strings.Repeat("n", 65)}, "expires_in": {"30d"}}, "1 to 64 characters"},
		{"expiry unreadable", url.Values{"name": {"ci"}, "expires_in": {"next week"}}, `expiry &#34;next week&#34;: use a positive number of days (30d) or a duration (12h)`},
		{"expiry zero", url.Values{"name": {"ci"}, "expires_in": {"0d"}}, "positive number of days"},
		{"expiry too long", url.Values{"name": {"ci"}, "expires_in": {"400d"}}, "tokens may last at most 366d"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ac := newAccountConsole(t, nil)
			a := ac.browser(alice).post("/tokens", tt.form)
			if a.Status != http.StatusUnprocessableEntity || !strings.Contains(a.Body, tt.want) || !strings.Contains(a.Body, `role="alert"`) {
				t.Fatalf("%d, want 422 saying %q:\n%s", a.Status, tt.want, a.Body)
			}
			// The form keeps what was sent.
			if !strings.Contains(a.Body, `name="expires_in" value="`+tt.form.Get("expires_in")+`"`) {
				t.Errorf("the form lost the expiry:\n%s", a.Body)
			}
			if len(ac.tokens("alice")) != 0 || secretRE.MatchString(a.Body) {
				t.Fatal("a token was made")
			}
		})
	}
}

// Another user's token is not found, to see and to revoke; so is one
// that does not exist.
func TestTokenIsolation(t *testing.T) {
	ac := newAccountConsole(t, nil)
	bobs := ac.storeToken(bob, "bobs-secret-project")
	b := ac.browser(alice)
	if a := b.get("/tokens"); strings.Contains(a.Body, "bobs-secret-project") || strings.Contains(a.Body, bobs.ID) {
		t.Fatalf("alice's list shows bob's token:\n%s", a.Body)
	}
	for _, id := range []string{bobs.ID, "tok_nosuchtoken0000"} {
		if a := b.post("/tokens/"+id+"/revoke", url.Values{}); a.Status != http.StatusNotFound || !strings.Contains(a.Body, "You have no token "+id) {
			t.Errorf("alice revokes %s: %d\n%s", id, a.Status, a.Body)
		}
	}
	if got := ac.tokens("bob")["bobs-secret-project"]; !got.RevokedAt.IsZero() {
		t.Fatal("alice revoked bob's token")
	}
}

// A session that a token's dashboard link started may not make tokens:
// no form, and 403.
func TestTokenSessionCannotMintTokens(t *testing.T) {
	ac := newAccountConsole(t, nil)
	tok := ac.storeToken(alice, "notebook")
	viaToken := &auth.User{ID: "alice", Name: "alice", TokenID: tok.ID, Expires: tok.ExpiresAt}
	b := ac.browser(viaToken)
	a := b.get("/tokens")
	if a.Status != http.StatusOK || strings.Contains(a.Body, `action="/tokens"`) || !strings.Contains(a.Body, "a token may not make tokens") {
		t.Fatalf("token session's page: %d\n%s", a.Status, a.Body)
	}
	a = b.post("/tokens", url.Values{"name": {"more"}, "expires_in": {"366d"}})
	if a.Status != http.StatusForbidden || !strings.Contains(a.Body, "may not make tokens") {
		t.Fatalf("token session creates: %d\n%s", a.Status, a.Body)
	}
	if len(ac.tokens("alice")) != 1 {
		t.Fatal("a token session made a token")
	}
}

// A read-only session sees no controls on the account pages, and every
// action is refused (403) and changes nothing; so is a request from
// another site.
func TestAccountActionsRefused(t *testing.T) {
	for _, tt := range []struct {
		name     string
		readOnly bool
		header   map[string]string
		want     string
	}{
		{name: "read-only", readOnly: true, want: "read-only"},
		{name: "cross-site", header: map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, want: "did not come from the gateway"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ac := newAccountConsole(t, nil)
			tok := ac.storeToken(alice, "ci")
			other := ac.browser(alice) // a second session of alice's
			u := alice
			if tt.readOnly {
				u = aliceRO
			}
			b := ac.browser(u)
			otherID := ac.sessionID(other)
			for _, p := range []struct {
				path string
				form url.Values
			}{
				{"/tokens", url.Values{"name": {"x"}, "expires_in": {"1d"}}},
				{"/tokens/" + tok.ID + "/revoke", url.Values{}},
				{"/sessions/" + otherID + "/end", url.Values{}},
				{"/sessions/end-others", url.Values{}},
			} {
				if a := b.do("POST", p.path, p.form, tt.header); a.Status != http.StatusForbidden || !strings.Contains(a.Body, tt.want) {
					t.Errorf("POST %s: %d\n%s", p.path, a.Status, a.Body)
				}
			}
			if ts := ac.tokens("alice"); len(ts) != 1 || !ts["ci"].RevokedAt.IsZero() {
				t.Errorf("tokens changed: %v", ts)
			}
			if a := other.get("/sessions"); a.Status != http.StatusOK || !strings.Contains(a.Body, "Browser sessions") {
				t.Errorf("the other session ended: %d", a.Status)
			}
			if !tt.readOnly {
				return
			}
			for _, path := range []string{"/tokens", "/sessions", "/usage"} {
				a := b.get(path)
				if a.Status != http.StatusOK || strings.Contains(a.Body, `method="post" action="/tokens`) || strings.Contains(a.Body, `method="post" action="/sessions`) ||
					strings.Contains(a.Body, "Create token") {
					t.Errorf("%s as read-only: %d\n%s", path, a.Status, a.Body)
				}
			}
		})
	}
}

// What users control on these pages (token names, their own names) is
// rendered as text.
func TestAccountHostileValuesEscaped(t *testing.T) {
	const evil = `<img src=x onerror=alert(1)>"'`
	ac := newAccountConsole(t, nil)
	evilUser := &auth.User{ID: "alice", Name: evil}
	ac.storeToken(evilUser, evil)
	b := ac.browser(evilUser)
	if a := b.post("/tokens", url.Values{"name": {"</title><script>alert(1)</script>"}, "expires_in": {"1d"}}); a.Status != http.StatusSeeOther {
		t.Fatalf("create: %d\n%s", a.Status, a.Body)
	}
	created := b.get("/tokens") // shows the token just made
	bad := b.post("/tokens", url.Values{"name": {evil}, "expires_in": {evil}})
	for name, a := range map[string]answer{"list": b.get("/tokens"), "created": created, "bad expiry": bad, "sessions": b.get("/sessions"), "usage": b.get("/usage")} {
		if strings.Contains(a.Body, "<img src=x") || strings.Contains(a.Body, "<script>alert") {
			t.Errorf("%s renders a hostile value as HTML:\n%s", name, a.Body)
		}
		if !strings.Contains(a.Body, "&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s does not show the value as text:\n%s", name, a.Body)
		}
	}
	if !strings.Contains(created.Body, "&lt;/title&gt;&lt;script&gt;") || !strings.Contains(created.Body, "shown only this once") {
		t.Errorf("the new token's name is not shown as text:\n%s", created.Body)
	}
}

// The sessions page lists the user's sessions, this one marked; one or
// all the others can be ended, never another user's.
func TestSessions(t *testing.T) {
	ac := newAccountConsole(t, nil)
	ctx := context.Background()
	list := func(owner string) []*store.Session {
		t.Helper()
		ss, err := ac.db.ListSessions(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	signedIn := func(b *browser) bool {
		t.Helper()
		a := b.get("/sessions")
		return a.Status == http.StatusOK && strings.Contains(a.Body, "<h1>Browser sessions</h1>")
	}
	here := ac.browser(alice)
	hereID := ac.sessionID(here)
	there := ac.browser(alice)
	thereID := ac.sessionID(there)
	bobs := ac.browser(bob)
	bobID := ac.sessionID(bobs)

	a := here.get("/sessions")
	if a.Status != http.StatusOK || !strings.Contains(a.Body, hereID+"</code> <strong>(this browser)</strong>") || !strings.Contains(a.Body, thereID) ||
		strings.Contains(a.Body, bobID) || !strings.Contains(a.Body, "End all other sessions") {
		t.Fatalf("sessions page:\n%s", a.Body)
	}
	if strings.Contains(a.Body, thereID+"</code> <strong>(this browser)") {
		t.Error("the other session is marked as this one")
	}

	// bob's session is not alice's to end.
	if a := here.post("/sessions/"+bobID+"/end", url.Values{}); a.Status != http.StatusNotFound || !strings.Contains(a.Body, "You have no active session") {
		t.Errorf("alice ends bob's session: %d\n%s", a.Status, a.Body)
	}
	if !signedIn(bobs) {
		t.Fatal("bob's session ended")
	}

	a = here.post("/sessions/"+thereID+"/end", url.Values{})
	if a.Status != http.StatusSeeOther || a.Header.Get("Location") != "/sessions?msg=Ended+session+"+thereID+"." {
		t.Fatalf("end: %d at %q", a.Status, a.Header.Get("Location"))
	}
	if signedIn(there) || !signedIn(here) {
		t.Fatal("ending the other session: it should be signed out, this one not")
	}
	if a := here.post("/sessions/"+thereID+"/end", url.Values{}); a.Status != http.StatusNotFound {
		t.Errorf("ending an ended session: %d", a.Status)
	}

	// End all others: two more, then only this one is left.
	more := []*browser{ac.browser(alice), ac.browser(alice)}
	a = here.post("/sessions/end-others", url.Values{})
	if a.Status != http.StatusSeeOther || !strings.Contains(a.Header.Get("Location"), "Ended+2+other+sessions") {
		t.Fatalf("end others: %d at %q", a.Status, a.Header.Get("Location"))
	}
	for _, m := range more {
		if signedIn(m) {
			t.Error("another session survived End all other sessions")
		}
	}
	if !signedIn(here) || !signedIn(bobs) {
		t.Fatal("End all other sessions ended this one, or bob's")
	}
	if ss := list("alice"); len(ss) != 1 || ss[0].ID != hereID {
		t.Fatalf("left: %v", ss)
	}
	if a := here.get("/sessions"); strings.Contains(a.Body, "End all other sessions") {
		t.Error("the button shows with no other session")
	}

	// Ending this one signs this browser out.
	a = here.post("/sessions/"+hereID+"/end", url.Values{})
	if a.Status != http.StatusSeeOther || a.Header.Get("Location") != "/" || signedIn(here) {
		t.Fatalf("ending this session: %d at %q", a.Status, a.Header.Get("Location"))
	}
}

// The usage page: this month's figures from the ledger (alice's only),
// split by day, against her budgets, and her limits with where each
// comes from.
func TestUsagePage(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)
	ac := newAccountConsole(t, func(tc *testConsole, a *Account) {
		budget := quota.Amount(100)
		q, err := quota.NewService(tc.db, []quota.ConfigEntry{{Subject: quota.DefaultSubject, Limits: quota.Limits{MonthlyVCPUHours: &budget}}}, quota.Refuse)
		if err != nil {
			t.Fatal(err)
		}
		three := quota.Amount(3)
		if _, err := q.Set(ctx, store.Actor{ID: "admin", Name: "admin"}, "user:alice", quota.Limits{MaxClusters: &three}); err != nil {
			t.Fatal(err)
		}
		a.Quotas, a.Now, a.OnExceed = q, func() time.Time { return now }, string(quota.Refuse)
	})
	at := func(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, time.UTC) }
	for _, c := range []struct {
		name, owner string
		status      store.Status
		entries     []store.LedgerEntry
	}{
		// 4 hours of 2 vCPUs across midnight: 4 vCPU-hours on the 2nd, 4 on the 3rd, $2.
		{"c1", "alice", store.Stopped, []store.LedgerEntry{
			{Member: "worker-1", Kind: store.LedgerStart, At: at(2, 22), VCPUs: 2, MemoryGiB: 4, PriceHour: 0.5},
			{Member: "worker-1", Kind: store.LedgerStop, At: at(3, 2)}}},
		// Still running since 06:00 today: 6 hours of 4 vCPUs and a GPU, $6.
		{"g1", "alice", store.Running, []store.LedgerEntry{
			{Member: "worker-1", Kind: store.LedgerStart, At: at(15, 6), VCPUs: 4, MemoryGiB: 16, GPUs: 1, GPUType: "t4", PriceHour: 1}}},
		// Last month's, and bob's: not in alice's figures.
		{"old", "alice", store.Stopped, []store.LedgerEntry{
			{Member: "worker-1", Kind: store.LedgerStart, At: at(1, 0).Add(-48 * time.Hour), VCPUs: 64},
			{Member: "worker-1", Kind: store.LedgerStop, At: at(1, 0).Add(-24 * time.Hour)}}},
		{"bobs-cluster", "bob", store.Running, []store.LedgerEntry{
			{Member: "worker-1", Kind: store.LedgerStart, At: at(10, 0), VCPUs: 1000, PriceHour: 99}}},
	} {
		cl := running(c.name, c.owner)
		cl.Status = c.status
		if err := ac.db.CreateCluster(ctx, cl); err != nil {
			t.Fatal(err)
		}
		if err := ac.db.RecordLedger(ctx, c.name, c.entries...); err != nil {
			t.Fatal(err)
		}
	}
	a := ac.browser(alice).get("/usage")
	if a.Status != http.StatusOK {
		t.Fatalf("usage: %d\n%s", a.Status, a.Body)
	}
	for _, want := range []string{
		"from 1 November 2026 to 15 November 2026 12:00 UTC",
		"<dt>vCPU-hours</dt><dd>32.00</dd>", "<dt>GPU-hours</dt><dd>6.00</dd>", "<dt>Estimated cost</dt><dd>$8.00</dd>",
		// The budget, its use and its source.
		"vCPU-hours:</span> 32.00 of 100 (32%)", "from default (config)", `<meter min="0" max="100" value="32"`,
		// The chart: accessible, one vCPU and one GPU bar a day.
		`role="img" aria-labelledby="usage-chart-title usage-chart-desc"`,
		`<title id="usage-chart-title">vCPU-hours and GPU-hours by day, November 2026 (UTC)</title>`,
		"The busiest day is 15 November, with 24.00 vCPU-hours.",
		"<title>2 Nov: 4.00 vCPU-hours</title>", "<title>3 Nov: 4.00 vCPU-hours</title>", "<title>15 Nov: 6.00 GPU-hours</title>",
		// Its table.
		`<time datetime="2026-11-02">2 Nov</time></th><td>4.00</td><td>8.00</td><td>0.00</td><td>$1.00</td>`,
		`<time datetime="2026-11-15">15 Nov</time></th><td>24.00</td><td>96.00</td><td>6.00</td><td>$6.00</td>`,
		// By cluster.
		"<td>c1</td><td>8.00</td>", "<td>g1 <span class=\"hint\">(running)</span></td><td>24.00</td>",
		// The limits, what runs holds of them, and where each comes from.
		`<tr data-limit="max_clusters"><td><code>max_clusters</code></td><td>3</td><td>1</td><td>user:alice (api)</td><td>stored by an admin</td></tr>`,
		`<tr data-limit="monthly_vcpu_hours"><td><code>monthly_vcpu_hours</code></td><td>100</td><td>–</td><td>default (config)</td><td>the configuration file</td></tr>`,
		`<tr data-limit="max_builds"><td><code>max_builds</code></td><td>2</td><td>–</td><td>built-in default</td><td>the gateway&#39;s built-in default</td></tr>`,
		`<tr data-limit="max_vcpus"><td><code>max_vcpus</code></td><td>unlimited</td>`,
		"A scale beyond a limit is refused",
	} {
		if !strings.Contains(a.Body, want) {
			t.Errorf("the usage page lacks %q", want)
		}
	}
	if n := strings.Count(a.Body, "<rect "); n != 30 {
		t.Errorf("%d bars, want 2 for each of 15 days", n)
	}
	if n := strings.Count(a.Body, "<time datetime="); n != 15 {
		t.Errorf("%d days in the table, want 15", n)
	}
	for _, absent := range []string{"bobs-cluster", ">old<", "1000"} {
		if strings.Contains(a.Body, absent) {
			t.Errorf("the usage page shows %q (bob's, or last month's)", absent)
		}
	}
}

// With no use yet, the page says so, and the chart still has its days.
func TestUsagePageEmpty(t *testing.T) {
	now := time.Date(2026, 11, 3, 0, 30, 0, 0, time.UTC)
	ac := newAccountConsole(t, func(_ *testConsole, a *Account) { a.Now = func() time.Time { return now } })
	a := ac.browser(alice).get("/usage")
	for _, want := range []string{"No use yet this month.", "No clusters ran this month.", "No monthly budget applies to you.",
		`<title id="usage-chart-title">vCPU-hours by day, November 2026 (UTC)</title>`, "from 1 November to 3 November"} {
		if !strings.Contains(a.Body, want) {
			t.Errorf("the page lacks %q:\n%s", want, a.Body)
		}
	}
	if n := strings.Count(a.Body, "<rect "); n != 3 {
		t.Errorf("%d bars, want 3 (a day from the 1st to now)", n)
	}
}

// failing is the real store with one call failing as a store that cannot
// be reached does.
type failing struct {
	*store.DB
	call string
}

var errDown = errors.New("database down")

func (f failing) ListTokens(ctx context.Context, owner string) ([]*store.APIToken, error) {
	if f.call == "ListTokens" {
		return nil, errDown
	}
	return f.DB.ListTokens(ctx, owner)
}

func (f failing) CreateToken(ctx context.Context, t *store.APIToken) error {
	if f.call == "CreateToken" {
		return errDown
	}
	return f.DB.CreateToken(ctx, t)
}

func (f failing) RevokeToken(ctx context.Context, owner, id string) error {
	if f.call == "RevokeToken" {
		return errDown
	}
	return f.DB.RevokeToken(ctx, owner, id)
}

func (f failing) ListSessions(ctx context.Context, owner string) ([]*store.Session, error) {
	if f.call == "ListSessions" {
		return nil, errDown
	}
	return f.DB.ListSessions(ctx, owner)
}

func (f failing) RevokeSession(ctx context.Context, owner, id string) error {
	if f.call == "RevokeSession" {
		return errDown
	}
	return f.DB.RevokeSession(ctx, owner, id)
}

func (f failing) Intervals(ctx context.Context, fl store.LedgerFilter) ([]store.Interval, error) {
	if f.call == "Intervals" {
		return nil, errDown
	}
	return f.DB.Intervals(ctx, fl)
}

func (f failing) OwnerUsage(ctx context.Context, owner string) (store.Usage, error) {
	if f.call == "OwnerUsage" {
		return store.Usage{}, errDown
	}
	return f.DB.OwnerUsage(ctx, owner)
}

// A store that fails is an error page (the API's mapping: here the
// harness's 500), never half a page, and the secret of a token that
// could not be stored is never shown.
func TestAccountStoreFailures(t *testing.T) {
	for _, tt := range []struct {
		call, method, path string
	}{
		{"ListTokens", "GET", "/tokens"},
		{"CreateToken", "POST", "/tokens"},
		{"RevokeToken", "POST", "/tokens/{token}/revoke"},
		{"ListSessions", "GET", "/sessions"},
		{"ListSessions", "POST", "/sessions/end-others"},
		{"RevokeSession", "POST", "/sessions/{session}/end"},
		{"RevokeSession", "POST", "/sessions/end-others"},
		{"Intervals", "GET", "/usage"},
		{"OwnerUsage", "GET", "/usage"},
	} {
		t.Run(tt.call+" "+tt.method+" "+tt.path, func(t *testing.T) {
			ac := newAccountConsole(t, func(tc *testConsole, a *Account) {
				f := failing{DB: tc.db, call: tt.call}
				a.Tokens, a.Sessions, a.Records = f, f, f
			})
			tok := ac.storeToken(alice, "ci")
			other := ac.browser(alice)
			b := ac.browser(alice)
			path := strings.NewReplacer("{token}", tok.ID, "{session}", ac.sessionID(other)).Replace(tt.path)
			var form url.Values
			if tt.method == "POST" {
				form = url.Values{"name": {"new"}, "expires_in": {"1d"}}
			}
			a := b.do(tt.method, path, form, nil)
			if a.Status != http.StatusInternalServerError || !strings.Contains(a.Body, "internal error") || secretRE.MatchString(a.Body) {
				t.Fatalf("%s %s with %s failing: %d\n%s", tt.method, path, tt.call, a.Status, a.Body)
			}
		})
	}
}

// The account pages have their links in the navigation.
func TestAccountNavigation(t *testing.T) {
	ac := newAccountConsole(t, nil)
	b := ac.browser(alice)
	for _, path := range []string{"/usage", "/tokens", "/sessions"} {
		a := b.get(path)
		if a.Status != http.StatusOK || !strings.Contains(a.Body, `<a href="`+path+`" aria-current="page">`) {
			t.Errorf("%s: %d, not the current link:\n%s", path, a.Status, a.Body)
		}
		for _, link := range []string{`href="/usage"`, `href="/tokens"`, `href="/sessions"`} {
			if !strings.Contains(a.Body, link) {
				t.Errorf("%s lacks the link %s", path, link)
			}
		}
	}
	// Without the account's dependencies, no pages and no links.
	plain := newTestConsole(t, newFakeClusters())
	if a := plain.browser(alice).get("/tokens"); a.Status != http.StatusNotFound || strings.Contains(a.Body, `href="/tokens"`) {
		t.Errorf("a console without the account pages: %d\n%s", a.Status, a.Body)
	}
}

func TestNiceCeil(t *testing.T) {
	for _, tt := range []struct {
		v     float64
		top   float64
		steps int
	}{{0, 1, 4}, {0.0043, 0.005, 5}, {1, 1, 5}, {1.2, 2, 4}, {24, 50, 5}, {26, 50, 5}, {100, 100, 5}, {101, 200, 4}, {600, 1000, 5}} {
		if top, steps := niceCeil(tt.v); math.Abs(top-tt.top) > 1e-12 || steps != tt.steps {
			t.Errorf("niceCeil(%v) = %v, %d; want %v, %d", tt.v, top, steps, tt.top, tt.steps)
		}
	}
}
