package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/gatewayhq/gateway/api/apitype"
)

// BenchAPI is the part of the gateway's API results go through;
// *client.Client has it.
type BenchAPI interface {
	CreateBenchRun(ctx context.Context, r apitype.BenchRunJSON) (apitype.BenchRunJSON, error)
	AddBenchSamples(ctx context.Context, runID string, s []apitype.BenchSampleJSON) error
	FinishBenchRun(ctx context.Context, runID, status, errMsg string) (apitype.BenchRunJSON, error)
}

// APIRecorder records a run through the gateway's API, in the caller's
// name.
type APIRecorder struct {
	API            BenchAPI
	Options        map[string]any // the run's options, as recorded
	ScheduleID     string
	GatewayVersion string
}

// StartRun implements Recorder.
func (r APIRecorder) StartRun(ctx context.Context, info RunInfo) (string, error) {
	shape := map[string]any{"workers": info.Workers}
	for k, v := range info.Shape {
		shape[k] = v
	}
	sb, err := json.Marshal(shape)
	if err != nil {
		return "", err
	}
	opts := map[string]any{}
	for k, v := range r.Options {
		opts[k] = v
	}
	opts["repeat"], opts["null"] = info.Repeat, info.Null
	ob, err := json.Marshal(opts)
	if err != nil {
		return "", err
	}
	run := apitype.BenchRunJSON{Suite: info.Suite, Tests: info.Tests, Shape: sb, Options: ob, Provider: info.Provider,
		Region: info.Region, ScheduleID: r.ScheduleID, GatewayVersion: r.GatewayVersion, StartedAt: info.Started}
	for _, e := range info.Envs {
		image, _ := e.Options["image"].(string)
		run.Envs = append(run.Envs, apitype.BenchEnvJSON{Label: e.Label, Name: e.Name, Hash: e.Hash, Image: image, Packages: e.Versions})
	}
	out, err := r.API.CreateBenchRun(ctx, run)
	if err != nil {
		return "", err
	}
	return out.ID, nil
}

// AddSamples implements Recorder.
func (r APIRecorder) AddSamples(ctx context.Context, runID string, s []Sample) error {
	out := make([]apitype.BenchSampleJSON, 0, len(s))
	for _, x := range s {
		out = append(out, SampleJSON(x))
	}
	return r.API.AddBenchSamples(ctx, runID, out)
}

// FinishRun implements Recorder.
func (r APIRecorder) FinishRun(ctx context.Context, runID, status, message string) error {
	st := "ok"
	switch status {
	case RunFailed, RunRefused:
		st = "failed"
	case RunStopped:
		st = "cancelled"
	case RunPartial:
		st = "partial"
	}
	_, err := r.API.FinishBenchRun(ctx, runID, st, message)
	return err
}

// SampleJSON is a sample as the API stores it: a benchmark that raised,
// and a sample skipped or lost with its cluster, are "failed" with the
// error saying which.
func SampleJSON(x Sample) apitype.BenchSampleJSON {
	rep := x.Repeat - 1
	if rep < 0 {
		rep = 0
	}
	j := apitype.BenchSampleJSON{Test: x.Test, Env: x.Set, Repeat: rep, Error: x.Error, At: x.Started}
	switch x.Status {
	case StatusOK:
		j.Status = "ok"
		j.WallSeconds = x.WallS
	case StatusTimeout:
		j.Status = "timeout"
	default:
		j.Status = "failed"
		if x.Status != StatusFailed && !strings.HasPrefix(j.Error, x.Status) {
			j.Error = fmt.Sprintf("%s: %s", x.Status, j.Error)
		}
	}
	m := x.Metrics
	j.PeakManaged = bytesOf(m["peak_managed_bytes"])
	j.PeakUnmanaged = bytesOf(m["peak_unmanaged_bytes"])
	j.AvgManaged = bytesOf(m["avg_managed_bytes"])
	j.AvgUnmanaged = bytesOf(m["avg_unmanaged_bytes"])
	j.Spilled = bytesOf(m["peak_spilled_bytes"])
	j.Transferred = bytesOf(m["bytes_sent_between_workers"])
	if c := m["worker_cpu_s"]; c > 0 && !math.IsInf(c, 0) {
		j.CPUSeconds = c
	}
	return j
}

func bytesOf(v float64) int64 {
	if v <= 0 || math.IsNaN(v) || v > math.MaxInt64/2 {
		return 0
	}
	return int64(v)
}
