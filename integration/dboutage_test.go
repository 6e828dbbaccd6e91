package integration

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/internal/testutil"
	_ "modernc.org/sqlite" // reads the gateway's SQLite file after the test
)

// requireRoot skips a test that needs root (a PostgreSQL server of its
// own, a filesystem to fill), or fails it when CI says it must run.
func requireRoot(t *testing.T, what string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	msg := what + " needs root; run the test as root (scripts/test.sh in CI does)"
	if os.Getenv(testdb.EnvRequirePostgres) == "1" {
		t.Fatalf("%s=1: %s", testdb.EnvRequirePostgres, msg)
	}
	t.Skip(msg)
}

// pgServer is a PostgreSQL server of the test's own, on a loopback port,
// so that stopping it disturbs no other test using the shared one.
type pgServer struct {
	t          *testing.T
	bin, dir   string
	data, log  string
	port       int
	url, shown string // shown: the URL without its password
}

const pgPassword = "s3cret-outage-pw" // must never reach an answer or a log

func startOwnPostgres(t *testing.T) *pgServer {
	t.Helper()
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(versions) == 0 {
		msg := "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql; scripts/test.sh does)"
		if os.Getenv(testdb.EnvRequirePostgres) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	sort.Slice(versions, func(i, j int) bool { return pgVersion(versions[i]) < pgVersion(versions[j]) })
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("the postgres user: %v", err)
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	// Not t.TempDir: its parents are closed to the postgres user.
	dir, err := os.MkdirTemp("", "gateway-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	s := &pgServer{t: t, bin: filepath.Dir(versions[len(versions)-1]), dir: dir,
		data: filepath.Join(dir, "data"), log: filepath.Join(dir, "server.log"), port: freePort(t)}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(pgPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(pw, uid, gid)
	s.asPostgres(time.Minute, "initdb", "-D", s.data, "-U", "gateway", "--pwfile", pw, "-A", "scram-sha-256", "--no-sync", "-E", "UTF8")
	s.start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "runuser", "-u", "postgres", "--", filepath.Join(s.bin, "pg_ctl"), "-D", s.data, "-m", "immediate", "-w", "stop")
		_ = cmd.Run()
	})
	s.url = fmt.Sprintf("postgres://gateway:%s@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=5", pgPassword, s.port)
	u, _ := url.Parse(s.url)
	s.shown = u.Redacted()
	return s
}

func pgVersion(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// asPostgres runs one of the server's programs as the postgres user,
// within limit.
func (s *pgServer) asPostgres(limit time.Duration, prog string, args ...string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", filepath.Join(s.bin, prog)}, args...)...)
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(s.log)
		s.t.Fatalf("%s %s: %v\n%s\n--- server log:\n%s", prog, strings.Join(args, " "), err, out, lastLines(string(log), 20))
	}
}

func (s *pgServer) start() {
	s.asPostgres(time.Minute, "pg_ctl", "-D", s.data, "-l", s.log, "-w", "-t", "50", "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", s.port, s.dir), "start")
}

// stop shuts the server down the way a restart does: sessions are
// ended, then the port closes.
func (s *pgServer) stop() {
	s.asPostgres(time.Minute, "pg_ctl", "-D", s.data, "-m", "fast", "-w", "-t", "50", "stop")
}

// healthAnswer is /api/health's answer.
type healthAnswer struct {
	code   int
	status string
	db     string // the database check's status
	output string // the database check's output
	raw    string
}

