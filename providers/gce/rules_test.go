package gce

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// TestShapeRules: shapes Compute Engine documents as impossible are refused
// before any insert, with the rule and its page named, or left out for the
// next choice; the fake refuses them too, so sending one would fail the
// start (TestDocumentedShapeRules in gcetest).
func TestShapeRules(t *testing.T) {
	tests := []struct {
		name    string
		spot    bool
		worker  providers.Machine
		mutate  func(*Config)
		want    []attempt // inserts of worker-0
		wantErr string    // substring of an ErrUnsupported error
		disk    string    // the boot disk type inserted
		gpus    int32     // attached GPUs inserted
	}{
		{name: "three T4s on N1", worker: providers.Machine{InstanceType: "n1-standard-8+3xt4", GPUs: 3, GPUType: "t4"},
			wantErr: "counts of 1, 2, 4, not 3"},
		{name: "one T4 on 96 vCPUs", worker: providers.Machine{InstanceType: "n1-standard-96", GPUs: 1, GPUType: "t4"},
			wantErr: "at most 48 vCPUs"},
		{name: "a2-highgpu-1g asked for 4", worker: providers.Machine{InstanceType: "a2-highgpu-1g", GPUs: 4, GPUType: "a100"},
			wantErr: "comes with 1 GPU(s), fixed by the type; 4 were asked for"},
		{name: "a3-highgpu-1g on demand", worker: providers.Machine{InstanceType: "a3-highgpu-1g", GPUs: 1, GPUType: "h100"},
			wantErr: "sold only as Spot"},
		{name: "too large, then the alternative that fits",
			worker: providers.Machine{InstanceType: "n1-standard-96+1xt4", Alternatives: []string{"n1-standard-8+1xt4"}},
			want:   []attempt{{"n1-standard-8", "us-central1-a", "STANDARD"}}, disk: "pd-balanced", gpus: 1},
		{name: "a3-highgpu-1g as Spot", spot: true, worker: providers.Machine{InstanceType: "a3-highgpu-1g", GPUs: 1, GPUType: "h100"},
			want: []attempt{{"a3-highgpu-1g", "us-central1-a", "SPOT"}}, disk: "pd-balanced"},
		{name: "C4 takes Hyperdisk", worker: providers.Machine{InstanceType: "c4-standard-4"},
			want: []attempt{{"c4-standard-4", "us-central1-a", "STANDARD"}}, disk: "hyperdisk-balanced"},
		{name: "N1 takes no Hyperdisk", worker: providers.Machine{InstanceType: "n1-standard-4"},
			mutate: func(c *Config) { c.DiskType = "hyperdisk-balanced" },
			want:   []attempt{{"n1-standard-4", "us-central1-a", "STANDARD"}}, disk: "pd-balanced"},
		{name: "a configured disk URL the series refuses", worker: providers.Machine{InstanceType: "c4-standard-4"},
			mutate:  func(c *Config) { c.DiskType = "projects/test-project/zones/us-central1-a/diskTypes/pd-ssd" },
			wantErr: "C4 series machines take Hyperdisk only, not pd-ssd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.mutate)
			spec := testSpec(t, "shapes", "alice")
			spec.Spot, spec.Worker = tt.spot, tt.worker
			err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786")
			got := e.attempts(instanceName("shapes", "worker-0"))
			if tt.wantErr != "" {
				if !errors.Is(err, providers.ErrUnsupported) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "https://cloud.google.com/compute/docs/") {
					t.Fatalf("StartWorker: %v; want ErrUnsupported naming %q and its page", err, tt.wantErr)
				}
				if len(got) != 0 {
					t.Errorf("inserts %v for a shape refused at request time", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("StartWorker: %v", err)
			}
			if !equalAttempts(got, tt.want) {
				t.Errorf("inserts %v; want %v", got, tt.want)
			}
			in := e.insertFor(instanceName("shapes", "worker-0"))
			if dt := lastSegment(in.Disks[0].InitializeParams.DiskType); dt != tt.disk {
				t.Errorf("boot disk %s; want %s", dt, tt.disk)
			}
			var n int32
			for _, a := range in.GuestAccelerators {
				n += a.AcceleratorCount
			}
			if n != tt.gpus {
				t.Errorf("%d GPUs attached; want %d", n, tt.gpus)
			}
		})
	}
}

