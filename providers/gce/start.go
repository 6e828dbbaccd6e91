package gce

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/catalog"
	"github.com/gatewayhq/gateway/providers/gce/gcerules"
)

const schedulerMember = "scheduler"

// StartScheduler implements providers.Provider. It returns once the
// instance exists (its insert operation is done); Describe reports the
// scheduler running once Dask accepts connections on it.
func (p *Provider) StartScheduler(ctx context.Context, spec providers.ClusterSpec) error {
	if err := p.checkStart(ctx, spec); err != nil {
		return fmt.Errorf("gce provider: start the scheduler of %s: %w", spec.Name, err)
	}
	found, err := p.clusterInstances(ctx, spec.Name)
	if err != nil {
		return fmt.Errorf("gce provider: start the scheduler of %s: %w", spec.Name, err)
	}
	if f := findMember(found, schedulerMember); f != nil {
		p.remember(spec.Name, schedulerMember, f.state())
		return nil // started before: idempotent
	}
	zones, err := p.zonesFor(spec.Region)
	if err != nil {
		return fmt.Errorf("gce provider: start the scheduler of %s: %w", spec.Name, err)
	}
	if err := p.ensureInfra(ctx, spec); err != nil {
		return fmt.Errorf("gce provider: start the scheduler of %s: %w", spec.Name, err)
	}
	l := launch{spec: spec, member: schedulerMember, role: providers.RoleScheduler, machine: spec.Scheduler, zones: zones}
	if err := p.launch(ctx, l); err != nil {
		return fmt.Errorf("gce provider: start the scheduler of %s: %w", spec.Name, err)
	}
	return nil
}

// StartWorker implements providers.Provider. Workers run in the
// scheduler's region, its zone first, on Spot capacity when the spec asks
// for it (on-demand when no Spot capacity is found).
func (p *Provider) StartWorker(ctx context.Context, spec providers.ClusterSpec, worker, schedulerAddress string) error {
	fail := func(err error) error {
		return fmt.Errorf("gce provider: start %s of %s: %w", worker, spec.Name, err)
	}
	if worker == "" || worker == schedulerMember || strings.ContainsFunc(worker, func(r rune) bool { return r <= ' ' || r == '/' }) {
		return fail(fmt.Errorf("invalid worker name %q", worker))
	}
	if host, port, err := net.SplitHostPort(schedulerAddress); err != nil || host == "" || !isPort(port) {
		return fail(fmt.Errorf("the scheduler address %q is not host:port", schedulerAddress))
	}
	if err := p.checkStart(ctx, spec); err != nil {
		return fail(err)
	}
	found, err := p.clusterInstances(ctx, spec.Name)
	if err != nil {
		return fail(err)
	}
	if f := findMember(found, worker); f != nil {
		p.remember(spec.Name, worker, f.state())
		return nil // started before: idempotent
	}
	schedZone := ""
	if f := findMember(found, schedulerMember); f != nil {
		schedZone = f.zone
	} else {
		p.mu.Lock()
		schedZone = p.state(spec.Name).schedZone
		p.mu.Unlock()
	}
	zones, err := p.workerZones(spec.Region, schedZone)
	if err != nil {
		return fail(err)
	}
	if err := p.ensureInfra(ctx, spec); err != nil {
		return fail(err)
	}
	l := launch{spec: spec, member: worker, role: providers.RoleWorker, machine: spec.Worker, zones: zones,
		schedulerAddress: schedulerAddress, spot: spec.Spot}
	if err := p.launch(ctx, l); err != nil {
		return fail(err)
	}
	return nil
}

func isPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0 && n < 65536
}

