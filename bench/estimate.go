package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"
)

// StartAllowance is the time an estimate counts for the clusters to start
// before the first sample (they are paid for while they start) when
// neither the suite's history nor the backend says better.
const StartAllowance = time.Minute

// StartHistory is an optional part of History: how long the suite's last
// runs took from their start to their first sample (their clusters
// starting with every worker, and the runners connecting): the median,
// and over how many runs.
type StartHistory interface {
	StartSeconds(ctx context.Context, suite string) (median float64, runs int, err error)
}

// ProviderNamer is an optional part of Pricer: the backend of the
// clusters it priced ("" before it priced any).
type ProviderNamer interface {
	Provider() string
}

// Pricer prices a cluster before it exists: USD per hour of the whole
// cluster (scheduler and workers) with these options, as the usage ledger
// will price it; zero when the gateway has no prices.
type Pricer interface {
	ClusterPrice(ctx context.Context, options map[string]any) (float64, error)
}

// History gives the typical time of one sample of each test, from the
// suite's stored results; tests without history are left out.
type History interface {
	SampleSeconds(ctx context.Context, suite string, tests []string) (map[string]float64, error)
}

// ErrOverBudget is a run whose estimated cost exceeds --max-cost.
var ErrOverBudget = errors.New("refused by --max-cost")

// Estimate is a run's expected time and cost, made before any cluster
// starts.
type Estimate struct {
	Clusters    int           // one per set
	PriceHour   float64       // one cluster's, USD per hour; 0: no price
	Priced      bool          // the gateway answered a price (maybe 0)
	Samples     int           // every test × set × repeat
	Sampling    time.Duration // the samples, one after another
	Start       time.Duration // allowance for the clusters to start
	StartFrom   string        // how Start was found
	FromHistory int           // tests timed from the suite's history
	Assumed     int           // tests counted at Default
	Default     time.Duration // a sample without history: the per-sample timeout
	Cost        float64       // USD
}

// Duration is how long the clusters are expected to run.
func (e Estimate) Duration() time.Duration { return e.Start + e.Sampling }

// How says what the estimate is made of.
func (e Estimate) How() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d cluster", e.Clusters)
	if e.Clusters != 1 {
		b.WriteString("s")
	}
	switch {
	case e.Priced && e.PriceHour == 0:
		b.WriteString(" x $0/h (the gateway has no price for them: pricing.* is not set)")
	case e.Priced:
		fmt.Fprintf(&b, " x $%.4g/h", e.PriceHour)
	}
	from := ""
	if e.StartFrom != "" {
		from = " (" + e.StartFrom + ")"
	}
	fmt.Fprintf(&b, " x ~%s (%s to start%s, then %d samples", e.Duration().Round(time.Second), e.Start, from, e.Samples)
	switch {
	case e.Samples == 0:
		b.WriteString(": counted once the clusters have listed the suite)")
	case e.Assumed == 0:
		fmt.Fprintf(&b, " timed from the suite's history)")
	case e.FromHistory == 0:
		fmt.Fprintf(&b, " at --timeout %s each, an upper bound: the suite has no history yet; the first pass of each benchmark times it)", e.Default)
	default:
		fmt.Fprintf(&b, "; %d benchmarks timed from the suite's history, %d without history at --timeout %s a sample, an upper bound until the first pass times them)", e.FromHistory, e.Assumed, e.Default)
	}
	return b.String()
}

// String is the estimate as progress shows it. Benchmarks without
// history are counted at the per-sample timeout: the figure is then a
// bound, said as such, until the first pass times them.
func (e Estimate) String() string {
	if e.Assumed > 0 && e.Samples > 0 {
		cost := "cost unknown"
		if e.Priced {
			cost = "at most ~" + usd(e.Cost)
		}
		return fmt.Sprintf("Estimate: at most ~%s, %s, until one pass of each benchmark is timed: %s", e.Duration().Round(time.Second), cost, e.How())
	}
	if !e.Priced {
		return fmt.Sprintf("Estimate: ~%s, cost unknown: %s", e.Duration().Round(time.Second), e.How())
	}
	return fmt.Sprintf("Estimate: ~%s, ~%s: %s", e.Duration().Round(time.Second), usd(e.Cost), e.How())
}

// Plan is what a run will do, known before any cluster starts.
type Plan struct {
	Listing  Listing
	Tests    []string // the benchmarks to run (after -k)
	Sets     int
	Estimate Estimate
}

