package ec2

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/internal/awsutil"
)

const schedulerMember = "scheduler"

// StartScheduler implements providers.Provider: it makes the cluster's
// security group and TLS parameter if they are missing, then launches the
// scheduler's instance unless one runs already.
func (p *Provider) StartScheduler(ctx context.Context, spec providers.ClusterSpec) error {
	return p.start(ctx, spec, schedulerMember, providers.RoleScheduler, "")
}

// StartWorker implements providers.Provider.
func (p *Provider) StartWorker(ctx context.Context, spec providers.ClusterSpec, worker, schedulerAddress string) error {
	if worker == schedulerMember || !reName.MatchString(worker) {
		return fmt.Errorf("ec2 provider: invalid worker name %q: use letters, digits, '.', '_' and '-'", worker)
	}
	host, port, err := net.SplitHostPort(schedulerAddress)
	if err != nil || host == "" || port == "" || strings.ContainsAny(schedulerAddress, " '\"$%\\") {
		return fmt.Errorf("ec2 provider: worker %s needs the scheduler's host:port, not %q", worker, schedulerAddress)
	}
	return p.start(ctx, spec, worker, providers.RoleWorker, schedulerAddress)
}

// try is one launch attempt that failed for want of capacity, as the final
// error lists it.
type try struct {
	instanceType, subnet, zone string
	spot                       bool
	code                       string
}

func (t try) String() string {
	market := ""
	if t.spot {
		market = " (spot)"
	}
	where := t.subnet
	if t.zone != "" {
		where += " (" + t.zone + ")"
	}
	if t.subnet == "" {
		return fmt.Sprintf("%s%s: %s", t.instanceType, market, t.code)
	}
	return fmt.Sprintf("%s%s in %s: %s", t.instanceType, market, where, t.code)
}

// Capacity errors that another subnet (Availability Zone) or instance type
// may not have.
func capacityCode(code string) bool {
	switch code {
	case codeInsufficientCapacity, codeUnsupported, codeInstanceLimit, codeFreeAddresses, "InsufficientCapacity":
		return true
	}
	return false
}

// spotRefused are the errors with which EC2 refuses spot capacity; an
// on-demand instance may still be had.
func spotRefused(code string) bool {
	return code == codeSpotPriceTooLow || code == codeMaxSpotCount || capacityCode(code)
}

func (p *Provider) start(ctx context.Context, spec providers.ClusterSpec, member string, role providers.Role, schedulerAddress string) error {
	if err := p.checkSpec(spec); err != nil {
		return err
	}
	// Idempotence: a member that has an instance (being launched, running,
	// or stopped by someone) is not launched again. The client token covers
	// the window in which EC2 does not list a new instance yet.
	live, err := p.clusterInstances(ctx, spec.Name, liveStates()...)
	if err != nil {
		return err
	}
	var schedulerSubnet string
	var mine []types.Instance
	for _, in := range live {
		switch tagValue(in.Tags, tagMember) {
		case member:
			mine = append(mine, in)
		case schedulerMember:
			schedulerSubnet = aws.ToString(in.SubnetId)
		}
	}
	if len(mine) > 0 {
		return p.dedupe(ctx, spec.Name, member, mine)
	}
	p.mu.Lock()
	_, pending := p.launched[spec.Name][member]
	p.mu.Unlock()
	if pending {
		return nil // launched moments ago by this process; not listed yet
	}

	n, err := p.network(ctx)
	if err != nil {
		return err
	}
	group, err := p.ensureGroup(ctx, spec.Name, spec.Owner, n)
	if err != nil {
		return err
	}
	if err := p.ensureSecret(ctx, spec); err != nil {
		return err
	}
	machine, defaultType := spec.Worker, p.cfg.DefaultWorkerType
	if role == providers.RoleScheduler {
		machine, defaultType = spec.Scheduler, p.cfg.DefaultSchedulerType
	}
	return p.launch(ctx, spec, member, role, schedulerAddress, machine, defaultType, group, n, schedulerSubnet)
}

