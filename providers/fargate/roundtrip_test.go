package fargate_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestRoundTrip runs a cluster's whole life through the real SDK against
// the fake: scheduler and two workers (one on FARGATE_SPOT), reuse of task
// definitions, Describe and List by tags, a worker stopped, the cluster
// stopped and everything made for it deleted, another gateway's and another
// cluster's resources untouched.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	const a, b = "0123456789abcdef", "fedcba9876543210"
	spec := testSpec(a, "ann")

	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	sched := schedulerUp(t, p, a)
	if !strings.HasPrefix(sched.Address, "10.1.") || !strings.HasSuffix(sched.Address, ":8786") {
		t.Errorf("scheduler address %q; want 10.1.x.y:8786", sched.Address)
	}
	ip := strings.TrimSuffix(sched.Address, ":8786")
	if sched.DashboardURL != "https://"+ip+":8787" || sched.Role != providers.RoleScheduler || sched.Owner != "ann" || sched.Cluster != a {
		t.Errorf("scheduler described as %+v", sched)
	}

	if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
		t.Fatalf("StartWorker(worker-0): %v", err)
	}
	spot := spec
	spot.Spot = true
	if err := p.StartWorker(ctx, spot, "worker-1", sched.Address); err != nil {
		t.Fatalf("StartWorker(worker-1, spot): %v", err)
	}
	ms := waitFor(t, p, a, "workers running", running("scheduler", "worker-0", "worker-1"))
	for _, m := range ms {
		if m.Owner != "ann" || m.Cluster != a || (m.Name != "scheduler") != (m.Role == providers.RoleWorker) {
			t.Errorf("member %+v", m)
		}
	}

	// The tasks as ECS got them.
	groups := f.Groups()
	if len(groups) != 1 {
		t.Fatalf("security groups: %+v; want one for the cluster", groups)
	}
	sg := groups[0]
	secrets := f.Secrets()
	if len(secrets) != 1 {
		t.Fatalf("secrets: %+v; want one for the cluster", secrets)
	}
	secret := secrets[0]
	for member, want := range map[string]string{"scheduler": "FARGATE", "worker-0": "FARGATE", "worker-1": "FARGATE_SPOT"} {
		task, ok := f.TaskOf(a, member)
		if !ok {
			t.Fatalf("no task for %s", member)
		}
		if task.CapacityProvider != want {
			t.Errorf("%s on %s; want %s", member, task.CapacityProvider, want)
		}
		if task.StartedBy != "gateway-"+a || task.AssignPublicIP != "DISABLED" || task.Subnet != fargatetest.SubnetA ||
			!slices.Equal(task.SecurityGroups, []string{sg.ID}) || !task.EnableECSManagedTags || task.PropagateTags != "TASK_DEFINITION" {
			t.Errorf("%s launched as %+v", member, task)
		}
		wantTags := map[string]string{"gateway-id": testGateway, "gateway-cluster": a, "gateway-member": member, "gateway-owner": "ann"}
		for k, v := range wantTags {
			if task.Tags[k] != v {
				t.Errorf("%s: tag %s=%q; want %q (tags %v)", member, k, task.Tags[k], v, task.Tags)
			}
		}
		cmd := strings.Join(task.Command, " ")
		mustContain(t, member+" command", cmd, "--tls-ca-file /tmp/gateway-tls/tls.crt", "--tls-cert /tmp/gateway-tls/tls.crt", "--tls-key /tmp/gateway-tls/tls.key")
		if member == "scheduler" {
			mustContain(t, "scheduler command", cmd, "scheduler --port 8786", "--protocol tls", "--dashboard-address :8787", "--dashboard-prefix /clusters/"+a)
		} else {
			mustContain(t, member+" command", cmd, "worker tls://"+sched.Address, "--name "+member, "--nthreads 2", "--memory-limit 3221225472", "--death-timeout 60")
		}
	}

	// Two task definitions, scheduler and worker; both workers share one.
	defs := f.TaskDefinitions()
	if len(defs) != 2 {
		t.Fatalf("task definitions: %d; want 2 (scheduler, worker)", len(defs))
	}
	for _, d := range defs {
		if !strings.HasPrefix(d.Family, "gateway-") || d.NetworkMode != "awsvpc" || !slices.Equal(d.Compatibilities, []string{"FARGATE"}) ||
			d.ExecutionRoleARN == "" || d.TaskRoleARN != "arn:aws:iam::123456789012:role/dask-task" || d.Tags["gateway-id"] != testGateway {
			t.Errorf("task definition %+v", d)
		}
		if len(d.Containers) != 1 {
			t.Fatalf("containers: %+v", d.Containers)
		}
		c := d.Containers[0]
		if c.Secrets["GATEWAY_TLS_CERT"] != secret.ARN+":cert::" || c.Secrets["GATEWAY_TLS_KEY"] != secret.ARN+":key::" {
			t.Errorf("container secrets %v; want references to %s", c.Secrets, secret.ARN)
		}
		if c.LogDriver != "awslogs" || c.LogOptions["awslogs-group"] != "/gateway/dask" || c.LogOptions["awslogs-region"] != fargatetest.DefaultRegion {
			t.Errorf("log configuration %s %v", c.LogDriver, c.LogOptions)
		}
		if len(c.EntryPoint) < 3 || c.EntryPoint[0] != "/bin/sh" || !strings.Contains(c.EntryPoint[2], "unset GATEWAY_TLS_CERT GATEWAY_TLS_KEY") {
			t.Errorf("entry point %q", c.EntryPoint)
		}
		for k, v := range c.Environment {
			if strings.HasPrefix(k, "GATEWAY_TLS") || strings.Contains(v, "-----BEGIN") {
				t.Errorf("TLS material in plain environment: %v", c.Environment)
			}
		}
		// The scheduler serves its dashboard over TLS with the cluster's
		// certificate, from the files the entry point writes; workers
		// serve none.
		wantEnv := map[string]string{
			"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CERT":    "/tmp/gateway-tls/tls.crt",
			"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__KEY":     "/tmp/gateway-tls/tls.key",
			"DASK_DISTRIBUTED__SCHEDULER__DASHBOARD__TLS__CA_FILE": "/tmp/gateway-tls/tls.crt",
		}
		isScheduler := slices.Contains(c.Command, "scheduler")
		for k, v := range wantEnv {
			if got, ok := c.Environment[k]; isScheduler && got != v || !isScheduler && ok {
				t.Errorf("%v task definition: %s=%q (set %v)", c.Command, k, got, ok)
			}
		}
	}
	wantSizes := map[string]bool{"1024/2048": true, "2048/4096": true}
	for _, d := range defs {
		if !wantSizes[d.CPU+"/"+d.Memory] {
			t.Errorf("task definition size %s/%s; want one of %v", d.CPU, d.Memory, wantSizes)
		}
	}

	// The TLS material went to the secret and nowhere else.
	var stored map[string]string
	if err := json.Unmarshal([]byte(secret.Value), &stored); err != nil || stored["cert"] != testCert || stored["key"] != testKey {
		t.Errorf("secret value %q: %v", secret.Value, err)
	}
	if secret.Name != "gateway/"+secret.Name[len("gateway/"):len("gateway/")+8]+"/"+a+"/tls" || secret.Tags["gateway-id"] != testGateway || secret.Tags["gateway-cluster"] != a {
		t.Errorf("secret %+v", secret)
	}
	for _, r := range f.Requests() {
		if r.Action == "secretsmanager:CreateSecret" {
			continue
		}
		for _, marker := range []string{"BEGIN", "CERTMARKER", "KEYMARKER"} {
			if strings.Contains(string(r.Body), marker) {
				t.Errorf("%s request carries TLS material (%s): %s", r.Action, marker, r.Body)
			}
		}
	}
	for _, d := range defs {
		if strings.Contains(string(d.Raw), "BEGIN") || strings.Contains(string(d.Raw), "MARKER") {
			t.Errorf("task definition %s holds TLS material", d.Family)
		}
	}
	for _, task := range f.Tasks() {
		if strings.Contains(string(task.Overrides), "MARKER") {
			t.Errorf("RunTask overrides hold TLS material: %s", task.Overrides)
		}
	}

	// The security group: the gateway to 8786-8787, members to each other;
	// never the internet.
	wantRules := []fargatetest.Rule{
		{Protocol: "tcp", FromPort: 8786, ToPort: 8787, CIDR: "10.0.0.0/16"},
		{Protocol: "tcp", FromPort: 8786, ToPort: 8787, CIDR: "fd00:ec2::/56"},
		{Protocol: "tcp", FromPort: 0, ToPort: 65535, SourceGroup: sg.ID},
	}
	if len(sg.Ingress) != len(wantRules) {
		t.Errorf("ingress %+v; want %+v", sg.Ingress, wantRules)
	}
	for _, w := range wantRules {
		if !slices.ContainsFunc(sg.Ingress, func(r fargatetest.Rule) bool {
			return r.Protocol == w.Protocol && r.FromPort == w.FromPort && r.ToPort == w.ToPort && r.CIDR == w.CIDR && r.SourceGroup == w.SourceGroup
		}) {
			t.Errorf("ingress lacks %+v: %+v", w, sg.Ingress)
		}
	}
	for _, r := range sg.Ingress {
		if r.CIDR == "0.0.0.0/0" || r.CIDR == "::/0" {
			t.Errorf("ingress open to the internet: %+v", r)
		}
	}
	if sg.VPC != fargatetest.DefaultVPC || sg.Tags["gateway-id"] != testGateway || sg.Tags["gateway-cluster"] != a {
		t.Errorf("security group %+v", sg)
	}

	// Reuse: another worker, and a restarted gateway, register nothing.
	regs := f.Calls("ecs:RegisterTaskDefinition")
	if err := p.StartWorker(ctx, spec, "worker-2", sched.Address); err != nil {
		t.Fatal(err)
	}
	p2, _ := newProvider(t, f)
	if err := p2.StartWorker(ctx, spec, "worker-3", sched.Address); err != nil {
		t.Fatal(err)
	}
	if n := f.Calls("ecs:RegisterTaskDefinition"); n != regs {
		t.Errorf("RegisterTaskDefinition called %d more times; the definition should be found by its hash", n-regs)
	}
	if n := len(f.Secrets()); n != 1 {
		t.Errorf("%d secrets after a restart; want the cluster's one", n)
	}
	if n := len(f.Groups()); n != 1 {
		t.Errorf("%d security groups after a restart; want the cluster's one", n)
	}

	// A second cluster of the same shape: its own secret, group and
	// definitions (ECS cannot override a definition's secrets per task).
	specB := testSpec(b, "bob")
	if err := p.StartScheduler(ctx, specB); err != nil {
		t.Fatal(err)
	}
	schedB := schedulerUp(t, p, b)
	if err := p.StartWorker(ctx, specB, "worker-0", schedB.Address); err != nil {
		t.Fatal(err)
	}
	if n := f.Calls("ecs:RegisterTaskDefinition"); n != regs+2 {
		t.Errorf("the second cluster registered %d definitions; want 2", n-regs)
	}

	// Another gateway's cluster of the same name in the same ECS cluster.
	other, _ := newProvider(t, f, func(c *fargate.Config) { c.GatewayID = "gw-other" })
	otherSpec := testSpec(a, "eve")
	otherSpec.GatewayID = "gw-other"
	if err := other.StartScheduler(ctx, otherSpec); err != nil {
		t.Fatal(err)
	}
	ms = waitFor(t, p, a, "four workers", running("scheduler", "worker-0", "worker-1", "worker-2", "worker-3"))
	if len(ms) != 5 {
		t.Errorf("Describe(%s) = %+v; want the scheduler and 4 workers, not the other gateway's", a, ms)
	}

	// List: this gateway's members, by tag.
	all, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range all {
		got[m.Cluster+"/"+m.Name] = m.Owner
	}
	want := map[string]string{
		a + "/scheduler": "ann", a + "/worker-0": "ann", a + "/worker-1": "ann", a + "/worker-2": "ann", a + "/worker-3": "ann",
		b + "/scheduler": "bob", b + "/worker-0": "bob",
	}
	if len(got) != len(want) {
		t.Errorf("List = %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("List: %s owned by %q; want %q", k, got[k], v)
		}
	}

	// Stop a worker: stopped, with no reason (not a loss); again: no error.
	if err := p.StopWorker(ctx, a, "worker-1"); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	if err := p.StopWorker(ctx, a, "worker-1"); err != nil {
		t.Fatalf("second StopWorker: %v", err)
	}
	if err := p.StopWorker(ctx, a, "worker-99"); err != nil {
		t.Fatalf("StopWorker of an unknown worker: %v", err)
	}
	ms = waitFor(t, p, a, "worker-1 stopped", func(ms []providers.Member) bool {
		w := find(ms, "worker-1")
		return w != nil && w.State == providers.StateStopped
	})
	if w := find(ms, "worker-1"); w.Reason != "" {
		t.Errorf("worker stopped on request has reason %q", w.Reason)
	}

	// Stop the cluster: every task stopped, group, secret and definitions
	// gone; the other cluster and the other gateway untouched.
	if err := p.StopCluster(ctx, a); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	for _, task := range f.Tasks() {
		mine := task.Tags["gateway-cluster"] == a && task.Tags["gateway-id"] == testGateway
		if mine && task.LastStatus != "STOPPED" {
			t.Errorf("task of %s/%s is %s after StopCluster", a, task.Tags["gateway-member"], task.LastStatus)
		}
		if !mine && task.DesiredStatus != "RUNNING" {
			t.Errorf("StopCluster(%s) stopped %s/%s of %s", a, task.Tags["gateway-cluster"], task.Tags["gateway-member"], task.Tags["gateway-id"])
		}
	}
	for _, g := range f.Groups() {
		if g.ID == sg.ID {
			t.Errorf("security group %s left after StopCluster", sg.ID)
		}
	}
	for _, s := range f.Secrets() {
		if s.Name == secret.Name {
			t.Errorf("secret %s left after StopCluster", s.Name)
		}
	}
	if n := len(f.Groups()); n != 2 {
		t.Errorf("%d security groups left; want the other cluster's and the other gateway's", n)
	}
	for _, d := range f.TaskDefinitions() {
		aDef := d.Tags["gateway-cluster"] == a && d.Tags["gateway-id"] == testGateway
		if aDef && d.Status != "DELETE_IN_PROGRESS" {
			t.Errorf("task definition %s is %s after StopCluster", d.Family, d.Status)
		}
		if !aDef && d.Status != "ACTIVE" {
			t.Errorf("task definition %s of another cluster is %s", d.Family, d.Status)
		}
	}
	for _, m := range []string{"scheduler", "worker-0", "worker-2", "worker-3"} {
		if at, ok := p.StoppedAt(a, m); !ok || at.IsZero() {
			t.Errorf("StoppedAt(%s) = %v, %v; want when ECS stopped it", m, at, ok)
		}
		if _, ok := p.StoppedAt(a, m); ok {
			t.Errorf("StoppedAt(%s) answered twice", m)
		}
	}
	ms, err = p.Describe(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.State != providers.StateStopped || m.Reason != "" {
			t.Errorf("after StopCluster: %+v; want stopped without a reason", m)
		}
	}

	// Idempotent, and unknown clusters are nothing to stop.
	if err := p.StopCluster(ctx, a); err != nil {
		t.Fatalf("second StopCluster: %v", err)
	}
	if err := p.StopCluster(ctx, "aaaaaaaaaaaaaaaa"); err != nil {
		t.Fatalf("StopCluster of an unknown cluster: %v", err)
	}
	if ms, err := p.Describe(ctx, "aaaaaaaaaaaaaaaa"); err != nil || len(ms) != 0 {
		t.Errorf("Describe of an unknown cluster: %+v, %v", ms, err)
	}
	if _, err := p.Describe(ctx, b); err != nil {
		t.Fatal(err)
	}
	schedulerUp(t, p, b)
}

