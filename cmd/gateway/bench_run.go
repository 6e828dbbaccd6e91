package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/gatewayhq/gateway/api/apitype"
	"github.com/gatewayhq/gateway/bench"
	"github.com/gatewayhq/gateway/bench/report"
	"github.com/gatewayhq/gateway/bench/schedspec"
	"github.com/gatewayhq/gateway/client"
	"github.com/gatewayhq/gateway/clusteropts"
	"github.com/gatewayhq/gateway/images"
	"github.com/gatewayhq/gateway/images/capture"
	"github.com/gatewayhq/gateway/server"
	"github.com/gatewayhq/gateway/stats"
)

// addBenchRunCmds adds gateway bench run and gateway bench schedule.
func addBenchRunCmds(cmd *cobra.Command, g *globals) {
	cmd.AddCommand(newBenchRunCmd(g), newBenchScheduleCmd(g))
}

// benchFlags are what run and schedule share: the environments and the
// clusters' shape.
type benchFlags struct {
	envs          []string
	python        string
	repeat        int
	workers       int
	threads       int
	cpus          int
	memory        string
	vmType        string
	null          bool
	pattern       string
	timeout       time.Duration
	startTimeout  time.Duration
	buildTimeout  time.Duration
	allowMismatch bool
}

func (b *benchFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&b.envs, "env", nil, "an environment to run (once for a plain run, twice for an A/B test): a Python interpreter's path (its environment is built, and it runs the benchmarks' client), an environment file (requirements.txt, environment.yml, pylock.toml), a published environment's name, auto (your Python) or none")
	f.StringVar(&b.python, "python", "", "the Python that runs the benchmarks' client (it needs the clusters' Dask versions; default: the environment's interpreter when --env names one, else python3 on PATH)")
	f.IntVar(&b.repeat, "repeat", 5, "how many times each benchmark runs in each environment")
	f.IntVarP(&b.workers, "workers", "n", 2, "workers of each cluster")
	f.IntVar(&b.threads, "worker-threads", 1, "threads per worker")
	f.IntVar(&b.cpus, "worker-cpus", 0, "vCPUs per worker (cloud backends)")
	f.StringVar(&b.memory, "worker-memory", "", "memory per worker, e.g. 2GiB")
	f.StringVar(&b.vmType, "worker-vm-type", "", "worker instance type by name (cloud backends)")
	f.BoolVar(&b.null, "null", false, "also run the first environment a second time as its own set (A/A), to measure each benchmark's noise")
	f.StringVarP(&b.pattern, "select", "k", "", "run only the benchmarks whose id (file.py::bench_name[params]) matches this regular expression")
	f.DurationVar(&b.timeout, "timeout", 10*time.Minute, "the longest one run of one benchmark may take")
	f.DurationVar(&b.startTimeout, "start-timeout", 10*time.Minute, "how long to wait for the clusters and their workers")
	f.DurationVar(&b.buildTimeout, "build-timeout", 30*time.Minute, "how long to wait for an environment's image build")
	f.BoolVar(&b.allowMismatch, "allow-mismatch", false, "run even if an image's software differs from the client's Python")
}

// check validates the flags that need no gateway.
func (b *benchFlags) check(suite string) (*regexp.Regexp, map[string]any, error) {
	switch {
	case len(b.envs) > 2:
		return nil, nil, fmt.Errorf("--env given %d times: a run compares at most two environments (A and B)", len(b.envs))
	case b.repeat < 1 || b.repeat > 1000:
		return nil, nil, fmt.Errorf("--repeat %d: give 1 to 1000 (5 to 10 for an A/B test)", b.repeat)
	case b.workers < 1:
		return nil, nil, errors.New("--workers must be at least 1")
	case b.timeout <= 0:
		return nil, nil, errors.New("--timeout must be positive")
	}
	st, err := os.Stat(suite)
	if err != nil {
		return nil, nil, fmt.Errorf("suite %s: %w", suite, err)
	}
	if !st.IsDir() {
		return nil, nil, fmt.Errorf("suite %s is not a folder: give the folder that holds the bench_*.py files", suite)
	}
	var re *regexp.Regexp
	if b.pattern != "" {
		if re, err = regexp.Compile(b.pattern); err != nil {
			return nil, nil, fmt.Errorf("-k %q: %w", b.pattern, err)
		}
	}
	shape := map[string]any{"worker_threads": b.threads}
	if b.memory != "" {
		gib, err := parseMemory(b.memory)
		if err != nil {
			return nil, nil, fmt.Errorf("--worker-memory: %w", err)
		}
		shape["worker_memory"] = gib
	}
	if b.cpus > 0 {
		shape["worker_cpus"] = b.cpus
	}
	if b.vmType != "" {
		shape["worker_vm_type"] = b.vmType
	}
	return re, shape, nil
}

