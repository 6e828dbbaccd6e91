package fargate_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
	"github.com/gatewayhq/gateway/providers/internal/coretest"
	"github.com/gatewayhq/gateway/scheduler"
	"github.com/gatewayhq/gateway/store"
)

// TestReaperRemovesLeftoversByTag runs the scheduler's reaper on the
// Fargate provider (real SDK, the fake ECS, Secrets Manager and EC2). A
// cluster whose tasks have all ended (and been forgotten by ECS) leaves
// its security group, secret and task definitions, which no task leads to:
// the reaper finds them by their tags and removes them after the grace
// period, not before. A running cluster's are kept, and so are another
// gateway's, even for a cluster of the same name.
func TestReaperRemovesLeftoversByTag(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	f.SetPageSize(1) // every listing pages
	starter, _ := newProvider(t, f)
	other, _ := newProvider(t, f, func(c *fargate.Config) { c.GatewayID = "gw-other" })
	start := func(p *fargate.Provider, gateway, cluster string) {
		t.Helper()
		spec := testSpec(cluster, "ann@example.com")
		spec.GatewayID = gateway
		if err := p.StartScheduler(ctx, spec); err != nil {
			t.Fatalf("StartScheduler(%s): %v", cluster, err)
		}
		addr := schedulerUp(t, p, cluster).Address
		if err := p.StartWorker(ctx, spec, "worker-0", addr); err != nil {
			t.Fatalf("StartWorker(%s): %v", cluster, err)
		}
	}
	start(starter, testGateway, "cgone")
	start(starter, testGateway, "cended")
	start(starter, testGateway, "clive")
	start(other, "gw-other", "cgone")
	// Every task but clive's ends, and ECS forgets it.
	for _, task := range f.Tasks() {
		if task.Tags["gateway-cluster"] == "clive" && task.Tags["gateway-id"] == testGateway {
			continue
		}
		if err := f.Exit(task.ARN, 0, ""); err != nil {
			t.Fatal(err)
		}
		f.Forget(task.ARN)
	}

	st, err := store.Open(ctx, "sqlite://"+t.TempDir()+"/g.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for name, status := range map[string]store.Status{"cended": store.Stopped, "clive": store.Running} {
		if err := st.CreateCluster(ctx, &store.Cluster{Name: name, Owner: "ann", Status: status, Provider: fargate.Name, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	// A restarted gateway: nothing remembered from the starts.
	p, _ := newProvider(t, f)
	if ms, err := p.List(ctx); err != nil || slices.ContainsFunc(ms, func(m providers.Member) bool { return m.Cluster != "clive" }) {
		t.Fatalf("List = %+v, %v; want clive's tasks only", ms, err)
	}
	clk := testutil.NewClock(time.Now())
	core := scheduler.New(scheduler.Config{GatewayID: testGateway, Reaper: scheduler.ReaperConfig{Grace: 2 * time.Minute}},
		st, p, coretest.NopRouter{}, slog.New(slog.DiscardHandler))
	core.SetClock(clk.Now)

	// What is left, as gateway/cluster/kind (task definitions: ACTIVE or
	// INACTIVE revisions, as deleted ones are DELETE_IN_PROGRESS).
	left := func() []string {
		var out []string
		for _, g := range f.Groups() {
			if g.Tags["gateway-cluster"] != "" {
				out = append(out, g.Tags["gateway-id"]+"/"+g.Tags["gateway-cluster"]+"/group")
			}
		}
		for _, s := range f.Secrets() {
			out = append(out, s.Tags["gateway-id"]+"/"+s.Tags["gateway-cluster"]+"/secret")
		}
		for _, d := range f.TaskDefinitions() {
			if d.Status != "DELETE_IN_PROGRESS" {
				out = append(out, d.Tags["gateway-id"]+"/"+d.Tags["gateway-cluster"]+"/taskdef:"+d.Status)
			}
		}
		slices.Sort(out)
		return out
	}
	all := left()
	want := func(clusters ...string) []string {
		var out []string
		for _, x := range all {
			for _, c := range clusters {
				if len(x) > len(c) && x[:len(c)+1] == c+"/" {
					out = append(out, x)
				}
			}
		}
		return out
	}
	if len(want(testGateway+"/cgone")) != 4 || len(want("gw-other/cgone")) != 4 {
		t.Fatalf("before the reaper: %v; want a group, a secret and 2 task definitions for each cluster", all)
	}

	core.ReapOnce(ctx)
	if got := left(); !slices.Equal(got, all) {
		t.Fatalf("within the grace, left %v; want everything kept: %v", got, all)
	}
	clk.Advance(2*time.Minute + time.Second)
	core.ReapOnce(ctx)
	if got, w := left(), want(testGateway+"/clive", "gw-other/cgone"); !slices.Equal(got, w) {
		t.Errorf("after the grace, left %v; want %v", got, w)
	}
	if core.Reaped() != 2 {
		t.Errorf("Reaped() = %d; want 2 (cgone and cended)", core.Reaped())
	}
	// Deleted revisions stay listed for a while (DELETE_IN_PROGRESS); the
	// next pass finds nothing more to do.
	deletes := f.Calls("ecs:DeleteTaskDefinitions") + f.Calls("ec2:DeleteSecurityGroup") + f.Calls("secretsmanager:DeleteSecret")
	core.ReapOnce(ctx)
	if n := f.Calls("ecs:DeleteTaskDefinitions") + f.Calls("ec2:DeleteSecurityGroup") + f.Calls("secretsmanager:DeleteSecret"); n != deletes {
		t.Errorf("%d more deletions on a pass with nothing left", n-deletes)
	}
}

// TestLeftoverSecretsCheckedExactly: ListSecrets' filters match prefixes
// and each tag on its own, so a secret under this gateway's name prefix
// that carries a gateway-id tag of another value (and this gateway's id
// as the value of some other tag) is not listed.
func TestLeftoverSecretsCheckedExactly(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	if err := p.StartScheduler(ctx, testSpec("cx", "ann")); err != nil {
		t.Fatal(err)
	}
	var ours string
	for _, s := range f.Secrets() {
		ours = s.Name
	}
	prefix := ours[:len(ours)-len("cx/tls")]
	f.PutSecret(prefix+"cy/tls", "{}", map[string]string{"gateway-id": testGateway + "-2", "gateway-cluster": "cy", "note": testGateway})
	f.PutSecret(prefix+"cz/tls", "{}", map[string]string{"gateway-id": testGateway, "gateway-cluster": "other"})
	ls, err := p.ListLeftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var secrets []string
	for _, l := range ls {
		if l.Kind == providers.LeftoverSecret {
			secrets = append(secrets, l.Cluster)
		}
	}
	if !slices.Equal(secrets, []string{"cx"}) {
		t.Errorf("leftover secrets of clusters %v; want [cx] only", secrets)
	}
	if n := len(f.Requests("secretsmanager:ListSecrets")); n == 0 {
		t.Error("no ListSecrets call")
	}
}
