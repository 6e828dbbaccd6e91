package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ecs"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"

	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/internal/crashpoint"
	"github.com/gatewayhq/gateway/providers/ec2/ec2test"
	"github.com/gatewayhq/gateway/providers/fargate/fargatetest"
	"github.com/gatewayhq/gateway/server"
)

// TestCrashPoints kills the real gateway binary at every named crash point
// (server.CrashPoints: the core's and each backend's) in turn: for each
// point, a gateway started with GATEWAY_CRASH_AT=<point> drives one
// cluster through its life (create
// with a worker, scale to 2, scale to 1, stop; or what else reaches the
// point: a scheduler lost, an orphaned member, leftovers found by tag, the
// lease renewal) until it SIGKILLs itself there. The test checks from the
// log that it died at that point and not of something else, restarts it
// without the crash, finishes the work as a user would (a request that got
// no answer is made again; a cluster created without an answer is found
// with list --all) and checks the outcome: no acknowledged cluster lost or
// FAILED, no member running twice, nothing left of a stopped cluster after
// the reaper's grace.
//
// It runs on the local provider (real Dask processes) and on the EC2 and
// Fargate wire-level fakes (providers/ec2/ec2test, providers/fargate/
// fargatetest). The fakes run no software on their "machines", so the test
// stands in for what would boot there: on each scheduler's loopback
// address it accepts connections on the scheduler's port and answers the
// gateway's health request on the dashboard port over TLS with the
// cluster's own certificate (read from the SSM parameter or the secret the
// backend stored), reporting as many workers as the fake runs for the
// cluster. A provider's points are shared by a few lanes, gateways side by
// side, each keeping its data directory (and fake cloud) across its points.
//
// Every point of server.CrashPoints() must be tried on at least one provider,
// and at least 50 distinct points in all; the figures are printed.
func TestCrashPoints(t *testing.T) {
	t.Parallel()
	var res crashResults
	// Lanes: gateways, each with its own data directory and fake cloud,
	// that share a provider's points and run side by side (Fargate's stops
	// wait the longest). They are goroutines rather than parallel subtests,
	// which go test would run only GOMAXPROCS at a time: the lanes mostly
	// wait.
	var wg sync.WaitGroup
	for _, p := range []struct {
		name  string
		lanes int
		make  func(t *testing.T, lane int) *crashBackend
	}{{"local", 3, localCrashBackend}, {"ec2", 3, ec2CrashBackend}, {"fargate", 4, fargateCrashBackend}} {
		lanes := make([]*crashBackend, p.lanes)
		for i := range lanes {
			lanes[i] = p.make(t, i)
			lanes[i].t = t
		}
		runs := crashRuns(t, lanes[0])
		for i, b := range lanes {
			var mine []crashRunSpec
			for j := i; j < len(runs); j += len(lanes) {
				mine = append(mine, runs[j])
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				runCrashPoints(b, mine, &res)
			}()
		}
	}
	wg.Wait()

	res.mu.Lock()
	defer res.mu.Unlock()
	var missed []string
	for _, p := range server.CrashPoints() {
		if len(res.tried[p]) == 0 {
			missed = append(missed, string(p))
		}
	}
	if len(missed) > 0 {
		t.Errorf("crash points never tried on any provider: %s", strings.Join(missed, ", "))
	}
	if len(res.tried) < 50 {
		t.Errorf("%d distinct crash points tried; want at least 50", len(res.tried))
	}
	for _, p := range server.CrashPoints() {
		t.Logf("%-40s %s", p, strings.Join(res.tried[p], " "))
	}
	summary := fmt.Sprintf("crash points tried: %d (%d runs: local %d, ec2 %d, fargate %d), clusters: %d, lost: %d, duplicated: %d, leaked: %d",
		len(res.tried), res.runs["local"]+res.runs["ec2"]+res.runs["fargate"], res.runs["local"], res.runs["ec2"], res.runs["fargate"],
		res.clusters, res.lost, res.duplicated, res.leaked)
	figure(t, "crash points test: %s", summary)
}

// crashResults adds up the figures of every provider's runs.
type crashResults struct {
	mu                                 sync.Mutex
	tried                              map[crashpoint.Name][]string // point -> providers that crashed there
	runs                               map[string]int
	clusters, lost, duplicated, leaked int
}

func (r *crashResults) add(provider string, point crashpoint.Name, clusters, lost, duplicated, leaked int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tried == nil {
		r.tried, r.runs = map[crashpoint.Name][]string{}, map[string]int{}
	}
	if point != "" && !slices.Contains(r.tried[point], provider) {
		r.tried[point] = append(r.tried[point], provider)
	}
	r.runs[provider]++
	r.clusters += clusters
	r.lost += lost
	r.duplicated += duplicated
	r.leaked += leaked
}