func equalAttempts(a, b []attempt) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestSpotOnlyNotOnDemand: a Spot-only size that finds no Spot capacity is
// not tried on demand (Compute Engine would refuse it), and it is neither
// listed nor priced as an on-demand choice.
func TestSpotOnlyNotOnDemand(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.FailInserts("", -1, "ZONE_RESOURCE_POOL_EXHAUSTED")
	spec := testSpec(t, "spotonly", "alice")
	spec.Spot, spec.Worker = true, providers.Machine{InstanceType: "a3-highgpu-1g", GPUs: 1, GPUType: "h100"}
	err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786")
	if !errors.Is(err, providers.ErrCapacity) || !strings.Contains(err.Error(), "sold only as Spot") {
		t.Errorf("StartWorker: %v; want ErrCapacity saying the type is Spot-only", err)
	}
	for _, a := range e.attempts(instanceName("spotonly", "worker-0")) {
		if a.model != "SPOT" {
			t.Errorf("tried %v on demand", a)
		}
	}
	types, err := e.p.InstanceTypes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Name == "a3-highgpu-1g" {
			t.Errorf("a3-highgpu-1g offered at an on-demand price: %+v", it)
		}
	}
	for _, it := range e.p.builtinTypes() {
		if it.Name == "a3-highgpu-1g" {
			t.Errorf("the built-in table offers a3-highgpu-1g on demand")
		}
	}
}

// TestTypesOfEveryZone: a machine type or GPU offered only in the second
// configured zone is offered (the first zone's listing alone missed it).
func TestTypesOfEveryZone(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.SetZoneAcceleratorTypes("us-central1-a", nil)
	var onlyB []gcetest.MachineType
	for _, m := range gcetest.DefaultMachineTypes() {
		if m.Name != "n2-highmem-4" {
			onlyB = append(onlyB, m)
		}
	}
	e.srv.SetZoneMachineTypes("us-central1-a", onlyB)
	types, err := e.p.InstanceTypes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, it := range types {
		names[it.Name] = true
	}
	if !names["n2-highmem-4"] || !names["n1-standard-8+1xt4"] {
		t.Errorf("types of the second zone missing: n2-highmem-4 %v, n1-standard-8+1xt4 %v", names["n2-highmem-4"], names["n1-standard-8+1xt4"])
	}
	if names["n1-standard-8+4xt4"] == false || names["n1-standard-96+1xt4"] {
		t.Errorf("N1 combinations outside the documented counts and ceilings: %v", names)
	}
}

