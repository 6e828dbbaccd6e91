package integration

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// cluster is the CLI's -o json answer of new-cluster.
type cluster struct {
	Name             string `json:"name"`
	Status           string `json:"status"`
	Workers          int    `json:"workers"`
	SchedulerAddress string `json:"scheduler_address"`
	ServerName       string `json:"tls_server_name"`
	DashboardURL     string `json:"dashboard_url"`
	TLSCertFile      string `json:"tls_cert_file"`
	TLSKeyFile       string `json:"tls_key_file"`
	Python           string `json:"python"`
}

func TestEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()

	var c cluster
	e.gwJSON(&c, "new-cluster", "--workers", "2")
	if c.Status != "RUNNING" || c.Workers != 2 {
		t.Fatalf("new-cluster: got status %s with %d workers, want RUNNING with 2", c.Status, c.Workers)
	}
	host := strings.TrimPrefix(e.url, "http://")
	if c.SchedulerAddress != "tls://"+host {
		t.Fatalf("scheduler address %q, want the gateway's own port tls://%s", c.SchedulerAddress, host)
	}
	if c.ServerName != "daskgateway-"+c.Name {
		t.Fatalf("server name %q", c.ServerName)
	}

	// The text form shows progress and the Python snippet.
	show := e.gwOK("show", c.Name)
	for _, want := range []string{"RUNNING", "2 ready of 2 requested", "tls://" + host, "/clusters/" + c.Name + "/status", "GatewaySecurity("} {
		if !strings.Contains(show, want) {
			t.Errorf("gateway show lacks %q:\n%s", want, show)
		}
	}

	// A real Dask client, through the gateway's port only, with the snippet
	// the CLI printed.
	out, err := e.runPython(c.Python + `
import dask.array as da
print("sum", client.submit(sum, range(100)).result())
print("array", da.ones((1000, 1000), chunks=100).sum().compute())
print("workers", len(client.scheduler_info()["workers"]))
print("address", client.scheduler.address)
client.close()
`)
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, out)
	}
	for _, want := range []string{"sum 4950", "array 1000000.0", "workers 2", "address tls://" + host} {
		if !strings.Contains(out, want) {
			t.Errorf("python output lacks %q:\n%s", want, out)
		}
	}

	// The dashboard, served by the scheduler through the gateway.
	tok := e.token()
	for _, path := range []string{"/health", "/info/main/workers.html", "/json/counts.json"} {
		code, body := get(t, e.url+"/clusters/"+c.Name+path, tok)
		if code != http.StatusOK {
			t.Errorf("dashboard %s: %d %s", path, code, body)
		}
		if path == "/info/main/workers.html" && !strings.Contains(body, "Workers") {
			t.Errorf("workers page is not the scheduler's:\n%s", body)
		}
	}
	if code, _ := get(t, e.url+"/clusters/"+c.Name+"/health", ""); code != http.StatusUnauthorized {
		t.Errorf("dashboard without credentials: %d, want 401", code)
	}
	if code, _ := get(t, e.url+"/clusters/"+c.Name+"/health", "wrong-token-0123456789"); code != http.StatusUnauthorized {
		t.Errorf("dashboard with a wrong token: %d, want 401", code)
	}

	// In a browser: a one-time link sets a session cookie, then the plain
	// dashboard URL works; the link does not work twice.
	link := strings.TrimSpace(e.gwStdout("dashboard", c.Name))
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "Sign in as dev") {
		t.Fatalf("sign-in link: %d %s", resp.StatusCode, page)
	}
	lu, _ := url.Parse(link)
	resp, err = browser.PostForm(e.url+"/auth/ticket", url.Values{"t": {lu.Query().Get("t")}, "next": {lu.Query().Get("next")}})
	if err != nil {
		t.Fatal(err)
	}
	landed, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !dashboardStatusPage(resp.StatusCode, string(landed)) || resp.Request.URL.Path != "/clusters/"+c.Name+"/status" {
		t.Fatalf("sign-in: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	resp, err = browser.Get(e.url + "/clusters/" + c.Name + "/info/main/workers.html")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("dashboard with the session cookie: %d", resp.StatusCode)
	}
	resp, err = http.PostForm(e.url+"/auth/ticket", url.Values{"t": {lu.Query().Get("t")}, "next": {lu.Query().Get("next")}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("sign-in link used twice: %d, want 401", resp.StatusCode)
	}

	// Scale up, and the scheduler sees it.
	e.gwOK("scale", c.Name, "--workers", "3", "--wait")
	out, err = e.runPython(c.Python + `
import time
deadline = time.time() + 30
while len(client.scheduler_info()["workers"]) < 3 and time.time() < deadline:
    time.sleep(0.1)
print("workers", len(client.scheduler_info()["workers"]))
`)
	if err != nil || !strings.Contains(out, "workers 3") {
		t.Fatalf("after scale to 3: %v\n%s", err, out)
	}
	if n := len(memberPIDs(c.Name)); n != 4 {
		t.Errorf("%d processes for scheduler + 3 workers, want 4", n)
	}

	var list []struct {
		Name    string `json:"name"`
		State   string `json:"state"`
		Workers struct {
			Ready int `json:"ready"`
		} `json:"workers"`
	}
	e.gwJSON(&list, "list")
	if len(list) != 1 || list[0].Name != c.Name || list[0].State != "RUNNING" || list[0].Workers.Ready != 3 {
		t.Errorf("list: %+v", list)
	}

	var jlogs []struct{ Member, Line string }
	e.gwJSON(&jlogs, "logs", c.Name, "--tail", "5")
	if len(jlogs) == 0 || jlogs[0].Member != "scheduler" || jlogs[0].Line == "" {
		t.Errorf("logs -o json: %+v", jlogs)
	}
	logs := e.gwOK("logs", c.Name, "--tail", "50")
	if !strings.Contains(logs, "[scheduler]") || !strings.Contains(logs, "Scheduler at") || !strings.Contains(logs, "[worker-0]") {
		t.Errorf("logs lack the scheduler's or a worker's lines:\n%s", lastLines(logs, 20))
	}

	// Stop: nothing of the cluster keeps running.
	e.gwOK("stop", c.Name)
	waitNoMembers(t, c.Name)
	var after []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	}
	e.gwJSON(&after, "list", "--all")
	if len(after) != 1 || after[0].State != "STOPPED" {
		t.Errorf("after stop: %+v", after)
	}
	if code, _ := get(t, e.url+"/clusters/"+c.Name+"/health", tok); code != http.StatusNotFound {
		t.Errorf("dashboard of a stopped cluster: %d, want 404", code)
	}
	if _, err := os.Stat(c.TLSKeyFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the CLI kept the stopped cluster's key at %s", c.TLSKeyFile)
	}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSchedulerRouteNeedsClientCertificate: knowing a cluster's name, or
// holding another cluster's credentials, does not reach its scheduler.
func TestSchedulerRouteNeedsClientCertificate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	var a, b cluster
	e.gwJSON(&a, "new-cluster")
	e.gwJSON(&b, "new-cluster")
	host := strings.TrimPrefix(e.url, "http://")

	caA := loadPool(t, a.TLSCertFile)
	certA, err := tls.LoadX509KeyPair(a.TLSCertFile, a.TLSKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	certB, err := tls.LoadX509KeyPair(b.TLSCertFile, b.TLSKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		certs  []tls.Certificate
		server string
		ok     bool
	}{
		{"own certificate", []tls.Certificate{certA}, "daskgateway-" + a.Name, true},
		{"no client certificate", nil, "daskgateway-" + a.Name, false},
		{"another cluster's certificate", []tls.Certificate{certB}, "daskgateway-" + a.Name, false},
		{"unknown cluster", []tls.Certificate{certA}, "daskgateway-0000000000000000", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := daskHandshake(host, tc.server, caA, tc.certs)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("the scheduler accepted the connection")
			}
		})
	}
}