// crashBackend is what the crash test needs of one provider: how to see
// its members and what else it makes, and how to make the situations some
// points need.
type crashBackend struct {
	t      *testing.T
	name   string
	env    *env
	lane   int
	failed bool // this lane's own failures: the others go on
	// prefix names the backend's own points.
	prefix string
	// gatewayID is read from the data directory after the first start.
	gatewayID string
	// live maps each member of the cluster that has a live process,
	// instance or task to how many it has (more than one: duplicated).
	live func(cluster string) map[string]int
	// remains lists what else is left of the cluster (security groups,
	// parameters, secrets, task definitions).
	remains func(cluster string) []string
	// lose ends a member as its machine failing does.
	lose func(cluster, member string)
	// orphan starts a member of a cluster the store does not know; nil
	// when the backend has no way for the test to make one.
	orphan func(cluster string) error
	// leftover makes resources of a cluster the store does not know, found
	// by their ownership tags; nil when the backend lists none.
	leftover func(cluster string) error
}

// A lane runs in a goroutine of its own: its failures are errors of the
// test, and a fatal one ends the lane alone.
func (b *crashBackend) errorf(format string, args ...any) {
	b.failed = true
	b.t.Errorf("%s lane %d: %s", b.name, b.lane, fmt.Sprintf(format, args...))
}

func (b *crashBackend) fatalf(format string, args ...any) {
	b.errorf(format, args...)
	runtime.Goexit()
}

func (b *crashBackend) logf(format string, args ...any) {
	b.t.Logf("%s lane %d: %s", b.name, b.lane, fmt.Sprintf(format, args...))
}

// start starts the gateway without a crash point.
func (b *crashBackend) start() {
	if err := b.env.launchGateway(nil); err != nil {
		b.fatalf("%v", err)
	}
}

// How the crash test's gateways are tuned: fast polls, a short reaper
// grace, so that each point is reached and settled in seconds.
var crashGatewayVars = []string{
	"GATEWAY_CLUSTER_POLL_INTERVAL=300ms",
	"GATEWAY_CLUSTER_REAP_INTERVAL=1s",
	"GATEWAY_CLUSTER_REAP_GRACE=3s",
}

// reapWait bounds how long anything of a stopped cluster may remain: the
// reaper's grace and a few passes.
const reapWait = 45 * time.Second

