package server

import (
	"testing"

	"github.com/gatewayhq/gateway/providers"
)

// named is a backend as runsOn sees it: a name, and a region or none.
type named struct {
	providers.Provider
	name string
}

func (n named) Name() string { return n.name }

type regional struct {
	named
	region string
}

func (r regional) Region() string { return r.region }

// TestRunsOn: gateway dev's banner names the backend the clusters run on,
// not "this machine" for a cloud.
func TestRunsOn(t *testing.T) {
	for _, tc := range []struct {
		p    providers.Provider
		want string
	}{
		{named{name: "local"}, "Dask on this machine"},
		{named{name: "docker"}, "Dask in Docker containers"},
		{regional{named{name: "ec2"}, "us-east-1"}, "Dask on EC2 instances in us-east-1"},
		{regional{named{name: "fargate"}, "eu-west-1"}, "Dask on ECS Fargate tasks in eu-west-1"},
		{regional{named{name: "gce"}, "us-central1"}, "Dask on Compute Engine VMs in us-central1"},
		{named{name: "toy"}, "Dask on the toy backend"},
	} {
		if got := runsOn(tc.p); got != tc.want {
			t.Errorf("runsOn(%s) = %q, want %q", tc.p.Name(), got, tc.want)
		}
	}
}