// resolveEnvs turns the --env values into what a cluster runs and which
// Python runs the client, building images where needed. An environment
// that cannot be built is returned with Err set: the run records its
// samples as failed and goes on with the other.
func (b *benchFlags) resolveEnvs(ctx context.Context, c *client.Client, suite string, progress io.Writer) ([]bench.Env, error) {
	envs, images, err := b.planEnvs(ctx, c)
	if err != nil {
		return nil, err
	}
	if images {
		b.buildEnvs(ctx, c, envs, suite, progress)
	}
	return envs, nil
}

// planEnvs names the sets and their client Python, and refuses what the
// gateway's provider cannot run, before anything is built or started.
// images is whether the provider runs container images (each
// environment is then built by buildEnvs).
func (b *benchFlags) planEnvs(ctx context.Context, c *client.Client) (envs []bench.Env, images bool, err error) {
	fields, err := c.OptionFields(ctx)
	if err != nil {
		return nil, false, err
	}
	values := b.envs
	if len(values) == 0 {
		values = []string{"auto"}
	}
	labels := []string{"A", "B"}
	out := make([]bench.Env, 0, len(values))
	for i, v := range values {
		e := bench.Env{Label: labels[i], Name: v, Python: b.clientPython(v), Options: map[string]any{}}
		if !fields["image"] {
			// The local provider runs the gateway host's Python: one
			// environment, the one the runner uses.
			if v != "auto" && v != "none" {
				return nil, false, fmt.Errorf("--env %s: this gateway's provider runs no container images, so the only environment is the gateway host's Python (leave out --env; use the docker, ec2, fargate or gce provider to compare environments)", v)
			}
			if len(values) > 1 {
				return nil, false, errors.New("this gateway's provider runs no container images: an A/B test needs the docker, ec2, fargate or gce provider (an A/A run with --null works)")
			}
		} else if b.allowMismatch {
			e.Options["allow_mismatch"] = true
		}
		out = append(out, e)
	}
	return out, fields["image"], nil
}

// buildEnvs builds each environment's image (or finds it built).
func (b *benchFlags) buildEnvs(ctx context.Context, c *client.Client, envs []bench.Env, suite string, progress io.Writer) {
	for i := range envs {
		e := &envs[i]
		fmt.Fprintf(progress, "Environment %s: %s\n", e.Label, e.Name)
		e.Err = b.resolveEnv(ctx, c, e, suite, progress)
		if e.Err != nil {
			fmt.Fprintf(progress, "  environment %s (%s) cannot run: %v\n", e.Label, e.Name, e.Err)
		}
	}
}

// clientPython is the Python that runs the benchmarks' client for --env
// v: --python, else v when it is an interpreter, else python3.
func (b *benchFlags) clientPython(v string) string {
	if b.python != "" {
		return b.python
	}
	if st, err := os.Stat(v); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
		if abs, err := filepath.Abs(v); err == nil {
			return abs
		}
	}
	return "python3"
}

