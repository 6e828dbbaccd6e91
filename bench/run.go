package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/bench/report"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/stats"
)

// Sample statuses.
const (
	StatusOK      = "ok"      // the benchmark returned
	StatusError   = "error"   // the benchmark raised
	StatusTimeout = "timeout" // it ran past the per-sample timeout
	StatusFailed  = "failed"  // its file did not import, or its cluster or environment failed
	StatusSkipped = "skipped" // the run stopped before it
)

// Run statuses.
const (
	RunDone    = "done"
	RunFailed  = "failed"  // nothing could run
	RunStopped = "stopped" // interrupted (Ctrl-C, the gateway stopping)
	RunRefused = "refused" // the cost estimate exceeded the limit
	RunPartial = "partial" // some samples failed (more than PartialOver of them: failed)
)

// FailedOver is the share of failed samples beyond which a run that
// went to its end is failed rather than partial.
const FailedOver = 0.5

// Env is one set of the comparison: an environment, the options that
// make a cluster run it, and the Python the runner uses for it (the
// client must run the cluster's software).
type Env struct {
	Label    string            // A, B, and A2 for the null run's second A
	Name     string            // as the user named it
	Options  map[string]any    // the software's cluster options (env, image, client_env)
	Python   string            // the runner's interpreter
	Hash     string            // the environment's hash, when built by the gateway
	Versions map[string]string // key package versions
	Err      error             // the environment could not be prepared (build failed)
}

// Clusters is the part of the gateway's API a run uses; *client.Client
// has it.
type Clusters interface {
	Create(ctx context.Context, options clusteropts.Request) (string, error)
	Get(ctx context.Context, name string) (*apitype.ClusterDetail, error)
	Scale(ctx context.Context, name string, n int) (string, error)
	Stop(ctx context.Context, name string) error
}

// RunInfo describes a run for the record.
type RunInfo struct {
	Suite    string
	Envs     []Env
	Workers  int
	Shape    map[string]any
	Repeat   int
	Null     bool
	Provider string
	Region   string
	Started  time.Time
	Tests    []string
}

// Sample is one run of one benchmark in one set.
type Sample struct {
	Test    string
	Set     string
	Repeat  int // 1-based; 0 for a file that did not import
	Status  string
	Error   string
	WallS   float64
	Metrics map[string]float64
	Started time.Time
	Cluster string
}

// Recorder keeps what a run did: the store, through the API.
type Recorder interface {
	StartRun(ctx context.Context, info RunInfo) (string, error)
	AddSamples(ctx context.Context, runID string, s []Sample) error
	FinishRun(ctx context.Context, runID, status, message string) error
}

// CostMeter reports what some of the caller's clusters cost since a time
// (the usage ledger's estimate), for --max-cost during the run.
type CostMeter interface {
	CostSince(ctx context.Context, since time.Time, clusters []string) (float64, error)
}

// Config is one run.
type Config struct {
	Suite     string // folder of bench_*.py
	SuiteName string // for the record (default: the folder's name)
	Envs      []Env
	Null      bool // also run the first environment a second time, as its own set
	Repeat    int
	// Precision, when set (0.05 is ±5 %), makes repeats adaptive: after
	// Repeat rounds, a benchmark goes on until the 95 % intervals of its
	// comparisons (A against B, A against A2; alone: of A's median) are
	// narrower than ±Precision, or MaxRepeat rounds.
	Precision    float64
	MaxRepeat    int
	Workers      int
	Shape        map[string]any // worker options shared by every set
	Pattern      *regexp.Regexp // only tests whose id matches
	Timeout      time.Duration  // per sample
	StartTimeout time.Duration  // for clusters to run with all their workers
	MaxCost      float64        // USD; 0: no limit (see Prepare)
	StopWait     time.Duration  // how long to wait for the clusters to stop at the end; 3 min
	Clusters     Clusters
	Recorder     Recorder
	Cost         CostMeter // optional: what the run's clusters cost so far
	Prices       Pricer    // optional: the clusters' price, for the estimate
	History      History   // optional: the suite's sample times, for the estimate
	Plan         *Plan     // from Prepare; nil: Run prepares
	Progress     io.Writer
	RunnerLog    io.Writer // the runners' stderr (benchmarks' output); nil drops it
	Provider     string
	Region       string
	Now          func() time.Time
	// TypicalStarts is, per backend (the provider's name), what an
	// estimate counts for its clusters to start with their workers when
	// the suite has no history: the backends' registrations say.
	TypicalStarts map[string]time.Duration

	// InCluster, when set, runs each set's runner next to its cluster's
	// scheduler (the bench agent), in the cluster's own Python, instead of
	// with Env.Python here. The suite goes there, and is listed there, by
	// the first runner that starts.
	InCluster *InCluster
}