// launch tries each allowed way to run the member, cheapest first: spot
// before on-demand (workers of spot clusters only; a scheduler's loss
// would end the cluster), then the requested instance type before its
// alternatives, then the subnets in order, the scheduler's own first for
// workers (traffic between Availability Zones is slower and charged).
// Throttling is retried inside each attempt; want of capacity moves to
// the next attempt; anything else ends the launch.
func (p *Provider) launch(ctx context.Context, spec providers.ClusterSpec, member string, role providers.Role, schedulerAddress string,
	machine providers.Machine, defaultType, group string, n *network, schedulerSubnet string) error {
	instanceTypes := []string{orDefault(machine.InstanceType, defaultType)}
	for _, alt := range machine.Alternatives {
		if alt != "" && !slices.Contains(instanceTypes, alt) {
			instanceTypes = append(instanceTypes, alt)
		}
	}
	for _, t := range instanceTypes {
		if !reInstanceType.MatchString(t) {
			return fmt.Errorf("ec2 provider: %q is not an EC2 instance type", t)
		}
	}
	subnets := slices.Clone(p.cfg.Subnets)
	if role == providers.RoleWorker && schedulerSubnet != "" {
		if i := slices.Index(subnets, schedulerSubnet); i > 0 {
			subnets = slices.Insert(slices.Delete(subnets, i, i+1), 0, schedulerSubnet)
		}
	}
	markets := []bool{false}
	if spec.Spot && role == providers.RoleWorker {
		markets = []bool{true, false}
	}

	var tries []try
	launches := 0 // RunInstances calls made
	for mi, spot := range markets {
	nextMarket:
		for ti, instanceType := range instanceTypes {
			ami, rootDevice, err := p.image(ctx, instanceType, machine)
			if errors.Is(err, errArchitecture) {
				if mi == 0 {
					tries = append(tries, try{instanceType: instanceType, code: err.Error()})
				}
				continue
			}
			if err != nil {
				return err
			}
			script, err := userData(p.script(spec, member, role, schedulerAddress, instanceType, machine))
			if err != nil {
				return err
			}
			for _, subnet := range subnets {
				// The token's attempt index follows the canonical order of
				// (market, type, subnet), not the order tried, so that the
				// same parameters always carry the same token.
				attempt := (mi*len(instanceTypes)+ti)*len(p.cfg.Subnets) + slices.Index(p.cfg.Subnets, subnet)
				in := p.runInput(spec, member, instanceType, subnet, group, ami, rootDevice, script, spot,
					clientToken(p.cfg.GatewayID, spec.Name, member, attempt))
				launches++
				out, err := call(ctx, p, "RunInstances", func(ctx context.Context) (*awsec2.RunInstancesOutput, error) {
					return p.ec2.RunInstances(ctx, in)
				})
				code := awsutil.ErrorCode(err)
				switch {
				case err == nil:
					if len(out.Instances) == 0 {
						return fmt.Errorf("ec2 provider: RunInstances for %s of %s returned no instance", member, spec.Name)
					}
					if role == providers.RoleScheduler {
						crashpoint.Hit(ctx, pointSchedulerLaunched)
					} else {
						crashpoint.Hit(ctx, pointWorkerLaunched)
					}
					p.launchedOne(spec, member, role, out.Instances[0], spot)
					return nil
				case code == codeIdempotentMismatch:
					// This token launched an instance before, with other
					// parameters (a newer image since): it is the member.
					if found, ferr := p.byClientToken(ctx, aws.ToString(in.ClientToken)); ferr == nil && found != nil {
						p.launchedOne(spec, member, role, *found, spot)
						return nil
					}
					return p.apiError(fmt.Sprintf("RunInstances %s of %s", member, spec.Name), err)
				case code == codeVCPULimit:
					q := vcpuQuota(instanceType, spot)
					return fmt.Errorf("%w: cannot start %s of cluster %s: the AWS account's vCPU quota for %s instances in %s is used up (VcpuLimitExceeded); ask AWS to raise %s in Service Quotas, or stop other instances: %w",
						providers.ErrCapacity, member, spec.Name, family(instanceType), p.cfg.Region, q, err)
				case spot && spotRefused(code):
					tries = append(tries, try{instanceType, subnet, n.zones[subnet], spot, code})
					p.log.Info("spot capacity refused", "cluster", spec.Name, "member", member, "type", instanceType, "subnet", subnet, "code", code)
					if code == codeMaxSpotCount {
						// An account-wide limit: no other spot attempt can succeed.
						p.log.Warn("spot instance quota reached; launching on-demand", "cluster", spec.Name, "member", member, "quota", vcpuQuota(instanceType, true).String())
						break nextMarket
					}
				case capacityCode(code):
					tries = append(tries, try{instanceType, subnet, n.zones[subnet], spot, code})
					p.log.Info("no capacity; trying the next subnet or type", "cluster", spec.Name, "member", member, "type", instanceType, "subnet", subnet, "code", code)
				default:
					if strings.HasPrefix(code, "InvalidGroup") {
						// Deleted behind the gateway's back: make it again next time.
						p.mu.Lock()
						delete(p.groups, spec.Name)
						p.mu.Unlock()
					}
					return p.apiError(fmt.Sprintf("RunInstances %s of %s (%s in %s)", member, spec.Name, instanceType, subnet), err)
				}
			}
		}
		if spot {
			p.log.Warn("no spot capacity for the worker; falling back to on-demand", "cluster", spec.Name, "member", member, "tried", len(tries))
		}
	}
	list := make([]string, len(tries))
	for i, t := range tries {
		list[i] = t.String()
	}
	if launches == 0 {
		// Not a want of capacity: no allowed type can boot the image.
		return fmt.Errorf("ec2 provider: no allowed instance type can run %s of cluster %s: %s; set providers.ec2.ami to an image for their architecture, or allow other types: %w",
			member, spec.Name, strings.Join(list, "; "), providers.ErrUnsupported)
	}
	return fmt.Errorf("%w: ec2 could not launch %s of cluster %s in %s; tried %s. Try again later, or allow more instance types or subnets",
		providers.ErrCapacity, member, spec.Name, p.cfg.Region, strings.Join(list, "; "))
}