func loadPool(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in", file)
	}
	return p
}

// daskHandshake opens a TLS connection through the gateway and waits for the
// scheduler's first answer. TLS 1.3 servers check the client certificate
// after the client's handshake finishes, so a refusal shows on the first
// read; a Dask scheduler that accepted says nothing until spoken to, so a
// read timeout means accepted.
func daskHandshake(addr, serverName string, roots *x509.CertPool, certs []tls.Certificate) error {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{
		ServerName: serverName, RootCAs: roots, Certificates: certs,
		// Dask's certificates name "dask-internal", not the SNI label.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			c, err := x509.ParseCertificate(raw[0])
			if err != nil {
				return err
			}
			_, err = c.Verify(x509.VerifyOptions{Roots: roots})
			return err
		},
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	var buf [1]byte
	_, err = conn.Read(buf[:])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	if err == nil {
		return nil
	}
	return err
}

// TestBadInput: every malformed request gets a 4xx that says what to fix,
// and creates nothing.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.startGateway()
	tok := e.token()
	cases := []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"unknown cluster", "GET", "/api/v1/clusters/0123456789abcdef", "", 404, "cluster_not_found", "not found"},
		{"malformed name", "GET", "/api/v1/clusters/..%2F..%2Fetc", "", 404, "cluster_not_found", "not found"},
		{"scale unknown cluster", "POST", "/api/v1/clusters/0123456789abcdef/scale", `{"count": 1}`, 404, "cluster_not_found", "not found"},
		{"malformed JSON", "POST", "/api/v1/clusters/", `{"cluster_options": `, 400, "malformed_json", "not valid JSON"},
		{"empty body", "POST", "/api/v1/clusters/", ``, 400, "malformed_json", "empty"},
		{"negative workers", "POST", "/api/v1/clusters/", `{"cluster_options": {"workers": -1}}`, 422, "invalid_request", "workers must be between 0 and 50"},
		{"absurd workers", "POST", "/api/v1/clusters/", `{"cluster_options": {"workers": 1000000000}}`, 422, "invalid_request", "workers must be between 0 and 50"},
		{"fractional workers", "POST", "/api/v1/clusters/", `{"cluster_options": {"workers": 1.5}}`, 422, "invalid_request", "whole number"},
		{"string workers", "POST", "/api/v1/clusters/", `{"cluster_options": {"workers": "two"}}`, 422, "invalid_request", "whole number"},
		{"unknown option", "POST", "/api/v1/clusters/", `{"cluster_options": {"gpus": 8}}`, 422, "invalid_request", "unknown option(s) gpus; known options are idle_timeout, worker_memory, worker_threads, workers"},
		{"tiny memory", "POST", "/api/v1/clusters/", `{"cluster_options": {"worker_memory": 0.001}}`, 422, "invalid_request", "worker_memory must be between"},
		{"bad status filter", "GET", "/api/v1/clusters/?status=BOGUS", "", 422, "invalid_request", "unknown status"},
		// A value of the wrong type is a 422 (dask-gateway's ValueError) on every route, before any lookup.
		{"scale count as a string", "POST", "/api/v1/clusters/0123456789abcdef/scale", `{"count": "2"}`, 422, "invalid_request", "count must be a whole number, not string"},
		{"adapt minimum as a string", "POST", "/api/v1/clusters/0123456789abcdef/adapt", `{"minimum": "1"}`, 422, "invalid_request", "minimum must be a whole number, not string"},
		{"options not an object", "POST", "/api/v1/clusters/", `{"cluster_options": [1]}`, 422, "invalid_request", "cluster_options must be a JSON object"},
		{"unknown route", "GET", "/api/v1/nothing", "", 404, "not_found", "no API route"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, e.url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error, Code, Message string
			}
			raw, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("%d answer is not JSON: %s", resp.StatusCode, raw)
			}
			if resp.StatusCode != tc.status || body.Code != tc.code || !strings.Contains(body.Message, tc.msg) || body.Error != body.Message {
				t.Fatalf("got %d %+v, want %d %s containing %q", resp.StatusCode, body, tc.status, tc.code, tc.msg)
			}
		})
	}
	var all []any
	e.gwJSON(&all, "list", "--all")
	if len(all) != 0 {
		t.Fatalf("bad requests created clusters: %v", all)
	}

	// The CLI says the same in words, and exits non-zero.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "0123456789abcdef"}, "cluster 0123456789abcdef not found"},
		{[]string{"stop", "0123456789abcdef"}, "cluster 0123456789abcdef not found"},
		{[]string{"scale", "0123456789abcdef", "--workers", "2"}, "not found"},
		{[]string{"scale", "0123456789abcdef"}, "say how many workers"},
		{[]string{"new-cluster", "--workers", "-3"}, "--workers must not be negative"},
		{[]string{"new-cluster", "--workers", "999"}, "workers must be between 0 and 50"},
		{[]string{"new-cluster", "--worker-memory", "lots"}, "use a size such as 2GiB"},
		{[]string{"list", "-o", "yaml"}, "use text or json"},
		{[]string{"stop"}, "name the clusters to stop, or pass --all"},
	} {
		out, err := e.gw(tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("gateway %s: err=%v, output %q lacks %q", strings.Join(tc.args, " "), err, out, tc.want)
		}
	}

	// Without credentials: 401 naming the fix.
	resp, err := http.Get(e.url + "/api/v1/clusters/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("no credentials: %d", resp.StatusCode)
	}
	// Scaling a stopped cluster conflicts.
	var c cluster
	e.gwJSON(&c, "new-cluster")
	e.gwOK("stop", c.Name)
	out, err := e.gw("scale", c.Name, "--workers", "1")
	if err == nil || !strings.Contains(out, "is STOPPED; only a pending or running cluster can be scaled") {
		t.Fatalf("scale of a stopped cluster: %v %s", err, out)
	}
}
