package gce

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/internal/testutil"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// attempt is one recorded insert: machine type, zone, provisioning model.
type attempt struct{ typ, zone, model string }

func (e *env) attempts(name string) []attempt {
	var out []attempt
	for _, in := range e.inserts() {
		if in.Name == name {
			out = append(out, attempt{lastSegment(in.MachineType), in.Zone, in.Scheduling.ProvisioningModel})
		}
	}
	return out
}

// TestCapacity: stock-outs and quota errors move on to the next zone, then
// to the next alternative type (Spot then falls back to on-demand); when
// nothing is left the error wraps ErrCapacity and lists every try.
func TestCapacity(t *testing.T) {
	const (
		a, b         = "us-central1-a", "us-central1-b"
		exhausted    = "ZONE_RESOURCE_POOL_EXHAUSTED"
		exhaustedDet = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
		quota        = "QUOTA_EXCEEDED"
	)
	type fault struct {
		typ, zone string
		n         int
		code      string
	}
	tests := []struct {
		name    string
		spot    bool
		faults  []fault
		mutate  func(*gcetest.Server)
		want    []attempt // inserts of worker-0, in order
		wantErr []string  // substrings of an ErrCapacity error; nil for success
	}{
		{
			name:   "next zone",
			faults: []fault{{"", a, 1, exhausted}},
			want:   []attempt{{"n2-standard-4", a, "STANDARD"}, {"n2-standard-4", b, "STANDARD"}},
		},
		{
			name:   "with details, then the alternative type",
			faults: []fault{{"n2-standard-4", "", -1, exhaustedDet}},
			want:   []attempt{{"n2-standard-4", a, "STANDARD"}, {"n2-standard-4", b, "STANDARD"}, {"e2-standard-4", a, "STANDARD"}},
		},
		{
			name:   "quota is regional: the region's other zones are skipped",
			faults: []fault{{"n2-standard-4", a, 1, quota}},
			want:   []attempt{{"n2-standard-4", a, "STANDARD"}, {"e2-standard-4", a, "STANDARD"}},
		},
		{
			name: "machine type not offered in a zone",
			mutate: func(s *gcetest.Server) {
				var types []gcetest.MachineType
				for _, m := range gcetest.DefaultMachineTypes() {
					if m.Name != "n2-standard-4" {
						types = append(types, m)
					}
				}
				s.SetZoneMachineTypes(a, types)
			},
			want: []attempt{{"n2-standard-4", a, "STANDARD"}, {"n2-standard-4", b, "STANDARD"}},
		},
		{
			name:   "spot falls back to on-demand",
			spot:   true,
			faults: []fault{{"", "", 4, exhausted}},
			want: []attempt{{"n2-standard-4", a, "SPOT"}, {"n2-standard-4", b, "SPOT"}, {"e2-standard-4", a, "SPOT"}, {"e2-standard-4", b, "SPOT"},
				{"n2-standard-4", a, "STANDARD"}},
		},
		{
			name:   "nothing anywhere",
			faults: []fault{{"", "", -1, exhausted}},
			want:   []attempt{{"n2-standard-4", a, "STANDARD"}, {"n2-standard-4", b, "STANDARD"}, {"e2-standard-4", a, "STANDARD"}, {"e2-standard-4", b, "STANDARD"}},
			wantErr: []string{
				"n2-standard-4 in us-central1-a: ZONE_RESOURCE_POOL_EXHAUSTED", "n2-standard-4 in us-central1-b: ZONE_RESOURCE_POOL_EXHAUSTED",
				"e2-standard-4 in us-central1-a: ZONE_RESOURCE_POOL_EXHAUSTED", "e2-standard-4 in us-central1-b: ZONE_RESOURCE_POOL_EXHAUSTED",
			},
		},
		{
			name:    "quota everywhere",
			faults:  []fault{{"", "", -1, quota}},
			want:    []attempt{{"n2-standard-4", a, "STANDARD"}, {"e2-standard-4", a, "STANDARD"}},
			wantErr: []string{"n2-standard-4 in us-central1-a: QUOTA_EXCEEDED", "e2-standard-4 in us-central1-a: QUOTA_EXCEEDED"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			spec := testSpec(t, "cap", "ann")
			spec.Spot = tc.spot
			if err := e.p.StartScheduler(e.ctx, spec); err != nil {
				t.Fatal(err)
			}
			if tc.mutate != nil {
				tc.mutate(e.srv)
			}
			for _, f := range tc.faults {
				e.srv.FailInsertsOf(f.typ, f.zone, f.n, f.code)
			}
			err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786")
			if got := e.attempts("gw-cap-worker-0"); !slices.Equal(got, tc.want) {
				t.Errorf("inserts:\n got %v\nwant %v", got, tc.want)
			}
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("StartWorker: %v", err)
				}
				last := tc.want[len(tc.want)-1]
				in, ok := e.srv.Instance("gw-cap-worker-0")
				if !ok || !strings.HasSuffix(in.MachineType, "/"+last.typ) || !strings.HasSuffix(in.Zone, last.zone) {
					t.Errorf("worker is %+v; want %v", in, last)
				}
				return
			}
			if !errors.Is(err, providers.ErrCapacity) {
				t.Fatalf("err = %v; want ErrCapacity", err)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q lacks %q", err, s)
				}
			}
			if _, ok := e.srv.Instance("gw-cap-worker-0"); ok {
				t.Errorf("an instance was left after a failed start")
			}
		})
	}
}