// script is what userData needs for one member on one instance type.
func (p *Provider) script(spec providers.ClusterSpec, member string, role providers.Role, schedulerAddress, instanceType string, m providers.Machine) memberScript {
	s := memberScript{
		Role: role, Cluster: spec.Name, Member: member, Region: p.cfg.Region,
		Parameter: p.parameterName(spec.Name),
		Image:     orDefault(spec.Image, p.cfg.Image),
		GPU:       m.GPUs > 0 || p.hasGPUs(instanceType),
		Python:    p.cfg.Python,
		Expect:    spec.EnvExpect,
		Env:       providers.EnvList(spec.Env),
	}
	s.ECRHost, s.ECRRegion = ecrImage(s.Image)
	if role == providers.RoleScheduler {
		s.Command = schedulerCommand(spec)
	} else {
		s.Command = workerCommand(spec, member, schedulerAddress)
	}
	return s
}

func (p *Provider) runInput(spec providers.ClusterSpec, member, instanceType, subnet, group, ami, rootDevice, script string, spot bool, token string) *awsec2.RunInstancesInput {
	tags := ec2Tags(p.memberTags(spec.Name, member, spec.Owner))
	in := &awsec2.RunInstancesInput{
		ClientToken:  aws.String(token),
		ImageId:      aws.String(ami),
		InstanceType: types.InstanceType(instanceType),
		MinCount:     aws.Int32(1),
		MaxCount:     aws.Int32(1),
		// On the interface rather than the instance, to say no public
		// address whatever the subnet's default: members are reached
		// through the gateway only.
		NetworkInterfaces: []types.InstanceNetworkInterfaceSpecification{{
			DeviceIndex: aws.Int32(0), SubnetId: aws.String(subnet), Groups: []string{group},
			AssociatePublicIpAddress: aws.Bool(false), DeleteOnTermination: aws.Bool(true),
		}},
		UserData: aws.String(script),
		BlockDeviceMappings: []types.BlockDeviceMapping{{
			DeviceName: aws.String(rootDevice),
			Ebs: &types.EbsBlockDevice{
				VolumeSize:          aws.Int32(p.cfg.VolumeGiB),
				VolumeType:          types.VolumeTypeGp3,
				DeleteOnTermination: aws.Bool(true),
				// Spilled data of the user's computation lands here.
				Encrypted: aws.Bool(true),
			},
		}},
		// IMDSv2 only; a hop limit of 2 lets the container (one network hop
		// further when not on the host network) reach it too.
		MetadataOptions: &types.InstanceMetadataOptionsRequest{
			HttpEndpoint:            types.InstanceMetadataEndpointStateEnabled,
			HttpTokens:              types.HttpTokensStateRequired,
			HttpPutResponseHopLimit: aws.Int32(2),
		},
		// A member whose Dask process exits powers off: that ends it.
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: tags},
			{ResourceType: types.ResourceTypeVolume, Tags: tags},
		},
	}
	if strings.HasPrefix(p.cfg.InstanceProfile, "arn:") {
		in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Arn: aws.String(p.cfg.InstanceProfile)}
	} else {
		in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(p.cfg.InstanceProfile)}
	}
	if spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{
			MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{
				SpotInstanceType:             types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate,
			},
		}
	}
	return in
}

