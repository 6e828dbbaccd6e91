package apitype

import (
	"encoding/json"
	"time"

	"github.com/gatewayhq/gateway/bench/schedspec"
	"github.com/gatewayhq/gateway/quota"
)

// BenchEnvJSON is one environment of a run.
type BenchEnvJSON struct {
	Label    string            `json:"label"` // A, B, or A2 (the second set of A in an A/A run)
	Name     string            `json:"name,omitempty"`
	Hash     string            `json:"hash,omitempty"`
	Image    string            `json:"image,omitempty"`
	Packages map[string]string `json:"packages,omitempty"`
}

// BenchRunJSON is one run of a suite. On POST, owner, status, times and
// samples are the gateway's to set and are ignored.
type BenchRunJSON struct {
	ID             string            `json:"id"`
	Owner          string            `json:"owner,omitempty"`
	OwnerName      string            `json:"owner_name,omitempty"`
	Suite          string            `json:"suite"`
	Envs           []BenchEnvJSON    `json:"envs"`
	Tests          []string          `json:"tests,omitempty"`
	Shape          json.RawMessage   `json:"shape,omitempty"`
	Provider       string            `json:"provider,omitempty"`
	Region         string            `json:"region,omitempty"`
	GatewayVersion string            `json:"gateway_version,omitempty"`
	Options        json.RawMessage   `json:"options,omitempty"`
	ScheduleID     string            `json:"schedule_id,omitempty"`
	Status         string            `json:"status"`
	Error          string            `json:"error,omitempty"`
	StartedAt      time.Time         `json:"started_at"`
	FinishedAt     *time.Time        `json:"finished_at,omitempty"`
	Samples        []BenchSampleJSON `json:"samples,omitempty"`
}

// BenchSampleJSON is one repeat of one test on one environment. Memory
// and traffic are bytes.
type BenchSampleJSON struct {
	RunID         string    `json:"run_id,omitempty"`
	Test          string    `json:"test"`
	Env           string    `json:"env"` // A, B or A2
	Repeat        int       `json:"repeat"`
	WallSeconds   float64   `json:"wall_seconds"`
	PeakManaged   int64     `json:"peak_managed"`
	PeakUnmanaged int64     `json:"peak_unmanaged"`
	AvgManaged    int64     `json:"avg_managed"`
	AvgUnmanaged  int64     `json:"avg_unmanaged"`
	Spilled       int64     `json:"spilled"`
	Transferred   int64     `json:"transferred"`
	CPUSeconds    float64   `json:"cpu_seconds"`
	Status        string    `json:"status"` // ok, failed or timeout
	Error         string    `json:"error,omitempty"`
	At            time.Time `json:"at,omitzero"`
}

// BenchPointJSON is a sample in a test's history.
type BenchPointJSON struct {
	BenchSampleJSON
	Owner        string    `json:"owner"`
	Suite        string    `json:"suite"`
	EnvName      string    `json:"env_name"`
	EnvHash      string    `json:"env_hash"`
	RunStartedAt time.Time `json:"run_started_at"`
}

// BenchSamplesRequest is the body of POST .../samples.
type BenchSamplesRequest struct {
	Samples []BenchSampleJSON `json:"samples"`
}

// BenchFinishRequest is the body of POST .../finish.
type BenchFinishRequest struct {
	Status string `json:"status"` // ok, partial (some samples failed), failed or cancelled
	Error  string `json:"error,omitempty"`
}

// BenchFindingJSON is the check of one test.
type BenchFindingJSON struct {
	Suite          string    `json:"suite"`
	Test           string    `json:"test"`
	Run            string    `json:"run"` // the latest run
	RunStartedAt   time.Time `json:"run_started_at"`
	Baseline       int       `json:"baseline_samples"`
	BaselineRuns   int       `json:"baseline_runs"` // each run is one observation: its median
	Latest         int       `json:"latest_samples"`
	BaselineMedian *float64  `json:"baseline_median"` // geometric mean of the earlier runs' medians
	LatestMedian   *float64  `json:"latest_median"`
	Change         *float64  `json:"change"` // +0.12 is 12 % slower
	P              *float64  `json:"p"`      // one-sided, run against runs
	// Spread is the run-to-run standard deviation of log(median) the test
	// used; Method says where it came from ("history": the earlier runs'
	// medians; "aa": the within-run A/A of runs that measured one), and
	// MethodText in words.
	Spread     *float64 `json:"spread,omitempty"`
	Method     string   `json:"method,omitempty"`
	MethodText string   `json:"method_text,omitempty"`
	Regressed  bool     `json:"regressed"`
	Note       string   `json:"note,omitempty"` // why it was not checked
}

// BenchCheckJSON is the answer of a regression check.
type BenchCheckJSON struct {
	Env         string             `json:"env"`
	Window      string             `json:"window"`
	Threshold   float64            `json:"threshold"`
	Alpha       float64            `json:"alpha"`
	Regressions int                `json:"regressions"`
	Findings    []BenchFindingJSON `json:"findings"`
}

// BenchPriceJSON is what a cluster with the given options would cost:
// the machines the gateway would choose for the caller and the usage
// ledger's price of each. PriceHour is zero when the gateway has no
// price for them (pricing.* unset).
type BenchPriceJSON struct {
	Provider  string     `json:"provider"`
	Region    string     `json:"region,omitempty"`
	Workers   int        `json:"workers"`
	Worker    quota.Size `json:"worker"`
	Scheduler quota.Size `json:"scheduler"`
	// PriceHour is the whole cluster's: the scheduler and every worker.
	PriceHour float64 `json:"price_hour"`
}

// BenchScheduleRequest makes a schedule.
type BenchScheduleRequest struct {
	Suite   string            `json:"suite"`
	Archive []byte            `json:"suite_archive"` // schedspec.PackSuite's zip, base64 in JSON
	Cron    string            `json:"cron"`
	Options schedspec.Options `json:"options"`
}

// BenchScheduleJSON is a stored schedule (without its suite's files).
type BenchScheduleJSON struct {
	ID        string            `json:"id"`
	Owner     string            `json:"owner"`
	OwnerName string            `json:"owner_name"`
	Suite     string            `json:"suite"`
	Envs      []string          `json:"envs"`
	Cron      string            `json:"cron"`
	Options   schedspec.Options `json:"options"`
	NextRun   time.Time         `json:"next_run"`
	LastRun   *time.Time        `json:"last_run,omitempty"`
	LastRunID string            `json:"last_run_id,omitempty"`
	LastError string            `json:"last_error,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
}