// TestTransientErrorsAreRetried: 429 and 503 answers are retried with
// bounded, jittered pauses; an answer lost after the insert took effect is
// retried with the same request ID, so only one instance is made.
func TestTransientErrorsAreRetried(t *testing.T) {
	t.Run("429 on insert", func(t *testing.T) {
		e := newEnv(t, nil)
		e.srv.FailRequests("POST", "/instances", 2, 429)
		if err := e.p.StartScheduler(e.ctx, testSpec(t, "c1", "ann")); err != nil {
			t.Fatalf("StartScheduler: %v", err)
		}
		if got := len(e.srv.RequestsTo("POST", "/instances")); got != 3 {
			t.Errorf("%d insert requests; want 3", got)
		}
		sl := e.sl.all()
		if len(sl) != 2 {
			t.Fatalf("pauses %v; want 2", sl)
		}
		for i, d := range sl {
			if bound := 500 * time.Millisecond << i; d < 0 || d >= bound {
				t.Errorf("pause %d is %v; want in [0, %v)", i, d, bound)
			}
		}
	})
	t.Run("503 on listing, secret manager and operation wait", func(t *testing.T) {
		e := newEnv(t, nil)
		e.srv.FailRequests("GET", "/aggregated/instances", 1, 503)
		e.srv.FailRequests("POST", "/v1/projects/test-project/secrets", 1, 503)
		e.srv.FailRequests("POST", "/wait", 1, 503)
		if err := e.p.StartScheduler(e.ctx, testSpec(t, "c1", "ann")); err != nil {
			t.Fatalf("StartScheduler: %v", err)
		}
		if len(e.sl.all()) != 3 {
			t.Errorf("pauses %v; want 3", e.sl.all())
		}
	})
	t.Run("gives up after MaxAttempts", func(t *testing.T) {
		e := newEnv(t, func(c *Config) { c.Retry.MaxAttempts = 3 })
		e.srv.FailRequests("GET", "/aggregated/instances", -1, 503)
		_, err := e.p.Describe(e.ctx, "c1")
		if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") {
			t.Fatalf("Describe: %v; want it to give up after 3 attempts", err)
		}
		if len(e.sl.all()) != 2 {
			t.Errorf("pauses %v; want 2", e.sl.all())
		}
	})
	t.Run("lost answer", func(t *testing.T) {
		e := newEnv(t, nil)
		e.srv.LoseAnswers("POST", "/zones/us-central1-a/instances", 1)
		if err := e.p.StartScheduler(e.ctx, testSpec(t, "c1", "ann")); err != nil {
			t.Fatalf("StartScheduler: %v", err)
		}
		reqs := e.srv.RequestsTo("POST", "/instances")
		if len(reqs) != 2 || reqs[0].Query.Get("requestId") == "" || reqs[0].Query.Get("requestId") != reqs[1].Query.Get("requestId") {
			t.Errorf("inserts %d with request IDs %q; want 2 with the same", len(reqs), []string{reqs[0].Query.Get("requestId"), reqs[len(reqs)-1].Query.Get("requestId")})
		}
		if n := len(e.srv.Instances()); n != 1 {
			t.Errorf("%d instances; want 1", n)
		}
	})
	t.Run("permanent errors are not retried", func(t *testing.T) {
		e := newEnv(t, nil)
		e.srv.FailRequests("POST", "/instances", 1, 403)
		err := e.p.StartScheduler(e.ctx, testSpec(t, "c1", "ann"))
		if err == nil || errors.Is(err, providers.ErrCapacity) || !strings.Contains(err.Error(), "403") {
			t.Fatalf("StartScheduler: %v; want the 403", err)
		}
		if len(e.sl.all()) != 0 {
			t.Errorf("pauses %v; want none", e.sl.all())
		}
	})
}

