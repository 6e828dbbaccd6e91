package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
)

// CreateBenchRun records the start of a benchmark run; the answer has its
// id, owner, status and start time.
func (c *Client) CreateBenchRun(ctx context.Context, r apitype.BenchRunJSON) (apitype.BenchRunJSON, error) {
	var out apitype.BenchRunJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/bench/runs", r, &out)
	return out, err
}

// AddBenchSamples records samples of a running run, all or none (at most
// 1000 per call).
func (c *Client) AddBenchSamples(ctx context.Context, runID string, samples []apitype.BenchSampleJSON) error {
	return c.do(ctx, http.MethodPost, "/api/v1/bench/runs/"+url.PathEscape(runID)+"/samples", apitype.BenchSamplesRequest{Samples: samples}, nil)
}

// FinishBenchRun ends a run: status ok, partial, failed or cancelled.
func (c *Client) FinishBenchRun(ctx context.Context, runID, status, errMsg string) (apitype.BenchRunJSON, error) {
	var out apitype.BenchRunJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/bench/runs/"+url.PathEscape(runID)+"/finish", apitype.BenchFinishRequest{Status: status, Error: errMsg}, &out)
	return out, err
}

// BenchRuns lists the caller's runs (an admin's: everyone's), newest
// first; suite "" for all, limit 0 for the gateway's default.
func (c *Client) BenchRuns(ctx context.Context, suite string, limit int) ([]apitype.BenchRunJSON, error) {
	q := url.Values{}
	if suite != "" {
		q.Set("suite", suite)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []apitype.BenchRunJSON
	err := c.do(ctx, http.MethodGet, "/api/v1/bench/runs"+query(q), nil, &out)
	return out, err
}

// BenchRun returns a run with its samples.
func (c *Client) BenchRun(ctx context.Context, id string) (apitype.BenchRunJSON, error) {
	var out apitype.BenchRunJSON
	err := c.do(ctx, http.MethodGet, "/api/v1/bench/runs/"+url.PathEscape(id), nil, &out)
	return out, err
}

// BenchHistoryQuery selects samples across runs. Zero fields select
// everything the caller may see (an admin: everyone's).
type BenchHistoryQuery struct {
	Owner string // an admin's choice of one owner
	Test  string
	Env   string // environment name or hash (prefix of at least 8)
	Since time.Time
	Limit int
}

// BenchHistory returns the samples that match q, oldest first.
func (c *Client) BenchHistory(ctx context.Context, q BenchHistoryQuery) ([]apitype.BenchPointJSON, error) {
	v := url.Values{}
	for k, s := range map[string]string{"owner": q.Owner, "test": q.Test, "env": q.Env} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out []apitype.BenchPointJSON
	err := c.do(ctx, http.MethodGet, "/api/v1/bench/history"+query(v), nil, &out)
	return out, err
}

// BenchCheck checks an environment's history of the caller for
// regressions. window and threshold are as the gateway reads them ("7d",
// "10%"); "" for the defaults.
func (c *Client) BenchCheck(ctx context.Context, env, window, threshold string) (apitype.BenchCheckJSON, error) {
	return c.BenchCheckAs(ctx, "", env, window, threshold)
}

// BenchCheckAs is BenchCheck of another user's history (admins only);
// owner "" is the caller.
func (c *Client) BenchCheckAs(ctx context.Context, owner, env, window, threshold string) (apitype.BenchCheckJSON, error) {
	q := url.Values{"env": {env}}
	for k, v := range map[string]string{"owner": owner, "window": window, "threshold": threshold} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out apitype.BenchCheckJSON
	err := c.do(ctx, http.MethodGet, "/api/v1/bench/check"+query(q), nil, &out)
	return out, err
}

func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// RenewBenchRun tells the gateway the run's client is alive and holds
// clusters; the gateway fails a run whose client stops renewing, and
// stops its clusters.
func (c *Client) RenewBenchRun(ctx context.Context, runID string, clusters []string) (apitype.BenchLeaseJSON, error) {
	var v apitype.BenchLeaseJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/bench/runs/"+url.PathEscape(runID)+"/lease", apitype.BenchLeaseRequest{Clusters: clusters}, &v)
	return v, err
}