func (b *benchFlags) resolveEnv(ctx context.Context, c *client.Client, e *bench.Env, suite string, progress io.Writer) error {
	v := e.Name
	// The suite goes with the environment as user code, like new-cluster's
	// --code-dir; the runner also sends its functions by value, so that a
	// published image without the suite runs it too.
	opts := capture.Options{Python: b.python, Dir: suite}
	var (
		env      capture.Env
		err      error
		fromFile bool
	)
	st, statErr := os.Stat(v)
	switch {
	case statErr == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0:
		// An interpreter: its environment (it also runs the client
		// unless --python, see clientPython).
		abs, _ := filepath.Abs(v)
		opts.Python = abs
		env, err = capture.Capture(ctx, opts)
	case statErr == nil && st.Mode().IsRegular():
		env, err = capture.FromFile(ctx, v, opts)
		fromFile = true
	case v == "auto":
		env, err = capture.Capture(ctx, opts)
	case v == "none":
		return nil
	case strings.ContainsAny(v, "/\\") || strings.HasSuffix(v, ".txt") || strings.HasSuffix(v, ".yml") || strings.HasSuffix(v, ".yaml") || strings.HasSuffix(v, ".toml"):
		return fmt.Errorf("--env %s: no such file (give an interpreter, an environment file or a published environment's name)", v)
	default:
		e.Options["env"] = v // a published environment, checked by the gateway
		if ce, cerr := capture.Capture(ctx, capture.Options{Python: e.Python}); cerr == nil {
			e.Options["client_env"] = images.ExpectedVersions(ce.Spec)
		}
		// The record keeps what the image runs, not what the client has.
		if list, lerr := c.Envs(ctx); lerr == nil {
			for _, pe := range list {
				if pe.Name == v {
					e.Versions = map[string]string{}
					for k, ver := range pe.Versions {
						if ver != "" { // not in the image
							e.Versions[k] = ver
						}
					}
				}
			}
		}
		return nil
	}
	if err != nil {
		return err
	}
	s, err := buildEnv(ctx, c, env, b.buildTimeout, progress)
	if err != nil {
		return err
	}
	e.Hash = s.Hash
	e.Options["env"] = s.Hash
	e.Options["client_env"] = images.ExpectedVersions(env.Spec)
	e.Versions = images.ExpectedVersions(env.Spec)
	if fromFile {
		// A file lists what it pins; the client that must match the
		// image is the Python that runs the benchmarks.
		if ce, cerr := capture.Capture(ctx, capture.Options{Python: e.Python}); cerr == nil {
			e.Options["client_env"] = images.ExpectedVersions(ce.Spec)
		}
	}
	return nil
}

func newBenchRunCmd(g *globals) *cobra.Command {
	var b benchFlags
	var maxCost float64
	var logFile, precision string
	var inCluster bool
	var maxRepeat int
	cmd := &cobra.Command{
		Use:   "run SUITE",
		Short: "Run a benchmark suite on one cluster per environment, interleaving them (A/B test)",
		Long: `Run a suite (a folder of bench_*.py files with bench_<name>(client) functions)
on identical clusters, one per environment, each benchmark --repeat times,
interleaving A and B so that drift hits both. Each sample records the wall
time and, sampled from the scheduler, peak and average cluster memory
(managed and unmanaged), spilled bytes, bytes sent between workers and the
workers' CPU seconds. Results go to the gateway's store: read them with
gateway bench report RUN and gateway bench history TEST.

  gateway bench run ./benchmarks --env ./base/bin/python --env ./candidate/bin/python --repeat 6
  gateway bench run ./benchmarks --env team --null -k 'shuffle'
  gateway bench run ./benchmarks --env base --env candidate --in-cluster`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			suite, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			re, shape, err := b.check(suite)
			if err != nil {
				return err
			}
			if maxCost < 0 {
				return errors.New("--max-cost must not be negative")
			}
			var prec float64
			if precision != "" {
				if prec, err = bench.ParseThreshold(precision); err != nil {
					return fmt.Errorf("--precision: %w", err)
				}
				if maxRepeat == 0 {
					maxRepeat = max(30, b.repeat)
				}
				if maxRepeat < b.repeat || maxRepeat > 1000 {
					return fmt.Errorf("--max-repeat %d: give %d (--repeat) to 1000", maxRepeat, b.repeat)
				}
			} else if maxRepeat != 0 {
				return errors.New("--max-repeat bounds adaptive repeats: give --precision too (e.g. --precision 5%)")
			}
			c, err := g.client(ctx)
			if err != nil {
				return err
			}
			progress := cmd.ErrOrStderr()
			envs, images, err := b.planEnvs(ctx, c)
			if err != nil {
				return err
			}
			cfg := bench.Config{
				Suite:        suite,
				SuiteName:    filepath.Base(suite),
				Envs:         envs,
				Null:         b.null,
				Repeat:       b.repeat,
				Precision:    prec,
				MaxRepeat:    maxRepeat,
				Workers:      b.workers,
				Shape:        shape,
				Pattern:      re,
				Timeout:      b.timeout,
				StartTimeout: b.startTimeout,
				MaxCost:      maxCost,
				Clusters:     c,
				Recorder:     bench.APIRecorder{API: c, Options: runOptions(b, maxCost, prec, maxRepeat)},
				Cost:         usageMeter{c: c},
				Prices:       &benchPricer{c: c},
				History:      benchHistory{c: c},
				Progress:     progress,
				// The gateway's backends are this binary's.
				TypicalStarts: server.TypicalStarts(),
			}
			if inCluster {
				zip, err := schedspec.PackSuite(suite)
				if err != nil {
					return err
				}
				hc, token := c.Credentials()
				cfg.InCluster = &bench.InCluster{Token: token, HTTP: hc, SuiteZip: zip}
			}
			// Estimated (and refused over --max-cost) before anything is
			// built or started.
			plan, err := bench.Prepare(ctx, cfg)
			if err != nil {
				return clientPythonHint(err, b.python)
			}
			if images {
				b.buildEnvs(ctx, c, envs, suite, progress)
			}
			cfg.Plan = plan
			if logFile != "" {
				f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
				if err != nil {
					return fmt.Errorf("--log: %w", err)
				}
				defer f.Close()
				cfg.RunnerLog = f
			}
			out, err := bench.Run(ctx, cfg)
			if out.RunID != "" {
				if perr := printBenchOutcome(context.WithoutCancel(ctx), cmd.OutOrStdout(), g.json(), c, out); perr != nil && err == nil {
					err = perr
				}
			}
			if err != nil {
				return err
			}
			switch {
			case len(out.StopErrors) > 0:
				return fmt.Errorf("%d clusters could not be stopped: stop them with gateway stop", len(out.StopErrors))
			case out.Status == bench.RunRefused || out.Status == bench.RunFailed:
				return errors.New(out.Message)
			case out.Failed() > 0:
				return fmt.Errorf("%d of %d samples did not succeed (the others are recorded: gateway bench report %s)", out.Failed(), len(out.Samples), out.RunID)
			}
			return nil
		},
	}
	b.add(cmd)
	cmd.Flags().BoolVar(&inCluster, "in-cluster", false, "run the benchmarks' client next to each cluster's scheduler, in the cluster's own software, instead of here (no local Python with the clusters' Dask is needed; the suite's top-level .py files go with it, at most 1 MiB)")
	cmd.Flags().StringVar(&precision, "precision", "", "adaptive repeats: after --repeat rounds, keep sampling each benchmark until the 95% intervals of its comparisons are narrower than this (e.g. 5%), or --max-repeat rounds")
	cmd.Flags().IntVar(&maxRepeat, "max-repeat", 0, "with --precision: the most rounds a benchmark runs (default 30)")
	cmd.Flags().StringVar(&logFile, "log", "", "append the benchmarks' own output (the runners' stderr: prints, warnings, Dask's logs) to this file")
	cmd.Flags().Float64Var(&maxCost, "max-cost", 0, "refuse the run when its estimated cost exceeds this many USD (the clusters' price x the expected time: the suite's history, else --timeout a sample), and stop it when the cost so far plus what is left would")
	return cmd
}