// TestOperationTimeout: an operation that never finishes fails the call
// after OperationTimeout, saying so; it is not a capacity problem.
func TestOperationTimeout(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.OperationTimeout = 150 * time.Millisecond })
	spec := testSpec(t, "slow", "ann")
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	e.srv.HangOperations(true)
	var err error
	testutil.Returns(t, "StartWorker on an operation that never finishes", func() {
		err = e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786")
	})
	if !errors.Is(err, errOperationTimeout) || errors.Is(err, providers.ErrCapacity) {
		t.Fatalf("StartWorker: %v; want an operation timeout", err)
	}
	if !strings.Contains(err.Error(), "insert of gw-slow-worker-0") || !strings.Contains(err.Error(), "150ms") {
		t.Errorf("error %q does not say what timed out", err)
	}
	// Stopping waits too, and says so.
	err = e.p.StopCluster(e.ctx, "slow")
	if !errors.Is(err, errOperationTimeout) {
		t.Fatalf("StopCluster: %v; want an operation timeout", err)
	}
	if len(e.srv.Firewalls()) != 2 || len(e.srv.Secrets()) != 1 {
		t.Errorf("firewall rules or secret deleted while instances may remain")
	}
	e.srv.HangOperations(false)
	if err := e.p.StopCluster(e.ctx, "slow"); err != nil {
		t.Fatalf("StopCluster once operations finish: %v", err)
	}
	if len(e.srv.Instances()) != 0 || len(e.srv.Firewalls()) != 0 || len(e.srv.Secrets()) != 0 {
		t.Errorf("left: %v %v %v", e.srv.Instances(), e.srv.Firewalls(), e.srv.Secrets())
	}
}

// TestContextIsHonoured: a cancelled context starts nothing; a context
// cancelled during a wait ends it with the context's error.
func TestContextIsHonoured(t *testing.T) {
	e := newEnv(t, nil)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	if err := e.p.StartScheduler(ctx, testSpec(t, "c1", "ann")); !errors.Is(err, context.Canceled) {
		t.Errorf("StartScheduler: %v; want context.Canceled", err)
	}
	if _, err := e.p.Describe(ctx, "c1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Describe: %v", err)
	}
	if _, err := e.p.InstanceTypes(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("InstanceTypes: %v", err)
	}
	if n := len(e.srv.Requests()); n != 0 {
		t.Errorf("%d requests sent with a cancelled context", n)
	}

	e.srv.HangOperations(true)
	ctx, cancel = context.WithTimeout(e.ctx, 100*time.Millisecond)
	defer cancel()
	if err := e.p.StartScheduler(ctx, testSpec(t, "c2", "ann")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("StartScheduler while operations hang: %v; want the context's deadline", err)
	}
}

