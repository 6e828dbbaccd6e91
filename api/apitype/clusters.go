package apitype

import (
	"encoding/json"
	"time"
)

// CreateClusterRequest is the body of POST /api/v1/clusters, as
// dask-gateway's client sends it; the gateway's own client may add whom
// to share the new cluster with.
type CreateClusterRequest struct {
	ClusterOptions map[string]json.RawMessage `json:"cluster_options"`
	Share          *ShareRequest              `json:"share,omitempty"`
}

// ShareRequest is the body of POST /api/v1/clusters/{name}/share: whom to
// share with (user:NAME, group:NAME) and what beyond viewing and
// connecting they may do (scale, stop). Sharing again with someone
// replaces what they may do.
type ShareRequest struct {
	With  []string `json:"with"`
	Allow []string `json:"allow,omitempty"`
}

// UnshareRequest is the body of POST /api/v1/clusters/{name}/unshare:
// whom to unshare from; none: everyone.
type UnshareRequest struct {
	With []string `json:"with,omitempty"`
}

// Share is one share of a cluster: with whom (user:<id> or group:<name>),
// the user's name, and what it allows beyond viewing and connecting.
type Share struct {
	With      string    `json:"with"`
	Name      string    `json:"name,omitempty"`
	Allow     []string  `json:"allow"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by,omitempty"`
}

// Shares answers the share routes: the cluster's shares now, the
// gateway's cluster.sharing, and what an unshare removed.
type Shares struct {
	Cluster string  `json:"cluster"`
	Sharing string  `json:"sharing"`
	Shares  []Share `json:"shares"`
	Removed []Share `json:"removed,omitempty"`
}

// Access is what the caller may do with a cluster someone else owns,
// which reaches them through shares (Via: user:bob, group:ops): view and
// connect, and the actions of Allow (scale, stop).
type Access struct {
	Shared bool     `json:"shared"`
	Via    []string `json:"via"`
	Allow  []string `json:"allow"`
}

// ScaleRequest is the body of POST /api/v1/clusters/{name}/scale. Count
// is a pointer to tell a missing count from 0; an int, not a json.Number,
// because json.Number also takes "2" (a string), which dask-gateway's
// server refuses as it refuses every other value of the wrong type.
type ScaleRequest struct {
	Count *int `json:"count"`
}

// AdaptRequest is the body of POST /api/v1/clusters/{name}/adapt.
// dask-gateway's client sends null for the bounds it leaves to the server.
type AdaptRequest struct {
	Minimum *int  `json:"minimum"`
	Maximum *int  `json:"maximum"`
	Active  *bool `json:"active"`
}

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
	// Access is set when the cluster is someone else's, shared with the
	// caller; SharedWith, for its owner's single-cluster answer, lists
	// whom it is shared with.
	Access     *Access `json:"access,omitempty"`
	SharedWith []Share `json:"shared_with,omitempty"`
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
