package report

import (
	"encoding/json"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/store"
)

// RunOf is a stored run as the API answers it, with its samples (none
// given: none listed).
func RunOf(r *store.BenchRun, samples []store.BenchSample) apitype.BenchRunJSON {
	out := apitype.BenchRunJSON{ID: r.ID, Owner: r.Owner, OwnerName: r.OwnerName, Suite: r.Suite, Tests: r.Tests,
		Shape: json.RawMessage(r.Shape), Provider: r.Provider, Region: r.Region, GatewayVersion: r.GatewayVersion,
		Options: json.RawMessage(r.Options), ScheduleID: r.ScheduleID, Status: r.Status, Error: r.Error, StartedAt: r.StartedAt.UTC()}
	if !r.FinishedAt.IsZero() {
		f := r.FinishedAt.UTC()
		out.FinishedAt = &f
	}
	for _, e := range r.Envs {
		out.Envs = append(out.Envs, apitype.BenchEnvJSON(e))
	}
	for _, m := range samples {
		out.Samples = append(out.Samples, SampleOf(m))
	}
	return out
}

// SampleOf is a stored sample as the API answers it.
func SampleOf(m store.BenchSample) apitype.BenchSampleJSON {
	return apitype.BenchSampleJSON{RunID: m.RunID, Test: m.Test, Env: m.Env, Repeat: m.Repeat, WallSeconds: m.WallSeconds,
		PeakManaged: m.PeakManaged, PeakUnmanaged: m.PeakUnmanaged, AvgManaged: m.AvgManaged, AvgUnmanaged: m.AvgUnmanaged,
		Spilled: m.Spilled, Transferred: m.Transferred, CPUSeconds: m.CPUSeconds, Status: m.Status, Error: m.Error, At: m.At.UTC()}
}

// PointOf is a stored point of a test's history as the API answers it.
func PointOf(p store.BenchPoint) apitype.BenchPointJSON {
	return apitype.BenchPointJSON{BenchSampleJSON: SampleOf(p.BenchSample), Owner: p.Owner, Suite: p.Suite,
		EnvName: p.EnvName, EnvHash: p.EnvHash, RunStartedAt: p.StartedAt.UTC()}
}