// TestPreemption: a preempted Spot worker is reported stopped with the
// reason "spot preemption", first while TERMINATED, then after its DELETE
// termination action removed it, until the core forgets it with
// StopWorker. A member that exits on its own carries its script's reason.
func TestPreemption(t *testing.T) {
	e := newEnv(t, nil)
	spec := testSpec(t, "pre", "ann")
	spec.Spot = true
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"worker-0", "worker-1", "worker-2"} {
		if err := e.p.StartWorker(e.ctx, spec, w, "10.128.0.2:8786"); err != nil {
			t.Fatal(err)
		}
	}
	if ms := e.describe("pre"); ms["worker-0"].State != providers.StateRunning {
		t.Fatalf("worker-0: %+v", ms["worker-0"])
	}
	if err := e.srv.Preempt("gw-pre-worker-0"); err != nil {
		t.Fatal(err)
	}
	if w := e.describe("pre")["worker-0"]; w.State != providers.StateStopped || w.Reason != "spot preemption" {
		t.Errorf("preempted worker: %+v", w)
	}
	if err := e.srv.Remove("gw-pre-worker-0"); err != nil { // instanceTerminationAction DELETE
		t.Fatal(err)
	}
	for range 2 {
		if w := e.describe("pre")["worker-0"]; w.State != providers.StateStopped || w.Reason != "spot preemption" || w.Role != providers.RoleWorker {
			t.Errorf("preempted and deleted worker: %+v", w)
		}
	}
	// Preempted and deleted before any Describe saw it stopped.
	if err := e.srv.Preempt("gw-pre-worker-2"); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Remove("gw-pre-worker-2"); err != nil {
		t.Fatal(err)
	}
	if w := e.describe("pre")["worker-2"]; w.State != providers.StateStopped || w.Reason != "spot preemption" {
		t.Errorf("worker deleted on preemption: %+v", w)
	}
	// The core forgets a lost worker with StopWorker.
	if err := e.p.StopWorker(e.ctx, "pre", "worker-0"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.describe("pre")["worker-0"]; ok {
		t.Errorf("worker-0 still described after StopWorker")
	}
	// Dask exited: the script powered the VM off with its reason.
	if err := e.srv.PowerOff("gw-pre-worker-1", "dask worker exited with status 1"); err != nil {
		t.Fatal(err)
	}
	if w := e.describe("pre")["worker-1"]; w.State != providers.StateStopped || !strings.Contains(w.Reason, "dask worker exited with status 1") {
		t.Errorf("exited worker: %+v", w)
	}
	// An instance deleted behind the gateway's back, no preemption.
	spec.Spot = false
	if err := e.p.StartWorker(e.ctx, spec, "worker-3", "10.128.0.2:8786"); err != nil {
		t.Fatal(err)
	}
	e.describe("pre")
	if err := e.srv.Remove("gw-pre-worker-3"); err != nil {
		t.Fatal(err)
	}
	if w := e.describe("pre")["worker-3"]; w.State != providers.StateStopped || !strings.Contains(w.Reason, "disappeared") {
		t.Errorf("vanished worker: %+v", w)
	}
	// A stopped scheduler with no record of why.
	if err := e.srv.SetStatus("gw-pre-scheduler", "TERMINATED"); err != nil {
		t.Fatal(err)
	}
	if s := e.describe("pre")["scheduler"]; s.State != providers.StateStopped || !strings.Contains(s.Reason, "TERMINATED without the gateway asking") {
		t.Errorf("terminated scheduler: %+v", s)
	}
}