// InCluster is how a run reaches its clusters' bench agents: through the
// gateway's dashboard proxy (HTTP, as Token's owner), with the suite as
// a zip (schedspec.PackSuite).
type InCluster struct {
	Token    string
	HTTP     *http.Client
	SuiteZip []byte
}

func (cfg *Config) defaults() {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Repeat < 1 {
		cfg.Repeat = 1
	}
	if cfg.Precision > 0 && cfg.MaxRepeat < cfg.Repeat {
		cfg.MaxRepeat = max(cfg.Repeat, 30)
	}
	if cfg.Precision <= 0 {
		cfg.MaxRepeat = cfg.Repeat
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Minute
	}
	if cfg.StopWait <= 0 {
		cfg.StopWait = 3 * time.Minute
	}
}

// Outcome is what a run did.
type Outcome struct {
	RunID    string
	Status   string
	Message  string
	Samples  []Sample
	Clusters []string // every cluster it started (all stopped when Run returns)
	// StopErrors are clusters that could not be stopped, by name.
	StopErrors map[string]error
}

// Failed counts samples that were not ok.
func (o Outcome) Failed() int {
	n := 0
	for _, s := range o.Samples {
		if s.Status != StatusOK {
			n++
		}
	}
	return n
}

// set is an environment's live state during a run.
type set struct {
	Env
	cluster string
	conn    Conn
	agent   *Agent // InCluster runs
	runner  *runner
	listing Listing // what its runner found in the suite
	err     error   // the set cannot go on: every later sample is failed with it
}

// ErrNoBenchmarks is a suite (or -k pattern) with nothing to run.
var ErrNoBenchmarks = errors.New("no benchmarks to run")

