package gce

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// TestConfigValidation: New reports every problem at once, each with what
// to fix, and never reaches the network to do so.
func TestConfigValidation(t *testing.T) {
	srv := gcetest.New(t, gcetest.Options{})
	valid := testConfig(srv, &sleeps{})
	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string
	}{
		{"empty", func(c *Config) { *c = Config{} }, []string{
			"5 problems", "project is empty", "zones is empty", "gateway_service_account is empty", "service_account is empty", "gateway id is empty",
		}},
		{"project", func(c *Config) { c.Project = "My Project" }, []string{`project "My Project" is not a project ID`}},
		{"zones", func(c *Config) { c.Zones = []string{"us-central1", "us-central1-a", "us-central1-a"} }, []string{`zone "us-central1" is not a zone name`, `zone "us-central1-a" is listed twice`}},
		{"regions", func(c *Config) { c.Zones = []string{"us-central1-a", "europe-west4-b"} }, []string{`zones span the regions ["us-central1" "europe-west4"]`}},
		{"the whole Internet", func(c *Config) { c.GatewayServiceAccount, c.GatewayCIDRs = "", []string{"0.0.0.0/0"} }, []string{"opens the schedulers to much of the Internet"}},
		{"the Internet in halves", func(c *Config) { c.GatewayServiceAccount, c.GatewayCIDRs = "", []string{"0.0.0.0/1", "128.0.0.0/1"} }, []string{`"0.0.0.0/1" opens the schedulers`, `"128.0.0.0/1" opens the schedulers`}},
		{"cidrs", func(c *Config) {
			c.GatewayServiceAccount, c.GatewayCIDRs = "", []string{"10.0.0.1/24", "fd00::/8", "nonsense"}
		}, []string{
			"did you mean 10.0.0.0/24?", `"fd00::/8" is IPv6`, `"nonsense" is not a CIDR range`,
		}},
		{"service account", func(c *Config) { c.ServiceAccount = "dask" }, []string{`service_account "dask" is not an email`}},
		{"gateway account and ranges", func(c *Config) { c.GatewayCIDRs = []string{"10.0.0.0/24"} }, []string{"both set; set only gateway_service_account"}},
		{"gateway account", func(c *Config) { c.GatewayServiceAccount = "gw" }, []string{`gateway_service_account "gw" is not an email`}},
		{"gateway account is the members'", func(c *Config) { c.GatewayServiceAccount = c.ServiceAccount }, []string{"gateway_service_account is the members' service_account"}},
		{"scopes", func(c *Config) { c.Scopes = []string{"https://www.googleapis.com/auth/devstorage.read_only"} }, []string{"lack https://www.googleapis.com/auth/cloud-platform"}},
		{"images and disks", func(c *Config) {
			c.Image, c.ContainerImage, c.DiskGiB, c.GPUDiskGiB = "bad image", "bad image;rm", 5, 20
		}, []string{`image "bad image" is not a resource name`, "container_image", "disk_gib is 5", "GPUDiskGiB is 20"}},
		{"machine types", func(c *Config) { c.WorkerMachineType = "N2_STANDARD" }, []string{`worker_machine_type "N2_STANDARD"`}},
		{"labels", func(c *Config) {
			c.Labels = map[string]string{"gateway-x": "1", "Team": "a", "ok": "Bad Value"}
		}, []string{`label "gateway-x" uses the reserved prefix`, `label key "Team" is invalid`, `label "ok" has value "Bad Value"`}},
		{"endpoints", func(c *Config) { c.Endpoint, c.SecretManagerEndpoint = "ftp://x", "::" }, []string{`endpoint "ftp://x" is not an http(s) URL`, `secretmanager_endpoint "::"`}},
		{"durations", func(c *Config) {
			c.Retry = RetryConfig{MaxAttempts: -1, BaseDelay: time.Second, MaxDelay: time.Millisecond}
			c.OperationTimeout, c.InstanceTypesTTL = -1, -1
		}, []string{"retry.max_attempts is -1", "retry delays", "OperationTimeout", "InstanceTypesTTL"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := valid
			cfg.Labels = nil
			tc.mutate(&cfg)
			_, err := New(context.Background(), cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("New: %v; want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("validation sent %d requests", n)
	}
	p, err := New(context.Background(), valid)
	if err != nil {
		t.Fatalf("valid config: %v", err)
	}
	if p.Name() != "gce" {
		t.Errorf("Name() = %q", p.Name())
	}
	if err := p.Close(context.Background(), false); err != nil {
		t.Errorf("Close: %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("New and Close sent %d requests", n)
	}
}

// TestSpecErrors: specs the provider cannot run are refused before any
// instance is made, with ErrUnsupported where another spec would do.
func TestSpecErrors(t *testing.T) {
	e := newEnv(t, nil)
	good := testSpec(t, "spec", "ann")
	if err := e.p.StartScheduler(e.ctx, good); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		mutate      func(*providers.ClusterSpec)
		worker      string
		addr        string
		want        string
		unsupported bool
	}{
		{"no certificate", func(s *providers.ClusterSpec) { s.TLSCert = nil }, "worker-0", "10.0.0.1:8786", "no PEM certificate", false},
		{"no key", func(s *providers.ClusterSpec) { s.TLSKey = []byte("x") }, "worker-0", "10.0.0.1:8786", "no PEM private key", false},
		{"bad image", func(s *providers.ClusterSpec) { s.Image = "img; rm -rf /" }, "worker-0", "10.0.0.1:8786", "is not an image reference", false},
		{"bad prefix", func(s *providers.ClusterSpec) { s.DashboardPrefix = "/x\nrm" }, "worker-0", "10.0.0.1:8786", "control characters", false},
		{"worker named scheduler", nil, "scheduler", "10.0.0.1:8786", `invalid worker name "scheduler"`, false},
		{"worker with a space", nil, "w 1", "10.0.0.1:8786", "invalid worker name", false},
		{"no scheduler address", nil, "worker-0", "", "is not host:port", false},
		{"bad port", nil, "worker-0", "10.0.0.1:http", "is not host:port", false},
		{"GPUs on a type without", func(s *providers.ClusterSpec) {
			s.Worker = providers.Machine{InstanceType: "e2-standard-4", GPUs: 1, GPUType: "t4"}
		}, "worker-0", "10.0.0.1:8786", "e2-standard-4 takes no GPUs", true},
		{"L4 on N1", func(s *providers.ClusterSpec) {
			s.Worker = providers.Machine{InstanceType: "n1-standard-4", GPUs: 1, GPUType: "l4"}
		}, "worker-0", "10.0.0.1:8786", "n1-standard-4 cannot carry l4 GPUs", true},
		{"bad type name", func(s *providers.ClusterSpec) { s.Worker = providers.Machine{InstanceType: "m5.xlarge"} }, "worker-0", "10.0.0.1:8786", `"m5.xlarge" is not a Compute Engine machine type`, true},
		{"nothing fits", func(s *providers.ClusterSpec) { s.Worker = providers.Machine{VCPUs: 4096} }, "worker-0", "10.0.0.1:8786", "none fits", true},
	}
	before := len(e.inserts())
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := good
			if tc.mutate != nil {
				tc.mutate(&spec)
			}
			err := e.p.StartWorker(e.ctx, spec, tc.worker, tc.addr)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("StartWorker: %v; want %q", err, tc.want)
			}
			if errors.Is(err, providers.ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(ErrUnsupported) = %v; want %v", !tc.unsupported, tc.unsupported)
			}
		})
	}
	if n := len(e.inserts()); n != before {
		t.Errorf("%d inserts for refused specs", n-before)
	}
	t.Run("region without configured zones", func(t *testing.T) {
		spec := testSpec(t, "eu", "ann")
		spec.Region = "europe-west4"
		err := e.p.StartScheduler(e.ctx, spec)
		if !errors.Is(err, providers.ErrUnsupported) || !strings.Contains(err.Error(), `region "europe-west4"`) {
			t.Errorf("StartScheduler: %v", err)
		}
	})
	t.Run("no scheduler certificate", func(t *testing.T) {
		spec := testSpec(t, "nocert", "ann")
		spec.TLSCert = nil
		if err := e.p.StartScheduler(e.ctx, spec); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
			t.Errorf("StartScheduler: %v", err)
		}
	})
}

