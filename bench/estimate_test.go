package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type fixedPrice struct {
	usd      float64
	err      error
	seen     map[string]any
	provider string
}

func (p *fixedPrice) Provider() string { return p.provider }

func (p *fixedPrice) ClusterPrice(_ context.Context, options map[string]any) (float64, error) {
	p.seen = options
	return p.usd, p.err
}

type fixedHistory map[string]float64

func (h fixedHistory) SampleSeconds(_ context.Context, suite string, tests []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, t := range tests {
		if s, ok := h[suite+"/"+t]; ok {
			out[t] = s
		}
	}
	return out, nil
}

// startedHistory also says how long the suite's last runs took to start.
type startedHistory struct {
	fixedHistory
	start float64
	runs  int
}

func (h startedHistory) StartSeconds(_ context.Context, suite string) (float64, int, error) {
	if suite != "s" {
		return 0, 0, nil
	}
	return h.start, h.runs, nil
}

// TestPrepareEstimatesAndRefuses: the estimate is the clusters' price x
// (the start allowance + every sample at its history's time, or at the
// timeout without one), and --max-cost refuses above it, or when there
// is no price to judge by, saying how the estimate was made.
func TestPrepareEstimatesAndRefuses(t *testing.T) {
	requirePython(t)
	suite := t.TempDir()
	if err := os.WriteFile(filepath.Join(suite, "bench_a.py"), []byte("def bench_x(client):\n    pass\n\n\ndef bench_y(client):\n    pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	x, y := "bench_a.py::bench_x", "bench_a.py::bench_y"
	base := Config{Suite: suite, SuiteName: "s", Envs: []Env{{Label: "A", Python: testPython}}, Repeat: 2, Workers: 3,
		Shape: map[string]any{"worker_threads": 2}, Timeout: time.Minute, TypicalStarts: map[string]time.Duration{"ec2": 3 * time.Minute}}
	for _, tc := range []struct {
		name     string
		null     bool
		price    *fixedPrice
		history  History
		maxCost  float64
		wantCost float64
		wantErr  []string // substrings; nil: accepted
		wantHow  string
	}{
		// 2 tests x 2 repeats x 1 min + 1 min to start = 5 min at $60/h.
		{name: "no history, under", price: &fixedPrice{usd: 60}, maxCost: 6, wantCost: 5, wantHow: "at --timeout 1m0s each"},
		{name: "no history, over", price: &fixedPrice{usd: 60}, maxCost: 4, wantCost: 5,
			wantErr: []string{"refused by --max-cost", "$5.00", "more than --max-cost $4.00", "nothing was started", "1 cluster x $60/h", "--timeout"}},
		// Two sets (A/A): twice the clusters and twice the samples: 2 x (1 + 8) min.
		{name: "null doubles", null: true, price: &fixedPrice{usd: 60}, maxCost: 17, wantCost: 18,
			wantErr: []string{"$18.00", "2 clusters x $60/h"}},
		// History: 4 samples x 3 s + 1 min.
		{name: "history", price: &fixedPrice{usd: 60}, history: fixedHistory{"s/" + x: 3, "s/" + y: 3}, maxCost: 1.3, wantCost: 1.2,
			wantHow: "timed from the suite's history"},
		{name: "history of another suite", price: &fixedPrice{usd: 60}, history: fixedHistory{"other/" + x: 3}, maxCost: 4, wantCost: 5,
			wantErr: []string{"$5.00"}},
		{name: "partial history", price: &fixedPrice{usd: 60}, history: fixedHistory{"s/" + x: 3}, maxCost: 10, wantCost: 1.0 / 60 * (60 + 6 + 120),
			wantHow: "1 benchmarks timed from the suite's history, 1 without history at --timeout 1m0s"},
		{name: "no price without limit", price: &fixedPrice{err: errors.New("404 not found")}, maxCost: 0},
		{name: "no price with limit", price: &fixedPrice{err: errors.New("404 not found")}, maxCost: 1,
			wantErr: []string{"refused by --max-cost", "cannot be estimated", "404 not found"}},
		{name: "no pricer with limit", maxCost: 1, wantErr: []string{"refused by --max-cost", "cannot be estimated"}},
		{name: "free", price: &fixedPrice{usd: 0}, maxCost: 0.01, wantHow: "$0/h (the gateway has no price for them"},
		// The start: the backend's typical time without history (3 min on
		// EC2: 4 x 1 min + 3 min), the suite's last runs' with it (4 x 3 s
		// + 90 s).
		{name: "ec2 start", price: &fixedPrice{usd: 60, provider: "ec2"}, maxCost: 8, wantCost: 7,
			wantHow: "3m0s to start (typical of ec2 until the suite has history)"},
		{name: "start from history", price: &fixedPrice{usd: 60, provider: "ec2"}, history: startedHistory{fixedHistory{"s/" + x: 3, "s/" + y: 3}, 90, 4},
			maxCost: 2, wantCost: 1.7, wantHow: "1m30s to start (as the suite's last 4 runs took)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			cfg.Null, cfg.MaxCost = tc.null, tc.maxCost
			if tc.price != nil {
				cfg.Prices = tc.price
			}
			if tc.history != nil {
				cfg.History = tc.history
			}
			p, err := Prepare(context.Background(), cfg)
			if tc.wantErr != nil {
				if !errors.Is(err, ErrOverBudget) {
					t.Fatalf("Prepare: %v, want ErrOverBudget", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("the refusal %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if len(p.Tests) != 2 {
				t.Fatalf("tests %v", p.Tests)
			}
			if d := p.Estimate.Cost - tc.wantCost; d > 1e-9 || d < -1e-9 {
				t.Errorf("cost %v, want %v (%s)", p.Estimate.Cost, tc.wantCost, p.Estimate)
			}
			if !strings.Contains(p.Estimate.How(), tc.wantHow) {
				t.Errorf("estimate %q does not say %q", p.Estimate.How(), tc.wantHow)
			}
			if tc.price != nil && tc.price.err == nil {
				if tc.price.seen["workers"] != 3 || tc.price.seen["worker_threads"] != 2 {
					t.Errorf("priced with options %v, want the run's shape", tc.price.seen)
				}
			}
		})
	}
}

// TestPrepareInCluster: a run whose suite is listed in its clusters is
// estimated before they start by their start alone (3 min of EC2 at
// $60/h = $3), which --max-cost still refuses above it; nothing is
// listed here.
func TestPrepareInCluster(t *testing.T) {
	inCluster := &InCluster{}
	for _, tc := range []struct {
		maxCost float64
		refused bool
	}{{2, true}, {4, false}, {0, false}} {
		cfg := Config{Suite: "/nonexistent", SuiteName: "s", Envs: []Env{{Label: "A"}}, Repeat: 2, Workers: 1, Timeout: time.Minute,
			MaxCost: tc.maxCost, Prices: &fixedPrice{usd: 60, provider: "ec2"}, InCluster: inCluster,
			TypicalStarts: map[string]time.Duration{"ec2": 3 * time.Minute}}
		p, err := Prepare(context.Background(), cfg)
		if tc.refused {
			if !errors.Is(err, ErrOverBudget) || !strings.Contains(err.Error(), "starting the clusters alone is estimated at $3.00") {
				t.Errorf("max-cost %v: %v, want refused for the start alone", tc.maxCost, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("max-cost %v: %v", tc.maxCost, err)
		}
		if len(p.Tests) != 0 || p.Estimate.Start != 3*time.Minute || p.Estimate.Cost != 3 {
			t.Errorf("max-cost %v: plan %+v", tc.maxCost, p)
		}
	}
}