// Prepare lists the suite and estimates the run's time and cost (the
// clusters' price from cfg.Prices, each sample's time from cfg.History,
// else cfg.Timeout). With cfg.MaxCost set it refuses, with ErrOverBudget
// and how the estimate was made, a run estimated above it, or one it
// cannot price. Run calls it unless cfg.Plan is given.
func Prepare(ctx context.Context, cfg Config) (*Plan, error) {
	cfg.defaults()
	if len(cfg.Envs) == 0 {
		return nil, errors.New("bench: no environment to run")
	}
	python := ""
	for _, e := range cfg.Envs {
		if e.Err == nil {
			python = e.Python
			break
		}
	}
	if python == "" {
		python = cfg.Envs[0].Python
	}
	p := &Plan{Sets: len(cfg.Envs)}
	if cfg.Null {
		p.Sets++
	}
	if cfg.InCluster != nil {
		// Listed in the clusters (Run): until then the estimate counts
		// only their start, and the run's own checks do the rest.
		est, err := estimate(ctx, cfg, p)
		if err == nil && cfg.MaxCost > 0 && est.Priced && est.Cost > cfg.MaxCost {
			err = fmt.Errorf("%w: starting the clusters alone is estimated at $%.2f, more than --max-cost $%.2f, so nothing was started. The estimate: %s",
				ErrOverBudget, est.Cost, cfg.MaxCost, est.How())
		}
		p.Estimate = est
		return p, err
	}
	listing, err := List(ctx, python, cfg.Suite)
	if err != nil {
		return nil, err
	}
	p.Listing, p.Tests = listing, listing.Select(cfg.Pattern)
	if len(p.Tests) == 0 && len(listing.Errors) == 0 {
		if cfg.Pattern != nil {
			return nil, fmt.Errorf("%w: none of the suite's %d benchmarks matches -k %s", ErrNoBenchmarks, len(listing.Benchmarks), cfg.Pattern)
		}
		return nil, fmt.Errorf("%w: %s has no bench_*.py file with a bench_<name>(client) function", ErrNoBenchmarks, cfg.Suite)
	}
	est, err := estimate(ctx, cfg, p)
	if err != nil {
		return nil, err
	}
	p.Estimate = est
	if cfg.MaxCost > 0 {
		if !est.Priced {
			return nil, fmt.Errorf("%w: the run's cost cannot be estimated without the clusters' price: leave out --max-cost", ErrOverBudget)
		}
		if est.Cost > cfg.MaxCost {
			hint := "run fewer repeats or benchmarks (-k), or smaller clusters"
			if est.Assumed > 0 {
				hint += ", or give a --timeout closer to what a sample takes (benchmarks without history count at --timeout)"
			}
			return nil, fmt.Errorf("%w: the run is estimated at $%.2f, more than --max-cost $%.2f, so nothing was started. The estimate: %s. To fit, %s",
				ErrOverBudget, est.Cost, cfg.MaxCost, est.How(), hint)
		}
	}
	return p, nil
}

func estimate(ctx context.Context, cfg Config, p *Plan) (Estimate, error) {
	e := Estimate{Clusters: p.Sets, Samples: len(p.Tests) * p.Sets * cfg.Repeat, Default: cfg.Timeout}
	var typical map[string]float64
	if cfg.History != nil {
		// Without history the estimate is only larger: not a reason to stop.
		typical, _ = cfg.History.SampleSeconds(ctx, cfg.SuiteName, p.Tests)
	}
	var perRound time.Duration // one repeat of every test in one set
	for _, t := range p.Tests {
		if s, ok := typical[t]; ok && s > 0 {
			e.FromHistory++
			perRound += time.Duration(s * float64(time.Second))
		} else {
			e.Assumed++
			perRound += cfg.Timeout
		}
	}
	e.Sampling = perRound * time.Duration(p.Sets*cfg.Repeat)
	if cfg.Prices != nil {
		price, err := cfg.Prices.ClusterPrice(ctx, clusterOptions(cfg, nil))
		switch {
		case err != nil && cfg.MaxCost > 0:
			return e, fmt.Errorf("%w: the run's cost cannot be estimated: %w", ErrOverBudget, err)
		case err == nil:
			e.PriceHour, e.Priced = price, true
		}
	}
	e.Start, e.StartFrom = startAllowance(ctx, cfg)
	if e.Priced {
		e.Cost = e.PriceHour * float64(e.Clusters) * e.Duration().Hours()
	}
	return e, nil
}

// startAllowance is how long the clusters are expected to take to start:
// as the suite's last runs did, else the backend's typical time, else
// StartAllowance.
func startAllowance(ctx context.Context, cfg Config) (time.Duration, string) {
	if sh, ok := cfg.History.(StartHistory); ok {
		if s, n, err := sh.StartSeconds(ctx, cfg.SuiteName); err == nil && n > 0 && s > 0 {
			runs := "runs"
			if n == 1 {
				runs = "run"
			}
			return time.Duration(s * float64(time.Second)).Round(time.Second), fmt.Sprintf("as the suite's last %d %s took", n, runs)
		}
	}
	provider := cfg.Provider
	if pn, ok := cfg.Prices.(ProviderNamer); ok && provider == "" {
		provider = pn.Provider()
	}
	if d, ok := cfg.TypicalStarts[provider]; ok && d > 0 {
		return d, "typical of " + provider + " until the suite has history"
	}
	return StartAllowance, ""
}

// clusterOptions are a set's cluster options: the shared shape, the
// set's software, the workers.
func clusterOptions(cfg Config, software map[string]any) map[string]any {
	opts := map[string]any{}
	maps.Copy(opts, cfg.Shape)
	maps.Copy(opts, software)
	opts["workers"] = cfg.Workers
	return opts
}
