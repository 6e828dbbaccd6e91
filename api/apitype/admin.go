package apitype

import (
	"encoding/json"
	"time"

	"github.com/gatewayhq/gateway/quota"
)

// QuotaEntryJSON is one subject's entry, with the source of each limit.
type QuotaEntryJSON struct {
	Subject   string            `json:"subject"`
	Limits    quota.Limits      `json:"limits"`            // stored over config over built-in
	Sources   map[string]string `json:"sources"`           // limit -> "built-in", "config" or "api"
	Builtin   *quota.Limits     `json:"builtin,omitempty"` // the built-in defaults, on the default entry
	Config    *quota.Limits     `json:"config,omitempty"`
	Stored    *quota.Limits     `json:"stored,omitempty"`
	UpdatedAt *time.Time        `json:"updated_at,omitempty"`
	UpdatedBy string            `json:"updated_by,omitempty"`
}

// AuditJSON is one audit log entry.
type AuditJSON struct {
	ID      int64           `json:"id"`
	At      time.Time       `json:"at"`
	Actor   string          `json:"actor"`
	ActorID string          `json:"actor_id"`
	Action  string          `json:"action"`
	Target  string          `json:"target"`
	Before  json.RawMessage `json:"before"`
	After   json.RawMessage `json:"after"`
}

// UsageRow is one line of a usage report: one user, or one cluster.
type UsageRow struct {
	User           string             `json:"user"`
	UserID         string             `json:"user_id"`
	Cluster        string             `json:"cluster,omitempty"`
	Clusters       int                `json:"clusters"`
	Running        bool               `json:"running"` // some of the time is still being counted
	VCPUHours      float64            `json:"vcpu_hours"`
	MemoryGiBHours float64            `json:"memory_gib_hours"`
	GPUHours       float64            `json:"gpu_hours"`
	GPUHoursByType map[string]float64 `json:"gpu_hours_by_type"`
	CostUSD        float64            `json:"estimated_cost_usd"`
}

// UsageReport is the answer of the usage routes.
type UsageReport struct {
	Since time.Time  `json:"since"`
	Until time.Time  `json:"until"`
	By    string     `json:"by"`
	Rows  []UsageRow `json:"rows"`
}