func localCrashBackend(t *testing.T, lane int) *crashBackend {
	b := &crashBackend{name: "local", prefix: "local.", lane: lane, env: newEnv(t, crashGatewayVars...)}
	members := func(cluster string) map[string][]int {
		out := map[string][]int{}
		for m, pids := range memberProcs(b.gatewayID) {
			if c, name, _ := strings.Cut(m, "/"); c == cluster {
				out[name] = pids
			}
		}
		return out
	}
	b.live = func(cluster string) map[string]int {
		out := map[string]int{}
		for m, pids := range members(cluster) {
			out[m] = len(pids)
		}
		return out
	}
	b.remains = func(string) []string { return nil }
	b.lose = func(cluster, member string) {
		for _, pid := range members(cluster)[member] {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	b.orphan = func(cluster string) error {
		// A member process the store knows nothing of, marked as this
		// gateway's: what a crash between starting a process and storing
		// its cluster would leave, had the store lost the cluster.
		cmd := exec.Command("sleep", "600")
		cmd.Env = append(os.Environ(), "GATEWAY_OWNER_ID="+b.gatewayID, "GATEWAY_MEMBER="+cluster+"/scheduler")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }()
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		return nil
	}
	return b
}

// testAWSCredentials are the test's own, for the calls it makes to the
// fakes as someone else would.
var testAWSCredentials = credentials.NewStaticCredentialsProvider("AKIDEXAMPLETEST", "secret-for-the-fake", "")

// awsTestVars are the SDK settings of a gateway that talks to the fakes.
var awsTestVars = []string{
	"AWS_ACCESS_KEY_ID=AKIDEXAMPLETEST", "AWS_SECRET_ACCESS_KEY=secret-for-the-fake",
	"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
}

func ec2CrashBackend(t *testing.T, lane int) *crashBackend {
	const region = "us-east-1"
	const subnet, vpc = "subnet-0d000000000000005", "vpc-0c000000000000001"
	fake := ec2test.NewEC2(t, region)
	ssm := ec2test.NewSSM(t, region)
	// Members' addresses on loopback, where the test serves the schedulers;
	// one range per lane.
	fake.AddSubnet(ec2test.Subnet{ID: subnet, VPC: vpc, Zone: region + "a", CIDR: fmt.Sprintf("127.0.%d.0/24", 10+lane)})
	// Instances end at the first look after TerminateInstances rather than
	// the second: the test compresses the machines' time (EC2's
	// shutting-down window is the subject of providers/ec2's own tests),
	// which spares each stop a poll of the backend (5s).
	fake.SetTerminateDescribes(0)
	vars := append(slices.Clone(crashGatewayVars), awsTestVars...)
	vars = append(vars,
		"GATEWAY_PROVIDER=ec2",
		"GATEWAY_PROVIDERS_EC2_REGION="+region,
		"GATEWAY_PROVIDERS_EC2_SUBNETS="+subnet,
		"GATEWAY_PROVIDERS_EC2_GATEWAY_CIDRS=192.0.2.0/24",
		"GATEWAY_PROVIDERS_EC2_AMI="+ec2test.DefaultImages()[0].ID,
		"GATEWAY_PROVIDERS_EC2_INSTANCE_PROFILE=gateway-members",
		"GATEWAY_PROVIDERS_EC2_EC2_ENDPOINT="+fake.URL,
		"GATEWAY_PROVIDERS_EC2_SSM_ENDPOINT="+ssm.URL,
	)
	b := &crashBackend{name: "ec2", prefix: "ec2.", lane: lane, env: newEnv(t, vars...)}
	instances := func(cluster string) []ec2test.Instance {
		return ofCluster(fake.Instances(), func(in ec2test.Instance) map[string]string { return in.Tags }, cluster)
	}
	b.live = func(cluster string) map[string]int {
		out := map[string]int{}
		for _, in := range instances(cluster) {
			switch in.State {
			case "pending", "running", "stopping", "stopped":
				out[in.Tags["gateway-member"]]++
			}
		}
		return out
	}
	param := func(gatewayID, cluster string) string { return "/gateway/" + gatewayID + "/" + cluster + "/tls" }
	b.remains = func(cluster string) []string {
		var out []string
		for _, g := range fake.SecurityGroups() {
			if g.Tags["gateway-cluster"] == cluster {
				out = append(out, "security group "+g.ID)
			}
		}
		if _, ok := ssm.Parameter(param(b.gatewayID, cluster)); ok {
			out = append(out, "parameter "+param(b.gatewayID, cluster))
		}
		return out
	}
	b.lose = func(cluster, member string) {
		if in, ok := fake.Instance(cluster, member); ok {
			fake.Terminate(in.ID)
		}
	}
	b.leftover = func(cluster string) error {
		tags := map[string]string{"gateway-id": b.gatewayID, "gateway-cluster": cluster}
		fake.AddSecurityGroup(ec2test.SecurityGroup{Name: "gateway-" + b.gatewayID + "-" + cluster, Description: "left over", VPC: vpc, Tags: tags})
		ssm.SetTagged(param(b.gatewayID, cluster), "left over", tags)
		return nil
	}
	b.orphan = func(cluster string) error {
		// An instance tagged as a member of this gateway's, launched
		// through the API as an earlier gateway whose store lost the
		// cluster would have.
		cli := awsec2.New(awsec2.Options{Region: region, BaseEndpoint: aws.String(fake.URL), Credentials: testAWSCredentials})
		var tags []ec2types.Tag
		for k, v := range map[string]string{"gateway-id": b.gatewayID, "gateway-cluster": cluster, "gateway-member": "scheduler"} {
			tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		_, err := cli.RunInstances(context.Background(), &awsec2.RunInstancesInput{
			ImageId: aws.String(ec2test.DefaultImages()[0].ID), InstanceType: "m6i.large", MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			SubnetId: aws.String(subnet), TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
		})
		if err != nil {
			return fmt.Errorf("launch an orphaned instance: %w", err)
		}
		return nil
	}
	playMachines(t, machineWorld{
		schedulers: func() []standIn {
			var out []standIn
			for _, in := range fake.Instances() {
				if in.State == "running" && in.Tags["gateway-member"] == "scheduler" {
					out = append(out, standIn{id: in.ID, cluster: in.Tags["gateway-cluster"], ip: in.PrivateIP})
				}
			}
			return out
		},
		workers: func(cluster string) int {
			n := 0
			for _, in := range instances(cluster) {
				if in.State == "running" && in.Tags["gateway-member"] != "scheduler" {
					n++
				}
			}
			return n
		},
		tls: func(cluster string) ([]byte, bool) {
			p, ok := ssm.Parameter(param(b.gatewayID, cluster))
			return []byte(p.Value), ok
		},
	})
	return b
}

func fargateCrashBackend(t *testing.T, lane int) *crashBackend {
	const subnet = "subnet-0ddd"
	fake := fargatetest.New(t)
	// Tasks' addresses on loopback, where the test serves the schedulers;
	// one range per lane.
	fake.AddSubnet(subnet, fargatetest.DefaultRegion+"a", fmt.Sprintf("127.0.%d.0/24", 20+lane))
	vars := append(slices.Clone(crashGatewayVars), awsTestVars...)
	vars = append(vars,
		"GATEWAY_PROVIDER=fargate",
		"GATEWAY_PROVIDERS_FARGATE_REGION="+fargatetest.DefaultRegion,
		"GATEWAY_PROVIDERS_FARGATE_CLUSTER="+fargatetest.DefaultCluster,
		"GATEWAY_PROVIDERS_FARGATE_SUBNETS="+subnet,
		"GATEWAY_PROVIDERS_FARGATE_GATEWAY_CIDRS=192.0.2.0/24",
		"GATEWAY_PROVIDERS_FARGATE_EXECUTION_ROLE_ARN=arn:aws:iam::"+fargatetest.DefaultAccount+":role/gateway-execution",
		"GATEWAY_PROVIDERS_FARGATE_ECS_ENDPOINT="+fake.ECS.URL,
		"GATEWAY_PROVIDERS_FARGATE_SECRETSMANAGER_ENDPOINT="+fake.SecretsManager.URL,
		"GATEWAY_PROVIDERS_FARGATE_EC2_ENDPOINT="+fake.EC2.URL,
		"GATEWAY_PROVIDERS_FARGATE_LOGS_ENDPOINT="+fake.Logs.URL,
	)
	b := &crashBackend{name: "fargate", prefix: "fargate.", lane: lane, env: newEnv(t, vars...)}
	tasks := func(cluster string) []fargatetest.Task {
		return ofCluster(fake.Tasks(), func(tk fargatetest.Task) map[string]string { return tk.Tags }, cluster)
	}
	b.live = func(cluster string) map[string]int {
		out := map[string]int{}
		for _, tk := range tasks(cluster) {
			if tk.LastStatus != "STOPPED" {
				out[tk.Tags["gateway-member"]]++
			}
		}
		return out
	}
	b.remains = func(cluster string) []string {
		var out []string
		for _, g := range fake.Groups() {
			if g.Tags["gateway-cluster"] == cluster {
				out = append(out, "security group "+g.ID)
			}
		}
		for _, s := range fake.Secrets() {
			if s.Tags["gateway-cluster"] == cluster {
				out = append(out, "secret "+s.Name)
			}
		}
		for _, d := range fake.TaskDefinitions() {
			if d.Tags["gateway-cluster"] == cluster && d.Status != "DELETE_IN_PROGRESS" {
				out = append(out, "task definition "+d.ARN+" ("+d.Status+")")
			}
		}
		return out
	}
	b.lose = func(cluster, member string) {
		if tk, ok := fake.TaskOf(cluster, member); ok {
			_ = fake.Exit(tk.ARN, 1, "the machine failed")
		}
	}
	key := func() string {
		sum := sha256.Sum256([]byte(b.gatewayID))
		return hex.EncodeToString(sum[:])[:8]
	}
	cli := ecs.New(ecs.Options{Region: fargatetest.DefaultRegion, BaseEndpoint: aws.String(fake.ECS.URL), Credentials: testAWSCredentials})
	// taskDefinition registers a definition of the cluster's, as the
	// backend names and tags them, through the API.
	taskDefinition := func(cluster string) (string, error) {
		var tags []ecstypes.Tag
		for k, v := range map[string]string{"gateway-id": b.gatewayID, "gateway-cluster": cluster, "gateway-member": "cluster"} {
			tags = append(tags, ecstypes.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		out, err := cli.RegisterTaskDefinition(context.Background(), &ecs.RegisterTaskDefinitionInput{
			Family:                  aws.String("gateway-" + key() + "-" + cluster + "-0123456789ab"),
			RequiresCompatibilities: []ecstypes.Compatibility{ecstypes.CompatibilityFargate},
			NetworkMode:             ecstypes.NetworkModeAwsvpc,
			Cpu:                     aws.String("256"), Memory: aws.String("512"),
			ExecutionRoleArn:     aws.String("arn:aws:iam::" + fargatetest.DefaultAccount + ":role/gateway-execution"),
			ContainerDefinitions: []ecstypes.ContainerDefinition{{Name: aws.String("dask"), Image: aws.String("ghcr.io/dask/dask:latest"), Essential: aws.Bool(true)}},
			Tags:                 tags,
		})
		if err != nil {
			return "", fmt.Errorf("register a task definition of %s: %w", cluster, err)
		}
		return aws.ToString(out.TaskDefinition.TaskDefinitionArn), nil
	}
	b.leftover = func(cluster string) error {
		tags := map[string]string{"gateway-id": b.gatewayID, "gateway-cluster": cluster, "gateway-member": "cluster"}
		fake.AddGroup("gateway-"+key()+"-"+cluster, fargatetest.DefaultVPC, tags)
		fake.PutSecret("gateway/"+key()+"/"+cluster+"/tls", `{"cert":"left over","key":"left over"}`, tags)
		_, err := taskDefinition(cluster)
		return err
	}
	b.orphan = func(cluster string) error {
		// A task tagged and started as a member of this gateway's, run
		// through the API as an earlier gateway whose store lost the
		// cluster would have.
		group := fake.AddGroup("gateway-"+key()+"-"+cluster, fargatetest.DefaultVPC,
			map[string]string{"gateway-id": b.gatewayID, "gateway-cluster": cluster, "gateway-member": "cluster"})
		var tags []ecstypes.Tag
		for k, v := range map[string]string{"gateway-id": b.gatewayID, "gateway-cluster": cluster, "gateway-member": "scheduler"} {
			tags = append(tags, ecstypes.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		def, err := taskDefinition(cluster)
		if err != nil {
			return err
		}
		_, err = cli.RunTask(context.Background(), &ecs.RunTaskInput{
			Cluster: aws.String(fargatetest.DefaultCluster), TaskDefinition: aws.String(def), Count: aws.Int32(1),
			LaunchType: ecstypes.LaunchTypeFargate, StartedBy: aws.String("gateway-" + cluster), Tags: tags,
			NetworkConfiguration: &ecstypes.NetworkConfiguration{AwsvpcConfiguration: &ecstypes.AwsVpcConfiguration{
				Subnets: []string{subnet}, SecurityGroups: []string{group},
			}},
		})
		if err != nil {
			return fmt.Errorf("run an orphaned task: %w", err)
		}
		return nil
	}
	playMachines(t, machineWorld{
		schedulers: func() []standIn {
			var out []standIn
			for _, tk := range fake.Tasks() {
				if tk.LastStatus == "RUNNING" && tk.DesiredStatus == "RUNNING" && tk.Tags["gateway-member"] == "scheduler" {
					out = append(out, standIn{id: tk.ARN, cluster: tk.Tags["gateway-cluster"], ip: tk.PrivateIP})
				}
			}
			return out
		},
		workers: func(cluster string) int {
			n := 0
			for _, tk := range tasks(cluster) {
				if tk.LastStatus == "RUNNING" && tk.DesiredStatus == "RUNNING" && tk.Tags["gateway-member"] != "scheduler" {
					n++
				}
			}
			return n
		},
		tls: func(cluster string) ([]byte, bool) {
			for _, s := range fake.Secrets() {
				if s.Tags["gateway-cluster"] != cluster || s.ScheduledForDeletion {
					continue
				}
				var v struct{ Cert, Key string }
				if json.Unmarshal([]byte(s.Value), &v) == nil {
					return []byte(v.Cert + "\n" + v.Key), true
				}
			}
			return nil, false
		},
		// A task's status moves as its machine boots or shuts down, not
		// only when someone asks ECS about it.
		tick: func() {
			for _, tk := range fake.Tasks() {
				if tk.LastStatus != "RUNNING" && tk.LastStatus != "STOPPED" {
					_ = fake.Advance(tk.ARN, 1)
				}
			}
		},
	})
	return b
}

// ofCluster keeps the items whose gateway-cluster tag names cluster.
func ofCluster[T any](items []T, tags func(T) map[string]string, cluster string) []T {
	return slices.DeleteFunc(items, func(it T) bool { return tags(it)["gateway-cluster"] != cluster })
}

// standIn is a scheduler machine the test serves.
type standIn struct{ id, cluster, ip string }

// machineWorld is how playMachines sees a fake cloud.
type machineWorld struct {
	schedulers func() []standIn                    // running scheduler machines
	workers    func(cluster string) int            // the cluster's running worker machines
	tls        func(cluster string) ([]byte, bool) // the cluster's certificate and key (PEM)
	tick       func()                              // anything else the machines do meanwhile
}

// Ports a booted scheduler serves (the backends' own constants).
const (
	standInSchedulerPort = "8786"
	standInDashboardPort = "8787"
)

// playMachines serves, until the test ends, what the software booted on
// each running scheduler machine would: the scheduler's port (the backend
// probes it) and the dashboard's health request over TLS with the
// cluster's certificate. A machine that stops running stops serving.
func playMachines(t *testing.T, w machineWorld) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	serving := map[string]func(){} // machine -> close its servers
	failed := map[string]bool{}    // machines whose servers would not start: said once
	go func() {
		defer close(done)
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				for _, stop := range serving {
					stop()
				}
				return
			case <-tk.C:
			}
			if w.tick != nil {
				w.tick()
			}
			running := map[string]bool{}
			for _, m := range w.schedulers() {
				running[m.id] = true
				if serving[m.id] != nil {
					continue
				}
				pem, ok := w.tls(m.cluster)
				if !ok {
					continue // its TLS material is not stored yet: the machine waits for it
				}
				stop, err := serveStandIn(m, pem, w.workers)
				if err != nil {
					if !failed[m.id] {
						failed[m.id] = true
						t.Logf("stand-in scheduler of %s on %s: %v", m.cluster, m.ip, err)
					}
					continue
				}
				serving[m.id] = stop
			}
			for id, stop := range serving {
				if !running[id] {
					stop()
					delete(serving, id)
				}
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// serveStandIn serves one scheduler machine's ports on its address.
func serveStandIn(m standIn, pem []byte, workers func(string) int) (stop func(), err error) {
	cert, err := tls.X509KeyPair(pem, pem)
	if err != nil {
		return nil, fmt.Errorf("the cluster's TLS material: %w", err)
	}
	sched, err := net.Listen("tcp", net.JoinHostPort(m.ip, standInSchedulerPort))
	if err != nil {
		return nil, err
	}
	dash, err := net.Listen("tcp", net.JoinHostPort(m.ip, standInDashboardPort))
	if err != nil {
		sched.Close()
		return nil, err
	}
	go func() {
		for {
			c, err := sched.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	srv := &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/clusters/"+m.cluster+"/json/counts.json") {
				http.NotFound(rw, r)
				return
			}
			rw.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(rw, `{"workers": %d, "desired_workers": 0, "processing": 0, "waiting": 0, "clients": 1}`, workers(m.cluster))
		}),
	}
	go func() {
		_ = srv.Serve(tls.NewListener(dash, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}()
	return func() { sched.Close(); _ = srv.Close() }, nil
}

// crashWorkload names what a run does to reach its point.
type crashWorkload string

const (
	workStandard crashWorkload = "create, scale to 2, scale to 1, stop"
	workFail     crashWorkload = "create, lose the scheduler"
	workLoseOne  crashWorkload = "create, lose the worker, stop"
	workOrphan   crashWorkload = "an orphaned member for the reaper"
	workLeftover crashWorkload = "leftovers for the reaper"
)

// crashSpec is the GATEWAY_CRASH_AT of a point, and the work that reaches
// it.
func crashSpec(p crashpoint.Name) (string, crashWorkload) {
	switch {
	case p == crashpoint.CoreFailRecorded:
		return string(p), workFail
	case p == crashpoint.CoreLedgerSynced:
		// A scaled-down worker's ledger row is closed with its stop; the
		// sync closes the rows of members that ended on their own.
		return string(p), workLoseOne
	case p == crashpoint.CoreReaperOrphanStopped:
		return string(p), workOrphan
	case p == crashpoint.CoreReaperLeftoverDeleted || strings.Contains(string(p), ".leftover."):
		return string(p), workLeftover
	case p == crashpoint.CoreLeasesRenewed:
		// The first renewal comes with the first sweep, before any cluster;
		// the second holds the cluster being made.
		return string(p) + "@2", workStandard
	}
	return string(p), workStandard
}

// crashRunSpec is one run: a GATEWAY_CRASH_AT and the work that reaches it.
type crashRunSpec struct {
	spec string
	work crashWorkload
}

// crashRuns lists the runs of a backend: each of its points (the core's and
// its own), and a few "@N" crashes at whatever point comes Nth.
func crashRuns(t *testing.T, b *crashBackend) []crashRunSpec {
	var runs []crashRunSpec
	for _, p := range server.CrashPoints() {
		if !strings.HasPrefix(string(p), "core.") && !strings.HasPrefix(string(p), b.prefix) {
			continue
		}
		spec, work := crashSpec(p)
		if (work == workOrphan && b.orphan == nil) || (work == workLeftover && b.leftover == nil) {
			t.Logf("%s: not tried on %s (the backend has no way to make %s)", p, b.name, work)
			continue
		}
		runs = append(runs, crashRunSpec{spec, work})
	}
	for _, n := range []int{3, 9} {
		runs = append(runs, crashRunSpec{"@" + strconv.Itoa(n), workStandard})
	}
	if only := os.Getenv("CRASHPOINTS_ONLY"); only != "" { // while working on one point
		runs = slices.DeleteFunc(runs, func(r crashRunSpec) bool { return !strings.Contains(r.spec, only) })
	}
	return runs
}

// runCrashPoints makes the runs one after the other in one data directory.
func runCrashPoints(b *crashBackend, runs []crashRunSpec, res *crashResults) {
	e := b.env
	b.start()
	id, err := os.ReadFile(filepath.Join(e.dataDir(), "gateway-id"))
	if err != nil {
		b.fatalf("%v", err)
	}
	b.gatewayID = strings.TrimSpace(string(id))[:15]
	e.stopGateway(syscall.SIGTERM)

	known := map[string]bool{} // every cluster made in this data directory
	for i, r := range runs {
		cr := &crashRun{b: b, spec: r.spec, known: known, ghost: fmt.Sprintf("ghost-%d-%d", b.lane, i)}
		start := time.Now()
		cr.do(r.work)
		e.stopGateway(syscall.SIGTERM)
		cr.mark("shutdown")
		b.logf("%s: crashed at %s (%s) in %s [%s]; clusters %d, lost %d, duplicated %d, leaked %d",
			r.spec, cr.crashedAt, r.work, time.Since(start).Round(100*time.Millisecond), strings.Join(cr.phases, ", "), len(cr.clusters), cr.lost, cr.duplicated, cr.leaked)
		res.add(b.name, cr.crashedAt, len(cr.clusters), cr.lost, cr.duplicated, cr.leaked)
		if b.failed {
			return // the state of this data directory is no base for the next points
		}
	}
}

// crashRun is one gateway crash and the recovery from it.
type crashRun struct {
	b     *crashBackend
	spec  string
	known map[string]bool
	ghost string // the cluster an orphan or leftovers belong to

	crashedAt                crashpoint.Name
	phases                   []string // how long each step took
	api                      *client.Client
	lastName, lastState      string // settleGone's last
	apiURL                   string
	last                     time.Time
	clusters                 []string
	lost, duplicated, leaked int
}

// mark notes how long the step just done took.
func (r *crashRun) mark(step string) {
	now := time.Now()
	r.phases = append(r.phases, fmt.Sprintf("%s %s", step, now.Sub(r.last).Round(100*time.Millisecond)))
	r.last = now
}

func (r *crashRun) do(work crashWorkload) {
	r.last = time.Now()
	switch work {
	case workOrphan:
		if err := r.b.orphan(r.ghost); err != nil {
			r.b.fatalf("%s: %v", r.spec, err)
		}
	case workLeftover:
		if err := r.b.leftover(r.ghost); err != nil {
			r.b.fatalf("%s: %v", r.spec, err)
		}
	}
	if err := r.b.env.launchGateway([]string{crashpoint.EnvVar + "=" + r.spec}); err != nil {
		r.recover()
	}
	r.mark("start")
	switch work {
	case workStandard:
		name := r.create()
		if !r.settle(name, 1) {
			return
		}
		r.mark("create")
		r.request("scale", name, "--workers", "2")
		if !r.settle(name, 2) {
			return
		}
		r.mark("scale up")
		r.request("scale", name, "--workers", "1")
		if !r.settle(name, 1) {
			return
		}
		r.mark("scale down")
		r.request("stop", "--wait=false", name)
		r.settleGone(name, "STOPPED")
		r.mark("stop")
	case workFail:
		name := r.create()
		if !r.settle(name, 1) {
			return
		}
		r.mark("create")
		r.b.lose(name, "scheduler")
		r.settleGone(name, "FAILED")
		r.mark("fail")
	case workLoseOne:
		name := r.create()
		if !r.settle(name, 1) {
			return
		}
		r.mark("create")
		for m := range r.b.live(name) {
			if m == "scheduler" {
				continue
			}
			r.b.lose(name, m)
			for deadline := time.Now().Add(30 * time.Second); r.b.live(name)[m] > 0 && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if !r.settle(name, 1) { // a new worker in its place
			return
		}
		r.mark("replace")
		r.request("stop", "--wait=false", name)
		r.settleGone(name, "STOPPED")
		r.mark("stop")
	case workOrphan, workLeftover:
		r.settleGone(r.ghost, "")
		r.mark("reaped")
	}
	if r.crashedAt == "" && r.crashSoon() {
		// The crash came after the work's last look (the reaper's points):
		// look again.
		r.settleGone(r.lastName, r.lastState)
	}
	if r.crashedAt == "" {
		// The work is done and the point never came: a test that cannot
		// crash there proves nothing.
		r.b.errorf("%s: the gateway never crashed (%s): the work does not reach the point\n%s", r.spec, work, lastLines(r.b.env.gwLog.String(), 30))
	}
}

// crashSoon waits a little for a crash that may follow the work's last
// look, and recovers from it.
func (r *crashRun) crashSoon() bool {
	select {
	case <-r.b.env.exited:
		r.recover()
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}

// recover is called once the gateway has died: it checks that it died at
// the point asked for, then starts it again without a crash.
func (r *crashRun) recover() {
	e := r.b.env
	select {
	case <-e.exited:
	case <-time.After(30 * time.Second):
		r.b.fatalf("%s: the gateway did not exit", r.spec)
	}
	log := e.gwLog.String()
	i := strings.Index(log, crashpoint.Marker)
	if i < 0 {
		r.b.fatalf("%s: the gateway died without reaching a crash point:\n%s", r.spec, lastLines(log, 40))
	}
	if r.crashedAt != "" {
		r.b.fatalf("%s: the gateway crashed again after its restart without a crash point:\n%s", r.spec, lastLines(log, 40))
	}
	name, _, _ := strings.Cut(log[i+len(crashpoint.Marker):], " ")
	r.crashedAt = crashpoint.Name(name)
	if want, _, _ := strings.Cut(r.spec, "@"); want != "" && want != name {
		r.b.errorf("%s: the gateway crashed at %s", r.spec, name)
	}
	r.b.start()
}

// down reports whether the gateway has died (the crash); a request that
// failed for another reason fails the test.
func (r *crashRun) down() bool {
	select {
	case <-r.b.env.exited:
		return true
	case <-time.After(3 * time.Second):
		return false
	}
}

// cli runs a CLI command against the gateway. If the gateway died (the
// crash point), it is restarted and ok is false: the caller repeats the
// request, as a user whose request got no answer would.
func (r *crashRun) cli(args ...string) (stdout string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.b.env.bin, args...)
	cmd.Env = r.b.env.vars
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	if err == nil {
		return out.String(), true
	}
	if r.down() {
		r.recover()
		return "", false
	}
	r.b.fatalf("%s: gateway %s: %v\n%s%s\n--- gateway log:\n%s", r.spec, strings.Join(args, " "), err, out.String(), stderr.String(), lastLines(r.b.env.gwLog.String(), 40))
	return "", false
}

// request makes a request until it is answered.
func (r *crashRun) request(args ...string) {
	for range 3 {
		if _, ok := r.cli(args...); ok {
			return
		}
	}
	r.b.fatalf("%s: gateway %s got no answer three times", r.spec, strings.Join(args, " "))
}

type crashListed struct {
	Name, State, Reason string
	Workers             struct{ Ready, Requested int }
}

// list is list --all, by cluster name.
func (r *crashRun) list() map[string]crashListed {
	for range 3 {
		out, ok := r.cli("list", "--all", "-o", "json")
		if !ok {
			continue
		}
		var l []crashListed
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			r.b.fatalf("list --all -o json: %v\n%s", err, out)
		}
		m := make(map[string]crashListed, len(l))
		for _, c := range l {
			m[c.Name] = c
		}
		return m
	}
	r.b.fatalf("%s: list got no answer three times", r.spec)
	return nil
}

// state reads every cluster through the API: cheaper than the CLI for
// polling. A failure while the gateway is down is the crash.
func (r *crashRun) state() map[string]crashListed {
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		all, err := r.apiClient().List(ctx, []string{"all"})
		cancel()
		if err == nil {
			m := make(map[string]crashListed, len(all))
			for name, c := range all {
				l := crashListed{Name: name, State: c.State, Reason: c.Reason}
				l.Workers.Ready, l.Workers.Requested = c.Workers.Ready, c.Workers.Requested
				m[name] = l
			}
			return m
		}
		if !r.down() {
			r.b.fatalf("%s: list the clusters: %v", r.spec, err)
		}
		r.recover()
	}
	r.b.fatalf("%s: the clusters could not be listed three times", r.spec)
	return nil
}

// apiClient is a client of the gateway that runs now, with the token
// gateway dev wrote for it.
func (r *crashRun) apiClient() *client.Client {
	if r.api != nil && r.apiURL == r.b.env.url {
		return r.api
	}
	b, err := os.ReadFile(filepath.Join(r.b.env.home, "config", "gateway", "credentials.json"))
	if err != nil {
		r.b.fatalf("%v", err)
	}
	var creds struct {
		Gateways map[string]struct {
			Token string `json:"token"`
		} `json:"gateways"`
	}
	if err := json.Unmarshal(b, &creds); err != nil {
		r.b.fatalf("%v", err)
	}
	tok, ok := creds.Gateways[r.b.env.url]
	if !ok {
		r.b.fatalf("no token for %s in gateway dev's credentials:\n%s", r.b.env.url, b)
	}
	c, err := client.New(r.b.env.url, tok.Token, nil)
	if err != nil {
		r.b.fatalf("%v", err)
	}
	r.api, r.apiURL = c, r.b.env.url
	return c
}

// create asks for a cluster with one worker. A request the crash cut off
// may have stored the cluster: one that list --all shows and the test has
// not seen before is it.
func (r *crashRun) create() string {
	for range 3 {
		out, ok := r.cli("new-cluster", "--no-wait", "--workers", "1", "-o", "json")
		var c struct{ Name string }
		if ok {
			if err := json.Unmarshal([]byte(out), &c); err != nil || c.Name == "" {
				r.b.fatalf("new-cluster -o json: %v\n%s", err, out)
			}
		} else {
			for name := range r.list() {
				if !r.known[name] {
					c.Name = name
				}
			}
		}
		if c.Name != "" {
			r.known[c.Name] = true
			r.clusters = append(r.clusters, c.Name)
			return c.Name
		}
	}
	r.b.fatalf("%s: no cluster after three attempts to create one", r.spec)
	return ""
}

// settle waits until the cluster runs with workers workers, connected and
// as many running members besides its scheduler. It reports false (and
// counts the cluster lost) if the cluster is gone or FAILED.
func (r *crashRun) settle(name string, workers int) bool {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, listed := r.state()[name]
		live := r.b.live(name)
		switch {
		case !listed || c.State == "FAILED":
			r.lost++
			r.b.errorf("%s: cluster %s is lost: %s %s", r.spec, name, c.State, c.Reason)
			return false
		case c.State == "RUNNING" && c.Workers.Ready == workers && c.Workers.Requested == workers && len(live) == workers+1:
			for m, n := range live {
				if n > 1 {
					r.duplicated++
					r.b.errorf("%s: member %s of %s runs %d times", r.spec, m, name, n)
				}
			}
			return true
		case time.Now().After(deadline):
			r.b.errorf("%s: cluster %s is %s %d/%d with members %v after 2 minutes; want RUNNING %d/%d\n%s",
				r.spec, name, c.State, c.Workers.Ready, c.Workers.Requested, live, workers, workers, lastLines(r.b.env.gwLog.String(), 30))
			return false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// settleGone waits until the cluster is in state (unless "") and nothing
// of it is left; what remains after reapWait is counted as leaked.
func (r *crashRun) settleGone(name, state string) {
	r.lastName, r.lastState = name, state
	deadline := time.Now().Add(reapWait)
	for {
		// The list also notices the crash, which may come while nothing
		// else is asked of the gateway (the reaper's points).
		c, listed := r.state()[name]
		if state == "" {
			c, listed = crashListed{}, true
		}
		live, remains := r.b.live(name), r.b.remains(name)
		switch {
		case !listed || (state != "FAILED" && c.State == "FAILED"):
			r.lost++
			r.b.errorf("%s: cluster %s is lost: %s %s", r.spec, name, c.State, c.Reason)
			return
		case c.State == state && len(live) == 0 && len(remains) == 0:
			return
		case time.Now().After(deadline):
			if c.State != state {
				r.b.errorf("%s: cluster %s is %s after %s; want %s", r.spec, name, c.State, reapWait, state)
			}
			for m, n := range live {
				r.leaked += n
				r.b.errorf("%s: member %s of %s still runs (%d) after %s", r.spec, m, name, n, reapWait)
			}
			r.leaked += len(remains)
			if len(remains) > 0 {
				sort.Strings(remains)
				r.b.errorf("%s: left of %s after %s: %s", r.spec, name, reapWait, strings.Join(remains, "; "))
			}
			if len(live)+len(remains) > 0 {
				r.b.logf("gateway log:\n%s", lastLines(r.b.env.gwLog.String(), 40))
			}
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}
