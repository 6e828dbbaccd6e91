package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dc "github.com/ory/dockertest/v3/docker"

	"github.com/gatewayhq/gateway/internal/testdb"
	"github.com/gatewayhq/gateway/internal/testdocker"
)

// TestEnvStateAcrossReplicas (issue 16, point 6): two gateways on the
// docker provider share one PostgreSQL, each with a data directory of its
// own (so that nothing reaches the other through files). A user builds an
// environment through replica A; A restarts; through either replica the
// user still sees its status and build log, and it runs for them; another
// user gets "not found" for both, and may not run it.
func TestEnvStateAcrossReplicas(t *testing.T) {
	t.Parallel()
	var pgURL string
	for _, s := range testdb.URLs(t) {
		if s.Name == "postgres" {
			pgURL = s.URL
		}
	}
	if pgURL == "" {
		t.Skip("needs PostgreSQL: set GATEWAY_TEST_POSTGRES_URL (scripts/test.sh does, as root)")
	}
	pool := testdocker.Pool(t)
	image := testdocker.DaskImage(t)
	rootfs := testdocker.Rootfs(t)

	id := fmt.Sprintf("gw-envstate-%d", time.Now().UnixNano()%1_000_000_000)
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	doc := fmt.Sprintf("provider: docker\ngateway_id: %s\nproviders:\n  docker:\n    image: %s\n", id, image)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeContainers(t, pool, id) })
	replica := func(name string) *env {
		e := newEnv(t, "GATEWAY_CONFIG="+cfg, "GATEWAY_DATABASE_URL="+pgURL, "GATEWAY_DATA_DIR="+filepath.Join(t.TempDir(), name),
			"GATEWAY_REPLICA_ID="+name, "GATEWAY_CLUSTER_POLL_INTERVAL=300ms")
		e.startGateway()
		return e
	}
	a, b := replica("replica-a"), replica("replica-b")
	var tok struct{ Token string }
	a.gwJSON(&tok, "token", "create", "--name", "envstate", "--expires", "1h")
	user := func(r *env) *env {
		u := &env{t: t, bin: r.bin, home: t.TempDir(), gwLog: r.gwLog, url: r.url}
		u.vars = append(filterEnv(os.Environ()), "HOME="+u.home, "XDG_CONFIG_HOME="+filepath.Join(u.home, "config"),
			"GATEWAY_URL="+r.url, "GATEWAY_TOKEN="+tok.Token)
		return u
	}

	// The image's own Python, and a module made for this run: a new
	// environment, which replica A builds.
	work := t.TempDir()
	userPython := testdocker.ChrootPython(t, rootfs, work)
	code := filepath.Join(work, "project")
	if err := os.MkdirAll(code, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "envstate.py"), []byte(fmt.Sprintf("RUN = %d\n", time.Now().UnixNano())), 0o644); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Hash, Image, State string
		Built              bool
	}
	user(a).gwJSON(&st, "env", "build", "--python", userPython, "--code-dir", code)
	if st.State != "ready" || !st.Built || len(st.Hash) != 64 {
		t.Fatalf("env build through replica A: %+v", st)
	}
	t.Cleanup(func() { _ = pool.Client.RemoveImageExtended(st.Image, dc.RemoveImageOptions{Force: true}) })

	// Replica A restarts (its data directory kept, as a deployed gateway's
	// is not: nothing of this is read from it).
	a.stopGateway(syscall.SIGTERM)
	a.startGateway()

	// Another user, signed in through B; an API token of theirs works on
	// both replicas.
	var otherTok struct{ Token string }
	b.userEnv(t, "dev2").gwJSON(&otherTok, "token", "create", "--name", "dev2", "--expires", "1h")
	for _, r := range []*env{a, b} {
		u := user(r)
		var got struct{ Hash, Image, State string }
		u.gwJSON(&got, "env", "status", st.Hash[:16])
		if got.Hash != st.Hash || got.State != "ready" || got.Image != st.Image {
			t.Errorf("env status through %s after the restart: %+v", r.url, got)
		}
		logs := u.gwOK("env", "logs", st.Hash)
		if !strings.Contains(logs, "build of "+st.Image+" started") || !strings.Contains(logs, "is ready") {
			t.Errorf("env logs through %s after the restart:\n%s", r.url, logs)
		}
		o := &env{t: t, bin: r.bin, home: t.TempDir(), gwLog: r.gwLog, url: r.url}
		o.vars = append(filterEnv(os.Environ()), "HOME="+o.home, "XDG_CONFIG_HOME="+filepath.Join(o.home, "config"),
			"GATEWAY_URL="+r.url, "GATEWAY_TOKEN="+otherTok.Token)
		for _, args := range [][]string{{"env", "status", st.Hash}, {"env", "logs", st.Hash}} {
			out, err := o.gw(args...)
			if err == nil || !strings.Contains(out, "not found") || strings.Contains(out, "is ready") {
				t.Errorf("%s as another user through %s: err=%v\n%s", strings.Join(args, " "), r.url, err, out)
			}
		}
		out, err := o.gw("new-cluster", "--env", st.Hash, "--no-wait")
		if err == nil || !strings.Contains(out, "no environment") {
			t.Errorf("new-cluster --env as another user through %s: err=%v\n%s", r.url, err, out)
		}
		out, err = o.gw("new-cluster", "--image", st.Image, "--no-wait")
		if err == nil || !strings.Contains(out, "you may not run that image") {
			t.Errorf("new-cluster --image as another user through %s: err=%v\n%s", r.url, err, out)
		}
	}
	// The user runs it through replica B, which did not build it.
	viaB := user(b)
	var cl struct{ Name string }
	viaB.gwJSON(&cl, "new-cluster", "--env", st.Hash, "--workers", "1", "--no-wait")
	waitRunning(t, viaB, cl.Name, 1)
	viaB.gwOK("stop", cl.Name)
}
