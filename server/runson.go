package server

import "github.com/gatewayhq/gateway/providers"

// RunsOn says where the gateway's clusters run, for gateway dev's banner:
// the backend in words, with its region when it has one.
func (g *Gateway) RunsOn() string { return runsOn(g.provider) }

func runsOn(p providers.Provider) string {
	where, ok := map[string]string{
		"local":   "Dask on this machine",
		"docker":  "Dask in Docker containers",
		"ec2":     "Dask on EC2 instances",
		"fargate": "Dask on ECS Fargate tasks",
		"gce":     "Dask on Compute Engine VMs",
	}[p.Name()]
	if !ok {
		where = "Dask on the " + p.Name() + " backend"
	}
	if r, ok := p.(providers.Regional); ok && r.Region() != "" {
		where += " in " + r.Region()
	}
	return where
}