// TestUnreachableZoneLeavesMembersUnknown: while a zone does not answer
// the aggregated listing (named in unreachables, or with an UNREACHABLE
// warning on its scope), Describe, ListMembers and List fail rather than
// report its members gone, and StopCluster deletes what it sees but keeps
// the firewall rules and the secret, failing, until every zone answers.
func TestUnreachableZoneLeavesMembersUnknown(t *testing.T) {
	for _, warning := range []bool{false, true} {
		e := newEnv(t, nil)
		spec := testSpec(t, "split", "alice")
		if err := e.p.StartScheduler(e.ctx, spec); err != nil {
			t.Fatal(err)
		}
		e.srv.FailInserts("us-central1-a", 1, "ZONE_RESOURCE_POOL_EXHAUSTED")
		if err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786"); err != nil {
			t.Fatal(err)
		}
		worker := instanceName("split", "worker-0")
		if in, ok := e.srv.Instance(worker); !ok || !strings.HasSuffix(in.Zone, "us-central1-b") {
			t.Fatalf("worker not in us-central1-b: %+v", in)
		}
		e.describe("split") // the provider now knows the worker

		e.srv.Unreachable("us-central1-b", warning)
		var partial *PartialListError
		if _, err := e.p.Describe(e.ctx, "split"); !errors.As(err, &partial) || len(partial.Scopes) != 1 || partial.Scopes[0] != "zones/us-central1-b" {
			t.Errorf("warning=%v: Describe: %v; want a PartialListError naming zones/us-central1-b", warning, err)
		}
		if ms, err := e.p.ListMembers(e.ctx); !errors.As(err, &partial) {
			t.Errorf("warning=%v: ListMembers: %v, %v; want a PartialListError", warning, ms, err)
		}
		if ms, err := e.p.List(e.ctx); !errors.As(err, &partial) {
			t.Errorf("warning=%v: List: %v, %v; want a PartialListError", warning, ms, err)
		}
		rules, secrets := len(e.srv.Firewalls()), len(e.srv.Secrets())
		if err := e.p.StopCluster(e.ctx, "split"); !errors.As(err, &partial) {
			t.Errorf("warning=%v: StopCluster: %v; want a PartialListError", warning, err)
		}
		if _, ok := e.srv.Instance(instanceName("split", "scheduler")); ok {
			t.Errorf("warning=%v: the reachable scheduler was not deleted", warning)
		}
		if len(e.srv.Firewalls()) != rules || len(e.srv.Secrets()) != secrets || rules == 0 || secrets == 0 {
			t.Errorf("warning=%v: rules %d->%d, secrets %d->%d: shared resources deleted while a zone may hold a member", warning, rules, len(e.srv.Firewalls()), secrets, len(e.srv.Secrets()))
		}

		e.srv.Reachable("us-central1-b")
		if err := e.p.StopCluster(e.ctx, "split"); err != nil {
			t.Fatalf("StopCluster once every zone answers: %v", err)
		}
		if len(e.srv.Instances()) != 0 || len(e.srv.Firewalls()) != 0 || len(e.srv.Secrets()) != 0 {
			t.Errorf("left after the retried stop: %d instances, %d rules, %d secrets", len(e.srv.Instances()), len(e.srv.Firewalls()), len(e.srv.Secrets()))
		}
	}
}

// adviceLines counts the log lines that give the pull advice.
type adviceLines struct{ n atomic.Int32 }

func (c *adviceLines) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("could not reach its image registry")) {
		c.n.Add(1)
	}
	return len(p), nil
}

// TestPullWithoutRouteIsExplained: a member that cannot reach its image
// registry stops with a reason that says what the network needs (Cloud
// NAT, or Private Google Access and Artifact Registry), and the gateway
// logs it once, however many members fail so; a pull that fails for
// another reason gets no such advice.
func TestPullWithoutRouteIsExplained(t *testing.T) {
	logs := &adviceLines{}
	e := newEnv(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(logs, nil)); c.Network = "shared-vpc" })
	spec := testSpec(t, "pull", "alice")
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{
		"worker-0": `cannot pull the container image ghcr.io/dask/dask:latest: Error response from daemon: Get "https://ghcr.io/v2/": dial tcp 140.82.112.34:443: i/o timeout`,
		"worker-1": `cannot pull the container image ghcr.io/dask/dask:latest: Error response from daemon: Get "https://ghcr.io/v2/": net/http: request canceled (Client.Timeout exceeded while awaiting headers)`,
		"worker-2": `cannot pull the container image ghcr.io/dask/nope:1: Error response from daemon: manifest unknown`,
	}
	for w, status := range statuses {
		if err := e.p.StartWorker(e.ctx, spec, w, "10.128.0.2:8786"); err != nil {
			t.Fatal(err)
		}
		name := instanceName("pull", w)
		if err := e.srv.PowerOff(name, status); err != nil {
			t.Fatal(err)
		}
	}
	ms := e.describe("pull")
	for w := range statuses {
		reason := ms[w].Reason
		advised := strings.Contains(reason, "Cloud NAT") && strings.Contains(reason, "Private Google Access") && strings.Contains(reason, `"shared-vpc"`)
		if want := w != "worker-2"; advised != want || ms[w].State != providers.StateStopped {
			t.Errorf("%s: %s %q; advice %v, want %v", w, ms[w].State, reason, advised, want)
		}
	}
	if n := logs.n.Load(); n != 1 {
		t.Errorf("the advice was logged %d times; want once", n)
	}
}