// checkStart refuses a cancelled context and a spec the provider cannot
// run, before anything is created.
func (p *Provider) checkStart(ctx context.Context, spec providers.ClusterSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var problems []string
	if spec.Name == "" {
		problems = append(problems, "the cluster has no name")
	}
	if !strings.Contains(string(spec.TLSCert), "-----BEGIN CERTIFICATE-----") {
		problems = append(problems, "the spec has no PEM certificate")
	}
	if !strings.Contains(string(spec.TLSKey), "PRIVATE KEY-----") {
		problems = append(problems, "the spec has no PEM private key")
	}
	if spec.Image != "" && !imageRefRE.MatchString(spec.Image) {
		problems = append(problems, fmt.Sprintf("container image %q is not an image reference", spec.Image))
	}
	if strings.ContainsAny(spec.DashboardPrefix, "\n\r\x00") {
		problems = append(problems, "the dashboard prefix has control characters")
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	if spec.GatewayID != "" && spec.GatewayID != p.cfg.GatewayID {
		p.log.Warn("spec names another gateway; the provider tags with its own", "cluster", spec.Name, "spec_gateway", spec.GatewayID, "gateway", p.cfg.GatewayID)
	}
	return nil
}

// zonesFor returns the configured zones of the region ("" for all).
func (p *Provider) zonesFor(region string) ([]string, error) {
	if region == "" {
		return slices.Clone(p.cfg.Zones), nil
	}
	var out []string
	for _, z := range p.cfg.Zones {
		if regionOf(z) == region {
			out = append(out, z)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: region %q: none of the configured zones %q is in it; add its zones to the gce provider's zones", providers.ErrUnsupported, region, p.cfg.Zones)
	}
	return out, nil
}

// workerZones keeps workers in the scheduler's region, its zone first:
// traffic between zones costs money and adds latency, between regions more.
func (p *Provider) workerZones(region, schedZone string) ([]string, error) {
	if schedZone == "" {
		return p.zonesFor(region)
	}
	out := []string{schedZone}
	for _, z := range p.cfg.Zones {
		if z != schedZone && regionOf(z) == regionOf(schedZone) {
			out = append(out, z)
		}
	}
	return out, nil
}

// launch is one member to create.
type launch struct {
	spec             providers.ClusterSpec
	member           string
	role             providers.Role
	machine          providers.Machine
	zones            []string
	schedulerAddress string
	spot             bool
}

// candidate is one machine type to try, with what its GPUs need.
type candidate struct {
	label       string // as the catalog names it (an N1 combination's "+" name)
	machineType string
	gpu         bool   // has GPUs: GPU image, no live migration
	accelerator string // N1: GPU type to attach ("" for none)
	count       int32
}

// acceleratorOptimized reports machine series whose GPUs are part of the
// machine type (A2, A3, A4, G2, G4): nothing is attached to them.
func acceleratorOptimized(machineType string) bool {
	_, builtin := gcerules.BuiltInGPUs(machineType)
	return builtin
}

// n1Size is an N1 predefined type's vCPUs and memory, from its name and
// the series' fixed memory per vCPU; ok is false for other names.
func n1Size(machineType string) (vcpus int, memGiB float64, ok bool) {
	perCPU := map[string]float64{"n1-standard": 3.75, "n1-highmem": 6.5, "n1-highcpu": 0.9}[typeClass(machineType)]
	n, err := strconv.Atoi(machineType[strings.LastIndex(machineType, "-")+1:])
	if perCPU == 0 || err != nil || n <= 0 {
		return 0, 0, false
	}
	return n, float64(n) * perCPU, true
}

// candidates lists the machine types to try, in order: the chosen type,
// then the alternatives. Types that Compute Engine would refuse with the
// GPUs asked for, for this role, are left out (gcerules: GPU counts and
// ceilings on N1, the fixed GPUs of accelerator-optimized types, Spot-only
// types for a member that cannot be Spot, the boot disk types a series
// takes), and said so, naming the rule, when none is left.
func (p *Provider) candidates(m providers.Machine, role providers.Role, spot bool) ([]candidate, error) {
	first := m.InstanceType
	if first == "" {
		var err error
		if first, err = p.defaultType(m, role); err != nil {
			return nil, err
		}
	}
	var out []candidate
	var left []string
	seen := map[string]bool{}
	for _, t := range append([]string{first}, m.Alternatives...) {
		if seen[t] {
			continue
		}
		seen[t] = true
		base, gpus, gpuType, combo := parseCombo(t)
		if !gceNameRE.MatchString(base) {
			return nil, fmt.Errorf("%w: %q is not a Compute Engine machine type name", providers.ErrUnsupported, t)
		}
		if !combo {
			gpus, gpuType = m.GPUs, m.GPUType
		}
		c := candidate{label: t, machineType: base}
		if err := p.checkShape(&c, gpus, gpuType, spot); err != nil {
			left = append(left, err.Error())
			continue
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s", providers.ErrUnsupported, strings.Join(left, "; "))
	}
	if len(left) > 0 {
		p.log.Info("left out machine types Compute Engine would refuse", "left_out", left)
	}
	return out, nil
}

// checkShape fills in what the candidate's GPUs need, or says which of
// Compute Engine's documented rules (gcerules) it breaks.
func (p *Provider) checkShape(c *candidate, gpus int, gpuType string, spot bool) error {
	switch {
	case acceleratorOptimized(c.machineType):
		if err := gcerules.CheckBuiltInGPUs(c.machineType, gpus); err != nil {
			return err
		}
		c.gpu = true
	case gpus > 0 && strings.HasPrefix(c.machineType, "n1-"):
		if gpuType == "" {
			gpuType = catalog.GPUT4 // the cheapest that attaches to N1
		}
		g, ok := n1GPUs[gpuType]
		if !ok {
			return fmt.Errorf("%s cannot carry %s GPUs (N1 takes %s; for l4, a100 or h100 use g2, a2 or a3 types; %s)", c.machineType, gpuType, strings.Join(slices.Sorted(maps.Keys(n1GPUs)), ", "), gcerules.RefN1GPUs)
		}
		vcpus, mem, known := n1Size(c.machineType)
		if !known {
			return fmt.Errorf("%s: GPUs attach only to predefined N1 types here (n1-standard, n1-highmem, n1-highcpu; %s)", c.machineType, gcerules.RefN1GPUs)
		}
		if err := gcerules.CheckN1GPUs(c.machineType, g.accelerator, gpus, vcpus, mem); err != nil {
			return err
		}
		c.gpu, c.accelerator, c.count = true, g.accelerator, int32(gpus)
	case gpus > 0:
		return fmt.Errorf("%s takes no GPUs (GPUs attach to N1 types; A2, A3 and G2 types come with them; %s)", c.machineType, gcerules.RefN1GPUs)
	}
	if err := gcerules.CheckProvisioning(c.machineType, spot); err != nil {
		return err
	}
	if dt := lastSegment(p.diskType(c.machineType)); dt != "" {
		if err := gcerules.CheckBootDisk(c.machineType, dt); err != nil {
			return fmt.Errorf("boot disk type %s cannot be used: %w", dt, err)
		}
	}
	return nil
}

// diskType is the boot disk type for a machine type: the configured one,
// or the series' own where the series does not take it (gcerules). A
// configured URL is kept as given.
func (p *Provider) diskType(machineType string) string {
	if strings.Contains(p.cfg.DiskType, "/") {
		return p.cfg.DiskType
	}
	return gcerules.BootDiskType(machineType, p.cfg.DiskType)
}

// defaultType picks a machine type for a spec that names none: the
// configured default when it gives no size either, else the cheapest
// built-in type that fits (an N1 type when the GPUs asked for attach to
// N1).
func (p *Provider) defaultType(m providers.Machine, role providers.Role) (string, error) {
	if m.VCPUs <= 0 && m.MemoryGiB <= 0 && m.GPUs <= 0 {
		if role == providers.RoleScheduler {
			return p.cfg.SchedulerMachineType, nil
		}
		return p.cfg.WorkerMachineType, nil
	}
	req := catalog.Requirements{Cloud: catalog.CloudGCE, MinVCPUs: int(math.Ceil(m.VCPUs)), MinMemoryGiB: m.MemoryGiB, GPUs: m.GPUs, GPUType: m.GPUType}
	if _, n1 := n1GPUs[m.GPUType]; m.GPUs > 0 && (n1 || m.GPUType == "") {
		req.GPUs, req.GPUType, req.Allowed = 0, "", []string{"n1-*"}
	}
	t, err := p.catalog.Cheapest(req)
	if err != nil {
		return "", fmt.Errorf("%w: no machine type named and none fits: %w", providers.ErrUnsupported, err)
	}
	return t.Name, nil
}

// launch creates the member's instance, trying each candidate type in each
// zone (Spot first when asked, then on-demand) until one has capacity.
func (p *Provider) launch(ctx context.Context, l launch) error {
	spotOK := l.spot && l.role == providers.RoleWorker
	cands, err := p.candidates(l.machine, l.role, spotOK)
	if err != nil {
		return err
	}
	modes := []bool{false}
	if spotOK {
		modes = []bool{true, false}
	}
	name := instanceName(l.spec.Name, l.member)
	var tries []string
	for _, spot := range modes {
		for _, c := range cands {
			if !spot && gcerules.SpotOnly(c.machineType) {
				tries = append(tries, gcerules.CheckProvisioning(c.machineType, false).Error())
				continue
			}
			// Quotas are regional: once one says no, the region's other
			// zones would say the same for this type.
			quotaOut := map[string]bool{}
			for _, zone := range l.zones {
				if quotaOut[regionOf(zone)] {
					continue
				}
				inst := p.instance(l, c, zone, spot)
				id, err := p.insert(ctx, zone, inst)
				if err == nil {
					p.remember(l.spec.Name, l.member, memberState{zone: zone, id: id, role: l.role, owner: l.spec.Owner, spot: spot})
					p.log.Info("started member", "cluster", l.spec.Name, "member", l.member, "instance", name, "zone", zone, "machine_type", c.label, "spot", spot)
					return nil
				}
				if isAlreadyExists(err) {
					return p.adoptExisting(ctx, zone, l)
				}
				code, more := capacityCode(err)
				if !more {
					return fmt.Errorf("create instance %s (%s in %s): %w", name, c.label, zone, err)
				}
				try := fmt.Sprintf("%s in %s: %s", c.label, zone, code)
				if spot {
					try = fmt.Sprintf("%s (spot) in %s: %s", c.label, zone, code)
				}
				tries = append(tries, try)
				p.log.Warn("no capacity; trying elsewhere", "cluster", l.spec.Name, "member", l.member, "machine_type", c.label, "zone", zone, "spot", spot, "code", code)
				if strings.HasPrefix(code, "QUOTA") {
					quotaOut[regionOf(zone)] = true
				}
			}
		}
		if spot {
			p.log.Warn("no Spot capacity; falling back to on-demand", "cluster", l.spec.Name, "member", l.member)
		}
	}
	return fmt.Errorf("%w for %s %s: tried %s", providers.ErrCapacity, l.role, name, strings.Join(tries, "; "))
}

// insert creates the instance, waits for its operation, and returns the
// instance's id. The request ID makes retries of the same insert safe.
func (p *Provider) insert(ctx context.Context, zone string, inst *computepb.Instance) (uint64, error) {
	rid := newRequestID()
	var op *compute.Operation
	err := p.call(ctx, "insert "+inst.GetName(), func(ctx context.Context) error {
		var err error
		op, err = p.instances.Insert(ctx, &computepb.InsertInstanceRequest{Project: p.cfg.Project, Zone: zone, InstanceResource: inst, RequestId: &rid})
		return err
	})
	if err != nil {
		return 0, err
	}
	done, err := p.waitZoneOp(ctx, zone, op.Proto(), "insert of "+inst.GetName())
	if err != nil {
		return 0, err
	}
	return done.GetTargetId(), opError(done)
}

// adoptExisting handles an insert refused because the name is taken: the
// member started earlier (a retry after a crash) is fine; an instance of
// another cluster or gateway under the same name is an error, not ours to
// use.
func (p *Provider) adoptExisting(ctx context.Context, zone string, l launch) error {
	name := instanceName(l.spec.Name, l.member)
	var in *computepb.Instance
	err := p.call(ctx, "get "+name, func(ctx context.Context) error {
		var err error
		in, err = p.instances.Get(ctx, &computepb.GetInstanceRequest{Project: p.cfg.Project, Zone: zone, Instance: name})
		return err
	})
	if err != nil {
		return fmt.Errorf("instance %s already exists in %s, and reading it failed: %w", name, zone, err)
	}
	f, ok := p.identify(in)
	if !ok || f.cluster != l.spec.Name || f.member != l.member {
		return fmt.Errorf("instance %s already exists in %s but is not %s of cluster %s of gateway %s (its metadata says gateway %q, cluster %q, member %q); delete it, or it keeps the name taken",
			name, zone, l.member, l.spec.Name, p.cfg.GatewayID, metadataValue(in, keyGateway), metadataValue(in, keyCluster), metadataValue(in, keyMember))
	}
	p.remember(l.spec.Name, l.member, f.state())
	return nil
}

// instance is the insert request's body for one member, machine type, zone
// and provisioning model.
func (p *Provider) instance(l launch, c candidate, zone string, spot bool) *computepb.Instance {
	spec := l.spec
	name := instanceName(spec.Name, l.member)
	image, diskGiB := p.cfg.Image, p.cfg.DiskGiB
	if c.gpu {
		image, diskGiB = p.cfg.GPUImage, p.cfg.GPUDiskGiB
	}
	labels := p.labels(spec.Name)
	labels[keyMember] = labelValue(l.member)
	labels[keyRole] = string(l.role)
	labels[keyOwner] = labelValue(spec.Owner)

	container := spec.Image
	if container == "" {
		container = p.cfg.ContainerImage
	}
	script := startupScript(scriptParams{
		Project: p.cfg.Project, SecretID: secretID(spec.Name), Image: container, Role: l.role, Member: l.member,
		GPU: c.gpu, Scheduler: l.schedulerAddress, Prefix: spec.DashboardPrefix,
		Threads: spec.WorkerThreads, Memory: spec.WorkerMemory,
		Python: p.cfg.Python, Expect: spec.EnvExpect, Env: providers.EnvList(spec.Env),
	})
	md := []*computepb.Items{
		{Key: ptr("startup-script"), Value: ptr(script)},
		// The script reports readiness and exit reasons through guest
		// attributes, which are off unless enabled.
		{Key: ptr("enable-guest-attributes"), Value: ptr("TRUE")},
		{Key: ptr("enable-oslogin"), Value: ptr("TRUE")},
		{Key: ptr("google-logging-enabled"), Value: ptr("true")},
		// Exact names (labels hold sanitized ones).
		{Key: ptr(keyGateway), Value: ptr(p.cfg.GatewayID)},
		{Key: ptr(keyCluster), Value: ptr(spec.Name)},
		{Key: ptr(keyMember), Value: ptr(l.member)},
		{Key: ptr(keyRole), Value: ptr(string(l.role))},
		{Key: ptr(keyOwner), Value: ptr(spec.Owner)},
	}
	if c.gpu {
		// Deep Learning VM images install the NVIDIA driver on first boot
		// when asked to.
		md = append(md, &computepb.Items{Key: ptr("install-nvidia-driver"), Value: ptr("True")})
	}

	sched := &computepb.Scheduling{ProvisioningModel: ptr("STANDARD")}
	switch {
	case spot:
		// Spot VMs cannot migrate or restart; DELETE on preemption leaves
		// nothing to pay for, and the core replaces the lost worker.
		sched.ProvisioningModel = ptr("SPOT")
		sched.InstanceTerminationAction = ptr("DELETE")
		sched.OnHostMaintenance, sched.AutomaticRestart = ptr("TERMINATE"), ptr(false)
	case c.gpu:
		// Machines with GPUs cannot live-migrate; a restart would start a
		// fresh Dask the cluster no longer expects.
		sched.OnHostMaintenance, sched.AutomaticRestart = ptr("TERMINATE"), ptr(false)
	default:
		sched.OnHostMaintenance, sched.AutomaticRestart = ptr("MIGRATE"), ptr(true)
	}
	diskType := p.diskType(c.machineType)
	if !strings.Contains(diskType, "/") {
		diskType = "zones/" + zone + "/diskTypes/" + diskType
	}
	nic := &computepb.NetworkInterface{Network: ptr(p.network)} // no access config: no external IP
	if sub := subnetworkURL(p.cfg.Project, p.cfg.Subnetwork, zone); sub != "" {
		nic.Subnetwork = ptr(sub)
	}
	inst := &computepb.Instance{
		Name:        ptr(name),
		Description: ptr(fmt.Sprintf("Dask %s %s of cluster %s (owner %s), started by gateway %s", l.role, l.member, spec.Name, spec.Owner, p.cfg.GatewayID)),
		MachineType: ptr("zones/" + zone + "/machineTypes/" + c.machineType),
		Labels:      labels,
		Tags:        &computepb.Tags{Items: []string{clusterTag(spec.Name)}},
		Metadata:    &computepb.Metadata{Items: md},
		Disks: []*computepb.AttachedDisk{{
			Boot: ptr(true), AutoDelete: ptr(true), Type: ptr("PERSISTENT"),
			InitializeParams: &computepb.AttachedDiskInitializeParams{
				SourceImage: ptr(image), DiskSizeGb: ptr(int64(diskGiB)), DiskType: ptr(diskType), Labels: p.labels(spec.Name),
			},
		}},
		NetworkInterfaces: []*computepb.NetworkInterface{nic},
		ServiceAccounts:   []*computepb.ServiceAccount{{Email: ptr(p.cfg.ServiceAccount), Scopes: slices.Clone(p.cfg.Scopes)}},
		Scheduling:        sched,
		ShieldedInstanceConfig: &computepb.ShieldedInstanceConfig{
			// GPU driver modules are not always signed for Secure Boot.
			EnableSecureBoot: ptr(!c.gpu), EnableVtpm: ptr(true), EnableIntegrityMonitoring: ptr(true),
		},
	}
	if c.accelerator != "" {
		inst.GuestAccelerators = []*computepb.AcceleratorConfig{{
			AcceleratorType:  ptr("projects/" + p.cfg.Project + "/zones/" + zone + "/acceleratorTypes/" + c.accelerator),
			AcceleratorCount: ptr(c.count),
		}}
	}
	return inst
}

// labels are the operator's labels plus the cluster's ownership labels.
func (p *Provider) labels(cluster string) map[string]string {
	l := make(map[string]string, len(p.cfg.Labels)+5)
	for k, v := range p.cfg.Labels {
		l[k] = v
	}
	l[keyGateway] = p.gwLabel
	l[keyCluster] = labelValue(cluster)
	return l
}
