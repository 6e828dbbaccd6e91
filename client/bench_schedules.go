package client

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/clusteropts"
)

// NewWithHTTP makes a client that sends its requests through hc: the
// gateway's own scheduled benchmark runs use one that calls the API
// handler in process.
func NewWithHTTP(base, token string, hc *http.Client) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

// CreateBenchSchedule stores a schedule that the gateway runs itself.
func (c *Client) CreateBenchSchedule(ctx context.Context, req apitype.BenchScheduleRequest) (apitype.BenchScheduleJSON, error) {
	var v apitype.BenchScheduleJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/bench/schedules", req, &v)
	return v, err
}

// BenchSchedules lists the caller's schedules (every one's with all, for admins).
func (c *Client) BenchSchedules(ctx context.Context, all bool) ([]apitype.BenchScheduleJSON, error) {
	q := url.Values{}
	if all {
		q.Set("all", "1")
	}
	var v []apitype.BenchScheduleJSON
	err := c.do(ctx, http.MethodGet, withQuery("/api/v1/bench/schedules", q), nil, &v)
	return v, err
}

// DeleteBenchSchedule removes a schedule.
func (c *Client) DeleteBenchSchedule(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/bench/schedules/"+url.PathEscape(id), nil, nil)
}

// BenchPrice is what a cluster with these options would cost per hour,
// without creating it (the gateway's prices; zero where it has none).
func (c *Client) BenchPrice(ctx context.Context, options clusteropts.Request) (apitype.BenchPriceJSON, error) {
	var v apitype.BenchPriceJSON
	err := c.do(ctx, http.MethodPost, "/api/v1/bench/price", clusterOptions{Options: options}, &v)
	return v, err
}
