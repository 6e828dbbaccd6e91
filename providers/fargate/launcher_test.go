package fargate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/fargate"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
)

// TestMembersStartThroughTheLauncher: the task definition's entry point
// runs the launcher (after the TLS script), its command and each launch's
// override are the launcher's arguments, and the client's versions travel
// in the launch's override only, so that one definition serves clusters
// with other versions; without versions, no variable.
func TestMembersStartThroughTheLauncher(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	expect := images.ExpectValue(images.Spec{Python: "3.11.4", Packages: []images.Package{{Name: "dask", Version: "2024.8.0"}, {Name: "numpy", Version: "1.26.4"}}})

	for _, tc := range []struct{ cluster, expect string }{{"c-with", expect}, {"c-without", ""}} {
		spec := testSpec(tc.cluster, "ann")
		spec.EnvExpect = tc.expect
		if err := p.StartScheduler(ctx, spec); err != nil {
			t.Fatalf("StartScheduler: %v", err)
		}
		sched := schedulerUp(t, p, tc.cluster)
		if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
			t.Fatalf("StartWorker: %v", err)
		}
		for _, member := range []string{"scheduler", "worker-0"} {
			task, ok := f.TaskOf(tc.cluster, member)
			if !ok {
				t.Fatalf("%s/%s: no task", tc.cluster, member)
			}
			role := strings.TrimSuffix(member, "-0")
			if len(task.Command) == 0 || task.Command[0] != role {
				t.Errorf("%s/%s: override command %q; want the launcher's arguments, starting with %s", tc.cluster, member, task.Command, role)
			}
			got, set := task.Environment[images.ExpectEnv]
			if set != (tc.expect != "") || got != tc.expect {
				t.Errorf("%s/%s: override %s = %q (set %v); want %q", tc.cluster, member, images.ExpectEnv, got, set, tc.expect)
			}
			if len(task.Overrides) > 8192 {
				t.Errorf("%s/%s: overrides of %d characters; ECS allows 8192", tc.cluster, member, len(task.Overrides))
			}
			t.Logf("%s/%s: overrides %d characters", tc.cluster, member, len(task.Overrides))
		}
	}
	defs := f.TaskDefinitions()
	if len(defs) != 4 {
		t.Fatalf("%d task definitions; want 4 (two clusters, two roles)", len(defs))
	}
	for _, d := range defs {
		c := d.Containers[0]
		launcher := images.LauncherCommand("python3")
		if len(c.EntryPoint) != 4+len(launcher) || c.EntryPoint[0] != "/bin/sh" || !slices.Equal(c.EntryPoint[4:], launcher) {
			t.Errorf("%s: entry point %q; want the TLS script, then %q", d.Family, c.EntryPoint[:min(4, len(c.EntryPoint))], launcher[:2])
		}
		if !strings.HasSuffix(c.EntryPoint[2], `exec "$@"`) {
			t.Errorf("%s: the entry point's script does not run its arguments", d.Family)
		}
		if len(c.Command) != 1 || (c.Command[0] != "scheduler" && c.Command[0] != "worker") {
			t.Errorf("%s: command %q; want the role", d.Family, c.Command)
		}
		if _, ok := c.Environment[images.ExpectEnv]; ok || strings.Contains(string(d.Raw), "1.26.4") {
			t.Errorf("%s: the client's versions are in the task definition", d.Family)
		}
		t.Logf("%s: task definition %d bytes", d.Family, len(d.Raw))
	}
}