func runOptions(b benchFlags, maxCost, precision float64, maxRepeat int) map[string]any {
	o := map[string]any{"repeat": b.repeat, "null": b.null, "select": b.pattern, "timeout": b.timeout.String(), "max_cost": maxCost,
		"order": "rotated: each test of each round starts one set later than the one before"}
	if precision > 0 {
		o["precision"], o["max_repeat"] = precision, maxRepeat
	}
	return o
}

// runReader reads a stored run; *client.Client has it.
type runReader interface {
	BenchRun(ctx context.Context, id string) (apitype.BenchRunJSON, error)
}

// printBenchOutcome prints the run's report as the gateway stored it, so
// that the table at the end of a run is the one gateway bench report
// prints (same n, same figures). When the store cannot be read it falls
// back to what this command saw, and says so.
func printBenchOutcome(ctx context.Context, w io.Writer, asJSON bool, c runReader, out bench.Outcome) error {
	if asJSON {
		return printJSON(w, out)
	}
	run, err := c.BenchRun(ctx, out.RunID)
	if err == nil {
		if err := printReport(w, report.Build(run, report.DefaultThreshold)); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nRun %s %s. Report: gateway bench report %s\n", out.RunID, run.Status, out.RunID)
		return nil
	}
	fmt.Fprintf(w, "The stored report could not be read (%v): the samples this command saw, which the store may lack:\n", err)
	type key struct{ test, set string }
	walls := map[key][]float64{}
	failed := map[key]int{}
	var tests, sets []string
	seenT, seenS := map[string]bool{}, map[string]bool{}
	for _, s := range out.Samples {
		k := key{s.Test, s.Set}
		if !seenT[s.Test] {
			seenT[s.Test] = true
			tests = append(tests, s.Test)
		}
		if !seenS[s.Set] {
			seenS[s.Set] = true
			sets = append(sets, s.Set)
		}
		if s.Status == bench.StatusOK {
			walls[k] = append(walls[k], s.WallS)
		} else {
			failed[k]++
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TEST\tSET\tOK\tFAILED\tMEDIAN")
	for _, t := range tests {
		for _, s := range sets {
			k := key{t, s}
			med := "-"
			if v := walls[k]; len(v) > 0 {
				med = fmt.Sprintf("%.3fs", stats.Median(v))
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", t, s, len(walls[k]), failed[k], med)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nRun %s %s. Report: gateway bench report %s\n", out.RunID, out.Status, out.RunID)
	return nil
}

// usageMeter reads the usage ledger's estimated cost of some of the
// caller's clusters since a time.
type usageMeter struct{ c *client.Client }

func (u usageMeter) CostSince(ctx context.Context, since time.Time, clusters []string) (float64, error) {
	v, err := u.c.MyUsage(ctx, since.UTC().Format(time.RFC3339), "")
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, row := range v.Clusters {
		if slices.Contains(clusters, row.Cluster) {
			sum += row.CostUSD
		}
	}
	return sum, nil
}

// benchPricer asks the gateway what a cluster would cost per hour, and
// keeps which backend would run it.
type benchPricer struct {
	c        *client.Client
	provider string
}

func (p *benchPricer) ClusterPrice(ctx context.Context, options map[string]any) (float64, error) {
	req, err := clusteropts.RequestFrom(options)
	if err != nil {
		return 0, err
	}
	v, err := p.c.BenchPrice(ctx, req)
	if err == nil {
		p.provider = v.Provider
	}
	return v.PriceHour, err
}

// Provider implements bench.ProviderNamer.
func (p *benchPricer) Provider() string { return p.provider }

// startRuns is how many of the suite's last runs the start estimate reads.
const startRuns = 5

// StartSeconds implements bench.StartHistory: for each of the suite's
// last runs that sampled anything, from the run's start to its first
// sample (clusters up with their workers, runners connected).
func (h benchHistory) StartSeconds(ctx context.Context, suite string) (float64, int, error) {
	runs, err := h.c.BenchRuns(ctx, suite, 20)
	if err != nil {
		return 0, 0, err
	}
	var starts []float64
	for _, r := range runs {
		if len(starts) == startRuns {
			break
		}
		if r.Suite != suite || time.Since(r.StartedAt) > historyWindow {
			continue
		}
		full, err := h.c.BenchRun(ctx, r.ID)
		if err != nil {
			return 0, 0, err
		}
		var first time.Time
		for _, s := range full.Samples {
			if s.Repeat > 0 && s.Status == "ok" && !s.At.IsZero() && (first.IsZero() || s.At.Before(first)) {
				first = s.At
			}
		}
		if !first.IsZero() && first.After(full.StartedAt) {
			starts = append(starts, first.Sub(full.StartedAt).Seconds())
		}
	}
	if len(starts) == 0 {
		return 0, 0, nil
	}
	return stats.Median(starts), len(starts), nil
}

// historyWindow is how far back the estimate looks for a test's times.
const historyWindow = 30 * 24 * time.Hour

// benchHistory gives each test's median successful sample time in the
// suite over the last 30 days.
type benchHistory struct{ c *client.Client }

func (h benchHistory) SampleSeconds(ctx context.Context, suite string, tests []string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, t := range tests {
		pts, err := h.c.BenchHistory(ctx, client.BenchHistoryQuery{Test: t, Since: time.Now().Add(-historyWindow)})
		if err != nil {
			return out, err
		}
		var walls []float64
		for _, p := range pts {
			if p.Suite == suite && p.Status == "ok" {
				walls = append(walls, p.WallSeconds)
			}
		}
		if len(walls) > 0 {
			out[t] = stats.Median(walls)
		}
	}
	return out, nil
}

// clientPythonHint says how to pick the client's Python when the one
// used has no Dask.
func clientPythonHint(err error, given string) error {
	if !errors.Is(err, bench.ErrNoDask) || given != "" {
		return err
	}
	return fmt.Errorf("%w; give --python PATH, a Python with the clusters' Dask (on gateway dev: the Python that runs its clusters, providers.local.python, /usr/bin/python3 by default)", err)
}

func newBenchScheduleCmd(g *globals) *cobra.Command {
	var b benchFlags
	var cronExpr, window, threshold, del string
	var list bool
	cmd := &cobra.Command{
		Use:   "schedule SUITE --env E --cron '0 2 * * *'",
		Short: "Have the gateway run a suite on a schedule, check it for regressions and alert",
		Long: `Store a schedule that the gateway itself runs, under your identity and
quotas: it starts the clusters, runs the suite, records the results like
gateway bench run, then checks each environment's tests against their
history (like gateway bench check) and POSTs an alert to the gateway's
bench.alert_webhook when one got slower. The suite's Python files are
stored with the schedule (at most 1 MiB); environments are built now and
run by their hash. Cron times are UTC.

  gateway bench schedule ./benchmarks --env ./venv/bin/python --cron '0 2 * * *'
  gateway bench schedule --list
  gateway bench schedule --delete bs-0123456789abcdef`,
		Args: func(cmd *cobra.Command, args []string) error {
			if list || del != "" {
				return cobra.NoArgs(cmd, args)
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := g.client(ctx)
			if err != nil {
				return err
			}
			switch {
			case list:
				return listSchedules(ctx, cmd.OutOrStdout(), g, c)
			case del != "":
				if err := c.DeleteBenchSchedule(ctx, del); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Schedule %s deleted\n", del)
				return nil
			}
			if cronExpr == "" {
				return errors.New("--cron is required, e.g. --cron '0 2 * * *' for 02:00 UTC every day")
			}
			if _, err := schedspec.Next(cronExpr, time.Now()); err != nil {
				return err
			}
			win, err := bench.ParseWindow(window)
			if err != nil {
				return fmt.Errorf("--window: %w", err)
			}
			thr, err := bench.ParseThreshold(threshold)
			if err != nil {
				return fmt.Errorf("--threshold: %w", err)
			}
			suite, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			_, shape, err := b.check(suite)
			if err != nil {
				return err
			}
			if b.null {
				return errors.New("--null is for gateway bench run: a schedule checks each run against its history")
			}
			// Before anything is built: a gateway that cannot run
			// schedules says why (and what its operator sets).
			if _, err := c.BenchSchedules(ctx, false); err != nil {
				return err
			}
			archive, err := schedspec.PackSuite(suite)
			if err != nil {
				return err
			}
			progress := cmd.ErrOrStderr()
			envs, err := b.resolveEnvs(ctx, c, suite, progress)
			if err != nil {
				return err
			}
			opts := schedspec.Options{Repeat: b.repeat, Workers: b.workers, Shape: shape, Select: b.pattern,
				Timeout: b.timeout.String(), Window: win.String(), Threshold: thr}
			for _, e := range envs {
				if e.Err != nil {
					return fmt.Errorf("environment %s (%s): %w", e.Label, e.Name, e.Err)
				}
				opts.Envs = append(opts.Envs, schedspec.Env{Label: e.Label, Name: e.Name, Hash: e.Hash, Options: e.Options, Versions: e.Versions})
			}
			s, err := c.CreateBenchSchedule(ctx, apitype.BenchScheduleRequest{Suite: filepath.Base(suite), Archive: archive, Cron: cronExpr, Options: opts})
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), s)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Schedule %s: %s on %s, next run %s (UTC)\n", s.ID, s.Suite, strings.Join(s.Envs, ", "), s.NextRun.UTC().Format("2006-01-02 15:04"))
			return nil
		},
	}
	b.add(cmd)
	f := cmd.Flags()
	f.StringVar(&cronExpr, "cron", "", "when to run, as a five-field cron expression in UTC (minute hour day-of-month month day-of-week)")
	f.StringVar(&window, "window", "7d", "the regression check's history window")
	f.StringVar(&threshold, "threshold", "10%", "the regression check's threshold: a test this much slower than its history, significantly, is a regression")
	f.BoolVar(&list, "list", false, "list your schedules")
	f.StringVar(&del, "delete", "", "delete the schedule with this id")
	return cmd
}

func listSchedules(ctx context.Context, w io.Writer, g *globals, c *client.Client) error {
	list, err := c.BenchSchedules(ctx, false)
	if err != nil {
		return err
	}
	if g.json() {
		return printJSON(w, list)
	}
	if len(list) == 0 {
		fmt.Fprintln(w, "No schedules (make one with gateway bench schedule SUITE --env E --cron '0 2 * * *').")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSUITE\tENVS\tCRON\tNEXT RUN\tLAST RUN\tLAST ERROR")
	for _, s := range list {
		last := "-"
		if s.LastRun != nil {
			last = s.LastRun.UTC().Format("2006-01-02 15:04") + " " + s.LastRunID
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Suite, strings.Join(s.Envs, ","), s.Cron,
			s.NextRun.UTC().Format("2006-01-02 15:04"), last, orDash(s.LastError))
	}
	return tw.Flush()
}