// TestPendingUntilReady: a scheduler VM that runs is pending until its
// startup script reports Dask listening; STAGING is pending.
func TestPendingUntilReady(t *testing.T) {
	e := newEnv(t, nil)
	e.srv.AutoReady(false)
	e.srv.HoldStaging(true)
	if err := e.p.StartScheduler(e.ctx, testSpec(t, "rdy", "ann")); err != nil {
		t.Fatal(err)
	}
	if s := e.describe("rdy")["scheduler"]; s.State != providers.StatePending || s.Address != "" {
		t.Errorf("staging scheduler: %+v", s)
	}
	e.srv.HoldStaging(false)
	e.describe("rdy") // STAGING -> RUNNING happens between requests
	if s := e.describe("rdy")["scheduler"]; s.State != providers.StatePending || s.Address != "" {
		t.Errorf("running VM, Dask not ready: %+v", s)
	}
	if err := e.srv.SetGuestAttribute("gw-rdy-scheduler", "gateway", "ready", "1"); err != nil {
		t.Fatal(err)
	}
	if s := e.describe("rdy")["scheduler"]; s.State != providers.StateRunning || s.Address == "" {
		t.Errorf("ready scheduler: %+v", s)
	}
	// Readiness is remembered: no more guest attribute reads.
	before := len(e.srv.RequestsTo("GET", "/getGuestAttributes"))
	e.describe("rdy")
	if after := len(e.srv.RequestsTo("GET", "/getGuestAttributes")); after != before {
		t.Errorf("guest attributes read again (%d -> %d)", before, after)
	}
	// A failing read is an error, not a silent "pending".
	e2 := newEnv(t, nil)
	if err := e2.p.StartScheduler(e2.ctx, testSpec(t, "rdy", "ann")); err != nil {
		t.Fatal(err)
	}
	e2.srv.FailRequests("GET", "/getGuestAttributes", -1, 403)
	if _, err := e2.p.Describe(e2.ctx, "rdy"); err == nil || !strings.Contains(err.Error(), "guest attributes") {
		t.Errorf("Describe with guest attributes refused: %v", err)
	}
}

// TestIdempotentStarts: repeated starts make one instance; a start that
// finds its instance only by name (a listing that missed it) adopts it; an
// instance of the same name that is not the member's is an error.
func TestIdempotentStarts(t *testing.T) {
	e := newEnv(t, nil)
	spec := testSpec(t, "idem", "ann")
	for range 2 {
		if err := e.p.StartScheduler(e.ctx, spec); err != nil {
			t.Fatal(err)
		}
		if err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.128.0.2:8786"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.inserts()); n != 2 {
		t.Errorf("%d inserts; want 2", n)
	}
	if n := len(e.srv.RequestsTo("POST", ":addVersion")); n != 1 {
		t.Errorf("%d secret versions added; want 1", n)
	}

	// A restarted gateway whose listing misses the scheduler: the insert
	// answers 409 alreadyExists, and the instance is recognised as its own.
	e.srv.HideFromLists("gw-idem-scheduler", true)
	p2 := e.provider(testConfig(e.srv, e.sl))
	if err := p2.StartScheduler(e.ctx, spec); err != nil {
		t.Fatalf("StartScheduler after a restart: %v", err)
	}
	if n := len(e.inserts()); n != 3 || len(e.srv.Instances()) != 2 {
		t.Errorf("%d inserts, %d instances; want 3 and 2", n, len(e.srv.Instances()))
	}
	if n := len(e.srv.RequestsTo("POST", ":addVersion")); n != 1 {
		t.Errorf("the restarted gateway stored the secret again (%d versions)", n)
	}

	// Someone else's instance under the member's name.
	e.srv.PutInstance("us-central1-a", gcetest.Instance{Name: "gw-idem-worker-9", MachineType: "zones/us-central1-a/machineTypes/e2-standard-4",
		Metadata: &gcetest.Metadata{Items: []gcetest.MetadataItem{{Key: "gateway-id", Value: "another-gateway"}}}})
	err := e.p.StartWorker(e.ctx, spec, "worker-9", "10.128.0.2:8786")
	if err == nil || !strings.Contains(err.Error(), "already exists in us-central1-a but is not worker-9") {
		t.Errorf("StartWorker over a foreign instance: %v", err)
	}
	// Someone else's firewall rule under the cluster's rule name.
	other := e.provider(func() Config { c := testConfig(e.srv, e.sl); c.GatewayID = "another-gateway"; return c }())
	err = other.StartScheduler(e.ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "was not made by gateway another-gateway") {
		t.Errorf("StartScheduler over a foreign firewall rule: %v", err)
	}
	// And the cluster's members are not stopped by another gateway.
	if err := other.StopCluster(e.ctx, "idem"); err != nil {
		t.Fatal(err)
	}
	if len(e.srv.Firewalls()) != 2 || len(e.srv.Secrets()) != 1 {
		t.Errorf("another gateway's StopCluster removed this one's rules or secret")
	}
}