// TestDuplicateMemberStopped: two gateway processes with their subnets in
// another order launch the same worker while ECS lists neither task; the
// next Describe lets the extra one go, and only one is reported.
func TestDuplicateMemberStopped(t *testing.T) {
	f := fargatetest.New(t)
	ctx := context.Background()
	p1, _ := newProvider(t, f)
	p2, _ := newProvider(t, f, func(c *fargate.Config) { c.Subnets = []string{fargatetest.SubnetB, fargatetest.SubnetA} })
	s := testSpec("dup", "ann")
	if err := p1.StartScheduler(ctx, s); err != nil {
		t.Fatal(err)
	}
	f.SetListLag(3)
	if err := p1.StartWorker(ctx, s, "worker-0", "10.1.0.10:8786"); err != nil {
		t.Fatal(err)
	}
	if err := p2.StartWorker(ctx, s, "worker-0", "10.1.0.10:8786"); err != nil {
		t.Fatal(err)
	}
	live := func() int {
		n := 0
		for _, tk := range f.Tasks() {
			if tk.Tags["gateway-member"] == "worker-0" && tk.DesiredStatus != "STOPPED" {
				n++
			}
		}
		return n
	}
	if n := live(); n != 2 {
		t.Fatalf("the test needs the duplicate: %d live worker-0 tasks", n)
	}
	f.SetListLag(0)
	var ms []providers.Member
	for range 3 {
		var err error
		if ms, err = p1.Describe(ctx, "dup"); err != nil {
			t.Fatal(err)
		}
	}
	if n := live(); n != 1 {
		t.Errorf("%d live worker-0 tasks after Describe, want 1", n)
	}
	count := 0
	for _, m := range ms {
		if m.Name == "worker-0" {
			count++
		}
	}
	if count != 1 {
		t.Errorf("worker-0 described %d times", count)
	}
}