// TestMachineChoice: a spec with sizes but no type gets the cheapest
// built-in fit; GPUs of N1 models get an N1 type with accelerators; a
// region keeps the scheduler in its zones.
func TestMachineChoice(t *testing.T) {
	e := newEnv(t, nil)
	if e.p.Region() != "us-central1" {
		t.Errorf("Region() = %q", e.p.Region())
	}
	spec := testSpec(t, "mc", "ann")
	spec.Scheduler = providers.Machine{}
	spec.Region = "us-central1"
	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	if in := e.insertFor("gw-mc-scheduler"); lastSegment(in.MachineType) != DefaultSchedulerType || in.Zone != "us-central1-a" {
		t.Errorf("scheduler %s in %s", in.MachineType, in.Zone)
	}
	for _, tc := range []struct {
		worker string
		m      providers.Machine
		want   string
		accel  string
	}{
		{"worker-0", providers.Machine{}, DefaultWorkerType, ""},
		{"worker-1", providers.Machine{VCPUs: 3, MemoryGiB: 20}, "n2-highmem-4", ""},
		{"worker-2", providers.Machine{VCPUs: 4, GPUs: 1, GPUType: "v100"}, "n1-standard-4", "nvidia-tesla-v100"},
		{"worker-3", providers.Machine{GPUs: 1, GPUType: "l4"}, "g2-standard-4", ""},
		{"worker-4", providers.Machine{GPUs: 2}, "n1-standard-4", "nvidia-tesla-t4"},
		// An N1 combination as InstanceTypes lists it, the machine's GPU
		// fields as the catalog entry gives them.
		{"worker-6", providers.Machine{InstanceType: "n1-standard-8+2xv100", GPUs: 2, GPUType: "v100", Alternatives: []string{"n1-highmem-8+2xv100"}}, "n1-standard-8", "nvidia-tesla-v100"},
	} {
		spec.Worker = tc.m
		if err := e.p.StartWorker(e.ctx, spec, tc.worker, "10.0.0.1:8786"); err != nil {
			t.Fatalf("%s: %v", tc.worker, err)
		}
		in := e.insertFor("gw-mc-" + tc.worker)
		if lastSegment(in.MachineType) != tc.want {
			t.Errorf("%s: machine type %s; want %s", tc.worker, in.MachineType, tc.want)
		}
		if got := ""; len(in.GuestAccelerators) > 0 {
			got = lastSegment(in.GuestAccelerators[0].AcceleratorType)
			if got != tc.accel || int(in.GuestAccelerators[0].AcceleratorCount) != tc.m.GPUs {
				t.Errorf("%s: accelerators %+v", tc.worker, in.GuestAccelerators)
			}
		} else if tc.accel != "" {
			t.Errorf("%s: no accelerators; want %s", tc.worker, tc.accel)
		}
		if tc.m.GPUs > 0 && in.Scheduling.OnHostMaintenance != "TERMINATE" {
			t.Errorf("%s: GPUs with onHostMaintenance %s", tc.worker, in.Scheduling.OnHostMaintenance)
		}
	}
	// An accelerator-optimized type with its built-in GPUs attaches none.
	spec.Worker = providers.Machine{InstanceType: "a2-highgpu-1g", GPUs: 1, GPUType: "a100"}
	if err := e.p.StartWorker(e.ctx, spec, "worker-5", "10.0.0.1:8786"); err != nil {
		t.Fatal(err)
	}
	if in := e.insertFor("gw-mc-worker-5"); len(in.GuestAccelerators) != 0 || in.Scheduling.OnHostMaintenance != "TERMINATE" || in.Disks[0].InitializeParams.SourceImage != DefaultGPUImage {
		t.Errorf("a2 worker: %+v %+v", in.GuestAccelerators, in.Scheduling)
	}
}

