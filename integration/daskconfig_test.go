package integration

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// daskClient runs testdata/dask_gateway_client.py (dask_gateway's client,
// replayed from its source) with env and returns its output.
func daskClient(t *testing.T, env []string, actions ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	script, err := filepath.Abs(filepath.Join("testdata", "dask_gateway_client.py"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, append([]string{script}, actions...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dask_gateway's client: %v\n%s", err, out)
	}
	return string(out)
}

// withoutDask is vars without the caller's own dask settings, and with
// extra added.
func withoutDask(vars []string, extra ...string) []string {
	var out []string
	for _, kv := range vars {
		if !strings.HasPrefix(kv, "DASK_") && !strings.HasPrefix(kv, "JUPYTERHUB_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

func wantLines(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("%s: no line matching %q in:\n%s", what, p, out)
		}
	}
}

// TestGatewayNoArguments: after gateway login, dask_gateway's Gateway()
// with no arguments reaches the gateway as that user, from the dask
// configuration login wrote (mode 0600, directory 0700): it lists their
// clusters and the one shared with their group (with exactly
// dask-gateway's fields, or its client would refuse the list), connects
// to the shared one by name and computes, and starts one of its own. The
// hub spawner's environment variables of docs/using.md do the same without
// the file. Unsharing ends the connect; logout removes the file and
// revokes its token.
func TestGatewayNoArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	dev2 := e.userEnv(t, "dev2") // gateway login, as a person would

	dir := filepath.Join(dev2.home, ".config", "dask")
	path := filepath.Join(dir, "gateway.yaml")
	for p, want := range map[string]os.FileMode{dir: os.ModeDir | 0o700, path: 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode() != want {
			t.Fatalf("%s: %v %v, want mode %v", p, fi.Mode(), err, want)
		}
	}
	b, _ := os.ReadFile(path)
	var doc struct {
		Gateway struct {
			Address string `yaml:"address"`
			Auth    struct {
				Type   string            `yaml:"type"`
				Kwargs map[string]string `yaml:"kwargs"`
			} `yaml:"auth"`
		} `yaml:"gateway"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil || doc.Gateway.Address != e.url || doc.Gateway.Auth.Type != "basic" ||
		!strings.HasPrefix(doc.Gateway.Auth.Kwargs["password"], "gw_") || doc.Gateway.Auth.Kwargs["username"] != "dev2" {
		t.Fatalf("the dask configuration login wrote: %v\n%s", err, b)
	}
	if tokens := dev2.gwOK("token", "list"); !strings.Contains(tokens, "dask-config") {
		t.Errorf("no token named for the dask configuration:\n%s", tokens)
	}

	// dev shares a running cluster with their group, which dev2 is in.
	var c struct {
		cluster
		DaskGateway string `json:"dask_gateway_python"`
	}
	e.gwJSON(&c, "new-cluster", "--workers", "1", "--share", "group:gateway-users")
	if want := "Gateway().connect(\"" + c.Name + "\").get_client()"; !strings.Contains(c.DaskGateway, want) {
		t.Errorf("new-cluster's dask_gateway snippet %q lacks %q", c.DaskGateway, want)
	}
	show := e.gwOK("show", c.Name)
	if i, j := strings.Index(show, "from dask_gateway import Gateway"), strings.Index(show, "from distributed import Client"); i < 0 || j < i {
		t.Errorf("the dask_gateway snippet does not come first:\n%s", show)
	}

	env := withoutDask(dev2.vars)
	out := daskClient(t, env, "list", "connect:"+c.Name, "new")
	host := strings.TrimPrefix(e.url, "http://")
	wantLines(t, "Gateway() from the file", out,
		`(?m)^address `+regexp.QuoteMeta(e.url)+` gateway://`+regexp.QuoteMeta(host)+` BasicAuth$`,
		`(?m)^listed `+c.Name+` RUNNING$`, `(?m)^ok list$`,
		`(?m)^ok connect `+c.Name+` computed 45$`,
		`(?m)^ok new [0-9a-f]+ computed 45$`)
	// dev2's browser, signed in by gateway dashboard's one-time link,
	// opens the shared cluster's dashboard.
	link := strings.TrimSpace(dev2.gwStdout("dashboard", c.Name))
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	lu, err := url.Parse(link)
	if err != nil || lu.Path != "/auth/ticket" {
		t.Fatalf("gateway dashboard of the shared cluster, as dev2: %q %v", link, err)
	}
	resp, err := browser.PostForm(e.url+"/auth/ticket", url.Values{"t": {lu.Query().Get("t")}, "next": {lu.Query().Get("next")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = browser.Get(e.url + "/clusters/" + c.Name + "/info/main/workers.html")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Workers") {
		t.Errorf("dev2's browser session on the shared dashboard: %d %.200s", resp.StatusCode, page)
	}

	// A hub's spawner: no file, the environment of docs/using.md.
	tok := strings.TrimSpace(dev2.gwStdout("token", "create", "--name", "hub"))
	bare := t.TempDir()
	out = daskClient(t, withoutDask(env, "HOME="+bare, "DASK_GATEWAY__ADDRESS="+e.url, "DASK_GATEWAY__AUTH__TYPE=jupyterhub", "JUPYTERHUB_API_TOKEN="+tok),
		"connect:"+c.Name)
	wantLines(t, "Gateway() from the environment", out, `(?m)^address \S+ \S+ JupyterHubAuth$`, `(?m)^ok connect `+c.Name+` computed 45$`)

	// Unshared: the upstream client's connect fails as it does for a
	// cluster that is not there.
	if out := e.gwOK("unshare", c.Name); !strings.Contains(out, "Dask connections they already made stay open") {
		t.Errorf("unshare:\n%s", out)
	}
	out = daskClient(t, env, "connect:"+c.Name)
	wantLines(t, "connect after the unshare", out, `(?m)^error ValueError: cluster `+c.Name+` not found$`)
	resp, err = browser.Get(e.url + "/clusters/" + c.Name + "/info/main/workers.html")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("dev2's browser on the dashboard after the unshare: %s, want 404", resp.Status)
	}

	// Logout removes the file and revokes its token.
	if out := dev2.gwOK("logout"); !strings.Contains(out, "Removed "+path+" and revoked its token") {
		t.Errorf("logout:\n%s", out)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the dask configuration is still there after logout: %v", err)
	}
	var tokens []struct {
		Name    string `json:"name"`
		Revoked bool   `json:"revoked"`
	}
	if err := json.Unmarshal([]byte(e.gwStdout("--token", tok, "token", "list", "-o", "json")), &tokens); err != nil {
		t.Fatal(err)
	}
	for _, tk := range tokens {
		if tk.Name == "dask-config" && !tk.Revoked {
			t.Errorf("the dask configuration's token was not revoked: %+v", tokens)
		}
	}
}