// Run runs the suite on one cluster per set, interleaving the sets, and
// stops every cluster it started before returning, whatever happened.
func Run(ctx context.Context, cfg Config) (out Outcome, err error) {
	cfg.defaults()
	plan := cfg.Plan
	if plan == nil {
		if plan, err = Prepare(ctx, cfg); err != nil {
			return out, err
		}
	} else if cfg.MaxCost > 0 && plan.Estimate.Priced && plan.Estimate.Cost > cfg.MaxCost {
		return out, fmt.Errorf("%w: the run is estimated at $%.2f, over --max-cost $%.2f: %s", ErrOverBudget, plan.Estimate.Cost, cfg.MaxCost, plan.Estimate.How())
	}
	sets := make([]*set, 0, len(cfg.Envs)+1)
	for _, e := range cfg.Envs {
		sets = append(sets, &set{Env: e, err: e.Err})
	}
	if cfg.Null {
		a := cfg.Envs[0]
		a.Label += "2"
		sets = append(sets, &set{Env: a, err: a.Err})
	}
	listing, tests := plan.Listing, plan.Tests

	start := cfg.Now()
	info := RunInfo{Suite: cfg.SuiteName, Workers: cfg.Workers, Shape: cfg.Shape, Repeat: cfg.Repeat, Null: cfg.Null,
		Provider: cfg.Provider, Region: cfg.Region, Started: start, Tests: tests}
	for _, s := range sets {
		info.Envs = append(info.Envs, s.Env)
	}
	out.RunID, err = cfg.Recorder.StartRun(ctx, info)
	if err != nil {
		return out, fmt.Errorf("recording the run: %w", err)
	}
	if cfg.InCluster != nil {
		fmt.Fprintf(cfg.Progress, "Run %s: the benchmarks the clusters list x %d sets x %d repeats\n", out.RunID, len(sets), cfg.Repeat)
	} else {
		fmt.Fprintf(cfg.Progress, "Run %s: %d benchmarks x %d sets x %d repeats\n", out.RunID, len(tests), len(sets), cfg.Repeat)
	}
	fmt.Fprintln(cfg.Progress, plan.Estimate)
	r := &run{cfg: cfg, out: &out, sets: sets, start: start, est: plan.Estimate}
	r.lease = holdRun(ctx, cfg.Recorder, out.RunID, r.clusters, func(m string) { fmt.Fprintln(cfg.Progress, m) })
	r.fileErrors(ctx, listing.Errors)

	defer func() {
		for _, s := range sets {
			if s.runner != nil {
				s.runner.close()
			}
		}
		out.StopErrors = r.stopAll()
		r.lease.end()
		if out.Status == "" {
			out.Status = RunDone
		}
		status, msg := out.Status, out.Message
		// The run's end is recorded even when the caller gave up.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if ferr := cfg.Recorder.FinishRun(fctx, out.RunID, status, msg); ferr != nil && err == nil {
			err = fmt.Errorf("recording the run's end: %w", ferr)
		}
	}()

	r.startClusters(ctx)
	r.sampling = cfg.Now()
	if ctx.Err() != nil {
		out.Status, out.Message = RunStopped, "interrupted while the clusters started"
		return out, ctx.Err()
	}
	if cfg.InCluster != nil {
		// Listed where it runs, by the first runner that started.
		if tests, err = r.listed(ctx, plan); err != nil {
			out.Status, out.Message = RunFailed, err.Error()
			if errors.Is(err, ErrNoBenchmarks) {
				return out, err
			}
			return out, nil // what failed is in the samples
		}
	}
	total := len(tests) * len(sets) * cfg.MaxRepeat // at most, when adaptive
	done := 0
	if r.noneRuns() {
		// Every sample fails the same way: recorded, said once above.
		fmt.Fprintf(cfg.Progress, "No set can run: its %d samples are recorded as failed\n", total)
		for rep := 1; rep <= cfg.Repeat; rep++ {
			for _, test := range tests {
				for _, s := range sets {
					r.sample(ctx, s, test, rep)
				}
			}
		}
		out.Status, out.Message = RunFailed, "no set could run: "+brief(sets[0].err.Error())
		return out, nil
	}
	round := tests // the benchmarks still sampled
	for rep := 1; rep <= cfg.MaxRepeat && len(round) > 0; rep++ {
		for ti, test := range round {
			for _, s := range r.order(rep, ti) {
				if ctx.Err() != nil {
					r.skipRest(ctx, round, rep, test, s.Label)
					out.Status, out.Message = RunStopped, "interrupted"
					return out, ctx.Err()
				}
				smp := r.sample(ctx, s, test, rep)
				done++
				over := r.progress(ctx, smp, done, total)
				if over != "" {
					out.Status, out.Message = RunRefused, over
					fmt.Fprintln(cfg.Progress, "Stopping: "+over)
					r.skipRestAfter(ctx, round, rep, test, s.Label)
					return out, nil
				}
			}
		}
		if cfg.Precision > 0 && rep >= cfg.Repeat && rep < cfg.MaxRepeat {
			next := r.unsettled(round)
			if len(next) < len(round) {
				fmt.Fprintf(cfg.Progress, "After %d rounds: %d benchmarks known within ±%.1f%%; %d go on (at most %d rounds)\n",
					rep, len(round)-len(next), cfg.Precision*100, len(next), cfg.MaxRepeat)
			}
			round = next
			total = done + len(round)*len(sets)*(cfg.MaxRepeat-rep)
		}
		if rep == 1 && r.est.Assumed > 0 && done < total {
			// The estimate counted benchmarks without history at the
			// timeout: the first pass has timed each of them.
			fmt.Fprintf(r.cfg.Progress, "Estimate from one timed pass of each benchmark (%d samples in %s): ~%s left\n",
				done, r.cfg.Now().Sub(r.sampling).Round(time.Second), r.left(done, total).Round(time.Second))
		}
	}
	out.Status, out.Message = finalStatus(out)
	return out, nil
}

// unsettled is the benchmarks of round whose intervals are still wider
// than ±Precision: A against B, A against A2, or (one set) A's median.
func (r *run) unsettled(round []string) []string {
	vals := map[string]map[string][]float64{}
	for _, s := range r.out.Samples {
		if s.Status != StatusOK {
			continue
		}
		if vals[s.Test] == nil {
			vals[s.Test] = map[string][]float64{}
		}
		vals[s.Test][s.Set] = append(vals[s.Test][s.Set], s.WallS)
	}
	var out []string
	for _, t := range round {
		v := vals[t]
		var widths []float64
		if r.has("B") {
			widths = append(widths, stats.HalfWidth(v["A"], v["B"], 1000, 0.95, 1))
		}
		if r.has("A2") {
			widths = append(widths, stats.HalfWidth(v["A"], v["A2"], 1000, 0.95, 2))
		}
		if len(widths) == 0 {
			widths = append(widths, stats.HalfWidth(v["A"], nil, 1000, 0.95, 3))
		}
		for _, w := range widths {
			if math.IsNaN(w) || w > r.cfg.Precision {
				out = append(out, t)
				break
			}
		}
	}
	return out
}