// TestInstanceTypes: the zone's machine types with their GPUs and prices,
// shared-core and deprecated ones left out, cached; the built-in table
// when the listing fails.
func TestInstanceTypes(t *testing.T) {
	e := newEnv(t, nil)
	types, err := e.p.InstanceTypes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for i, it := range types {
		byName[it.Name] = i
		if it.Cloud != "gce" || it.PriceHour <= 0 {
			t.Errorf("%s", it)
		}
	}
	get := func(name string) (ok bool, vcpus int, mem float64, gpus int, gpu string, price float64) {
		i, ok := byName[name]
		if !ok {
			return false, 0, 0, 0, "", 0
		}
		it := types[i]
		return true, it.VCPUs, it.MemoryGiB, it.GPUs, it.GPUType, it.PriceHour
	}
	if ok, v, m, g, gt, p := get("a2-highgpu-1g"); !ok || v != 12 || m != 85 || g != 1 || gt != "a100" || p != 3.673385 {
		t.Errorf("a2-highgpu-1g: %v %d %g %d %s %g", ok, v, m, g, gt, p)
	}
	if ok, v, m, _, _, p := get("n1-standard-4"); !ok || v != 4 || m != 15 || p != 0.189999 {
		t.Errorf("n1-standard-4: %v %d %g %g", ok, v, m, p)
	}
	// Not in the built-in table: priced from its series and class.
	if ok, _, _, _, _, p := get("n2-standard-32"); !ok || p != 0.097118*16 {
		t.Errorf("n2-standard-32 priced %v %g; want %g", ok, p, 0.097118*16)
	}
	// Not in the table, with GPUs: priced per GPU of the same model.
	if ok, _, _, g, gt, p := get("a3-megagpu-8g"); !ok || g != 8 || gt != "h100" || p != 88.253 {
		t.Errorf("a3-megagpu-8g: %v %d %s %g", ok, g, gt, p)
	}
	// N1 machines with the GPUs the zone attaches, within the vCPU limits.
	if ok, v, _, g, gt, p := get("n1-standard-4+1xt4"); !ok || v != 4 || g != 1 || gt != "t4" || p != 0.539999 {
		t.Errorf("n1-standard-4+1xt4: %v %d %d %s %g", ok, v, g, gt, p)
	}
	if ok, _, _, g, gt, _ := get("n1-standard-8+8xv100"); !ok || g != 8 || gt != "v100" {
		t.Errorf("n1-standard-8+8xv100 missing")
	}
	if ok, _, _, _, _, _ := get("n1-standard-8+4xp100"); !ok {
		t.Errorf("n1-standard-8+4xp100 missing")
	}
	for _, gone := range []string{"e2-micro", "n1-standard-1", "n1-standard-8+8xt4", "e2-standard-4+1xt4", "n1-standard-8+1xp4"} {
		if _, ok := byName[gone]; ok {
			t.Errorf("%s listed (shared-core or deprecated)", gone)
		}
	}
	reqs := len(e.srv.Requests())
	if _, err := e.p.InstanceTypes(e.ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.srv.Requests()); n != reqs {
		t.Errorf("cached listing sent %d requests", n-reqs)
	}
	first := 0 // pages after the first carry a pageToken
	for _, r := range e.srv.RequestsTo("GET", "/zones/us-central1-a/acceleratorTypes") {
		if r.Query.Get("pageToken") == "" {
			first++
		}
	}
	if first != 1 {
		t.Errorf("accelerator types listed %d times; want once", first)
	}

	t.Run("fallback", func(t *testing.T) {
		e := newEnv(t, nil)
		e.srv.FailRequests("GET", "/machineTypes", -1, 403)
		types, err := e.p.InstanceTypes(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(types) != len(e.p.builtinTypes()) || len(types) <= len(e.p.catalog.Types("gce")) {
			t.Errorf("fallback has %d types; want the %d built-in ones with N1 GPU combinations", len(types), len(e.p.builtinTypes()))
		}
		names := map[string]bool{}
		for _, it := range types {
			names[it.Name] = true
		}
		if !names["n1-standard-4+1xt4"] || !names["n1-standard-8+1xv100"] || names["n1-standard-8+1xp4"] {
			t.Errorf("fallback combinations: %v", names)
		}
	})
	t.Run("accelerator listing refused", func(t *testing.T) {
		e := newEnv(t, nil)
		e.srv.FailRequests("GET", "/acceleratorTypes", -1, 403)
		types, err := e.p.InstanceTypes(e.ctx)
		if err != nil || len(types) < 10 {
			t.Errorf("InstanceTypes: %d types, %v", len(types), err)
		}
		for _, it := range types {
			if strings.Contains(it.Name, "+") {
				t.Errorf("%s offered without knowing the zone's GPUs", it.Name)
			}
		}
	})
	t.Run("nothing usable", func(t *testing.T) {
		e := newEnv(t, nil)
		for _, z := range e.p.cfg.Zones {
			e.srv.SetZoneMachineTypes(z, []gcetest.MachineType{{Name: "x9-odd-4", GuestCpus: 4, MemoryMb: 4096}})
		}
		types, err := e.p.InstanceTypes(e.ctx)
		if err != nil || len(types) != len(e.p.builtinTypes()) {
			t.Errorf("InstanceTypes: %d types, %v; want the built-in table", len(types), err)
		}
	})
}

func TestParseCombo(t *testing.T) {
	for in, want := range map[string]string{
		"n1-standard-8+2xt4": "n1-standard-8 2 t4 true", "n1-standard-8": "n1-standard-8 0  false",
		"n1-standard-8+x": "n1-standard-8+x 0  false", "n1-standard-8+0xt4": "n1-standard-8+0xt4 0  false", "n1-standard-8+2x": "n1-standard-8+2x 0  false",
	} {
		m, n, g, ok := parseCombo(in)
		if got := fmt.Sprintf("%s %d %s %v", m, n, g, ok); got != want {
			t.Errorf("parseCombo(%q) = %s; want %s", in, got, want)
		}
	}
}

func TestGPUShortName(t *testing.T) {
	desc := map[string]string{"nvidia-b200": "NVIDIA B200", "weird": "Some GPU (v2)"}
	for in, want := range map[string]string{
		"nvidia-tesla-t4": "t4", "nvidia-a100-80gb": "a100-80gb", "nvidia-h100-mega-80gb": "h100",
		"nvidia-b200": "b200", "nvidia-tesla-k80": "k80", "weird": "",
	} {
		if got := gpuShortName(in, desc); got != want {
			t.Errorf("gpuShortName(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestNames: every name is a valid, deterministic GCE name or label value,
// and distinct inputs stay distinct.
func TestNames(t *testing.T) {
	nameRE := regexp.MustCompile(`^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$`)
	long := strings.Repeat("a", 51)
	for _, tc := range []struct{ cluster, member, want string }{
		{"82c6ead88602331f", "scheduler", "gw-82c6ead88602331f-scheduler"},
		{"82c6ead88602331f", "worker-12", "gw-82c6ead88602331f-worker-12"},
		{long, "scheduler", ""},
		{"My_Cluster", "worker-1", ""},
		{"c", "worker-", ""},
	} {
		got := instanceName(tc.cluster, tc.member)
		if !nameRE.MatchString(got) || len(got) > 63 {
			t.Errorf("instanceName(%q, %q) = %q: not a valid name", tc.cluster, tc.member, got)
		}
		if tc.want != "" && got != tc.want {
			t.Errorf("instanceName(%q, %q) = %q; want %q", tc.cluster, tc.member, got, tc.want)
		}
		if again := instanceName(tc.cluster, tc.member); again != got {
			t.Errorf("not deterministic: %q then %q", got, again)
		}
	}
	if instanceName(long, "worker-1") == instanceName(long, "worker-2") {
		t.Errorf("long names collide")
	}
	if gceName("A") == gceName("a") {
		t.Errorf("upper and lower case collide")
	}
	for _, v := range []string{"ann", "Ann", "ann@example.com", strings.Repeat("x", 70), ""} {
		got := labelValue(v)
		if !labelValRE.MatchString(got) {
			t.Errorf("labelValue(%q) = %q: not a label value", v, got)
		}
	}
	if labelValue("ann") != "ann" || labelValue("Ann") == "ann" {
		t.Errorf("labelValue: %q %q", labelValue("ann"), labelValue("Ann"))
	}
	if got := networkURL("p", "global/networks/n"); got != "projects/p/global/networks/n" {
		t.Errorf("networkURL = %q", got)
	}
	if got := networkURL("p", "projects/host/global/networks/shared"); got != "projects/host/global/networks/shared" {
		t.Errorf("networkURL = %q", got)
	}
	for in, want := range map[string]string{
		"sub": "projects/p/regions/us-central1/subnetworks/sub", "regions/r/subnetworks/s": "projects/p/regions/r/subnetworks/s",
		"projects/h/regions/r/subnetworks/s": "projects/h/regions/r/subnetworks/s", "": "",
	} {
		if got := subnetworkURL("p", in, "us-central1-a"); got != want {
			t.Errorf("subnetworkURL(%q) = %q; want %q", in, got, want)
		}
	}
	if id := newRequestID(); !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Errorf("request ID %q is not a UUID v4", id)
	}
}

// TestSubnetworkAndLabels: the subnetwork is set in the zone's region.
func TestSubnetwork(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Subnetwork = "dask" })
	if err := e.p.StartScheduler(e.ctx, testSpec(t, "sn", "ann")); err != nil {
		t.Fatal(err)
	}
	if in := e.insertFor("gw-sn-scheduler"); in.NetworkInterfaces[0].Subnetwork != "projects/test-project/regions/us-central1/subnetworks/dask" {
		t.Errorf("subnetwork %q", in.NetworkInterfaces[0].Subnetwork)
	}
}

// TestStartupScript: the scripts are valid bash (checked with bash -n when
// bash is here), quote what comes from users, and hold no key.
func TestStartupScript(t *testing.T) {
	sched := startupScript(scriptParams{Project: "p", SecretID: "gw-c-tls", Image: "ghcr.io/dask/dask:2024.12.1", Role: providers.RoleScheduler,
		Member: "scheduler", Prefix: "/clusters/c'; touch /tmp/pwned; echo '"})
	worker := startupScript(scriptParams{Project: "p", SecretID: "gw-c-tls", Image: "us-docker.pkg.dev/p/r/dask:1", Role: providers.RoleWorker,
		Member: "worker-1", GPU: true, Scheduler: "10.0.0.2:8786", Threads: 4, Memory: 1 << 30})
	if !strings.Contains(sched, `--dashboard-prefix '/clusters/c'\''; touch /tmp/pwned; echo '\'''`) {
		t.Errorf("dashboard prefix not quoted:\n%s", sched)
	}
	for _, s := range []string{sched, worker} {
		if strings.Contains(s, "BEGIN PRIVATE KEY") || !strings.Contains(s, "versions/latest:access") || !strings.Contains(s, "poweroff") {
			t.Errorf("script does not fetch the key from Secret Manager or power off:\n%s", s)
		}
	}
	if !strings.Contains(worker, "--nthreads 4 --memory-limit 1073741824") || !strings.Contains(worker, "GPU=1") || !strings.Contains(worker, "attr ready 1") {
		t.Errorf("worker script:\n%s", worker)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to check the syntax with")
	}
	for _, s := range []string{sched, worker} {
		cmd := exec.Command(bash, "-n")
		cmd.Stdin = strings.NewReader(s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v\n%s\n%s", err, out, s)
		}
	}
}

// TestClassification covers the error classes the retry and capacity
// logic rely on.
func TestClassification(t *testing.T) {
	gerr := func(code int, reason, msg string) error {
		return &googleapi.Error{Code: code, Message: msg, Errors: []googleapi.ErrorItem{{Reason: reason, Message: msg}}}
	}
	for _, tc := range []struct {
		err       error
		retry     bool
		capCode   string
		isCap     bool
		notFound  bool
		duplicate bool
	}{
		{err: gerr(429, "rateLimitExceeded", "slow down"), retry: true},
		{err: gerr(503, "backendError", ""), retry: true},
		{err: gerr(403, "userRateLimitExceeded", ""), retry: true},
		{err: gerr(400, "resourceNotReady", "busy"), retry: true},
		{err: gerr(403, "quotaExceeded", "Quota 'CPUS' exceeded"), capCode: "QUOTA_EXCEEDED", isCap: true},
		{err: gerr(400, "invalid", "Machine type with name 'a2-highgpu-1g' does not exist in zone 'us-central1-f'."), capCode: "MACHINE_TYPE_NOT_IN_ZONE", isCap: true},
		{err: gerr(400, "invalid", "Accelerator type 'nvidia-tesla-v100' does not exist in zone z."), capCode: "ACCELERATOR_TYPE_NOT_IN_ZONE", isCap: true},
		{err: gerr(404, "notFound", "The resource 'projects/p/zones/z/machineTypes/x' was not found"), capCode: "MACHINE_TYPE_NOT_IN_ZONE", isCap: true, notFound: true},
		{err: gerr(409, "alreadyExists", ""), duplicate: true},
		{err: &OperationError{Errors: []OperationErrorItem{{Code: "ZONE_RESOURCE_POOL_EXHAUSTED"}}}, capCode: "ZONE_RESOURCE_POOL_EXHAUSTED", isCap: true},
		{err: &OperationError{Errors: []OperationErrorItem{{Code: "UNSUPPORTED_OPERATION", Message: "A n2 VM instance is currently unavailable in the us-central1-a zone."}}}, capCode: "UNSUPPORTED_OPERATION", isCap: true},
		{err: &OperationError{Errors: []OperationErrorItem{{Code: "RESOURCE_ALREADY_EXISTS"}}}, duplicate: true},
		{err: &OperationError{Errors: []OperationErrorItem{{Code: "INVALID_FIELD_VALUE"}}}},
		{err: &secretAPIError{Code: 404, Status: "NOT_FOUND"}, notFound: true},
		{err: &secretAPIError{Code: 409, Status: "ALREADY_EXISTS"}, duplicate: true},
		{err: &secretAPIError{Code: 502}, retry: true},
		{err: context.Canceled},
		{err: &netErr{}, retry: true},
	} {
		if got := retryable(tc.err); got != tc.retry {
			t.Errorf("retryable(%v) = %v", tc.err, got)
		}
		code, isCap := capacityCode(tc.err)
		if isCap != tc.isCap || code != tc.capCode {
			t.Errorf("capacityCode(%v) = %q, %v", tc.err, code, isCap)
		}
		if isNotFound(tc.err) != tc.notFound || isAlreadyExists(tc.err) != tc.duplicate {
			t.Errorf("isNotFound/isAlreadyExists(%v) = %v, %v", tc.err, isNotFound(tc.err), isAlreadyExists(tc.err))
		}
	}
}

type netErr struct{}

func (*netErr) Error() string   { return "connection reset" }
func (*netErr) Timeout() bool   { return false }
func (*netErr) Temporary() bool { return true }

// TestBackoff: full jitter below the exponential bound, capped, raised to
// Retry-After.
func TestBackoff(t *testing.T) {
	p := &Provider{cfg: withDefaults(Config{Retry: RetryConfig{BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}})}
	for attempt := 1; attempt <= 40; attempt++ {
		bound := min(2*time.Second, 100*time.Millisecond<<min(attempt-1, 20))
		for range 20 {
			if d := p.backoff(attempt, errors.New("x")); d < 0 || d >= bound {
				t.Fatalf("backoff(%d) = %v; want in [0, %v)", attempt, d, bound)
			}
		}
	}
	ra := &googleapi.Error{Code: 429, Header: http.Header{"Retry-After": {"1"}}}
	if d := p.backoff(1, ra); d != time.Second {
		t.Errorf("backoff with Retry-After: 1 = %v", d)
	}
	ra.Header.Set("Retry-After", "60")
	if d := p.backoff(1, ra); d != 2*time.Second {
		t.Errorf("backoff with Retry-After: 60 = %v; want the 2s cap", d)
	}
}

func TestOpError(t *testing.T) {
	e := &OperationError{Operation: "op-1", Type: "insert", Target: "https://x/zones/z/instances/i",
		Errors: []OperationErrorItem{{Code: "QUOTA_EXCEEDED", Message: "Quota 'CPUS' exceeded"}}}
	if got := e.Error(); got != "operation op-1 (insert i) failed: QUOTA_EXCEEDED: Quota 'CPUS' exceeded" {
		t.Errorf("Error() = %q", got)
	}
}