// launchedOne notes a launched instance until DescribeInstances lists it.
func (p *Provider) launchedOne(spec providers.ClusterSpec, member string, role providers.Role, in types.Instance, spot bool) {
	id := aws.ToString(in.InstanceId)
	started := aws.ToTime(in.LaunchTime)
	if started.IsZero() {
		started = time.Now()
	}
	p.mu.Lock()
	if p.launched[spec.Name] == nil {
		p.launched[spec.Name] = map[string]launch{}
	}
	p.launched[spec.Name][member] = launch{id: id, role: role, owner: spec.Owner, startedAt: started}
	p.mu.Unlock()
	if in.State != nil && (in.State.Name == types.InstanceStateNameTerminated || in.State.Name == types.InstanceStateNameShuttingDown) {
		// A repeat of a launch whose instance has ended since: EC2 answers
		// with that instance, and Describe reports it stopped.
		p.log.Warn("member was launched before and has ended", "cluster", spec.Name, "member", member, "instance", id)
		return
	}
	p.log.Info("launched member", "cluster", spec.Name, "member", member, "role", role, "instance", id,
		"type", string(in.InstanceType), "subnet", aws.ToString(in.SubnetId), "spot", spot)
}

// dedupe keeps the oldest of several live instances of one member. Two can
// only exist after a launch repeated across a gateway crash while EC2 did
// not yet list the first; the younger is terminated so that nobody pays
// for it.
func (p *Provider) dedupe(ctx context.Context, cluster, member string, mine []types.Instance) error {
	if len(mine) < 2 {
		return nil
	}
	slices.SortFunc(mine, func(a, b types.Instance) int {
		if c := aws.ToTime(a.LaunchTime).Compare(aws.ToTime(b.LaunchTime)); c != 0 {
			return c
		}
		return strings.Compare(aws.ToString(a.InstanceId), aws.ToString(b.InstanceId))
	})
	var extra []string
	for _, in := range mine[1:] {
		extra = append(extra, aws.ToString(in.InstanceId))
	}
	p.log.Warn("member has more than one instance; terminating the younger", "cluster", cluster, "member", member,
		"kept", aws.ToString(mine[0].InstanceId), "terminated", extra)
	return p.terminate(ctx, cluster, extra)
}

// byClientToken finds the instance a client token launched.
func (p *Provider) byClientToken(ctx context.Context, token string) (*types.Instance, error) {
	found, err := p.describe(ctx, []types.Filter{filter("client-token", token)})
	if err != nil || len(found) == 0 {
		return nil, err
	}
	return &found[0], nil
}