// has is whether the run has a set of this label.
func (r *run) has(label string) bool {
	for _, s := range r.sets {
		if s.Label == label {
			return true
		}
	}
	return false
}

// finalStatus is the status of a run that went to its end: done when
// every sample succeeded, partial when some failed, failed when more
// than FailedOver of them did.
func finalStatus(out Outcome) (string, string) {
	failed, n := out.Failed(), len(out.Samples)
	switch {
	case failed == 0:
		return RunDone, ""
	case failed == n:
		return RunFailed, "no sample succeeded"
	case float64(failed) > FailedOver*float64(n):
		return RunFailed, fmt.Sprintf("%d of %d samples failed (more than %.0f%%)", failed, n, FailedOver*100)
	}
	return RunPartial, fmt.Sprintf("%d of %d samples failed", failed, n)
}

// order is the sets in the order they run test ti of round rep: rotated
// by one each test and each round, so that no set always goes first (a
// warm cache or a slow neighbour favours no set). Samples record when
// each ran.
func (r *run) order(rep, ti int) []*set {
	n := len(r.sets)
	out := make([]*set, n)
	for i := range out {
		out[i] = r.sets[(i+rep-1+ti)%n]
	}
	return out
}

// listed is the tests of an InCluster run, from what its first runner
// found in the suite; files that do not import are recorded as failed.
// With no runner up, every set is recorded as failed once, under the
// suite's name.
func (r *run) listed(ctx context.Context, plan *Plan) ([]string, error) {
	for _, s := range r.sets {
		if s.runner == nil {
			continue
		}
		plan.Listing, plan.Tests = s.listing, s.listing.Select(r.cfg.Pattern)
		r.fileErrors(ctx, s.listing.Errors)
		if len(plan.Tests) == 0 && len(s.listing.Errors) == 0 {
			return nil, fmt.Errorf("%w: the suite has no bench_*.py file with a bench_<name>(client) function that matches", ErrNoBenchmarks)
		}
		fmt.Fprintf(r.cfg.Progress, "%d benchmarks found in the suite next to the scheduler\n", len(plan.Tests))
		if est, err := estimate(ctx, r.cfg, plan); err == nil {
			r.est = est
			fmt.Fprintln(r.cfg.Progress, est)
		}
		return plan.Tests, nil
	}
	why := "its runner did not start"
	for i, s := range r.sets {
		if s.err != nil {
			if i == 0 {
				why = s.err.Error()
			}
			r.record(ctx, Sample{Test: r.cfg.SuiteName, Set: s.Label, Status: StatusFailed, Error: clip(s.err.Error()), Started: r.cfg.Now(), Cluster: s.cluster})
		}
	}
	return nil, errors.New("no set could run: " + brief(why))
}

// fileErrors records each suite file that does not import as a failed
// sample of every set.
func (r *run) fileErrors(ctx context.Context, errs []FileError) {
	for _, fe := range errs {
		fmt.Fprintf(r.cfg.Progress, "  %s does not import: %s\n", fe.File, fe.Error)
		for _, s := range r.sets {
			r.record(ctx, Sample{Test: fe.File, Set: s.Label, Status: StatusFailed, Error: "the file does not import: " + fe.Error, Started: r.cfg.Now()})
		}
	}
}

// noneRuns is whether no set can run a sample.
func (r *run) noneRuns() bool {
	for _, s := range r.sets {
		if s.err == nil {
			return false
		}
	}
	return true
}

type run struct {
	cfg      Config
	out      *Outcome
	sets     []*set
	start    time.Time
	sampling time.Time // when the clusters were up: the time left is estimated from here
	est      Estimate
	mu       sync.Mutex
	lease    *lease // nil: the recorder holds no lease
}

// clusters are the clusters the run started so far.
func (r *run) clusters() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.out.Clusters)
}

