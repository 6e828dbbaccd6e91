package gce

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/gce/gcetest"
)

// TestRoundTrip runs a cluster's life through the real REST clients and the
// fake: scheduler, a Spot worker and an N1 worker with a T4, Describe and
// List by label filters, a worker stopped, then the whole cluster, leaving
// no instance, firewall rule or secret behind.
func TestRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	const cluster = "82c6ead88602331f"
	spec := testSpec(t, cluster, "Ann.Smith@example.com")

	if err := e.p.StartScheduler(e.ctx, spec); err != nil {
		t.Fatalf("StartScheduler: %v", err)
	}
	ms := e.describe(cluster)
	sched, ok := ms["scheduler"]
	if !ok || sched.State != providers.StateRunning || sched.Role != providers.RoleScheduler {
		t.Fatalf("scheduler after start: %+v", ms)
	}
	inst, _ := e.srv.Instance("gw-" + cluster + "-scheduler")
	ip := inst.NetworkInterfaces[0].NetworkIP
	if sched.Address != ip+":8786" || sched.DashboardURL != "https://"+ip+":8787" {
		t.Errorf("scheduler address %q dashboard %q; want %s:8786 and https://%s:8787", sched.Address, sched.DashboardURL, ip, ip)
	}
	if sched.Owner != "Ann.Smith@example.com" || sched.Cluster != cluster || sched.StartedAt.IsZero() {
		t.Errorf("scheduler described as %+v", sched)
	}

	// A Spot worker, and a GPU worker on N1 with a T4.
	spot := spec
	spot.Spot = true
	if err := e.p.StartWorker(e.ctx, spot, "worker-0", sched.Address); err != nil {
		t.Fatalf("StartWorker(spot): %v", err)
	}
	gpu := spec
	gpu.Worker = providers.Machine{InstanceType: "n1-standard-4", GPUs: 1, GPUType: "t4"}
	if err := e.p.StartWorker(e.ctx, gpu, "worker-1", sched.Address); err != nil {
		t.Fatalf("StartWorker(gpu): %v", err)
	}

	t.Run("scheduler instance", func(t *testing.T) {
		in := e.insertFor("gw-" + cluster + "-scheduler")
		if in.Zone != "us-central1-a" || !strings.HasSuffix(in.MachineType, "zones/us-central1-a/machineTypes/e2-standard-2") {
			t.Errorf("scheduler in %s as %s", in.Zone, in.MachineType)
		}
		want := map[string]string{"gateway-id": testGatewayID, "gateway-cluster": cluster, "gateway-member": "scheduler", "gateway-role": "scheduler", "team": "data"}
		for k, v := range want {
			if in.Labels[k] != v {
				t.Errorf("label %s = %q, want %q (labels %v)", k, in.Labels[k], v, in.Labels)
			}
		}
		if o := in.Labels["gateway-owner"]; !labelValRE.MatchString(o) || !strings.HasPrefix(o, "ann_smith_example_com-") {
			t.Errorf("owner label %q is not a label-safe form of the owner", o)
		}
		if v, _ := in.MetadataValue("gateway-owner"); v != "Ann.Smith@example.com" {
			t.Errorf("owner metadata %q", v)
		}
		if in.Tags == nil || !slices.Equal(in.Tags.Items, []string{"gw-" + cluster}) {
			t.Errorf("tags %+v; want the cluster tag", in.Tags)
		}
		if len(in.NetworkInterfaces) != 1 || len(in.NetworkInterfaces[0].AccessConfigs) != 0 {
			t.Errorf("network interfaces %+v; want one without external address", in.NetworkInterfaces)
		}
		if in.NetworkInterfaces[0].Network != "projects/test-project/global/networks/default" {
			t.Errorf("network %q", in.NetworkInterfaces[0].Network)
		}
		d := in.Disks[0]
		if !d.Boot || !d.AutoDelete || d.InitializeParams.SourceImage != DefaultImage || d.InitializeParams.DiskSizeGb != DefaultDiskGiB {
			t.Errorf("boot disk %+v %+v", d, d.InitializeParams)
		}
		if len(in.ServiceAccounts) != 1 || in.ServiceAccounts[0].Email != "dask-workers@test-project.iam.gserviceaccount.com" || !slices.Contains(in.ServiceAccounts[0].Scopes, CloudPlatformScope) {
			t.Errorf("service accounts %+v", in.ServiceAccounts)
		}
		s := in.Scheduling
		if s == nil || s.ProvisioningModel != "STANDARD" || s.OnHostMaintenance != "MIGRATE" || s.AutomaticRestart == nil || !*s.AutomaticRestart {
			t.Errorf("scheduler scheduling %+v", s)
		}
		script, _ := in.MetadataValue("startup-script")
		for _, want := range []string{"--entrypoint 'python3' \"$IMAGE\" \\\n  /etc/dask-tls/launcher.py scheduler", "--protocol tls", "--port 8786", `--dashboard-address ":8787"`, "--dashboard-prefix '/clusters/" + cluster + "'", "attr ready 1", "secretmanager.googleapis.com"} {
			if !strings.Contains(script, want) {
				t.Errorf("startup script lacks %q", want)
			}
		}
		if v, _ := in.MetadataValue("enable-guest-attributes"); v != "TRUE" {
			t.Errorf("guest attributes not enabled: %q", v)
		}
	})

	t.Run("spot worker", func(t *testing.T) {
		in := e.insertFor("gw-" + cluster + "-worker-0")
		s := in.Scheduling
		if s.ProvisioningModel != "SPOT" || s.InstanceTerminationAction != "DELETE" || s.OnHostMaintenance != "TERMINATE" || s.AutomaticRestart == nil || *s.AutomaticRestart {
			t.Errorf("spot scheduling %+v", s)
		}
		if in.Zone != "us-central1-a" { // the scheduler's zone first
			t.Errorf("worker in %s", in.Zone)
		}
		script, _ := in.MetadataValue("startup-script")
		for _, want := range []string{"/etc/dask-tls/launcher.py worker 'tls://" + sched.Address + "'", "--name 'worker-0'", "--nthreads 2", "--memory-limit 4294967296", "--death-timeout 60"} {
			if !strings.Contains(script, want) {
				t.Errorf("worker script lacks %q", want)
			}
		}
	})

	t.Run("gpu worker", func(t *testing.T) {
		in := e.insertFor("gw-" + cluster + "-worker-1")
		if len(in.GuestAccelerators) != 1 || !strings.HasSuffix(in.GuestAccelerators[0].AcceleratorType, "zones/us-central1-a/acceleratorTypes/nvidia-tesla-t4") || in.GuestAccelerators[0].AcceleratorCount != 1 {
			t.Errorf("guest accelerators %+v", in.GuestAccelerators)
		}
		if s := in.Scheduling; s.OnHostMaintenance != "TERMINATE" || s.AutomaticRestart == nil || *s.AutomaticRestart || s.ProvisioningModel != "STANDARD" {
			t.Errorf("gpu scheduling %+v", s)
		}
		if in.Disks[0].InitializeParams.SourceImage != DefaultGPUImage || in.Disks[0].InitializeParams.DiskSizeGb != DefaultGPUDiskGiB {
			t.Errorf("gpu boot disk %+v", in.Disks[0].InitializeParams)
		}
		if v, _ := in.MetadataValue("install-nvidia-driver"); v != "True" {
			t.Errorf("install-nvidia-driver = %q", v)
		}
		if script, _ := in.MetadataValue("startup-script"); !strings.Contains(script, "GPU=1") {
			t.Errorf("gpu script does not ask for GPUs")
		}
	})

	t.Run("no key material in compute requests", func(t *testing.T) {
		// A line of the key's base64 survives JSON encoding unchanged.
		_, key := testTLS(t)
		line := bytes.Split(key, []byte("\n"))[1]
		if len(line) < 40 {
			t.Fatalf("key line %q too short to search for", line)
		}
		for _, r := range e.srv.Requests() {
			if strings.HasPrefix(r.Path, "/compute/") && bytes.Contains(r.Body, line) {
				t.Errorf("%s %s carries the TLS key", r.Method, r.Path)
			}
		}
	})

	t.Run("secret", func(t *testing.T) {
		sec, ok := e.srv.Secrets()["gw-"+cluster+"-tls"]
		if !ok {
			t.Fatalf("no secret; have %v", e.srv.Secrets())
		}
		cert, key := testTLS(t)
		if len(sec.Versions) != 1 || !bytes.Equal(sec.Versions[0], append(append([]byte{}, cert...), key...)) {
			t.Errorf("secret versions %d; want one with the certificate and key", len(sec.Versions))
		}
		if sec.Labels["gateway-id"] != testGatewayID || sec.Labels["gateway-cluster"] != cluster {
			t.Errorf("secret labels %v", sec.Labels)
		}
		want := []gcetest.IAMBinding{{Role: "roles/secretmanager.secretAccessor", Members: []string{"serviceAccount:dask-workers@test-project.iam.gserviceaccount.com"}}}
		if b, _ := json.Marshal(sec.Policy.Bindings); string(b) != mustJSON(want) {
			t.Errorf("secret policy %s", b)
		}
	})

	t.Run("firewall", func(t *testing.T) {
		fws := e.srv.Firewalls()
		if len(fws) != 2 {
			t.Fatalf("firewall rules %+v; want 2", fws)
		}
		byName := map[string]gcetest.Firewall{}
		for _, f := range fws {
			byName[f.Name] = f
			for _, r := range f.SourceRanges {
				if r == "0.0.0.0/0" || strings.HasSuffix(r, "/0") {
					t.Errorf("rule %s opens %s", f.Name, r)
				}
			}
			if f.Direction != "INGRESS" || f.Network != "projects/test-project/global/networks/default" {
				t.Errorf("rule %+v", f)
			}
		}
		// The gateway by its service account (targeting the members'),
		// the cluster's members by their network tag.
		gw := byName["gw-"+cluster+"-gateway"]
		if !slices.Equal(gw.SourceServiceAccounts, []string{testGatewaySA}) || !slices.Equal(gw.TargetServiceAccounts, []string{"dask-workers@test-project.iam.gserviceaccount.com"}) ||
			len(gw.SourceRanges)+len(gw.SourceTags)+len(gw.TargetTags) != 0 ||
			len(gw.Allowed) != 1 || gw.Allowed[0].IPProtocol != "tcp" || !slices.Equal(gw.Allowed[0].Ports, []string{"8786-8787"}) {
			t.Errorf("gateway rule %+v", gw)
		}
		in := byName["gw-"+cluster+"-internal"]
		if !slices.Equal(in.SourceTags, []string{"gw-" + cluster}) || !slices.Equal(in.TargetTags, []string{"gw-" + cluster}) ||
			len(in.SourceRanges)+len(in.SourceServiceAccounts)+len(in.TargetServiceAccounts) != 0 || len(in.Allowed) != 1 || in.Allowed[0].IPProtocol != "tcp" || len(in.Allowed[0].Ports) != 0 {
			t.Errorf("internal rule %+v", in)
		}
		for _, r := range e.srv.RequestsTo("POST", "/global/firewalls") {
			if bytes.Contains(r.Body, []byte("0.0.0.0/0")) {
				t.Errorf("firewall insert carries 0.0.0.0/0: %s", r.Body)
			}
		}
	})

	// Describe and List by label filters.
	other := testSpec(t, "other-cluster", "bob")
	if err := e.p.StartScheduler(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	ms = e.describe(cluster)
	if len(ms) != 3 || ms["worker-0"].State != providers.StateRunning || ms["worker-1"].State != providers.StateRunning || ms["worker-1"].Role != providers.RoleWorker {
		t.Errorf("members: %+v", ms)
	}
	wantCluster := `(labels.gateway-id = "gw-test-1") AND (labels.gateway-cluster = "` + cluster + `")`
	if fs := filters(e.srv.RequestsTo("GET", "/aggregated/instances")); !slices.Contains(fs, wantCluster) {
		t.Errorf("aggregated list filters %q; want %q", fs, wantCluster)
	}
	all, err := e.p.List(e.ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var got []string
	for _, m := range all {
		got = append(got, m.Cluster+"/"+m.Name+"/"+m.Owner)
	}
	want := []string{cluster + "/scheduler/Ann.Smith@example.com", cluster + "/worker-0/Ann.Smith@example.com", cluster + "/worker-1/Ann.Smith@example.com", "other-cluster/scheduler/bob"}
	if !slices.Equal(got, want) {
		t.Errorf("List = %q; want %q", got, want)
	}
	if fs := filters(e.srv.RequestsTo("GET", "/aggregated/instances")); !slices.Contains(fs, `(labels.gateway-id = "gw-test-1")`) {
		t.Errorf("List filters %q", fs)
	}

	// Stop one worker: stopped without a reason (asked), then gone; a
	// second stop is no error.
	if err := e.p.StopWorker(e.ctx, cluster, "worker-0"); err != nil {
		t.Fatalf("StopWorker: %v", err)
	}
	if err := e.p.StopWorker(e.ctx, cluster, "worker-0"); err != nil {
		t.Fatalf("second StopWorker: %v", err)
	}
	ms = e.describe(cluster)
	if w, ok := ms["worker-0"]; ok && (w.State != providers.StateStopped || w.Reason != "") {
		t.Errorf("worker-0 after stop: %+v", w)
	}
	if _, ok := ms["worker-1"]; !ok {
		t.Errorf("worker-1 went too: %+v", ms)
	}

	// Stop the cluster: instances, firewall rules and secret gone; the
	// other cluster untouched.
	if err := e.p.StopCluster(e.ctx, cluster); err != nil {
		t.Fatalf("StopCluster: %v", err)
	}
	for _, in := range e.srv.Instances() {
		if strings.Contains(in.Name, cluster) {
			t.Errorf("instance %s left", in.Name)
		}
	}
	for _, f := range e.srv.Firewalls() {
		if strings.Contains(f.Name, cluster) {
			t.Errorf("firewall rule %s left", f.Name)
		}
	}
	if _, ok := e.srv.Secrets()["gw-"+cluster+"-tls"]; ok {
		t.Errorf("secret left")
	}
	if len(e.srv.Firewalls()) != 2 || len(e.srv.Secrets()) != 1 {
		t.Errorf("the other cluster's rules or secret went: %+v %v", e.srv.Firewalls(), e.srv.Secrets())
	}
	if ms := e.describe(cluster); len(ms) != 0 {
		t.Errorf("members after StopCluster: %+v", ms)
	}
	if ms := e.describe("other-cluster"); ms["scheduler"].State != providers.StateRunning {
		t.Errorf("other cluster: %+v", ms)
	}
	for _, m := range []string{"scheduler", "worker-1"} {
		at, ok := e.p.StoppedAt(cluster, m)
		if !ok || at.IsZero() || time.Since(at) > time.Minute {
			t.Errorf("StoppedAt(%s) = %v, %v", m, at, ok)
		}
		if _, again := e.p.StoppedAt(cluster, m); again {
			t.Errorf("StoppedAt(%s) answered twice", m)
		}
	}
	if err := e.p.StopCluster(e.ctx, cluster); err != nil {
		t.Errorf("second StopCluster: %v", err)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
