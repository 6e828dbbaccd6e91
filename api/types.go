package api

import (
	"encoding/json"
	"net/url"
	"time"

	"github.com/gatewayhq/gateway/store"
)

// Cluster is dask-gateway's cluster model, field for field: its client
// passes unknown fields to a constructor that rejects them.
type Cluster struct {
	Name           string          `json:"name"`
	Status         string          `json:"status"`
	DashboardRoute *string         `json:"dashboard_route"`
	StartTime      int64           `json:"start_time"` // ms since the epoch
	StopTime       *int64          `json:"stop_time"`
	Options        json.RawMessage `json:"options"`
	TLSCert        *string         `json:"tls_cert"`
	TLSKey         *string         `json:"tls_key"`
}

// ClusterDetail is the gateway's own richer view (?view=detail).
type ClusterDetail struct {
	Cluster
	Phase  string `json:"phase"`  // STARTING etc. plus progress, e.g. "waiting for workers 1/2"
	State  string `json:"state"`  // the gateway's own status, with STARTING
	Reason string `json:"reason"` // why it failed or stopped
	Owner  string `json:"owner"`
	// OwnerName is the owner's user name (Owner is the stable id).
	OwnerName string `json:"owner_name,omitempty"`
	Provider  string `json:"provider"`
	Workers   struct {
		Requested int `json:"requested"`
		Ready     int `json:"ready"`
	} `json:"workers"`
	Adaptive *struct {
		Minimum int `json:"minimum"`
		Maximum int `json:"maximum"`
	} `json:"adaptive,omitempty"`
	// SchedulerAddress is what a distributed.Client dials: the gateway's
	// own port, with SNI naming the cluster.
	SchedulerAddress string `json:"scheduler_address,omitempty"`
	// GatewayAddress is the dask_gateway form of the same.
	GatewayAddress string `json:"gateway_address,omitempty"`
	ServerName     string `json:"tls_server_name"`
	DashboardURL   string `json:"dashboard_url,omitempty"`
	// DashboardProblem is why the cluster's dashboard cannot work (its
	// Dask lacks a usable bokeh), with the install command, when the
	// gateway knows; the CLI shows it next to the dashboard's address.
	DashboardProblem string     `json:"dashboard_problem,omitempty"`
	CreatedAt        time.Time  `json:"created_at"`
	StartedAt        *time.Time `json:"started_at,omitempty"`
	StoppedAt        *time.Time `json:"stopped_at,omitempty"`
}

// EventJSON is one lifecycle event.
type EventJSON struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Message string    `json:"message"`
}

// SNIPrefix is dask-gateway's convention for naming a cluster in the TLS
// server name.
const SNIPrefix = "daskgateway-"

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
	out := Cluster{
		Name:      c.Name,
		Status:    compatStatus(c.Status),
		StartTime: c.CreatedAt.UnixMilli(),
		Options:   json.RawMessage(c.Options),
	}
	if len(out.Options) == 0 {
		out.Options = json.RawMessage("{}")
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
	d := ClusterDetail{Cluster: out, Phase: c.Phase, State: string(c.Status), Reason: c.Reason, Owner: c.Owner, OwnerName: c.OwnerName,
		Provider: c.Provider, ServerName: SNIPrefix + c.Name, CreatedAt: c.CreatedAt.UTC()}
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