// TestStopErrors: a failing deletion is reported, and leaves the firewall
// rules and the secret for the next StopCluster, which finishes the job.
func TestStopErrors(t *testing.T) {
	e := newEnv(t, nil)
	spec := testSpec(t, "stp", "ann")
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	e.srv.FailRequests("DELETE", "/instances/", -1, 403)
	if err := e.p.StopCluster(e.ctx, "stp"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("StopCluster: %v; want the 403", err)
	}
	if err := e.p.StopWorker(e.ctx, "stp", "scheduler"); err == nil {
		t.Errorf("StopWorker with deletions refused: no error")
	}
	if len(e.srv.Firewalls()) != 2 || len(e.srv.Secrets()) != 1 {
		t.Errorf("rules or secret deleted before the instances")
	}
	e.srv.ClearFaults()
	e.srv.FailRequests("DELETE", "/global/firewalls/", 1, 403)
	if err := e.p.StopCluster(e.ctx, "stp"); err == nil {
		t.Errorf("StopCluster with the firewall deletion refused: no error")
	}
	e.srv.FailRequests("DELETE", "/secrets/", 1, 403)
	if err := e.p.StopCluster(e.ctx, "stp"); err == nil {
		t.Errorf("StopCluster with the secret deletion refused: no error")
	}
	if err := e.p.StopCluster(e.ctx, "stp"); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	if len(e.srv.Instances())+len(e.srv.Firewalls())+len(e.srv.Secrets()) != 0 {
		t.Errorf("left: %v %v %v", e.srv.Instances(), e.srv.Firewalls(), e.srv.Secrets())
	}
	// Listing failures surface from every method.
	e.srv.FailRequests("GET", "/aggregated/instances", -1, 403)
	if err := e.p.StopCluster(e.ctx, "stp"); err == nil {
		t.Errorf("StopCluster with listing refused: no error")
	}
	if err := e.p.StopWorker(e.ctx, "stp", "worker-0"); err == nil {
		t.Errorf("StopWorker with listing refused: no error")
	}
	if _, err := e.p.List(e.ctx); err == nil {
		t.Errorf("List with listing refused: no error")
	}
	if err := e.p.StartScheduler(e.ctx, spec); err == nil {
		t.Errorf("StartScheduler with listing refused: no error")
	}
	if err := e.p.StartWorker(e.ctx, spec, "worker-0", "10.0.0.1:8786"); err == nil {
		t.Errorf("StartWorker with listing refused: no error")
	}
}

// TestSecretErrors: Secret Manager refusals fail the start with what was
// refused, before any instance is made.
func TestSecretErrors(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"POST", "/secrets", "create secret gw-sec-tls"},
		{"GET", "latest:access", "read secret gw-sec-tls"},
		{"POST", ":addVersion", "store the TLS material"},
		{"POST", ":setIamPolicy", "read secret gw-sec-tls"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			e := newEnv(t, nil)
			e.srv.FailRequests(tc.method, tc.path, -1, 403)
			err := e.p.StartScheduler(e.ctx, testSpec(t, "sec", "ann"))
			want := tc.want
			if tc.path == ":setIamPolicy" {
				want = "let dask-workers@test-project.iam.gserviceaccount.com read secret gw-sec-tls"
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("StartScheduler: %v; want %q", err, want)
			}
			if len(e.srv.Instances()) != 0 {
				t.Errorf("an instance was made without its secret")
			}
		})
	}
	t.Run("someone else's secret", func(t *testing.T) {
		e := newEnv(t, nil)
		other := e.provider(func() Config { c := testConfig(e.srv, e.sl); c.GatewayID = "another-gateway"; return c }())
		if err := other.ensureSecret(e.ctx, testSpec(t, "sec", "ann")); err != nil {
			t.Fatal(err)
		}
		err := e.p.StartScheduler(e.ctx, testSpec(t, "sec", "ann"))
		if err == nil || !strings.Contains(err.Error(), "secret gw-sec-tls exists but is not") {
			t.Errorf("StartScheduler over a foreign secret: %v", err)
		}
		if err := e.p.deleteSecret(e.ctx, "sec"); err != nil || len(e.srv.Secrets()) != 1 {
			t.Errorf("deleteSecret of a foreign secret: %v, %d left", err, len(e.srv.Secrets()))
		}
	})
}
