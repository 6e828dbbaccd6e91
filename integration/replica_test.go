package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/internal/testdb"
)

// TestReplicas: three gateways on one PostgreSQL share the work. Clusters
// made through one are reachable through any; when one is killed with
// clusters in flight, the others take them over, with nothing lost or
// doubled.
func TestReplicas(t *testing.T) {
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
	shared := filepath.Join(t.TempDir(), "shared")
	const gatewayID = "gw-replicas-test"
	replica := func(id string) *env {
		e := newEnv(t, "GATEWAY_DATABASE_URL="+pgURL, "GATEWAY_DATA_DIR="+shared, "GATEWAY_GATEWAY_ID="+gatewayID,
			"GATEWAY_REPLICA_ID="+id, "GATEWAY_CLUSTER_LEASE_TTL=2s", "GATEWAY_CLUSTER_POLL_INTERVAL=500ms",
			"GATEWAY_CLUSTER_ON_SHUTDOWN=leave")
		e.startGateway()
		return e
	}
	a, b, c := replica("replica-a"), replica("replica-b"), replica("replica-c")

	var tok struct{ Token string }
	a.gwJSON(&tok, "token", "create", "--name", "replicas", "--expires", "1h")
	user := func(r *env) *env {
		u := &env{t: t, bin: r.bin, home: t.TempDir(), gwLog: r.gwLog, url: r.url}
		u.vars = append(filterEnv(os.Environ()), "HOME="+u.home, "XDG_CONFIG_HOME="+filepath.Join(u.home, "config"),
			"GATEWAY_URL="+r.url, "GATEWAY_TOKEN="+tok.Token)
		return u
	}
	viaA, viaB, viaC := user(a), user(b), user(c)

	want := map[string]int{}
	for i := 0; i < 6; i++ {
		var cl struct{ Name string }
		viaA.gwJSON(&cl, "new-cluster", "--no-wait", "--workers", "1")
		want[cl.Name] = 1
	}
	settle(t, viaB, want)

	// Any replica routes to any cluster: a cluster made through A, used
	// through C's port.
	var some string
	for n := range want {
		some = n
		break
	}
	var shown struct{ Connection struct{ Python string } }
	viaC.gwJSON(&shown, "show", some)
	out, err := viaC.runPython(shown.Connection.Python + "\nprint('sum', client.submit(sum, range(100)).result())\n")
	if err != nil || !strings.Contains(out, "sum 4950") {
		t.Fatalf("Dask through another replica's port: %v\n%s", err, out)
	}

	// Kill A, which made the clusters and holds their leases, with scale
	// requests in flight; B and C must take its clusters over to do them.
	n := 0
	for name := range want {
		if n%2 == 0 {
			viaB.gwOK("scale", name, "--workers", "2")
			want[name] = 2
		}
		n++
		if n == 2 {
			a.kill9()
		}
	}
	settle(t, viaC, want)
	// A made the clusters and reconciled them first: the others had to
	// take its members over.
	if !strings.Contains(b.gwLog.String()+c.gwLog.String(), "picked up a member started by another gateway process") {
		t.Errorf("no replica took over a member of the killed one\n--- A:\n%s\n--- B:\n%s", grepLines(a.gwLog.String(), "member"), grepLines(b.gwLog.String(), "member"))
	}

	members := memberNames(gatewayID)
	duplicates, leaked := 0, 0
	for m, count := range members {
		cluster, _, _ := strings.Cut(m, "/")
		if _, ok := want[cluster]; !ok {
			leaked++
		}
		if count > 1 {
			duplicates++
			t.Errorf("%d processes run as %s", count, m)
		}
	}
	if leaked > 0 {
		t.Errorf("%d processes belong to no cluster", leaked)
	}
	figure(t, "replica test: replicas: 3, killed: 1, clusters: %d, leaked resources: %d, duplicates: %d", len(want), leaked, duplicates)

	viaB.gwOK("stop", "--all")
	for name := range want {
		waitNoMembers(t, name)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
