package api

import (
	"encoding/json"
	"net/url"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/store"
)

// compatStatus maps our statuses to dask-gateway's five: its client does not
// know STARTING, which is still "not yet running" to it.
func compatStatus(s store.Status) string {
	if s == store.Starting {
		return string(store.Pending)
	}
	return string(s)
}

// clusterJSON is a cluster's answer; credentials says whether a running
// cluster's TLS certificate and key may go in it (single answers, to their
// owner; never in lists, see list.go).
func (s *Server) clusterJSON(c *store.Cluster, detail, readOnly, credentials bool) any {
	out := apitype.Cluster{
		Name:      c.Name,
		Status:    compatStatus(c.Status),
		StartTime: c.CreatedAt.UnixMilli(),
		Options:   json.RawMessage(c.Options),
	}
	if len(out.Options) == 0 {
		out.Options = json.RawMessage("{}")
	} else if _, err := clusteropts.Decode(out.Options); err != nil {
		// Passed on as they are, options that are not JSON would spoil the
		// whole answer (a list with every cluster of the owner's): null,
		// and the cluster's reason says why (the loop fails it).
		out.Options = json.RawMessage("null")
	}
	running := c.Status == store.Running
	if running && c.DashboardAddress != "" {
		r := "/clusters/" + c.Name + "/status"
		out.DashboardRoute = &r
	}
	if !c.StoppedAt.IsZero() {
		ms := c.StoppedAt.UnixMilli()
		out.StopTime = &ms
	}
	// The key is a full Dask client credential (it runs code on the
	// cluster): a read-only caller does not get it.
	if running && !readOnly && credentials {
		cert, key := string(c.TLSCert), string(c.TLSKey)
		out.TLSCert, out.TLSKey = &cert, &key
	}
	if !detail {
		return out
	}
	d := apitype.ClusterDetail{Cluster: out, Phase: c.Phase, State: string(c.Status), Reason: c.Reason, Owner: c.Owner, OwnerName: c.OwnerName,
		Provider: c.Provider, ServerName: apitype.SNIPrefix + c.Name, CreatedAt: c.CreatedAt.UTC()}
	d.Workers.Requested, d.Workers.Ready = c.DesiredWorkers, c.ReadyWorkers
	if c.Adaptive {
		d.Adaptive = &struct {
			Minimum int `json:"minimum"`
			Maximum int `json:"maximum"`
		}{c.AdaptMin, c.AdaptMax}
	}
	if u, err := url.Parse(s.cfg.PublicURL); err == nil && u.Host != "" {
		if running {
			d.SchedulerAddress = "tls://" + u.Host
			d.GatewayAddress = "gateway://" + u.Host + "/" + c.Name
			if out.DashboardRoute != nil {
				d.DashboardURL = u.Scheme + "://" + u.Host + *out.DashboardRoute
			}
		}
	}
	if s.cfg.DashboardProblem != nil {
		d.DashboardProblem = s.cfg.DashboardProblem(c.Provider)
	}
	if !c.StartedAt.IsZero() {
		t := c.StartedAt.UTC()
		d.StartedAt = &t
	}
	if !c.StoppedAt.IsZero() {
		t := c.StoppedAt.UTC()
		d.StoppedAt = &t
	}
	return d
}