func (r *run) record(ctx context.Context, s Sample) {
	r.out.Samples = append(r.out.Samples, s)
	if err := r.cfg.Recorder.AddSamples(ctx, r.out.RunID, []Sample{s}); err != nil {
		fmt.Fprintf(r.cfg.Progress, "  could not record a sample of %s: %v\n", s.Test, err)
	}
}

// startClusters creates one cluster per set at once and waits for each
// to run with its workers. A set whose cluster cannot start has err set.
func (r *run) startClusters(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range r.sets {
		if s.err != nil {
			// Said in full where it happened (the build's output).
			fmt.Fprintf(r.cfg.Progress, "  %s (%s): cannot run: %s\n", s.Label, s.Name, brief(s.err.Error()))
			continue
		}
		opts := map[string]any{}
		maps.Copy(opts, r.cfg.Shape)
		maps.Copy(opts, s.Options)
		opts["workers"] = r.cfg.Workers
		var name string
		req, err := clusteropts.RequestFrom(opts)
		if err == nil {
			name, err = r.cfg.Clusters.Create(ctx, req)
		}
		if err != nil {
			s.err = fmt.Errorf("its cluster could not be created: %w", err)
			fmt.Fprintf(r.cfg.Progress, "  %s (%s): %v\n", s.Label, s.Name, s.err)
			continue
		}
		s.cluster = name
		r.mu.Lock()
		r.out.Clusters = append(r.out.Clusters, name)
		r.mu.Unlock()
		r.lease.renew(ctx, r.clusters()) // held by the gateway before it is waited for
		fmt.Fprintf(r.cfg.Progress, "  %s (%s): cluster %s\n", s.Label, s.Name, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.connect(ctx, s); err != nil {
				s.err = err
				fmt.Fprintf(r.cfg.Progress, "  %s (%s): %v\n", s.Label, s.Name, err)
			}
		}()
	}
	wg.Wait()
}

// connect waits for the set's cluster and starts its runner.
func (r *run) connect(ctx context.Context, s *set) error {
	d, err := waitWorkers(ctx, r.cfg.Clusters, s.cluster, r.cfg.Workers, r.cfg.StartTimeout)
	if err != nil {
		return err
	}
	if d.TLSCert == nil || d.TLSKey == nil || d.SchedulerAddress == "" {
		return fmt.Errorf("cluster %s: the gateway gave no connection details", s.cluster)
	}
	s.conn = Conn{Address: d.SchedulerAddress, ServerName: d.ServerName, Cert: *d.TLSCert, Key: *d.TLSKey}
	var rn *runner
	var l Listing
	if ic := r.cfg.InCluster; ic != nil {
		s.agent, err = AgentFor(d, ic.Token, ic.HTTP)
		if err == nil {
			rn, l, err = startAgentRunner(ctx, s.agent, ic.SuiteZip, r.cfg.RunnerLog)
		}
	} else {
		rn, l, err = startRunner(ctx, s.Python, r.cfg.Suite, s.conn, r.cfg.RunnerLog)
	}
	if err != nil {
		return fmt.Errorf("cluster %s: %w", s.cluster, err)
	}
	s.runner, s.listing = rn, l
	if s.Versions == nil {
		s.Versions = l.Versions
	}
	return nil
}

