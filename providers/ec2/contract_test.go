package ec2

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewayhq/gateway/providers"
	"github.com/gatewayhq/gateway/providers/contract"
)

// capabilities are the optional interfaces of providers/provider.go the
// EC2 provider implements, which the suite exercises.
func capabilities() []contract.Capability {
	return []contract.Capability{contract.InstanceTypes, contract.Regional, contract.StopTimes,
		contract.MemberLister, contract.LeftoverLister, contract.StartPacer}
}

// TestContract runs the providers' shared suite against the EC2 provider
// on the wire-level fakes, with instances pending for two describes and
// terminating over two more, as EC2 makes them.
func TestContract(t *testing.T) {
	envs := newEnvRegistry()
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			e := envs.add(newEnv(t))
			e.ec2.SetPendingDescribes(2)
			e.ec2.SetTerminateDescribes(2)
			return e.p
		},
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			s := spec(cluster)
			s.Owner = owner
			return s
		},
		Capabilities: capabilities(),
		Region:       testRegion,
		Timeout:      10 * time.Second,
		Poll:         5 * time.Millisecond,
		Isolation:    envs.isolation(),
	})
}

// TestContractEventuallyConsistent runs the suite again with new instances
// missing from DescribeInstances for a few calls, as EC2 can leave them.
func TestContractEventuallyConsistent(t *testing.T) {
	envs := newEnvRegistry()
	contract.Run(t, contract.Harness{
		New: func(t *testing.T) providers.Provider {
			e := envs.add(newEnv(t))
			e.ec2.SetPendingDescribes(1)
			e.ec2.SetVisibilityDelay(3)
			return e.p
		},
		Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
			s := spec(cluster)
			s.Owner = owner
			return s
		},
		Capabilities: capabilities(),
		Region:       testRegion,
		Timeout:      10 * time.Second,
		Poll:         5 * time.Millisecond,
		Isolation:    envs.isolation(),
	})
}

// envRegistry finds the env of a provider the suite made, for its
// neighbour.
type envRegistry struct {
	mu         sync.Mutex
	byProvider map[providers.Provider]*env
}

func newEnvRegistry() *envRegistry {
	return &envRegistry{byProvider: map[providers.Provider]*env{}}
}

func (r *envRegistry) add(e *env) *env {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byProvider[e.p] = e
	return e
}

func (r *envRegistry) of(t *testing.T, p providers.Provider) *env {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.byProvider[p]
	if e == nil {
		t.Fatalf("no env for provider %p", p)
	}
	return e
}

// isolation: the neighbour is another gateway (gw-other) on the same
// fakes, with the same configuration otherwise; LooseFilter makes both
// fakes ignore the gateway-id tag filter (DescribeInstances,
// DescribeSecurityGroups, DescribeParameters).
func (r *envRegistry) isolation() *contract.Isolation {
	return &contract.Isolation{
		Neighbour: func(t *testing.T, p providers.Provider) contract.Neighbour {
			e := r.of(t, p)
			cfg := e.cfg
			cfg.GatewayID = "gw-other"
			other, err := New(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			return contract.Neighbour{P: other, Spec: func(t *testing.T, cluster, owner string) providers.ClusterSpec {
				s := spec(cluster)
				s.Owner, s.GatewayID = owner, cfg.GatewayID
				return s
			}}
		},
		LooseFilter: func(t *testing.T, p providers.Provider) {
			e := r.of(t, p)
			e.ec2.IgnoreFilter("tag:" + tagGateway)
			e.ssm.IgnoreFilter("tag:" + tagGateway)
		},
		Unfiltered: func(t *testing.T, p providers.Provider) []string {
			return r.of(t, p).unfiltered("gw-test", "gw-other")
		},
	}
}

// unfiltered lists the listings of instances, security groups (other than
// by id) and parameters the fakes received without a tag:gateway-id
// filter naming one of the gateways.
func (e *env) unfiltered(ids ...string) []string {
	var out []string
	for _, r := range e.ec2.Requests("") {
		if r.Action != "DescribeInstances" && (r.Action != "DescribeSecurityGroups" || r.Params.Has("GroupId.1")) {
			continue
		}
		ok := false
		for k, v := range r.Params {
			n, found := strings.CutSuffix(k, ".Name")
			if found && strings.HasPrefix(k, "Filter.") && v[0] == "tag:"+tagGateway {
				ok = slices.Contains(ids, r.Params.Get(n+".Value.1")) && !r.Params.Has(n+".Value.2")
			}
		}
		if !ok {
			out = append(out, fmt.Sprintf("%s %v", r.Action, r.Params))
		}
	}
	for _, r := range e.ssm.Requests("DescribeParameters") {
		ok := false
		for _, id := range ids {
			ok = ok || strings.Contains(r.Body, `{"Key":"tag:`+tagGateway+`","Option":"Equals","Values":["`+id+`"]}`)
		}
		if !ok {
			out = append(out, "DescribeParameters "+r.Body)
		}
	}
	return out
}
