package integration

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
)

// waitLog waits (at most testutil.HangBound) for the gateway's output to
// contain want.
func (e *env) waitLog(want string) bool {
	deadline := time.Now().Add(testutil.HangBound)
	for time.Now().Before(deadline) {
		if strings.Contains(e.gwLog.String(), want) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// devIssuer is the dev gateway's issuer, from its banner, which it prints
// after it has begun to answer (once it has signed the CLI in): waited for.
func (e *env) devIssuer() string {
	e.t.Helper()
	if !e.waitLog("for dask_gateway:") {
		e.t.Fatalf("no banner from the dev gateway:\n%s", e.gwLog.String())
	}
	issuer := regexp.MustCompile(`dev issuer:\s+(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(e.gwLog.String())
	if issuer == nil {
		e.t.Fatalf("no issuer in the dev gateway's banner:\n%s", e.gwLog.String())
	}
	return issuer[1]
}

// TestDashboardNeedsBokeh: Debian's python3-distributed has no bokeh, so
// dashboards cannot work. gateway dev says so in one line of its banner, and
// new-cluster (which may run elsewhere, so it learns it from the API) says
// it next to the dashboard's address, each with the install command.
func TestDashboardNeedsBokeh(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	if !e.waitLog("for dask_gateway:") {
		t.Fatalf("no banner:\n%s", e.gwLog.String())
	}
	var line string
	for _, l := range strings.Split(e.gwLog.String(), "\n") {
		if strings.Contains(l, "dashboards:") {
			line = l
		}
	}
	for _, want := range []string{"cluster dashboards will not work", "without bokeh", "-m pip install", "'bokeh>=2.4.2"} {
		if !strings.Contains(line, want) {
			t.Errorf("banner's dashboard line %q does not say %q", line, want)
		}
	}
	if n := strings.Count(e.gwLog.String(), "cluster dashboards will not work"); n != 1 {
		t.Errorf("gateway dev says it %d times, want once:\n%s", n, e.gwLog.String())
	}
	out := e.gwOK("new-cluster", "--workers", "0")
	if !strings.Contains(out, "NOTE: cluster dashboards will not work") || !strings.Contains(out, "pip install") {
		t.Errorf("new-cluster does not say dashboards will not work:\n%s", out)
	}
	if n := strings.Count(out, "cluster dashboards will not work"); n != 1 {
		t.Errorf("new-cluster says it %d times, want once", n)
	}
	var name string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "Cluster" && f[2] == "requested" {
			name = f[1]
		}
	}
	if out := e.gwOK("dashboard", name); !strings.Contains(out, "/auth/ticket?") || !strings.Contains(out, "note: cluster dashboards will not work") {
		t.Errorf("gateway dashboard %s does not say dashboards will not work:\n%s", name, out)
	}
}

// TestDashboardWithBokeh: with a bokeh in distributed's range first on the
// path (a stand-in package with only its version: the check reads no more),
// the banner says nothing about dashboards.
func TestDashboardWithBokeh(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bokeh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bokeh", "__init__.py"), []byte("__version__ = \"2.4.3\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "PYTHONPATH="+dir)
	e.startGateway()
	if !e.waitLog("for dask_gateway:") {
		t.Fatalf("no banner:\n%s", e.gwLog.String())
	}
	if strings.Contains(e.gwLog.String(), "dashboards will not work") {
		t.Errorf("dashboards said not to work with bokeh 2.4.3:\n%s", e.gwLog.String())
	}
}

// TestAPICookieThroughGateway: the whole gateway (its host guard, the
// proxy's HTTP listener) passes the API cookie, so dask-gateway's client
// calls after the first need no 401 round trip.
func TestAPICookieThroughGateway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	req, _ := http.NewRequest("GET", e.url+"/api/v1/whoami", nil)
	req.Header.Set("Authorization", "jupyterhub "+e.token()) // dask_gateway.auth.JupyterHubAuth's form
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "gateway-api" {
			ck = c
		}
	}
	if resp.StatusCode != 200 || ck == nil {
		t.Fatalf("whoami with a jupyterhub token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	req, _ = http.NewRequest("GET", e.url+"/api/v1/whoami", nil)
	req.AddCookie(ck)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var who struct{ Name string }
	if err := json.NewDecoder(resp.Body).Decode(&who); err != nil || resp.StatusCode != 200 || who.Name != "dev" {
		t.Fatalf("whoami with the cookie only: %d %+v %v", resp.StatusCode, who, err)
	}
}