// waitWorkers polls a cluster until it runs with n workers.
func waitWorkers(ctx context.Context, c Clusters, name string, n int, timeout time.Duration) (*apitype.ClusterDetail, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		d, err := c.Get(ctx, name)
		if err == nil {
			switch d.Status {
			case "FAILED", "STOPPED", "STOPPING":
				return nil, fmt.Errorf("cluster %s %s: %s", name, d.Status, d.Reason)
			case "RUNNING":
				if d.Workers.Ready == n {
					return d, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return nil, fmt.Errorf("cluster %s: %w", name, err)
			}
			return nil, fmt.Errorf("cluster %s did not run with %d workers within %s", name, n, timeout)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// sample runs one benchmark once in one set and records it.
func (r *run) sample(ctx context.Context, s *set, test string, rep int) Sample {
	smp := Sample{Test: test, Set: s.Label, Repeat: rep, Started: r.cfg.Now(), Cluster: s.cluster}
	defer func() { r.record(context.WithoutCancel(ctx), smp) }()
	if s.err != nil {
		smp.Status, smp.Error = StatusFailed, s.err.Error()
		return smp
	}
	res, err := s.runner.do(ctx, test, r.cfg.Timeout)
	switch {
	case err == nil:
		smp.WallS, smp.Metrics = res.WallS, res.Metrics
		smp.Status = StatusOK
		if !res.OK {
			smp.Status, smp.Error = StatusError, clip(res.Error)
		}
		if res.Connected != nil && !*res.Connected {
			// The client lost its scheduler: the cluster failed, or the
			// connection broke and a new runner reconnects.
			s.runner.kill()
			s.runner = nil
			if err := r.lost(ctx, s, 20*time.Second); err != nil {
				s.err = err
			} else if rerr := r.renew(ctx, s, false); rerr != nil {
				s.err = rerr
			}
		}
		return smp
	case ctx.Err() != nil:
		s.runner = nil
		smp.Status, smp.Error = StatusSkipped, "the run was interrupted"
		return smp
	case errors.Is(err, ErrTimeout):
		smp.Status, smp.Error = StatusTimeout, fmt.Sprintf("did not finish within --timeout %s", r.cfg.Timeout)
		s.runner = nil
		// The hung task still holds a worker thread: replace the workers.
		if rerr := r.renew(ctx, s, true); rerr != nil {
			s.err = rerr
			if lerr := r.lost(ctx, s, 20*time.Second); lerr != nil {
				s.err = lerr
			}
		}
		return smp
	default:
		s.runner = nil
		smp.Status, smp.Error = StatusFailed, clip(err.Error())
		if lerr := r.lost(ctx, s, 5*time.Second); lerr != nil {
			s.err = lerr
			smp.Error = s.err.Error()
			return smp
		}
		if rerr := r.renew(ctx, s, false); rerr != nil {
			s.err = rerr
			if lerr := r.lost(ctx, s, 20*time.Second); lerr != nil {
				s.err = lerr
			}
		}
		return smp
	}
}

// lost reports a set's cluster that is no longer running, watching it
// for up to within (the gateway notices a dead scheduler after a while).
func (r *run) lost(ctx context.Context, s *set, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		d, err := r.cfg.Clusters.Get(ctx, s.cluster)
		if err == nil && d.Status != "RUNNING" {
			return fmt.Errorf("cluster %s %s mid-run: %s", s.cluster, d.Status, d.Reason)
		}
		if time.Now().After(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// renew gives a set a new runner, first replacing its workers if asked.
func (r *run) renew(ctx context.Context, s *set, workers bool) error {
	if workers {
		fmt.Fprintf(r.cfg.Progress, "  %s: replacing the workers of cluster %s\n", s.Label, s.cluster)
		if _, err := r.cfg.Clusters.Scale(ctx, s.cluster, 0); err != nil {
			return fmt.Errorf("cluster %s: replacing its workers: %w", s.cluster, err)
		}
		if _, err := waitWorkers(ctx, r.cfg.Clusters, s.cluster, 0, r.cfg.StartTimeout); err != nil {
			return err
		}
		if _, err := r.cfg.Clusters.Scale(ctx, s.cluster, r.cfg.Workers); err != nil {
			return fmt.Errorf("cluster %s: replacing its workers: %w", s.cluster, err)
		}
	}
	return r.connect(ctx, s)
}

// skipRest records every sample from (rep, test, set) on as skipped.
func (r *run) skipRest(ctx context.Context, tests []string, rep int, fromTest, fromSet string) {
	r.skip(ctx, tests, rep, fromTest, fromSet, true)
}

// skipRestAfter records every sample after (rep, test, set) as skipped.
func (r *run) skipRestAfter(ctx context.Context, tests []string, rep int, test, set string) {
	r.skip(ctx, tests, rep, test, set, false)
}

func (r *run) skip(ctx context.Context, tests []string, rep int, fromTest, fromSet string, inclusive bool) {
	ctx = context.WithoutCancel(ctx)
	started := fromTest == ""
	// Adaptive rounds past the current one were never planned.
	last := r.cfg.Repeat
	if r.cfg.Precision > 0 {
		last = max(rep, r.cfg.Repeat)
	}
	for ; rep <= last; rep++ {
		for ti, t := range tests {
			for _, s := range r.order(rep, ti) {
				at := !started && t == fromTest && s.Label == fromSet
				if at {
					started = true
					if !inclusive {
						continue
					}
				}
				if started {
					r.record(ctx, Sample{Test: t, Set: s.Label, Repeat: rep, Status: StatusSkipped, Error: "the run stopped before it", Started: r.cfg.Now(), Cluster: s.cluster})
				}
			}
		}
		started = true
	}
}

// stopAll stops every cluster the run started, even when the run was
// cancelled, and waits for them to stop.
func (r *run) stopAll() map[string]error {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StopWait)
	defer cancel()
	var (
		mu   sync.Mutex
		errs = map[string]error{}
		wg   sync.WaitGroup
	)
	for _, name := range r.out.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := r.cfg.Clusters.Stop(ctx, name)
			if err == nil {
				err = waitStopped(ctx, r.cfg.Clusters, name)
			}
			if err != nil {
				mu.Lock()
				errs[name] = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		for n, e := range errs {
			fmt.Fprintf(r.cfg.Progress, "Cluster %s could not be stopped: %v (gateway stop %s)\n", n, e, n)
		}
	} else if len(r.out.Clusters) > 0 {
		fmt.Fprintf(r.cfg.Progress, "Stopped %d clusters\n", len(r.out.Clusters))
	}
	return errs
}

func waitStopped(ctx context.Context, c Clusters, name string) error {
	for {
		d, err := c.Get(ctx, name)
		if err == nil && (d.Status == "STOPPED" || d.Status == "FAILED") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster %s did not stop: %w", name, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// left is the time the rest of the run is expected to take: measured
// from the samples so far, or the estimate before any.
func (r *run) left(done, total int) time.Duration {
	if done == 0 {
		return r.est.Sampling
	}
	elapsed := r.cfg.Now().Sub(r.sampling)
	return time.Duration(float64(elapsed) / float64(done) * float64(total-done))
}

// spent is what the run's clusters cost so far: the usage ledger's
// figure when it answers, else their price over the time since they were
// requested.
func (r *run) spent(ctx context.Context) float64 {
	if r.cfg.Cost != nil {
		if v, err := r.cfg.Cost.CostSince(ctx, r.start, r.out.Clusters); err == nil {
			return v
		}
	}
	// No ledger to ask: their price over the time since they were asked for.
	return r.est.PriceHour * float64(len(r.out.Clusters)) * r.cfg.Now().Sub(r.start).Hours()
}

// progress prints one sample's line with the time and cost left, and
// says why the run must stop when what it spent and what is left would
// exceed --max-cost (checked after each round of the sets).
func (r *run) progress(ctx context.Context, s Sample, done, total int) (over string) {
	left := r.left(done, total)
	cost := ""
	if r.est.Priced && r.est.PriceHour > 0 {
		costLeft := r.est.PriceHour * float64(len(r.out.Clusters)) * left.Hours()
		cost = ", ~" + usd(costLeft) + " left"
		if r.cfg.MaxCost > 0 && done < total && done%len(r.sets) == 0 {
			if spent := r.spent(ctx); spent+costLeft > r.cfg.MaxCost {
				over = fmt.Sprintf("$%.2f spent and ~$%.2f more expected (%d samples left, at the %s a sample measured so far) exceed --max-cost $%.2f",
					spent, costLeft, total-done, (left / time.Duration(total-done)).Round(time.Millisecond), r.cfg.MaxCost)
			}
		}
	}
	what := fmt.Sprintf("%.3fs", s.WallS)
	if s.Status != StatusOK {
		// A traceback says what went wrong last; the gateway's own
		// messages first (a cluster's reason ends with its log's tail).
		what = s.Status + ": " + report.Shorten(report.Exception(s.Error), 240)
	}
	fmt.Fprintf(r.cfg.Progress, "[%d/%d] %s repeat %d/%d %s  %s  (~%s left%s)\n", done, total, s.Set, s.Repeat, r.cfg.MaxRepeat, s.Test, what, left.Round(time.Second), cost)
	return over
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// lastLine is where a Python traceback says what went wrong.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// usd shows an amount in dollars, with cents unless it is less than one.
func usd(v float64) string {
	if v > 0 && v < 0.01 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// brief is a long message's first line, cut to a line's length.
func brief(s string) string {
	s = firstLine(s)
	if len(s) > 240 {
		return s[:240] + "..."
	}
	return s
}

func clip(s string) string {
	const max = 4 << 10
	if len(s) > max {
		return "..." + s[len(s)-max:]
	}
	return s
}