// getHealth asks url (the public /api/health, or the metrics port's
// /health) with token, if any.
func getHealth(url, token string) (healthAnswer, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return healthAnswer{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return healthAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Status string `json:"status"`
		Checks map[string][]struct {
			Status string `json:"status"`
			Output string `json:"output"`
		} `json:"checks"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return healthAnswer{}, fmt.Errorf("health body %q: %w", b, err)
	}
	h := healthAnswer{code: resp.StatusCode, status: body.Status, raw: string(b)}
	if d := body.Checks["database"]; len(d) > 0 {
		h.db, h.output = d[0].Status, d[0].Output
	}
	return h, nil
}

// checkHealthAudiences checks, while the database is down, that the
// public /api/health tells an anonymous caller and a user only that it
// fails, and that an admin's request and the metrics port's /health say
// what failed, with detail in it (issue 32, finding 6).
func checkHealthAudiences(t *testing.T, e *env, metrics, userToken, adminToken, detail string) {
	t.Helper()
	for _, who := range []struct{ name, token string }{{"anonymous", ""}, {"a user", userToken}} {
		h, err := getHealth(e.url+"/api/health", who.token)
		if err != nil || h.code != http.StatusServiceUnavailable || strings.TrimSpace(h.raw) != `{"status":"fail"}` {
			t.Errorf("health for %s with the database down: %+v %v, want 503 {\"status\":\"fail\"} and nothing more", who.name, h, err)
		}
	}
	for _, who := range []struct{ name, url, token string }{
		{"an admin", e.url + "/api/health", adminToken},
		{"the metrics port", metrics, ""},
	} {
		h, err := getHealth(who.url, who.token)
		if err != nil || h.code != http.StatusServiceUnavailable || h.db != "fail" || !strings.Contains(h.output, detail) {
			t.Errorf("health for %s with the database down: %+v %v, want 503 with the database check failing and naming %s", who.name, h, err, detail)
		}
	}
}

// adminIDToken logs the dev issuer's admin in and uses the ID token once,
// so that this gateway has verified it (and can again while the database
// is away).
func adminIDToken(t *testing.T, e *env) string {
	t.Helper()
	tok := e.userEnv(t, "admin").token()
	if code, body, err := apiCall(e.url, tok, "GET", "/api/v1/whoami", ""); err != nil || code != http.StatusOK || !strings.Contains(body, `"admin":true`) {
		t.Fatalf("admin whoami: %d %s %v", code, body, err)
	}
	return tok
}

// apiCall makes one authenticated API request and returns its status and
// body.
func apiCall(base, token, method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func readGatewayID(t *testing.T, e *env) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dataDir(), "gateway-id"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))[:15]
}

// TestDatabaseOutage: PostgreSQL is stopped and started again while
// clusters are being created, scaled and stopped by a gateway on it.
// While it is down, /api/health answers 503 naming the server, and
// requests that need it get 503 database_unavailable (never a password);
// once it is back the gateway serves again within seconds, every request
// it acknowledged ends as asked, and no member process is doubled or
// left behind.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	requireRoot(t, "TestDatabaseOutage starts and stops a PostgreSQL server of its own, which")
	pg := startOwnPostgres(t)
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	e := newEnv(t, "GATEWAY_DATABASE_URL="+pg.url, "GATEWAY_CLUSTER_POLL_INTERVAL=300ms",
		"GATEWAY_CLUSTER_REAP_GRACE=5s", "GATEWAY_CLUSTER_REAP_INTERVAL=1s", "GATEWAY_METRICS_LISTEN="+metrics)
	e.startGateway()
	gatewayID := readGatewayID(t, e)
	token := e.token()
	adminToken := adminIDToken(t, e)

	// Three clusters before the outage, to be scaled and stopped during it.
	want := map[string]int{} // cluster -> workers wanted; -1: stopped
	var before []string
	for range 3 {
		var cl struct{ Name string }
		e.gwJSON(&cl, "new-cluster", "--no-wait", "--workers", "1")
		want[cl.Name] = 1
		before = append(before, cl.Name)
	}
	settle(t, e, want)

	// Requests flow all through the outage, one after another: creates
	// (three acknowledged at most), scales of one cluster up and down and
	// of another, and a stop. Each is acknowledged, or refused with 503
	// database_unavailable, never anything else.
	d := &requestStream{base: e.url, token: token, last: map[string]streamOp{}}
	streamDone := make(chan struct{})
	stopStream := make(chan struct{})
	go func() {
		defer close(streamDone)
		d.run(t, before, stopStream)
	}()
	time.Sleep(time.Second) // some requests before the outage

	stopping := time.Now()
	pg.stop()
	downAt := time.Now()
	t.Logf("PostgreSQL stopped in %s", downAt.Sub(stopping).Round(time.Millisecond))

	// While it is down: health fails, naming the server to admins and on
	// the metrics port only; a request that needs the store is 503
	// database_unavailable.
	var failedHealth healthAnswer
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		h, err := getHealth("http://"+metrics+"/health", "")
		if err != nil {
			t.Fatalf("health while PostgreSQL is down: %v", err)
		}
		if h.code == http.StatusServiceUnavailable {
			failedHealth = h
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if failedHealth.code != http.StatusServiceUnavailable || failedHealth.status != "fail" || failedHealth.db != "fail" ||
		!strings.Contains(failedHealth.output, fmt.Sprintf("cannot reach PostgreSQL at 127.0.0.1:%d", pg.port)) {
		t.Errorf("health while PostgreSQL is down: %+v, want 503 with the database check failing and naming 127.0.0.1:%d", failedHealth, pg.port)
	}
	checkHealthAudiences(t, e, "http://"+metrics+"/health", token, adminToken, fmt.Sprintf("cannot reach PostgreSQL at 127.0.0.1:%d", pg.port))
	out, cliErr := e.gw("list")
	if cliErr == nil || !strings.Contains(out, "database is unavailable") || !strings.Contains(out, "cannot reach PostgreSQL") {
		t.Errorf("gateway list while PostgreSQL is down: %v\n%s", cliErr, out)
	}
	for _, s := range []string{failedHealth.raw, out} {
		if strings.Contains(s, pgPassword) {
			t.Errorf("an answer carries the database password: %s", s)
		}
	}
	time.Sleep(time.Until(downAt.Add(3 * time.Second))) // an outage of a few seconds at least

	pg.start()
	back := time.Now()
	outage := back.Sub(downAt)
	// How long until the gateway serves again: health passes and an
	// authenticated request that reads the store answers.
	var healthy, serving time.Duration
	deadline = back.Add(60 * time.Second)
	for time.Now().Before(deadline) && (healthy == 0 || serving == 0) {
		if h, err := getHealth(e.url+"/api/health", ""); healthy == 0 && err == nil && h.code == http.StatusOK {
			healthy = time.Since(back)
		}
		if code, _, err := apiCall(e.url, token, "GET", "/api/v1/clusters/", ""); serving == 0 && err == nil && code == http.StatusOK {
			serving = time.Since(back)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if healthy == 0 || serving == 0 {
		t.Fatalf("the gateway did not serve again within 60s of PostgreSQL's return\n--- gateway log:\n%s", lastLines(e.gwLog.String(), 40))
	}
	time.Sleep(time.Second) // requests after the outage too
	close(stopStream)
	<-streamDone
	if d.refused == 0 {
		t.Errorf("no request met the outage: the test proved nothing")
	}

	// What was acknowledged must happen. A cluster's last request, if it
	// was refused, is asked again, as a user would.
	for _, name := range d.created {
		want[name] = 1
	}
	for name, op := range d.last {
		if !op.acked {
			e.gwOK(op.args()...)
		}
		want[name] = op.workers
	}
	// A create cut off after its commit is a cluster too (the user
	// would find it in the list); one acknowledged must be there.
	var all []struct{ Name string }
	e.gwJSON(&all, "list", "--all")
	listed := map[string]bool{}
	for _, c := range all {
		listed[c.Name] = true
		if _, ok := want[c.Name]; !ok {
			want[c.Name] = 1
		}
	}
	lost := 0
	for name := range want {
		if !listed[name] {
			lost++
			t.Errorf("cluster %s, acknowledged, is not in the store", name)
		}
	}
	settle(t, e, want)
	leaked, duplicated := countMembers(t, gatewayID, want)
	if strings.Contains(e.gwLog.String(), pgPassword) {
		t.Errorf("the gateway's log carries the database password")
	}
	t.Logf("database outage: %s; health passed %s and the API served %s after PostgreSQL was back", outage.Round(time.Millisecond),
		healthy.Round(time.Millisecond), serving.Round(time.Millisecond))
	figure(t, "database outage test: outage %.1f s, serving again after %.2f s (health %.2f s), clusters: %d, requests: %d acknowledged, %d refused with 503, lost: %d, duplicated: %d, leaked: %d",
		outage.Seconds(), serving.Seconds(), healthy.Seconds(), len(want), d.acked, d.refused, lost, duplicated, leaked)

	e.gwOK("stop", "--all")
	for n := range want {
		waitNoMembers(t, n)
	}
}

// TestSQLiteFullDisk: the gateway's SQLite database lives on a small
// filesystem that fills up. Writes get 503 naming the disk, health says
// so, nothing half-written remains, and once space is freed everything
// works again.
func TestSQLiteFullDisk(t *testing.T) {
	t.Parallel()
	requireRoot(t, "TestSQLiteFullDisk mounts a small tmpfs, which")
	mnt := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		testutil.Missing(t, testutil.EnvRequireSandbox, fmt.Sprintf("cannot mount a tmpfs here (a container without CAP_SYS_ADMIN?): %v %s", err, out))
	}
	// Registered before the gateway's cleanup, so it runs after it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", mnt, err, out)
		}
	})
	dbPath := filepath.Join(mnt, "gateway.db")
	metrics := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	e := newEnv(t, "GATEWAY_DATABASE_URL=sqlite://"+dbPath, "GATEWAY_CLUSTER_POLL_INTERVAL=300ms", "GATEWAY_METRICS_LISTEN="+metrics)
	e.startGateway()
	gatewayID := readGatewayID(t, e)
	token := e.token()
	adminToken := adminIDToken(t, e)

	want := map[string]int{}
	var first struct{ Name string }
	e.gwJSON(&first, "new-cluster", "--no-wait", "--workers", "1")
	want[first.Name] = 1
	settle(t, e, want)

	// Fill the disk: the WAL first folded into the database and cut to
	// nothing, so that the next writes need new space.
	checkpoint(t, dbPath)
	filler := filepath.Join(mnt, "filler")
	fill(t, filler)

	// Writes fail, sooner or later (pages freed earlier may take a few),
	// with 503 naming the disk; acknowledged creates are clusters.
	diskMsg := "disk is full (" + mnt + ")"
	var refused string
	for i := 0; i < 20 && refused == ""; i++ {
		code, body, err := apiCall(e.url, token, "POST", "/api/v1/clusters/", `{"cluster_options":{"workers":0}}`)
		switch {
		case err != nil:
			t.Fatalf("create on a full disk: %v", err)
		case code == http.StatusCreated:
			var cl struct{ Name string }
			_ = json.Unmarshal([]byte(body), &cl)
			want[cl.Name] = 0
		case code == http.StatusServiceUnavailable && strings.Contains(body, `"database_unavailable"`) && strings.Contains(body, diskMsg):
			refused = body
		default:
			t.Fatalf("create on a full disk: %d %s, want 201 or 503 naming %s", code, body, mnt)
		}
	}
	if refused == "" {
		t.Fatalf("20 creates succeeded on a full disk\n--- gateway log:\n%s", lastLines(e.gwLog.String(), 30))
	}
	// Health says so (where, to admins and on the metrics port only), and
	// other writes are refused the same way.
	checkHealthAudiences(t, e, "http://"+metrics+"/health", token, adminToken, diskMsg)
	code, body, err := apiCall(e.url, token, "POST", "/api/v1/clusters/"+first.Name+"/scale", `{"count":2}`)
	if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, diskMsg) {
		t.Errorf("scale on a full disk: %d %s %v", code, body, err)
	}
	out, cliErr := e.gw("stop", "--wait=false", first.Name)
	if cliErr == nil || !strings.Contains(out, diskMsg) {
		t.Errorf("gateway stop on a full disk: %v\n%s", cliErr, out)
	}

	// Room again: health passes within seconds, and writes work.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := getHealth(e.url+"/api/health", "")
		if err == nil && h.code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health after space was freed: %+v %v", h, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.gwOK("scale", first.Name, "--workers", "2")
	want[first.Name] = 2
	var again struct{ Name string }
	e.gwJSON(&again, "new-cluster", "--no-wait", "--workers", "1")
	want[again.Name] = 1
	settle(t, e, want)
	leaked, duplicated := countMembers(t, gatewayID, want)
	e.gwOK("stop", "--all")
	for n := range want {
		waitNoMembers(t, n)
	}
	e.stopGateway(syscall.SIGTERM)

	// Nothing half-written: the store holds exactly the clusters whose
	// creation was acknowledged, each with its creation event, and every
	// usage record belongs to one of them.
	halfWritten := checkNoHalfWrites(t, dbPath, want)
	t.Logf("full disk: refused with %s", strings.TrimSpace(refused))
	figure(t, "sqlite full disk test: clusters: %d, half-written: %d, duplicated: %d, leaked: %d", len(want), halfWritten, duplicated, leaked)
}

// checkpoint folds SQLite's WAL into the database and truncates it.
func checkpoint(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
}

// fill writes path until its filesystem has no space left.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := 0; i < 1<<16; i++ {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			t.Fatal(err)
		}
	}
	small := make([]byte, 512) // the last partial pages
	for i := 0; i < 1<<12; i++ {
		if _, err := f.Write(small); err != nil {
			return
		}
	}
	t.Fatal("the filesystem did not fill")
}

func checkNoHalfWrites(t *testing.T, path string, want map[string]int) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	bad := 0
	names := func(q string) map[string]int {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int{}
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			out[n]++
		}
		return out
	}
	clusters := names(`SELECT name FROM clusters`)
	created := names(`SELECT cluster FROM cluster_events WHERE kind = 'created'`)
	usage := names(`SELECT cluster FROM usage_events`)
	for n := range clusters {
		if _, ok := want[n]; !ok {
			bad++
			t.Errorf("the store holds cluster %s, whose creation was refused", n)
		}
		if created[n] != 1 {
			bad++
			t.Errorf("cluster %s has %d creation events", n, created[n])
		}
	}
	for n := range want {
		if clusters[n] == 0 {
			bad++
			t.Errorf("acknowledged cluster %s is not in the store", n)
		}
	}
	for n := range usage {
		if clusters[n] == 0 {
			bad++
			t.Errorf("usage records of %s, which the store does not hold", n)
		}
	}
	for n := range created {
		if clusters[n] == 0 {
			bad++
			t.Errorf("events of %s, which the store does not hold", n)
		}
	}
	return bad
}

// streamOp is a request of the stream: a scale to workers, or a stop
// (workers -1).
type streamOp struct {
	cluster string
	workers int
	acked   bool
}

func (o streamOp) args() []string {
	if o.workers < 0 {
		return []string{"stop", "--wait=false", o.cluster}
	}
	return []string{"scale", o.cluster, "--workers", strconv.Itoa(o.workers)}
}

// requestStream sends requests one after another through an outage.
type requestStream struct {
	base, token    string
	created        []string
	last           map[string]streamOp // each cluster's last scale or stop
	acked, refused int
}

func (d *requestStream) run(t *testing.T, before []string, stop <-chan struct{}) {
	flip, stopped := 2, false
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(150 * time.Millisecond):
		}
		var method, path, body string
		var op *streamOp
		switch i % 4 {
		case 0:
			if len(d.created) >= 3 {
				continue
			}
			method, path, body = "POST", "/api/v1/clusters/", `{"cluster_options":{"workers":1}}`
		case 1:
			op = &streamOp{cluster: before[0], workers: flip}
		case 2:
			op = &streamOp{cluster: before[2], workers: 2}
		case 3:
			if stopped {
				continue
			}
			op = &streamOp{cluster: before[1], workers: -1}
		}
		if op != nil {
			method, path, body = "POST", "/api/v1/clusters/"+op.cluster+"/scale", fmt.Sprintf(`{"count":%d}`, op.workers)
			if op.workers < 0 {
				method, path, body = "DELETE", "/api/v1/clusters/"+op.cluster, ""
			}
		}
		code, resp, err := apiCall(d.base, d.token, method, path, body)
		switch {
		case err != nil:
			t.Errorf("%s %s: %v", method, path, err)
			continue
		case code == http.StatusServiceUnavailable && strings.Contains(resp, `"database_unavailable"`):
			d.refused++
		case code < 300:
			d.acked++
		default:
			t.Errorf("%s %s during the outage: %d %s, want success or 503 database_unavailable", method, path, code, resp)
			continue
		}
		ok := code < 300
		switch {
		case op == nil && ok:
			var cl struct{ Name string }
			_ = json.Unmarshal([]byte(resp), &cl)
			d.created = append(d.created, cl.Name)
		case op != nil:
			op.acked = ok
			d.last[op.cluster] = *op
			if ok && op.cluster == before[0] {
				flip = 3 - flip // 2, 1, 2, ...
			}
			if ok && op.workers < 0 {
				stopped = true
			}
		}
	}
}