// TestTooManyVersionsRefused: versions that would take the overrides past
// ECS's 8192 characters are refused before anything is made.
func TestTooManyVersionsRefused(t *testing.T) {
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	spec := testSpec("c-big", "ann")
	big := map[string]string{}
	for i := range 400 {
		big[strings.Repeat("p", 10)+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "1.0.0"
	}
	b, _ := json.Marshal(big)
	spec.EnvExpect = string(b)
	err := p.StartScheduler(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "more than a task's overrides can carry") {
		t.Fatalf("StartScheduler = %v", err)
	}
	if n := len(f.Tasks()); n != 0 {
		t.Errorf("%d tasks started", n)
	}
}

const testTable = images.MismatchMarker + ": this worker does not run the client's software\n" +
	"package  client  image\n" +
	"numpy    1.26.4  1.24.2"

// TestMismatchExitFailsTheMember: a member whose launcher exits with 97
// (the fake ends its task as ECS does: stop code EssentialContainerExited,
// the container's exitCode) is reported stopped with the launcher's table,
// read through the SDK from the task's CloudWatch Logs stream (once: a
// stopped task's log does not change). Where the table cannot be had (no
// log group, the log not delivered yet, no permission), the reason still
// starts the mismatch report, so that the core fails the cluster as
// running other software, and says where the table is.
func TestMismatchExitFailsTheMember(t *testing.T) {
	for _, tc := range []struct {
		name, logGroup string
		log            bool   // the launcher's lines are in the stream
		fault          string // GetLogEvents answers with this error
		want           []string
	}{
		{name: "table from the log", logGroup: "/gateway/dask", log: true, want: []string{testTable}},
		{name: "log not delivered", logGroup: "/gateway/dask", want: []string{"CloudWatch Logs group /gateway/dask, stream gateway/dask/", "aws logs tail /gateway/dask"}},
		{name: "no permission", logGroup: "/gateway/dask", log: true, fault: "AccessDeniedException", want: []string{"CloudWatch Logs group /gateway/dask, stream gateway/dask/"}},
		{name: "no log group", want: []string{"set providers.fargate.log_group"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := fargatetest.New(t)
			p, _ := newProvider(t, f, func(c *fargate.Config) { c.LogGroup = tc.logGroup })
			spec := testSpec("c1", "ann")
			spec.EnvExpect = `{"numpy":"1.26.4"}`
			if err := p.StartScheduler(ctx, spec); err != nil {
				t.Fatal(err)
			}
			sched := schedulerUp(t, p, "c1")
			if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
				t.Fatal(err)
			}
			task, _ := f.TaskOf("c1", "worker-0")
			id := task.ARN[strings.LastIndex(task.ARN, "/")+1:]
			if tc.log {
				lines := append([]string{"gateway-env: python=3.11 numpy=1.24.2"}, strings.Split(testTable, "\n")...)
				f.Log("/gateway/dask", "gateway/dask/"+id, lines...)
			}
			if tc.fault != "" {
				f.FailNext("logs:GetLogEvents", 2, 400, tc.fault, "not authorized to perform: logs:GetLogEvents")
			}
			if err := f.Exit(task.ARN, images.MismatchExitCode, ""); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				ms, err := p.Describe(ctx, "c1")
				if err != nil {
					t.Fatal(err)
				}
				w := find(ms, "worker-0")
				if w == nil || w.State != providers.StateStopped {
					t.Fatalf("worker-0 = %+v; want stopped", w)
				}
				report, ok := images.MismatchIn(w.Reason)
				if !ok {
					t.Fatalf("reason %q has no mismatch report", w.Reason)
				}
				mustContain(t, "report", report, tc.want...)
				if !tc.log && tc.logGroup != "" {
					mustContain(t, "report", report, "stream gateway/dask/"+id)
				}
				if !strings.Contains(w.Reason, "(exit code 97)") {
					t.Errorf("reason %q lacks the exit code", w.Reason)
				}
			}
			if tc.log && tc.fault == "" {
				if n := f.Calls("logs:GetLogEvents"); n != 1 {
					t.Errorf("GetLogEvents called %d times; want once", n)
				}
			}
		})
	}
	t.Run("another exit", func(t *testing.T) {
		ctx := context.Background()
		f := fargatetest.New(t)
		p, _ := newProvider(t, f)
		if err := p.StartScheduler(ctx, testSpec("c1", "ann")); err != nil {
			t.Fatal(err)
		}
		task, _ := f.TaskOf("c1", "scheduler")
		if err := f.Exit(task.ARN, 1, ""); err != nil {
			t.Fatal(err)
		}
		ms, err := p.Describe(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if s := find(ms, "scheduler"); s == nil || strings.Contains(s.Reason, images.MismatchMarker) {
			t.Errorf("scheduler = %+v; an exit other than 97 is no mismatch", s)
		}
	})
}

// TestOwnerEnvInTheOverride: the owner's variables (the environ option)
// travel in each launch's override, next to the client's versions, and
// never into the shared task definition; too many for ECS's overrides are
// refused before any request.
func TestOwnerEnvInTheOverride(t *testing.T) {
	ctx := context.Background()
	f := fargatetest.New(t)
	p, _ := newProvider(t, f)
	spec := testSpec("c-env", "ann")
	spec.Env = map[string]string{"DASK_DISTRIBUTED__WORKER__MEMORY__TARGET": "0.1", "MY_VAR": `a "quoted" value`}
	spec.EnvExpect = `{"dask":"2024.8.0"}`
	if err := p.StartScheduler(ctx, spec); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	sched := schedulerUp(t, p, "c-env")
	if err := p.StartWorker(ctx, spec, "worker-0", sched.Address); err != nil {
		t.Fatalf("StartWorker: %v", err)
	}
	for _, member := range []string{"scheduler", "worker-0"} {
		task, ok := f.TaskOf("c-env", member)
		if !ok {
			t.Fatalf("%s: no task", member)
		}
		for k, v := range spec.Env {
			if got := task.Environment[k]; got != v {
				t.Errorf("%s: override %s = %q, want %q", member, k, got, v)
			}
		}
		if task.Environment[images.ExpectEnv] != spec.EnvExpect {
			t.Errorf("%s: the client's versions lost next to the owner's variables", member)
		}
	}
	for _, d := range f.TaskDefinitions() {
		if b, _ := json.Marshal(d); strings.Contains(string(b), "MY_VAR") {
			t.Errorf("the owner's variables are in a shared task definition: %s", b)
		}
	}

	big := testSpec("c-big", "ann")
	big.Env = map[string]string{}
	for i := range 8 {
		big.Env[fmt.Sprintf("V%d", i)] = strings.Repeat("x", 1000)
	}
	if err := p.StartScheduler(ctx, big); err == nil || !strings.Contains(err.Error(), "environ") {
		t.Errorf("8 KB of variables: err = %v, want a refusal naming the environ option", err)
	}
	if _, ok := f.TaskOf("c-big", "scheduler"); ok {
		t.Error("a refused cluster's scheduler was launched")
	}
}
